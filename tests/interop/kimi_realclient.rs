//! `sim explore --real-client` over agent-loop scenarios (docs/real-client.md, "The agent
//! loop"): a short seed sweep of the published Kimi Code CLI (installed by
//! tests/interop/setup-kimi.sh) judged from the provider's side, and the proof that the judge
//! can fail: a deliberately faulty agent (tests/interop/kimi_faulty_client.py) that drops a
//! tool result or answers a call twice, caught by `loop-envelope`.
//!
//! Run just these: `cargo test --test interop kimi_realclient::` (a minute: real processes in
//! real time).

use std::path::PathBuf;

use super::clients::work_dir;
use super::kimi_cli::setup_kimi;
use crate::common::repo;
use loopsim::harness::realclient::agent_loop::{self, LoopPlanner};
use loopsim::harness::realclient::{self, RealClientOptions, RealRun};
use loopsim::harness::scenario::Scenario;

const ANTHROPIC: &str = "tests/interop/kimi_sweep.toml";
const OPENAI: &str = "tests/interop/kimi_sweep_openai.toml";

fn options(command: String, tag: &str) -> RealClientOptions {
    RealClientOptions {
        command,
        seeds: 0..1,
        jobs: 2,
        run_timeout_ms: 60_000,
        reruns: 1,
        dir: work_dir()
            .join("real-client-tests")
            .join(format!("kimi-{tag}-{}", std::process::id())),
        root: repo().to_path_buf(),
        keep: false,
    }
}

fn scenario(rel: &str) -> Scenario {
    Scenario::load(&repo().join(rel)).expect("the sweep scenario loads")
}

/// The faulty agent in `mode` over `rel`, with no faults planned: whatever breaks is its doing.
fn faulty(rel: &str, mode: &str) -> RealRun {
    let script: PathBuf = repo().join("tests/interop/kimi_faulty_client.py");
    let tag = format!("{mode}-{}", rel.len());
    let o = options(format!("python3 '{}' {mode}", script.display()), &tag);
    let s = scenario(rel);
    agent_loop::run_once(&s, 0, &[], &o, &o.dir.join("run")).expect("the run is judged")
}

fn envelope_messages(run: &RealRun) -> Vec<String> {
    run.verdicts
        .iter()
        .filter(|(id, _)| *id == "loop-envelope")
        .flat_map(|(_, f)| f.iter().map(|x| x.message.clone()))
        .collect()
}

#[test]
fn an_agent_that_drops_a_tool_result_fails_loop_envelope() {
    for rel in [ANTHROPIC, OPENAI] {
        let run = faulty(rel, "drop");
        assert_eq!(
            run.failed(),
            ["loop-envelope"],
            "{rel}: {:#?}",
            run.verdicts
        );
        let m = envelope_messages(&run);
        // The first batch is Read a, Read b, Write c: the two it left out have no result.
        assert_eq!(m.len(), 2, "{rel}: {m:?}");
        assert!(
            m[0].contains("Read call") && m[0].contains("has no result"),
            "{rel}: {m:?}"
        );
        assert!(m[1].contains("Write call"), "{rel}: {m:?}");
    }
}

#[test]
fn an_agent_that_answers_a_call_twice_fails_loop_envelope() {
    for rel in [ANTHROPIC, OPENAI] {
        let run = faulty(rel, "twice");
        assert_eq!(
            run.failed(),
            ["loop-envelope"],
            "{rel}: {:#?}",
            run.verdicts
        );
        let m = envelope_messages(&run);
        assert!(
            m.iter().any(|x| x.contains("is answered twice")),
            "{rel}: {m:?}"
        );
    }
}

/// Three seeds of the real CLI per scenario, the first three in a row whose plans hold a
/// fault but no stall (the CLI waits on a stalled stream past any budget: docs/real-client.md).
/// The sweep passes or reports its findings; either way every seed has a verdict, the model's
/// run beside it, and every failure carries what a failure report must.
#[test]
fn a_short_sweep_of_the_real_kimi_cli_gives_a_verdict_per_seed() {
    let Some(kimi) = setup_kimi() else { return };
    let scenarios = [scenario(ANTHROPIC), scenario(OPENAI)];
    let planner = LoopPlanner::new(&scenarios[0]).unwrap();
    let quick = |seed: u64| {
        let p = planner.plan(seed);
        !p.is_empty() && !p.iter().any(|f| f.to_string().contains("stall"))
    };
    let start = (0..1000).find(|&k| (k..k + 3).all(quick)).unwrap();
    let mut o = options(
        format!(
            "'{}' '{}' -p \"$SIM_TURN\" --output-format stream-json",
            kimi.node.display(),
            kimi.main.display()
        ),
        "sweep",
    );
    o.seeds = start..start + 3;
    let report = realclient::explore(&scenarios, &o, &|_, _, what| println!("{what}"))
        .expect("the sweep runs");
    println!("{}", report.render());
    assert_eq!(report.runs.len(), 6);
    assert_eq!(report.model, agent_loop::MODEL);
    for r in &report.runs {
        assert!(r.requests >= 3, "the CLI ran the turn: {r:?}");
        assert!(!r.plan.is_empty(), "{r:?}");
        assert_ne!(r.model_outcome, "none", "the model ran the plan: {r:?}");
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

/// The agent-loop sweep refuses a Letta scenario mixed in, naming its file and line.
#[test]
fn a_letta_scenario_among_agent_loop_ones_is_refused() {
    let o = options("true".into(), "mixed");
    let scenarios = [
        scenario(ANTHROPIC),
        scenario("scenarios/real-client/bash_effect.toml"),
    ];
    let err = realclient::explore(&scenarios, &o, &|_, _, _| {}).unwrap_err();
    assert!(err.file.ends_with("bash_effect.toml"), "{err:?}");
    assert!(err.line.is_some(), "{err:?}");
    assert!(err.message.contains("agent-loop"), "{err:?}");
}
