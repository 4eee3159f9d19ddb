//! The Letta system's swarm families: `network` (latency, partition or hold on the client–server
//! or server–provider link), `process` (server or provider crash and restart), `provider` (an
//! error status or a stream fault on a model call) and `stream` (a fault on a response the
//! server streams to the client), placed inside what a fault-free run of the same scenario did.
//! The PRNG is seeded with `derive_seed(seed, "swarm")`.

use rand::RngExt as _;
use rand_chacha::ChaCha8Rng;

use crate::harness::faults::Fault;
use crate::harness::swarm::{crash_fault, draw_plan, network_fault, provider_fault};
use crate::harness::trace::TraceEvent;
use crate::model::port::inject::StreamFault;
use crate::model::port::observe::Observation;

/// What a fault-free run did: where faults can land.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    pub end_ms: u64,
    /// Frames of each streaming response the server sent, in order (chunks + `[DONE]`).
    pub response_frames: Vec<u64>,
    /// Frames of each provider answer, in call order.
    pub provider_frames: Vec<u64>,
}

impl Baseline {
    /// Reads a baseline off a fault-free trace.
    pub fn from_trace(trace: &[TraceEvent], end_ms: u64) -> Baseline {
        let mut runs: Vec<(String, u64)> = Vec::new();
        let mut provider_frames = Vec::new();
        for e in trace {
            match &e.obs {
                Observation::ChunkRecorded { run_id, .. } => {
                    match runs.iter_mut().find(|(r, _)| r == run_id) {
                        Some((_, n)) => *n += 1,
                        None => runs.push((run_id.clone(), 1)),
                    }
                }
                Observation::ProviderServe { frames, .. } => provider_frames.push(*frames as u64),
                _ => {}
            }
        }
        Baseline {
            end_ms,
            response_frames: runs.into_iter().map(|(_, n)| n + 1).collect(),
            provider_frames,
        }
    }
}

/// The fault families a Letta swarm draws from (DESIGN.md §3).
pub const FAMILIES: [&str; 4] = ["network", "process", "provider", "stream"];

pub(crate) const STREAM_ACTIONS: [StreamFault; 6] = [
    StreamFault::Reset,
    StreamFault::CutInside,
    StreamFault::Stall,
    StreamFault::Close,
    StreamFault::Drop,
    StreamFault::Duplicate,
];

/// Draws the plan for `seed`: which families are on, and one fault from each.
pub fn plan(seed: u64, baseline: &Baseline) -> Vec<Fault> {
    let horizon = baseline.end_ms.max(1);
    draw_plan(seed, "swarm", &FAMILIES, |family, rng| match family {
        "network" => network_fault(rng, horizon, pair),
        "process" => {
            let host = if rng.random_range(0..3u32) == 0 {
                "provider"
            } else {
                "server"
            };
            crash_fault(rng, host.into(), horizon)
        }
        "provider" => provider_fault(rng, &baseline.provider_frames, &STREAM_ACTIONS),
        _ => stream_fault(rng, &baseline.response_frames),
    })
}

/// The `stream` family: one of the server's streamed responses breaks at one of its frames.
pub(crate) fn stream_fault(rng: &mut ChaCha8Rng, response_frames: &[u64]) -> Fault {
    let responses = response_frames.len().max(1);
    let r = rng.random_range(0..responses);
    let frames = response_frames.get(r).copied().unwrap_or(1).max(1);
    Fault::ServerStream {
        response: r as u64 + 1,
        frame: rng.random_range(1..=frames),
        action: STREAM_ACTIONS[rng.random_range(0..STREAM_ACTIONS.len())],
    }
}

/// The link a partition or hold cuts: client–server or server–provider.
fn pair(rng: &mut ChaCha8Rng) -> [String; 2] {
    if rng.random_range(0..2u32) == 0 {
        ["client".into(), "server".into()]
    } else {
        ["server".into(), "provider".into()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baseline() -> Baseline {
        Baseline {
            end_ms: 240,
            response_frames: vec![11, 7],
            provider_frames: vec![15, 9],
        }
    }

    #[test]
    fn plans_are_a_function_of_the_seed_and_valid() {
        let b = baseline();
        let mut nonempty = 0;
        for seed in 0..200 {
            let p = plan(seed, &b);
            assert_eq!(p, plan(seed, &b));
            for f in &p {
                assert_eq!(f.problem(), None, "{f}");
            }
            nonempty += usize::from(!p.is_empty());
        }
        // Each family is on half the time: about 15 in 16 plans have at least one fault.
        assert!((170..=199).contains(&nonempty), "{nonempty}");
    }
}
