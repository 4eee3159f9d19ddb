//! The two [`Env`] implementations: turmoil's simulated network with simulated time (every
//! observation goes into the [`Trace`]), and tokio's real TCP with real time (for `sim serve`).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::model::port::clock::{Clock, Sleep, Timers};
use crate::model::port::env::{Env, Listener};
use crate::model::port::observe::Observation;

use super::trace::Trace;

/// A host on turmoil's simulated network.
#[derive(Clone)]
pub struct SimEnv {
    host: Arc<str>,
    trace: Trace,
    epoch_ms: u64,
    clock: Clock,
}

impl SimEnv {
    pub fn new(host: &str, trace: Trace, epoch_ms: u64) -> Self {
        SimEnv {
            host: host.into(),
            trace,
            epoch_ms,
            clock: Clock::new(SimTimers),
        }
    }
}

/// Simulated time: turmoil's elapsed time on the running host; its timers are the host
/// runtime's, which turmoil advances tick by tick.
struct SimTimers;

impl Timers for SimTimers {
    fn now(&self) -> std::time::Duration {
        turmoil::sim_elapsed().unwrap_or_default()
    }

    fn sleep_until(&self, deadline: std::time::Duration) -> Sleep {
        let now = self.now();
        let here = tokio::time::Instant::now();
        let at = if deadline >= now {
            here.checked_add(deadline - now)
        } else {
            Some(here.checked_sub(now - deadline).unwrap_or(here))
        };
        match at {
            Some(at) => Box::pin(tokio::time::sleep_until(at)),
            None => Box::pin(std::future::pending()),
        }
    }
}

pub struct SimListener(turmoil::net::TcpListener);

impl Listener for SimListener {
    type Stream = turmoil::net::TcpStream;
    async fn accept(&mut self) -> io::Result<Self::Stream> {
        self.0.accept().await.map(|(s, _)| s)
    }
}

impl Env for SimEnv {
    type Stream = turmoil::net::TcpStream;
    type Listener = SimListener;

    async fn bind(&self, port: u16) -> io::Result<SimListener> {
        turmoil::net::TcpListener::bind(("0.0.0.0", port))
            .await
            .map(SimListener)
    }

    async fn connect(&self, addr: &str) -> io::Result<Self::Stream> {
        turmoil::net::TcpStream::connect(addr.to_string()).await
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    fn observe(&self, event: Observation) {
        self.trace.push(self.now_ms(), &self.host, event);
    }
}

/// Host names → real loopback addresses, so models written for "server:8283" find each other
/// on real TCP where every listener binds an ephemeral port.
#[derive(Clone, Default)]
pub struct AddressBook(Arc<Mutex<BTreeMap<String, SocketAddr>>>);

impl AddressBook {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&self, name: &str, addr: SocketAddr) {
        self.0.lock().unwrap().insert(name.to_string(), addr);
    }

    pub fn get(&self, name: &str) -> Option<SocketAddr> {
        self.0.lock().unwrap().get(name).copied()
    }
}

/// A host on real loopback TCP (for `sim serve` and the real-network test). Time is tokio's
/// clock; observations still go into a trace so a session can be read like a simulated one.
#[derive(Clone)]
pub struct TcpEnv {
    host: Arc<str>,
    trace: Trace,
    clock: Clock,
    epoch_ms: u64,
    book: AddressBook,
}

/// How long `connect` waits for a peer's name to appear in the address book.
const NAME_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl TcpEnv {
    /// `epoch_ms` is the date the server stamps for time zero; pass a fixed value for
    /// reproducible bodies.
    pub fn new(host: &str, trace: Trace, epoch_ms: u64, book: AddressBook) -> Self {
        TcpEnv {
            host: host.into(),
            trace,
            // Real time is the point of this Env: it serves real clients on real TCP and is
            // never used inside a simulation, so it cannot affect a simulated run.
            clock: Clock::tokio(),
            epoch_ms,
            book,
        }
    }
}

pub struct TcpListenerWrap(tokio::net::TcpListener);

impl Listener for TcpListenerWrap {
    type Stream = tokio::net::TcpStream;
    async fn accept(&mut self) -> io::Result<Self::Stream> {
        self.0.accept().await.map(|(s, _)| s)
    }
}

impl Env for TcpEnv {
    type Stream = tokio::net::TcpStream;
    type Listener = TcpListenerWrap;

    /// Binds an ephemeral loopback port and publishes it as "<host>:<port>".
    async fn bind(&self, port: u16) -> io::Result<TcpListenerWrap> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        self.book
            .insert(&format!("{}:{port}", self.host), listener.local_addr()?);
        Ok(TcpListenerWrap(listener))
    }

    /// Resolves "name:port" through the address book (waiting briefly for the peer to bind),
    /// or connects to a literal socket address.
    async fn connect(&self, addr: &str) -> io::Result<Self::Stream> {
        if let Ok(sock) = addr.parse::<SocketAddr>() {
            return tokio::net::TcpStream::connect(sock).await;
        }
        // TcpEnv is real TCP only (never inside a simulation), so real time is right here.
        let deadline = tokio::time::Instant::now() + NAME_WAIT;
        loop {
            if let Some(sock) = self.book.get(addr) {
                return tokio::net::TcpStream::connect(sock).await;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no host bound as {addr}"),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    fn observe(&self, event: Observation) {
        self.trace.push(self.now_ms(), &self.host, event);
    }
}
