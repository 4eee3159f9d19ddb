//! The fault plan of a real-client seed: the swarm of [`crate::harness::swarm`] restricted to
//! what `sim serve` can apply on real TCP (docs/serve.md "What it can be told to do"), placed
//! inside what a fault-free simulated run of the same scenario did. Network and process faults
//! act on turmoil, so they are never drawn. The PRNG is seeded with `derive_seed(seed,
//! "real-client")`: a seed's plan is a function of the seed and the scenario alone.

use rand::RngExt as _;
use toml::Spanned;

use crate::harness::faults::{Fault, RUN_READ_FAIL_MAX};
use crate::harness::letta::swarm::{Baseline, STREAM_ACTIONS, stream_fault};
use crate::harness::letta::world::run_once;
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::swarm::{draw_plan, provider_fault};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// The families a real-client plan draws from, each on with the swarm's probability.
pub const FAMILIES: [&str; 7] = [
    "provider",
    "stream",
    "busy",
    "approval_pending",
    "shutdown_503",
    "run_stream_fail",
    "run_read_fail",
];

/// What a fault-free simulated run of the scenario did: where a plan's faults can land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealBaseline {
    /// Streamed responses and model calls, with their frames (the swarm's baseline).
    pub swarm: Baseline,
    /// The numbers (1-based, as the server counts message sends) of the sends that carry a
    /// user message. A pending approval can appear only before one of those: on a send that
    /// answers an approval, the conversation already waits for that answer, and a second
    /// pending call planted behind a new user entry is a history no server holds.
    pub user_sends: Vec<u64>,
}

/// The baseline of `scenario` (seed 0, its explicit faults removed), or why it has none (only a
/// Letta server can be served).
pub fn baseline(scenario: &Scenario) -> Result<RealBaseline, InputError> {
    if scenario.is_agent_loop() {
        return Err(scenario.error_at(
            scenario.scenario.system.span(),
            "--real-client serves a Letta server; this is an agent-loop scenario (system = \"agent-loop\"), which has none",
        ));
    }
    let mut clean = scenario.clone();
    clean.faults.clear();
    let out = run_once(&clean, 0)?;
    Ok(RealBaseline {
        swarm: Baseline::from_trace(&out.trace, out.end_ms),
        user_sends: user_sends(&out.trace),
    })
}

/// The numbers (1-based, as the server counts message sends) of the sends of `trace` that
/// carry a user message.
pub fn user_sends(trace: &[TraceEvent]) -> Vec<u64> {
    let mut user_sends = Vec::new();
    let mut n = 0;
    for e in trace {
        if let Observation::ClientSend { path, items, .. } = &e.obs
            && path.split('?').next().unwrap_or("").ends_with("/messages")
        {
            n += 1;
            if items.split('+').any(|i| i == "user") {
                user_sends.push(n);
            }
        }
    }
    user_sends
}

/// Another client's call left pending on the conversation when send `send` arrives (reference
/// B.5.3), with the stale call the bundled scenarios use.
pub fn stale_approval_on(send: u64) -> Fault {
    Fault::ApprovalPendingOnSend {
        send,
        tool_call_id: crate::harness::faults::plan::default_stale_id(),
        tool: crate::harness::faults::plan::default_stale_tool(),
        arguments: crate::harness::faults::plan::default_stale_args(),
    }
}

/// The plan of `seed`: which families are on, and one fault from each.
pub fn plan(seed: u64, baseline: &RealBaseline) -> Vec<Fault> {
    let b = &baseline.swarm;
    // A send per streamed response of the baseline: the user turn and each continuation.
    let sends = b.response_frames.len().max(1) as u64;
    let user_sends: &[u64] = if baseline.user_sends.is_empty() {
        &[1]
    } else {
        &baseline.user_sends
    };
    draw_plan(seed, "real-client", &FAMILIES, |family, rng| match family {
        "provider" => provider_fault(rng, &b.provider_frames, &STREAM_ACTIONS),
        "stream" => stream_fault(rng, &b.response_frames),
        "busy" => Fault::BusyOnSend {
            send: rng.random_range(1..=sends),
        },
        "approval_pending" => stale_approval_on(user_sends[rng.random_range(0..user_sends.len())]),
        // The real client dates an HTTP-date `Retry-After` against the machine's clock, not
        // the simulated one, so this family sends none.
        "shutdown_503" => Fault::ShuttingDownOnSend {
            send: rng.random_range(1..=sends),
            retry_after_s: None,
            retry_after_date: false,
            retry_after_broken: None,
        },
        // Up to three failed run lookups: the SDK makes three requests of each.
        "run_read_fail" => Fault::RunReadFail {
            times: rng.random_range(1..=RUN_READ_FAIL_MAX),
        },
        _ => Fault::RunStreamFail {
            times: rng.random_range(1..=3),
            retry_after_s: None,
            retry_after_date: false,
            retry_after_broken: None,
        },
    })
}

/// `scenario` with the seed's plan added to its own faults.
pub fn with_plan(scenario: &Scenario, plan: &[Fault]) -> Scenario {
    let mut s = scenario.clone();
    s.faults
        .extend(plan.iter().cloned().map(|f| Spanned::new(0..0, f)));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_a_function_of_the_seed_and_only_server_side() {
        let b = RealBaseline {
            swarm: Baseline {
                end_ms: 200,
                response_frames: vec![9, 7],
                provider_frames: vec![8, 6],
            },
            user_sends: vec![1],
        };
        for seed in 0..200 {
            let p = plan(seed, &b);
            assert_eq!(p, plan(seed, &b));
            for f in &p {
                assert_eq!(f.problem(), None, "{f}");
                assert!(f.trigger().is_none(), "a simulation-only fault: {f}");
                if let Fault::ApprovalPendingOnSend { send, .. } = f {
                    assert_eq!(*send, 1, "only a user send meets a pending approval");
                }
            }
        }
    }
}
