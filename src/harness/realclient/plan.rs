//! The fault plan of a real-client seed: the swarm of [`crate::harness::swarm`] restricted to
//! what `sim serve` can apply on real TCP (docs/serve.md "What it can be told to do"), placed
//! inside what a fault-free simulated run of the same scenario did. Network and process faults
//! act on turmoil, so they are never drawn. The PRNG is seeded with `derive_seed(seed,
//! "real-client")`: a seed's plan is a function of the seed and the scenario alone.

use rand::RngExt as _;
use rand_chacha::ChaCha8Rng;
use toml::Spanned;

use crate::harness::faults::Fault;
use crate::harness::letta::swarm::{Baseline, STREAM_ACTIONS};
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::swarm::{draw_plan, provider_fault};
use crate::harness::system::Baseline as SystemBaseline;

/// The families a real-client plan draws from, each on with the swarm's probability.
pub const FAMILIES: [&str; 6] = [
    "provider",
    "stream",
    "busy",
    "approval_pending",
    "shutdown_503",
    "run_stream_fail",
];

/// The Letta baseline of `scenario`, or why it has none (only a Letta server can be served).
pub fn baseline(scenario: &Scenario) -> Result<Baseline, InputError> {
    match crate::harness::explore::baseline(scenario)? {
        SystemBaseline::Letta(b) => Ok(b),
        SystemBaseline::Kimi(_) => Err(scenario.error_at(
            scenario.scenario.system.span(),
            "--real-client serves a Letta server; this is an agent-loop scenario (system = \"agent-loop\"), which has none",
        )),
    }
}

/// The plan of `seed`: which families are on, and one fault from each.
pub fn plan(seed: u64, baseline: &Baseline) -> Vec<Fault> {
    // A send per streamed response of the baseline: the user turn and each continuation.
    let sends = baseline.response_frames.len().max(1) as u64;
    draw_plan(seed, "real-client", &FAMILIES, |family, rng| match family {
        "provider" => provider_fault(rng, &baseline.provider_frames, &STREAM_ACTIONS),
        "stream" => stream_fault(rng, &baseline.response_frames),
        "busy" => Fault::BusyOnSend {
            send: rng.random_range(1..=sends),
        },
        "approval_pending" => Fault::ApprovalPendingOnSend {
            send: rng.random_range(1..=sends),
            tool_call_id: "toolu_stale_1".into(),
            tool: "Bash".into(),
            arguments: r#"{"command": "echo stale", "description": "left pending"}"#.into(),
        },
        "shutdown_503" => Fault::ShuttingDownOnSend {
            send: rng.random_range(1..=sends),
        },
        _ => Fault::RunStreamFail {
            times: rng.random_range(1..=3),
        },
    })
}

/// One of the server's streamed responses breaks at one of its frames.
fn stream_fault(rng: &mut ChaCha8Rng, response_frames: &[u64]) -> Fault {
    let responses = response_frames.len().max(1);
    let r = rng.random_range(0..responses);
    let frames = response_frames.get(r).copied().unwrap_or(1).max(1);
    Fault::ServerStream {
        response: r as u64 + 1,
        frame: rng.random_range(1..=frames),
        action: STREAM_ACTIONS[rng.random_range(0..STREAM_ACTIONS.len())],
    }
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
        let b = Baseline {
            end_ms: 200,
            response_frames: vec![9, 7],
            provider_frames: vec![8, 6],
        };
        for seed in 0..200 {
            let p = plan(seed, &b);
            assert_eq!(p, plan(seed, &b));
            for f in &p {
                assert_eq!(f.problem(), None, "{f}");
                assert!(f.trigger().is_none(), "a simulation-only fault: {f}");
            }
        }
    }
}
