//! The agent loop's swarm families, placed inside what a fault-free run of the same scenario
//! did; the PRNG is seeded with `derive_seed(seed, "swarm-loop")`.
//! Families: `network` (latency, partition or hold between the agent and the provider),
//! `process` (provider crash and restart), `provider` (error status or a stream fault on a
//! model call), `user` (an abort at a random agent event or time), `tool` (a tool that hangs
//! past the abort, or returns garbage), `listener` (the live listener throws).

use rand::RngExt as _;
use rand_chacha::ChaCha8Rng;

use crate::harness::faults::{Fault, LOOP_EVENT_TYPES, RECORDED_EVENT_TYPES, When};
use crate::harness::swarm::{Ratio, crash_fault, draw_plan, network_fault, provider_fault};
use crate::harness::trace::TraceEvent;
use crate::model::kimi::agent::inject::{AbortReason, Garbage, ListenerFault};
use crate::model::port::inject::StreamFault;
use crate::model::port::observe::Observation;

/// The agent-loop fault families.
pub const FAMILIES: [&str; 6] = ["network", "process", "provider", "user", "tool", "listener"];

/// What a fault-free agent-loop run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    pub end_ms: u64,
    /// Frames of each provider answer, in call order.
    pub provider_frames: Vec<u64>,
    /// Tool executions that ran.
    pub tool_executions: u32,
    /// Agent events by name, in first-seen order, with how often each happened.
    pub agent_events: Vec<(String, u32)>,
}

impl Baseline {
    pub fn from_trace(trace: &[TraceEvent], end_ms: u64) -> Baseline {
        let mut b = Baseline {
            end_ms,
            ..Baseline::default()
        };
        for e in trace {
            match &e.obs {
                Observation::ProviderServe { frames, .. } => b.provider_frames.push(*frames as u64),
                Observation::LoopToolStart { .. } => b.tool_executions += 1,
                _ => {}
            }
            if e.host == "client" {
                let name = e.obs.name();
                match b.agent_events.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, c)) => *c += 1,
                    None => b.agent_events.push((name, 1)),
                }
            }
        }
        b
    }
}

/// The agent reads provider answers whole; a dropped frame is not one of its faults.
pub(crate) const STREAM_ACTIONS: [StreamFault; 5] = [
    StreamFault::Reset,
    StreamFault::CutInside,
    StreamFault::Stall,
    StreamFault::Close,
    StreamFault::Duplicate,
];

/// A user abort lands after one of these agent events (the loop then acts at a safe point).
pub(crate) const ABORT_EVENTS: [&str; 6] = [
    "loop_step_begin",
    "loop_provider_response",
    "loop_model_return",
    "loop_tool_call",
    "loop_tool_start",
    "loop_tool_result",
];

/// Draws the plan for `seed`: which families are on, and one fault from each.
pub fn plan(seed: u64, baseline: &Baseline) -> Vec<Fault> {
    let horizon = baseline.end_ms.max(1);
    draw_plan(seed, "swarm-loop", &FAMILIES, |family, rng| match family {
        "network" => network_fault(rng, horizon, |_| {
            ["client".to_string(), "provider".to_string()]
        }),
        "process" => crash_fault(rng, "provider".into(), horizon),
        "provider" => provider_fault(rng, &baseline.provider_frames, &STREAM_ACTIONS),
        "user" => user_fault(rng, baseline, horizon),
        "tool" => tool_fault(rng, baseline.tool_executions),
        _ => listener_fault(rng),
    })
}

/// Who aborts a turn: the user (a `UserCancellationError`) three times in four, else a plain
/// abort of the signal.
pub fn abort_reason(rng: &mut ChaCha8Rng) -> AbortReason {
    if Ratio::new(3, 4).draw(rng) {
        AbortReason::User
    } else {
        AbortReason::Signal
    }
}

/// The `user` family: an abort, after one of the agent events a fault-free run had (or, one
/// time in four and when there is none, at a time before `horizon`).
fn user_fault(rng: &mut ChaCha8Rng, baseline: &Baseline, horizon: u64) -> Fault {
    let reason = Some(abort_reason(rng));
    let candidates: Vec<&(String, u32)> = baseline
        .agent_events
        .iter()
        .filter(|(n, _)| ABORT_EVENTS.contains(&n.as_str()))
        .collect();
    if candidates.is_empty() || rng.random_range(0..4u32) == 0 {
        Fault::UserAbort {
            when: When::AtMs(rng.random_range(0..horizon)),
            reason,
        }
    } else {
        let (name, count) = candidates[rng.random_range(0..candidates.len())];
        Fault::UserAbort {
            when: When::OnEvent {
                event: name.clone(),
                nth: rng.random_range(1..=*count),
            },
            reason,
        }
    }
}

/// The `tool` family: one of the tool executions hangs past the abort, or returns garbage.
fn tool_fault(rng: &mut ChaCha8Rng, tool_executions: u32) -> Fault {
    let executions = tool_executions.max(1);
    let execution = rng.random_range(1..=executions);
    if rng.random_range(0..2u32) == 0 {
        // Paired with the user's abort: without one a hang is a hang forever.
        Fault::ToolHang {
            execution,
            abort_after_ms: Some(rng.random_range(1..=5_000)),
        }
    } else {
        Fault::ToolGarbage {
            execution,
            value: Garbage::ALL[rng.random_range(0..Garbage::ALL.len())],
        }
    }
}

/// The `listener` family, the two sides of the loop's event dispatcher: the live listener
/// throws (an error or a panic) on an event type, or, one time in four, the host's record
/// store rejects an append of a recorded event (kimi-loop.md §4.6), which fails the run.
fn listener_fault(rng: &mut ChaCha8Rng) -> Fault {
    if rng.random_range(0..4u32) == 0 {
        let event = RECORDED_EVENT_TYPES[rng.random_range(0..RECORDED_EVENT_TYPES.len())];
        return Fault::TranscriptRejects {
            event: Some(event.to_string()),
            nth: Some(rng.random_range(1..=3)),
        };
    }
    let event = LOOP_EVENT_TYPES[rng.random_range(0..7usize)];
    Fault::ListenerThrows {
        event: Some(event.to_string()),
        nth: Some(rng.random_range(1..=3)),
        how: if rng.random_range(0..2u32) == 0 {
            ListenerFault::Error
        } else {
            ListenerFault::Panic
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baseline() -> Baseline {
        Baseline {
            end_ms: 900,
            provider_frames: vec![20, 9],
            tool_executions: 4,
            agent_events: vec![
                ("loop_step_begin".into(), 2),
                ("loop_tool_start".into(), 4),
                ("loop_model_return".into(), 2),
            ],
        }
    }

    #[test]
    fn loop_plans_are_a_function_of_the_seed_valid_and_serverless() {
        let b = baseline();
        let mut kinds = std::collections::BTreeSet::new();
        for seed in 0..300 {
            let p = plan(seed, &b);
            assert_eq!(p, plan(seed, &b));
            for f in &p {
                assert_eq!(f.problem(), None, "{f}");
                assert!(!f.needs_server(), "{f}");
                let text = f.to_toml();
                kinds.insert(text.split('"').nth(1).unwrap_or("").to_string());
            }
        }
        for kind in [
            "latency",
            "partition",
            "hold",
            "crash",
            "provider_error",
            "provider_stream",
            "user_abort",
            "tool_hang",
            "tool_garbage",
            "listener_throws",
            "transcript_rejects",
        ] {
            assert!(kinds.contains(kind), "{kind} never drawn: {kinds:?}");
        }
    }
}
