//! Fault plans as a proptest strategy (`harness::strategy`): a property over a reference
//! scenario holds under every plan, and over a planted canary it fails and proptest shrinks the
//! failing plan.

use std::sync::Mutex;

use loopsim::harness::faults::Fault;
use loopsim::harness::report::Verdict;
use loopsim::harness::run::run_scenario;
use loopsim::harness::scenario::Scenario;
use loopsim::harness::shrink::with_plan;
use loopsim::harness::strategy;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestError, TestRng, TestRunner};

use crate::common::load;

fn runner(cases: u32) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// Runs `scenario` with `plan` in place of its own faults.
fn verdict(scenario: &Scenario, plan: Vec<Fault>, seed: u64) -> (Verdict, String) {
    let report = run_scenario(&with_plan(scenario, plan), seed, 1).unwrap();
    (report.verdict.clone(), report.render())
}

proptest! {
    #![proptest_config(Config {
        cases: 12,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(1),
        ..Config::default()
    })]

    /// The reference client and server finish every turn correctly whatever the swarm does.
    #[test]
    fn the_reference_approval_turn_passes_under_any_plan(
        (scenario, plan) in {
            let s = load("scenarios/letta/approval_turn.toml");
            strategy::plans(&s).unwrap().prop_map(move |p| (s.clone(), p))
        },
        seed in 0..4u64,
    ) {
        let (v, report) = verdict(&scenario, plan, seed);
        prop_assert_eq!(v, Verdict::Pass, "{}", report);
    }

    /// The same for the agent loop, with its own families (user, tool, listener).
    #[test]
    fn the_reference_agent_loop_passes_under_any_plan(
        (scenario, plan) in {
            let s = load("scenarios/kimi/parallel_conflicts.toml");
            strategy::plans(&s).unwrap().prop_map(move |p| (s.clone(), p))
        },
        seed in 0..4u64,
    ) {
        let (v, report) = verdict(&scenario, plan, seed);
        prop_assert_eq!(v, Verdict::Pass, "{}", report);
    }
}

/// A client with no stall window waits for ever on a silent stream: some plans make it hang
/// (`turn-terminates`), and proptest shrinks the plan it found to one no larger.
#[test]
fn a_canary_fails_under_some_plan_and_the_plan_shrinks() {
    let canary = load("scenarios/planted/waits_forever_on_silence.toml");
    let plans = strategy::plans(&canary).unwrap();
    let first_failure: Mutex<Option<Vec<Fault>>> = Mutex::new(None);
    let result = runner(256).run(&plans, |plan| {
        let (v, _) = verdict(&canary, plan.clone(), 1);
        if v != Verdict::Pass {
            first_failure.lock().unwrap().get_or_insert(plan);
        }
        prop_assert_eq!(v, Verdict::Pass);
        Ok(())
    });
    let Err(TestError::Fail(_, minimal)) = result else {
        panic!("no plan made the canary fail: {result:?}");
    };
    let first = first_failure
        .into_inner()
        .unwrap()
        .expect("a first failing plan");
    assert!(!minimal.is_empty(), "the canary passes without faults");
    assert!(
        minimal.len() <= first.len(),
        "shrunk {minimal:?} from {first:?}"
    );
    // What proptest reports fails as the property said.
    let (v, report) = verdict(&canary, minimal.clone(), 1);
    assert!(
        matches!(v, Verdict::Liveness(_)),
        "{minimal:?} gave {v:?}\n{report}"
    );
    // Every fault left is needed: without any one of them the canary passes.
    for i in 0..minimal.len() {
        let mut fewer = minimal.clone();
        let gone = fewer.remove(i);
        assert_eq!(
            verdict(&canary, fewer, 1).0,
            Verdict::Pass,
            "{gone} is not needed"
        );
    }
}
