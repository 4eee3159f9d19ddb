//! `sim explore --real-client` (docs/real-client.md): a short seed sweep of the real Letta Code
//! CLI (installed by tests/interop/setup.sh) judged from the server's side, and the proof that
//! the judge can fail: a deliberately faulty client (tests/interop/faulty_client.py) caught by
//! the invariant it breaks.
//!
//! Run just these: `cargo test --test interop realclient::` (a minute or two: real processes in
//! real time).

use std::path::PathBuf;

use super::clients::{setup, work_dir};
use crate::common::repo;
use loopsim::harness::gate::{RealClientStage, real_client_cases};
use loopsim::harness::realclient::{self, Planner, RealClientOptions, run_once};
use loopsim::harness::scenario::Scenario;

const SCENARIO: &str = "scenarios/real-client/bash_effect.toml";
const PLANTED: &str = "scenarios/real-client/planted_server_accepts_message_while_pending.toml";

fn options(command: String, tag: &str) -> RealClientOptions {
    RealClientOptions {
        command,
        seeds: 0..1,
        jobs: 2,
        run_timeout_ms: 120_000,
        reruns: 1,
        dir: work_dir()
            .join("real-client-tests")
            .join(format!("{tag}-{}", std::process::id())),
        root: repo().to_path_buf(),
        keep: false,
    }
}

fn scenario() -> Scenario {
    Scenario::load(&repo().join(SCENARIO)).expect("the sweep scenario loads")
}

fn real_cli_command(cli: &std::path::Path) -> String {
    format!(
        "node '{}' -p \"$SIM_TURN\" -m \"$SIM_MODEL\" --output-format stream-json",
        cli.display()
    )
}

/// The faulty client in `mode`, with no faults planned: whatever breaks is the client's doing.
fn faulty(mode: &str) -> realclient::RealRun {
    let script: PathBuf = repo().join("tests/interop/faulty_client.py");
    let o = options(format!("python3 '{}' {mode}", script.display()), mode);
    let s = scenario();
    run_once(&s, 0, &[], &o, &o.dir.join("run")).expect("the run is judged")
}

#[test]
fn a_client_that_runs_a_tool_twice_fails_no_double_execution() {
    let run = faulty("twice");
    assert_eq!(run.cli.code, Some(0), "stderr:\n{}", run.cli.stderr);
    assert_eq!(run.failed(), ["no-double-execution"], "{:#?}", run.verdicts);
    let (_, findings) = run
        .verdicts
        .iter()
        .find(|(id, _)| *id == "no-double-execution")
        .unwrap();
    assert!(
        findings[0]
            .message
            .contains("call_fake0001 took effect 2 times"),
        "{findings:?}"
    );
}

#[test]
fn a_client_that_leaves_a_call_unanswered_fails_tool_call_resolved() {
    let run = faulty("unresolved");
    assert_eq!(run.cli.code, Some(0), "stderr:\n{}", run.cli.stderr);
    assert_eq!(run.failed(), ["tool-call-resolved"], "{:#?}", run.verdicts);
}

/// Three seeds of the real CLI, the first three in a row whose plans hold no stall (a stall
/// costs the CLI's 60 s stall reconciler). The sweep passes or reports its findings; either
/// way every seed has a verdict and every failure carries what a failure report must.
#[test]
fn a_short_sweep_of_the_real_cli_gives_a_verdict_per_seed() {
    let Some(cli) = setup() else { return };
    let s = scenario();
    let planner = Planner::new(&s).unwrap();
    let quick = |seed: u64| {
        !planner
            .plan(seed)
            .iter()
            .any(|f| f.to_string().contains("stall"))
    };
    let start = (0..1000).find(|&k| (k..k + 3).all(quick)).unwrap();
    let mut o = options(real_cli_command(&cli), "sweep");
    o.seeds = start..start + 3;
    let report = realclient::explore(std::slice::from_ref(&s), &o, &|_, _, what| {
        println!("{what}")
    })
    .expect("the sweep runs");
    println!("{}", report.render());
    assert_eq!(report.runs.len(), 3);
    for r in &report.runs {
        assert!(r.requests > 0, "the CLI reached the server: {r:?}");
    }
    let failing = report.runs.iter().filter(|r| !r.failed.is_empty()).count();
    assert_eq!(report.failures.len(), failing);
    for f in &report.failures {
        assert!(!f.findings.is_empty(), "{f:?}");
        assert!(f.rerun.contains("--real-client"), "{}", f.rerun);
        assert_eq!(f.reruns, 1);
        assert!(!f.requests.is_empty(), "{f:?}");
    }
    assert_eq!(report.exit_code() == 0, report.failures.is_empty());
}

/// A planted server defect (a user message accepted while another client's tool call is
/// pending) makes a run of the real, unmodified CLI fail `tool-call-resolved`: the judge bites
/// on a real client, not only on faulty fakes. The server's trace names the dangling call.
#[test]
fn a_planted_server_defect_makes_the_real_cli_fail_tool_call_resolved() {
    let Some(cli) = setup() else { return };
    let s = Scenario::load(&repo().join(PLANTED)).expect("the planted scenario loads");
    let o = options(real_cli_command(&cli), "planted");
    let run = run_once(&s, 0, &[], &o, &o.dir.join("run")).expect("the run is judged");
    assert!(
        run.failed().iter().any(|f| f == "tool-call-resolved"),
        "the planted defect went unnoticed: {:#?}\nstdout:\n{:?}",
        run.verdicts,
        run.cli.stdout
    );
    let (_, findings) = run
        .verdicts
        .iter()
        .find(|(id, _)| *id == "tool-call-resolved")
        .unwrap();
    assert!(
        findings.iter().any(|f| f.message.contains("toolu_stale_1")),
        "{findings:?}"
    );
}

/// `sim ci --real-client`'s stage over scenarios/real-client/: two stall-free seeds of the sweep
/// scenario pass (or fail only flakily), and the planted server defect is caught.
#[test]
fn the_gate_s_real_client_stage_sweeps_and_catches_its_canary() {
    let Some(cli) = setup() else { return };
    let stage = RealClientStage {
        command: real_cli_command(&cli),
        dir: work_dir()
            .join("real-client-tests")
            .join(format!("gate-{}", std::process::id())),
        seeds: 2,
        run_timeout_ms: 120_000,
    };
    let cases = real_client_cases(repo(), &stage, 2, &|_| {}).expect("the stage runs");
    for c in &cases {
        println!(
            "{} {} {}\n{}",
            if c.ok { "ok" } else { "FAIL" },
            c.suite,
            c.name,
            c.message
        );
    }
    assert_eq!(cases.len(), 2, "{cases:?}");
    assert!(
        cases.iter().all(|c| c.suite == "real-client" && c.ok),
        "{cases:#?}"
    );
    let canary = cases.iter().find(|c| c.name.contains("planted_")).unwrap();
    assert!(
        canary.message.starts_with("caught by tool-call-resolved"),
        "{}",
        canary.message
    );
    let sweep = cases
        .iter()
        .find(|c| c.name.contains("bash_effect"))
        .unwrap();
    assert!(sweep.message.starts_with("2 seeds ("), "{}", sweep.message);
}
