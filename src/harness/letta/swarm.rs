//! Swarm testing: per seed, draw which fault families are on and where their faults land, and
//! turn that into an explicit plan (printed before the run, shrinkable, writable as a scenario).
//!
//! Faults are placed inside what a fault-free run of the same scenario did (its [`Baseline`]):
//! a cut lands on a frame that exists, a crash at a time when something is happening. Every
//! probability is an integer ratio drawn from the seeded PRNG (`derive_seed(seed, "swarm")`).

use rand::{RngExt as _, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::harness::faults::{Fault, When};
use crate::harness::letta::world::derive_seed;
use crate::harness::trace::TraceEvent;
use crate::model::port::inject::StreamFault;
use crate::model::port::observe::Observation;

/// A probability as an integer ratio `num / den`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    pub num: u32,
    pub den: u32,
}

impl Ratio {
    pub const fn new(num: u32, den: u32) -> Self {
        Ratio { num, den }
    }

    pub fn draw(self, rng: &mut ChaCha8Rng) -> bool {
        self.den > 0 && rng.random_range(0..self.den) < self.num
    }
}

/// What a fault-free run did: where faults can land.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    pub end_ms: u64,
    /// Frames of each streaming response the server sent, in order (chunks + `[DONE]`).
    pub response_frames: Vec<u64>,
    /// Frames of each provider answer, in call order.
    pub provider_frames: Vec<u64>,
    /// For an agent-loop run (`system = "agent-loop"`): what the agent did. [`plan`] then
    /// draws from the agent-loop families instead (`loop_swarm`).
    pub agent_loop: Option<crate::harness::kimi::swarm::LoopBaseline>,
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
        let agent_loop = trace
            .iter()
            .any(|e| matches!(e.obs, Observation::LoopStepBegin { .. }))
            .then(|| crate::harness::kimi::swarm::LoopBaseline::from_trace(trace, end_ms));
        Baseline {
            end_ms,
            response_frames: runs.into_iter().map(|(_, n)| n + 1).collect(),
            provider_frames,
            agent_loop,
        }
    }
}

/// Per-family switches: each family is on for a seed with this probability.
pub const FAMILY_ON: Ratio = Ratio::new(1, 2);

/// The fault families a swarm draws from (DESIGN.md §3). User and tool faults arrive with the
/// client model's interrupt and restart support.
pub const FAMILIES: [&str; 4] = ["network", "process", "provider", "stream"];

const STREAM_ACTIONS: [StreamFault; 6] = [
    StreamFault::Reset,
    StreamFault::CutInside,
    StreamFault::Stall,
    StreamFault::Close,
    StreamFault::Drop,
    StreamFault::Duplicate,
];

/// Draws the plan for `seed`: which families are on, and one fault from each.
pub fn plan(seed: u64, baseline: &Baseline) -> Vec<Fault> {
    if let Some(agent_loop) = &baseline.agent_loop {
        // The agent-loop world has no server, and user, tool and listener faults.
        return crate::harness::kimi::swarm::plan(seed, agent_loop);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, "swarm"));
    let horizon = baseline.end_ms.max(1);
    let mut faults = Vec::new();
    // Draw every switch first, so turning one family's placement logic never shifts another's.
    let on: Vec<bool> = FAMILIES.iter().map(|_| FAMILY_ON.draw(&mut rng)).collect();
    for (family, on) in FAMILIES.iter().zip(on) {
        if !on {
            continue;
        }
        let fault = match *family {
            "network" => match rng.random_range(0..3u32) {
                0 => Fault::Latency {
                    when: When::AtMs(rng.random_range(0..horizon)),
                    max_ms: rng.random_range(20..=500),
                },
                1 => Fault::Partition {
                    between: pair(&mut rng),
                    when: When::AtMs(rng.random_range(0..horizon)),
                    duration_ms: rng.random_range(100..=10_000),
                },
                _ => Fault::Hold {
                    between: pair(&mut rng),
                    when: When::AtMs(rng.random_range(0..horizon)),
                    duration_ms: rng.random_range(100..=10_000),
                },
            },
            "process" => Fault::Crash {
                host: if rng.random_range(0..3u32) == 0 {
                    "provider".into()
                } else {
                    "server".into()
                },
                when: When::AtMs(rng.random_range(0..horizon)),
                restart_after_ms: Some(rng.random_range(50..=5_000)),
            },
            "provider" => {
                let calls = baseline.provider_frames.len().max(1) as u32;
                let call = rng.random_range(0..calls);
                if rng.random_range(0..2u32) == 0 {
                    let statuses = [429u16, 500, 503, 529];
                    let status = statuses[rng.random_range(0..statuses.len())];
                    Fault::ProviderError {
                        call,
                        status,
                        retry_after_s: (status == 429).then(|| rng.random_range(1..=30)),
                        message: None,
                    }
                } else {
                    let frames = baseline
                        .provider_frames
                        .get(call as usize)
                        .copied()
                        .unwrap_or(1)
                        .max(1);
                    Fault::ProviderStream {
                        call,
                        frame: rng.random_range(1..=frames),
                        action: STREAM_ACTIONS[rng.random_range(0..STREAM_ACTIONS.len())],
                    }
                }
            }
            _ => {
                let responses = baseline.response_frames.len().max(1);
                let r = rng.random_range(0..responses);
                let frames = baseline.response_frames.get(r).copied().unwrap_or(1).max(1);
                Fault::ServerStream {
                    response: r as u64 + 1,
                    frame: rng.random_range(1..=frames),
                    action: STREAM_ACTIONS[rng.random_range(0..STREAM_ACTIONS.len())],
                }
            }
        };
        faults.push(fault);
    }
    faults
}

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
            agent_loop: None,
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

    #[test]
    fn ratios_are_exact_integer_draws() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!(!Ratio::new(0, 5).draw(&mut rng));
        assert!(Ratio::new(5, 5).draw(&mut rng));
        assert!(!Ratio::new(1, 0).draw(&mut rng));
    }
}
