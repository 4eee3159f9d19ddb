//! The seams through which a model meets the world: network, clock and observation.
//!
//! A model is generic over [`Env`]. The harness supplies a turmoil-backed implementation
//! (simulated network, simulated time, events into the trace); `sim serve` supplies a tokio
//! one (loopback TCP, real time). Models never import the harness (DESIGN.md §4 rule 1).
//! Time is the [`Clock`] the `Env` hands out, the only clock a model reads (every sleep and
//! timeout too); randomness is a seeded PRNG each model receives in its config.

use std::future::Future;
use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

use super::clock::Clock;
use super::observe::Observation;
use super::spawn::Spawner;

/// Network, clock and probe for one host.
pub trait Env: Clone + Send + Sync + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    type Listener: Listener<Stream = Self::Stream>;

    /// Binds a listener on this host's `port` (all interfaces).
    fn bind(&self, port: u16) -> impl Future<Output = io::Result<Self::Listener>> + Send;
    /// Connects to `addr` ("host:port"; in the simulation hosts are named, e.g. "server:8283").
    fn connect(&self, addr: &str) -> impl Future<Output = io::Result<Self::Stream>> + Send;
    /// This host's clock: time since the start of the run (simulated under turmoil), sleeps
    /// and timeouts.
    fn clock(&self) -> Clock;
    /// Milliseconds since the start of the run (simulated under turmoil).
    fn now_ms(&self) -> u64 {
        self.clock().now_ms()
    }
    /// Unix epoch milliseconds of `now_ms() == 0`, for the dates a server stamps on messages.
    fn epoch_ms(&self) -> u64;
    /// Reports an observable protocol event (the trace in the simulation, a log on real TCP).
    fn observe(&self, event: Observation);
    /// Where this host's side tasks run: every task a model starts goes through it.
    fn spawner(&self) -> Spawner {
        Spawner::Runtime
    }
}

/// A bound listener.
pub trait Listener: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Stream>> + Send;
}
