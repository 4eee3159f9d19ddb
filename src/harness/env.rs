//! The two [`Env`] implementations: turmoil's simulated network with simulated time (every
//! observation goes into the [`Trace`]), and tokio's real TCP with real time (for `sim serve`).

use std::io;
use std::sync::Arc;

use crate::model::env::{Env, Listener};
use crate::model::observe::Observation;

use super::trace::Trace;

/// A host on turmoil's simulated network.
#[derive(Clone)]
pub struct SimEnv {
    host: Arc<str>,
    trace: Trace,
    epoch_ms: u64,
}

impl SimEnv {
    pub fn new(host: &str, trace: Trace, epoch_ms: u64) -> Self {
        SimEnv {
            host: host.into(),
            trace,
            epoch_ms,
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

    fn now_ms(&self) -> u64 {
        turmoil::sim_elapsed().map_or(0, |d| d.as_millis() as u64)
    }

    fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    fn observe(&self, event: Observation) {
        self.trace.push(self.now_ms(), &self.host, event);
    }
}

/// A host on real loopback TCP. Time is tokio's clock from when the env was made; observations
/// go into a trace as well, so a real-client session can be inspected the same way.
#[derive(Clone)]
pub struct TcpEnv {
    host: Arc<str>,
    trace: Trace,
    start: tokio::time::Instant,
    epoch_ms: u64,
}

impl TcpEnv {
    /// `epoch_ms` is the date the server stamps for time zero; pass a fixed value for
    /// reproducible bodies.
    pub fn new(host: &str, trace: Trace, epoch_ms: u64) -> Self {
        TcpEnv {
            host: host.into(),
            trace,
            start: tokio::time::Instant::now(),
            epoch_ms,
        }
    }
}

pub struct TcpListenerWrap(tokio::net::TcpListener);

impl TcpListenerWrap {
    pub fn local_port(&self) -> Option<u16> {
        self.0.local_addr().ok().map(|a| a.port())
    }
}

impl Listener for TcpListenerWrap {
    type Stream = tokio::net::TcpStream;
    async fn accept(&mut self) -> io::Result<Self::Stream> {
        self.0.accept().await.map(|(s, _)| s)
    }
}

impl Env for TcpEnv {
    type Stream = tokio::net::TcpStream;
    type Listener = TcpListenerWrap;

    async fn bind(&self, port: u16) -> io::Result<TcpListenerWrap> {
        tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map(TcpListenerWrap)
    }

    async fn connect(&self, addr: &str) -> io::Result<Self::Stream> {
        tokio::net::TcpStream::connect(addr).await
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    fn observe(&self, event: Observation) {
        self.trace.push(self.now_ms(), &self.host, event);
    }
}
