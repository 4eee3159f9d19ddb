//! The library face (`loopsim::check`) as a user's own `cargo test` uses it: a passing sweep,
//! and a planted defect whose failed assertion carries the report and the reproduce command.

use std::panic::{AssertUnwindSafe, catch_unwind};

use loopsim::check::Check;

use crate::common::repo;

#[test]
fn a_bundled_scenario_passes_a_swarm_sweep() {
    Check::load(repo().join("scenarios/letta/approval_turn.toml"))
        .unwrap()
        .seeds(0..6)
        .swarm(true)
        .assert_pass();
}

#[test]
fn one_seed_reports_pass_and_a_planted_defect_reports_its_invariant() {
    let ok = Check::load(repo().join("scenarios/kimi/parallel_conflicts.toml"))
        .unwrap()
        .run_seed(1)
        .unwrap();
    assert!(ok.passed(), "{}", ok.render());
    let bad = Check::load(repo().join("scenarios/planted/dangling_tool_call.toml"))
        .unwrap()
        .run_seed(1)
        .unwrap();
    assert!(!bad.passed());
    assert!(
        bad.render().contains("tool-call-resolved           FAIL"),
        "{}",
        bad.render()
    );
}

#[test]
fn a_failing_sweep_panics_with_the_report_and_the_reproduce_command() {
    let check = Check::load(repo().join("scenarios/planted/dangling_tool_call.toml"))
        .unwrap()
        .seeds(0..3);
    let panic = catch_unwind(AssertUnwindSafe(|| check.assert_pass())).expect_err("must fail");
    let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(text.contains("3 of 3 seeds failed"), "{text}");
    assert!(text.contains("tool-call-resolved"), "{text}");
    assert!(
        text.contains("reproduce: cargo run --release -p sim -- run"),
        "{text}"
    );
}

#[test]
fn a_bad_scenario_is_an_input_error_naming_the_file() {
    let e = Check::load(repo().join("scenarios/letta/no_such_scenario.toml")).unwrap_err();
    assert!(e.to_string().contains("no_such_scenario.toml"), "{e}");
}
