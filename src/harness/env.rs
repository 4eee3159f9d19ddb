//! The two [`Env`] implementations: turmoil's simulated network with simulated time (every
//! observation goes into the [`Trace`]), and tokio's real TCP with real time (for `sim serve`).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::model::port::clock::Clock;
use crate::model::port::env::{Env, Listener};
use crate::model::port::observe::Observation;
use crate::model::port::spawn::Spawner;

use super::trace::Trace;
use super::warp::WorldClock;

/// A host on turmoil's simulated network.
#[derive(Clone)]
pub struct SimEnv {
    host: Arc<str>,
    trace: Trace,
    epoch_ms: u64,
    clock: Clock,
    world: WorldClock,
}

impl SimEnv {
    /// A host on the trace's world: its clock is the trace's world clock.
    pub fn new(host: &str, trace: Trace, epoch_ms: u64) -> Self {
        trace.clock().host_started(host);
        SimEnv {
            host: host.into(),
            epoch_ms,
            clock: trace.clock().model_clock(),
            world: trace.clock().clone(),
            trace,
        }
    }
}

pub struct SimListener {
    inner: turmoil::net::TcpListener,
    clock: WorldClock,
}

impl Listener for SimListener {
    type Stream = SimStream;
    async fn accept(&mut self) -> io::Result<Self::Stream> {
        self.clock.touch();
        let accepted = self.inner.accept().await;
        self.clock.touch();
        accepted.map(|(s, _)| SimStream::new(s, &self.clock))
    }
}

/// A turmoil stream that notes every poll, write and close in the world clock's activity
/// count (the warp skips time only across steps in which no host used the network).
pub struct SimStream {
    inner: turmoil::net::TcpStream,
    clock: WorldClock,
}

impl SimStream {
    fn new(inner: turmoil::net::TcpStream, clock: &WorldClock) -> Self {
        SimStream {
            inner,
            clock: clock.clone(),
        }
    }
}

impl Drop for SimStream {
    fn drop(&mut self) {
        self.clock.touch();
    }
}

impl AsyncRead for SimStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.clock.touch();
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for SimStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.clock.touch();
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.clock.touch();
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.clock.touch();
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.clock.touch();
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl Env for SimEnv {
    type Stream = SimStream;
    type Listener = SimListener;

    async fn bind(&self, port: u16) -> io::Result<SimListener> {
        self.world.touch();
        let bound = turmoil::net::TcpListener::bind(("0.0.0.0", port)).await;
        self.world.touch();
        bound.map(|inner| SimListener {
            inner,
            clock: self.world.clone(),
        })
    }

    async fn connect(&self, addr: &str) -> io::Result<Self::Stream> {
        self.world.touch();
        let connected = turmoil::net::TcpStream::connect(addr.to_string()).await;
        self.world.touch();
        connected.map(|s| SimStream::new(s, &self.world))
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    fn observe(&self, event: Observation) {
        self.world.touch();
        self.trace.push(self.now_ms(), &self.host, event);
    }

    /// The host's `LocalSet`: tokio's scheduler queues stay empty, so woken tasks run in the
    /// order they were woken, in the set's local queue.
    fn spawner(&self) -> Spawner {
        Spawner::Local
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
