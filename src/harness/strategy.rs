//! Fault plans as a proptest [`Strategy`], for property tests of your own: the plans the swarm
//! can draw for a scenario (the same families, placed inside what a fault-free run of it did),
//! so that when a property fails proptest shrinks the plan with its own shrinker: fewer
//! faults, then smaller times, counts and indices, then earlier alternatives.
//!
//! A plan has at most one fault per family, each family on with probability 1/2, as in
//! `sim explore --swarm` (docs/faults.md#swarm). For `system = "letta"`: network, process,
//! provider and stream; for `system = "agent-loop"`: network, process, provider, user, tool
//! and listener.

use proptest::prelude::*;
use proptest::sample::select;

use super::faults::{Fault, LOOP_EVENT_TYPES, RECORDED_EVENT_TYPES, When};
use super::input::InputError;
// The stream actions and abort points are the swarm's own lists, so a property test and a
// sweep explore the same space.
use super::kimi::swarm::{
    ABORT_EVENTS, Baseline as LoopBaseline, STREAM_ACTIONS as LOOP_STREAM_ACTIONS,
};
use super::letta::swarm::{Baseline as LettaBaseline, STREAM_ACTIONS};
use super::scenario::Scenario;
use super::system::Baseline;
use crate::model::kimi::agent::inject::{AbortReason, Garbage, ListenerFault};
use crate::model::port::inject::StreamFault;

/// The fault plans the swarm can draw for `scenario`, as a [`Strategy`]. Runs the scenario once
/// without its explicit faults (seed 0) to find where faults can land; the plans do not include
/// the scenario's own faults (add them, or replace them, as your property needs).
///
/// ```
/// use loopsim::harness::strategy;
/// use loopsim::harness::report::Verdict;
/// use loopsim::harness::run::run_scenario;
/// use loopsim::harness::scenario::Scenario;
/// use loopsim::harness::shrink::with_plan;
/// use proptest::prelude::*;
///
/// let scenario = Scenario::load("scenarios/letta/approval_turn.toml".as_ref()).unwrap();
/// let plans = strategy::plans(&scenario).unwrap();
/// proptest!(ProptestConfig::with_cases(4), |(plan in plans, seed in 0..4u64)| {
///     // The reference client and server finish every turn correctly under any plan.
///     let report = run_scenario(&with_plan(&scenario, plan), seed, 1).unwrap();
///     prop_assert_eq!(&report.verdict, &Verdict::Pass, "{}", report.render());
/// });
/// ```
pub fn plans(scenario: &Scenario) -> Result<BoxedStrategy<Vec<Fault>>, InputError> {
    Ok(plans_over(&super::explore::baseline(scenario)?))
}

/// The fault plans the swarm can draw over a fault-free run's [`Baseline`].
pub fn plans_over(baseline: &Baseline) -> BoxedStrategy<Vec<Fault>> {
    let families = match baseline {
        Baseline::Letta(b) => letta_families(b),
        Baseline::Kimi(b) => loop_families(b),
    };
    families
        .into_iter()
        .map(proptest::option::of)
        .collect::<Vec<_>>()
        .prop_map(|faults| faults.into_iter().flatten().collect())
        .boxed()
}

fn letta_families(b: &LettaBaseline) -> Vec<BoxedStrategy<Fault>> {
    let horizon = b.end_ms.max(1);
    let responses = b.response_frames.clone();
    let server_stream = (0..responses.len().max(1))
        .prop_flat_map(move |r| {
            let frames = responses.get(r).copied().unwrap_or(1).max(1);
            (Just(r as u64 + 1), 1..=frames, select(&STREAM_ACTIONS[..]))
        })
        .prop_map(|(response, frame, action)| Fault::ServerStream {
            response,
            frame,
            action,
        });
    vec![
        network(&[["client", "server"], ["server", "provider"]], horizon),
        crash(&["server", "provider"], horizon),
        provider(&b.provider_frames, &STREAM_ACTIONS),
        server_stream.boxed(),
    ]
}

fn loop_families(b: &LoopBaseline) -> Vec<BoxedStrategy<Fault>> {
    let horizon = b.end_ms.max(1);
    let reason = prop_oneof![3 => Just(AbortReason::User), 1 => Just(AbortReason::Signal)];
    let events: Vec<(String, u32)> = b
        .agent_events
        .iter()
        .filter(|(name, _)| ABORT_EVENTS.contains(&name.as_str()))
        .cloned()
        .collect();
    let when = if events.is_empty() {
        at(horizon).boxed()
    } else {
        let on_event = select(events).prop_flat_map(|(event, count)| {
            (1..=count).prop_map(move |nth| When::OnEvent {
                event: event.clone(),
                nth,
            })
        });
        prop_oneof![3 => on_event, 1 => at(horizon)].boxed()
    };
    let user = (when, reason).prop_map(|(when, reason)| Fault::UserAbort {
        when,
        reason: Some(reason),
    });
    let executions = b.tool_executions.max(1);
    let tool = prop_oneof![
        // With the user's abort: without one a hang is a hang for ever.
        (1..=executions, 1..=5_000u64).prop_map(|(execution, a)| Fault::ToolHang {
            execution,
            abort_after_ms: Some(a),
        }),
        (1..=executions, select(&Garbage::ALL[..]))
            .prop_map(|(execution, value)| Fault::ToolGarbage { execution, value }),
    ];
    let listener = (
        select(&LOOP_EVENT_TYPES[..7]),
        1..=3u32,
        select(&[ListenerFault::Error, ListenerFault::Panic][..]),
    )
        .prop_map(|(event, nth, how)| Fault::ListenerThrows {
            event: Some(event.to_string()),
            nth: Some(nth),
            how,
        });
    // The dispatcher's other side: the host's record store rejects an append (as the swarm's
    // `listener` family draws it, one time in four).
    let rejected = (select(RECORDED_EVENT_TYPES), 1..=3u32).prop_map(|(event, nth)| {
        Fault::TranscriptRejects {
            event: Some(event.to_string()),
            nth: Some(nth),
        }
    });
    let listener = prop_oneof![3 => listener, 1 => rejected];
    vec![
        network(&[["client", "provider"]], horizon),
        crash(&["provider"], horizon),
        provider(&b.provider_frames, &LOOP_STREAM_ACTIONS),
        user.boxed(),
        tool.boxed(),
        listener.boxed(),
    ]
}

fn at(horizon: u64) -> impl Strategy<Value = When> + Clone {
    (0..horizon).prop_map(When::AtMs)
}

/// A latency spike, or a partition or hold between one of `pairs`, at a time in the baseline.
fn network(pairs: &[[&'static str; 2]], horizon: u64) -> BoxedStrategy<Fault> {
    let between = select(pairs.to_vec()).prop_map(|p| p.map(String::from));
    let span = (between, at(horizon), 100..=10_000u64);
    prop_oneof![
        (at(horizon), 20..=500u64).prop_map(|(when, max_ms)| Fault::Latency { when, max_ms }),
        span.clone()
            .prop_map(|(between, when, duration_ms)| Fault::Partition {
                between,
                when,
                duration_ms,
            }),
        span.prop_map(|(between, when, duration_ms)| Fault::Hold {
            between,
            when,
            duration_ms,
        }),
    ]
    .boxed()
}

/// A crash of one of `hosts` at a time in the baseline, restarted 50 ms to 5 s later.
fn crash(hosts: &[&'static str], horizon: u64) -> BoxedStrategy<Fault> {
    (select(hosts.to_vec()), at(horizon), 50..=5_000u64)
        .prop_map(|(host, when, restart)| Fault::Crash {
            host: host.into(),
            when,
            restart_after_ms: Some(restart),
        })
        .boxed()
}

/// An error status on a model call, or a stream action on a frame of its answer.
fn provider(frames: &[u64], actions: &'static [StreamFault]) -> BoxedStrategy<Fault> {
    let calls = frames.len().max(1) as u32;
    let error = (0..calls, select(&[429u16, 500, 503, 529][..]), 1..=30u64).prop_map(
        |(call, status, retry)| Fault::ProviderError {
            call,
            status,
            retry_after_s: (status == 429).then_some(retry),
            message: None,
        },
    );
    let frames = frames.to_vec();
    let stream = (0..calls)
        .prop_flat_map(move |call| {
            let n = frames.get(call as usize).copied().unwrap_or(1).max(1);
            (Just(call), 1..=n, select(actions))
        })
        .prop_map(|(call, frame, action)| Fault::ProviderStream {
            call,
            frame,
            action,
        });
    prop_oneof![error, stream].boxed()
}

#[cfg(test)]
mod tests {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{RngAlgorithm, TestError, TestRng, TestRunner};

    use super::*;

    fn runner() -> TestRunner {
        let config = proptest::test_runner::Config {
            failure_persistence: None,
            ..Default::default()
        };
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
    }

    #[test]
    fn drawn_plans_are_valid_one_per_family_and_fit_the_baseline() {
        let letta_frames = vec![11, 7];
        let letta = Baseline::Letta(LettaBaseline {
            end_ms: 240,
            response_frames: letta_frames.clone(),
            provider_frames: vec![15, 9],
        });
        let kimi = Baseline::Kimi(LoopBaseline {
            end_ms: 900,
            provider_frames: vec![20, 9],
            tool_executions: 4,
            agent_events: vec![("loop_tool_start".into(), 4)],
        });
        let mut runner = runner();
        for (base, families, server) in [(&letta, 4, true), (&kimi, 6, false)] {
            let strategy = plans_over(base);
            for _ in 0..200 {
                let plan = strategy.new_tree(&mut runner).unwrap().current();
                assert!(plan.len() <= families, "{plan:?}");
                for f in &plan {
                    assert_eq!(f.problem(), None, "{f}");
                    assert!(server || !f.needs_server(), "{f}");
                    if let Fault::ServerStream {
                        response, frame, ..
                    } = f
                    {
                        assert!(*frame <= letta_frames[*response as usize - 1]);
                    }
                }
            }
        }
    }

    #[test]
    fn a_plan_shrinks_to_fewer_faults_and_smaller_numbers() {
        let base = Baseline::Letta(LettaBaseline {
            end_ms: 5_000,
            response_frames: vec![30],
            provider_frames: vec![30],
        });
        // "Fails" whenever the plan has a fault: the simplest failing plan is one fault of one
        // family, its first alternative with its numbers at their lower bounds.
        let failure = runner().run(&plans_over(&base), |plan| {
            prop_assert!(plan.is_empty());
            Ok(())
        });
        let Err(TestError::Fail(_, plan)) = failure else {
            panic!("{failure:?}")
        };
        let simplest = [
            Fault::Latency {
                when: When::AtMs(0),
                max_ms: 20,
            },
            Fault::Crash {
                host: "server".into(),
                when: When::AtMs(0),
                restart_after_ms: Some(50),
            },
            Fault::ProviderError {
                call: 0,
                status: 429,
                retry_after_s: Some(1),
                message: None,
            },
            Fault::ServerStream {
                response: 1,
                frame: 1,
                action: StreamFault::Reset,
            },
        ];
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert!(simplest.contains(&plan[0]), "{plan:?}");
    }
}
