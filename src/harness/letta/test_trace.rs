//! Client and server trace events for the Letta checkers' unit tests.

use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// `obs` on the client at `t_ms`.
pub fn client(t_ms: u64, obs: Observation) -> TraceEvent {
    TraceEvent {
        t_ms,
        host: "client".into(),
        obs,
    }
}

/// `obs` on the server at `t_ms`.
pub fn server(t_ms: u64, obs: Observation) -> TraceEvent {
    TraceEvent {
        t_ms,
        host: "server".into(),
        obs,
    }
}

/// The reference client's start in `mode`.
pub fn started(mode: &str) -> TraceEvent {
    started_as("reference", mode)
}

/// A client of `profile` starting in `mode`.
pub fn started_as(profile: &str, mode: &str) -> TraceEvent {
    client(
        0,
        Observation::ClientStarted {
            restart: 0,
            profile: profile.into(),
            mode: mode.into(),
        },
    )
}
