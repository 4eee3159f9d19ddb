//! Sweeps, swarm plans, shrinking and the gate: results independent of parallelism, shards that
//! merge into the whole, shrunk scenarios that still fail, canaries that are always caught.

use crate::common::{load, repo};
use loopsim::harness::explore::{ExploreOptions, ExploreReport, explore, plan_of};
use loopsim::harness::gate::{GateOptions, run_gate, sweep_in_process};
use loopsim::harness::guided::explore_in_process;
use loopsim::harness::report::Verdict;
use loopsim::harness::run::run_scenario;
use loopsim::harness::scenario::{Fault, Scenario};
use loopsim::harness::shrink::{shrink, with_plan};

fn options(seeds: std::ops::Range<u64>, jobs: usize, swarm: bool) -> ExploreOptions {
    ExploreOptions {
        seeds,
        jobs,
        shard: None,
        swarm,
        determinism_every: 5,
        guided: false,
    }
}

#[test]
fn results_do_not_depend_on_jobs() {
    let s = vec![load("scenarios/letta/approval_turn.toml")];
    let one = explore(&s, &options(0..60, 1, true), &|_, _| {}).unwrap();
    let three = explore(&s, &options(0..60, 3, true), &|_, _| {}).unwrap();
    assert_eq!(one, three);
    assert_eq!(one.runs, 60);
    // Swarm faults reach interesting places.
    assert!(one.coverage["provider-error"] > 0, "{}", one.render());
    assert!(
        one.coverage["stream-cut-in-tool-args"] > 0,
        "{}",
        one.render()
    );
}

#[test]
fn shards_merge_into_the_whole_sweep() {
    let s = vec![load("scenarios/planted/dangling_tool_call.toml")];
    let whole = explore(&s, &options(0..12, 1, true), &|_, _| {}).unwrap();
    let shards: Vec<ExploreReport> = (1..=3)
        .map(|k| {
            let mut o = options(0..12, 1, true);
            o.shard = Some((k, 3));
            explore(&s, &o, &|_, _| {}).unwrap()
        })
        .collect();
    assert_eq!(shards.iter().map(|r| r.runs).sum::<u64>(), 12);
    let merged = ExploreReport::merge(&shards).unwrap();
    assert_eq!(merged, whole);
    assert!(!whole.by_invariant()["tool-call-resolved"].is_empty());
}

#[test]
fn a_sweep_reports_failures_by_invariant_with_reproduce_commands() {
    let s = vec![load("scenarios/planted/dangling_tool_call.toml")];
    let r = explore(&s, &options(0..4, 2, false), &|_, _| {}).unwrap();
    assert_eq!(r.failures.len(), 4);
    let text = r.render();
    assert!(text.contains("tool-call-resolved: 4 seed(s)"), "{text}");
    // The message is the first broken invariant's; under another invariant's group it says so.
    let first_under = |group: &str| {
        let head = format!("  {group}: 4 seed(s)\n");
        let at = text.find(&head).expect("the group") + head.len();
        let line = text[at..].lines().next().unwrap();
        line.split_once("dangling_tool_call.toml: ")
            .unwrap()
            .1
            .to_string()
    };
    assert!(
        first_under("history-valid")
            .starts_with("(first broken: tool-call-resolved) conversation "),
        "{text}"
    );
    assert!(
        first_under("tool-call-resolved").starts_with("conversation "),
        "{text}"
    );
    assert!(
        text.contains("reproduce: cargo run --release -p sim -- run "),
        "{text}"
    );
    assert!(text.contains("NEVER REACHED"), "{text}");
}

#[test]
fn shrinking_keeps_the_failure_and_writes_a_standalone_scenario() {
    let base = load("scenarios/planted/dangling_tool_call.toml");
    // The first seed whose swarm plan still lets the planted bug show.
    let (seed, start) = (0..50)
        .map(|seed| (seed, with_plan(&base, plan_of(&base, seed, true).unwrap())))
        .find(|(seed, s)| {
            !s.faults.is_empty()
                && run_scenario(s, *seed, 1).unwrap().verdict == Verdict::Correctness
        })
        .expect("some seed with faults fails");
    let shrunk = shrink(&start, seed, "tool-call-resolved", 300).unwrap();
    assert!(shrunk.scenario.faults.len() <= start.faults.len());
    // Every swarm fault goes: the planted server bug and the scenario's own fault (another
    // client leaving a call pending) are all the failure needs.
    let kept: Vec<Fault> = shrunk
        .scenario
        .faults
        .iter()
        .map(|f| f.get_ref().clone())
        .collect();
    let own: Vec<Fault> = base.faults.iter().map(|f| f.get_ref().clone()).collect();
    assert_eq!(kept, own, "{:?}", shrunk.steps);

    let dir = std::env::temp_dir().join(format!("loopsim-shrink-{}", std::process::id()));
    let file = shrunk.write(&dir).unwrap();
    let again = Scenario::load(&file).unwrap();
    let report = run_scenario(&again, seed, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Correctness, "{}", report.render());
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("# Reproduce: cargo run --release -p sim -- run ")
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A swarm seed that moves the world's start runs, reports and shrinks from it: `sim shrink
/// --swarm` starts where the seed ran and moves the start back to the default when the
/// failure does not need it. A scenario that names its own start keeps it on every seed.
#[test]
fn a_swarm_seed_may_move_the_start_and_shrinking_moves_it_back() {
    use loopsim::harness::explore::{baseline, with_swarm};
    use loopsim::harness::seed::{SeedShrink, ShrinkSeedOptions, shrink_seed};
    let path = "scenarios/planted/dangling_tool_call.toml";
    let base = load(path);
    let b = baseline(&base).unwrap();
    let (seed, moved) = (0..64)
        .map(|seed| (seed, with_swarm(&base, seed, &b)))
        .find(|(_, s)| !s.network.start.is_default())
        .expect("one seed in eight moves the start");
    let report = run_scenario(&moved, seed, 1).unwrap();
    let shown = format!("start     {}\n", moved.network.start);
    assert!(report.render().contains(&shown), "{}", report.render());
    let dir = std::env::temp_dir().join(format!("loopsim-shrink-start-{}", std::process::id()));
    let options = ShrinkSeedOptions {
        seed,
        swarm: true,
        invariant: Some("tool-call-resolved".into()),
        out: Some(dir.clone()),
        max_runs: 300,
    };
    let SeedShrink::Shrunk { shrunk, .. } = shrink_seed(&repo().join(path), &options).unwrap()
    else {
        panic!("seed {seed} fails");
    };
    assert!(
        shrunk
            .steps
            .iter()
            .any(|s| s == "start = 2026-01-01T00:00:00Z (the default)"),
        "{:?}",
        shrunk.steps
    );
    assert!(shrunk.scenario.network.start.is_default());
    std::fs::remove_dir_all(&dir).ok();

    let dated = load("scenarios/letta/client_retry_date_2100.toml");
    let b = baseline(&dated).unwrap();
    for seed in 0..64 {
        assert_eq!(
            with_swarm(&dated, seed, &b).network.start,
            dated.network.start
        );
    }
}

/// A guided seed moves the world's start as the same swarm seed does, and its reproduce
/// command names the start (`--start`), since a guided run is reproduced from its plan: that
/// command runs from the start the failure ran from and gives its trace again.
#[test]
fn a_guided_seed_moves_the_start_and_its_reproduce_command_names_it() {
    use loopsim::harness::scenario::Retune;
    use loopsim::harness::seed::run_planned;
    use loopsim::harness::swarm::swarm_start;
    let path = "scenarios/planted/dangling_tool_call.toml";
    let report = explore_in_process(&[load(path)], &guided(0..16, 2), &|_, _| {}).unwrap();
    let moved: Vec<_> = report
        .failures
        .iter()
        .filter_map(|f| swarm_start(f.seed).map(|start| (f, start)))
        .collect();
    assert!(!moved.is_empty(), "some seed of 0..16 moves the start");
    for f in &report.failures {
        match swarm_start(f.seed) {
            Some(start) => assert!(
                f.reproduce.contains(&format!(" --start {start}")),
                "{}",
                f.reproduce
            ),
            None => assert!(!f.reproduce.contains("--start"), "{}", f.reproduce),
        }
    }
    let (failure, start) = moved[0];
    let run = |start| {
        let retune = Retune {
            start,
            ..Retune::default()
        };
        run_planned(
            &repo().join(path),
            failure.seed,
            false,
            &failure.faults,
            &retune,
            1,
        )
        .unwrap()
    };
    let again = run(Some(start));
    assert_eq!(again.trace_hash, failure.trace_hash);
    let shown = format!("start     {start}\n");
    assert!(again.render().contains(&shown), "{}", again.render());
    let r = run(None).render();
    assert!(!r.contains("\nstart     "), "{r}");
}

#[test]
fn shrinking_a_fault_driven_failure_keeps_the_fault_that_matters() {
    let base = load("scenarios/planted/waits_forever_on_silence.toml");
    // Add noise faults the failure does not need.
    let mut s = base.clone();
    for f in [
        r#"{ kind = "latency", at_ms = 5, max_ms = 40 }"#,
        r#"{ kind = "provider_error", call = 1, status = 500 }"#,
    ] {
        let t: toml::Table = toml::from_str(&format!("f = {f}")).unwrap();
        let fault = t["f"].clone().try_into().unwrap();
        s.faults.push(toml::Spanned::new(0..0, fault));
    }
    let shrunk = shrink(&s, 1, "turn-terminates", 300).unwrap();
    let left: Vec<String> = shrunk
        .scenario
        .faults
        .iter()
        .map(|f| f.get_ref().to_string())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].contains("action=stall"), "{left:?}");
}

#[test]
fn the_gate_catches_every_canary_and_checks_snapshots() {
    let report = run_gate(
        &GateOptions {
            root: repo().to_path_buf(),
            as_written_seeds: 2,
            fixed_seeds: 8,
            published_seeds: 2,
            commit: Some("0123456789abcdef".into()),
            commit_seeds: 4,
            canary_seeds: 4,
            determinism_every: 2,
            jobs: 2,
            real_client: None,
        },
        &sweep_in_process,
        &|_| {},
    )
    .unwrap();
    assert_eq!(report.exit_code, 0, "{}", report.render());
    let canaries: Vec<_> = report
        .cases
        .iter()
        .filter(|c| c.suite == "canary")
        .collect();
    assert!(canaries.len() >= 3);
    assert!(canaries.iter().all(|c| c.ok));
    assert!(report.cases.iter().any(|c| c.suite == "snapshot" && c.ok));
    let xml = report.to_junit();
    assert!(xml.contains("<testsuite name=\"canary\""), "{xml}");
    assert!(xml.contains("failures=\"0\""));
    // Without a real client the last stage is skipped and says why.
    assert!(
        report.skipped.iter().any(|s| s.contains("--real-client")),
        "{:?}",
        report.skipped
    );
    assert!(report.render().contains("skip real-client"));
}

/// A repository root of its own under the temp dir, with an empty `scenarios/letta` and the
/// cassettes linked, so scenarios copied in name their cassettes as in the repository.
fn temp_gate_root(name: &str) -> std::path::PathBuf {
    let root = std::env::temp_dir().join(format!("loopsim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("scenarios/letta")).unwrap();
    std::os::unix::fs::symlink(repo().join("cassettes"), root.join("cassettes")).unwrap();
    root
}

/// The gate over `root` with only the as-written and published-client stages, at these seeds.
fn gate_of_two_stages(
    root: &std::path::Path,
    as_written_seeds: u64,
    published_seeds: u64,
) -> loopsim::harness::gate::GateReport {
    let report = run_gate(
        &GateOptions {
            root: root.to_path_buf(),
            as_written_seeds,
            fixed_seeds: 0,
            published_seeds,
            commit: None,
            commit_seeds: 0,
            canary_seeds: 0,
            determinism_every: 2,
            jobs: 1,
            real_client: None,
        },
        &sweep_in_process,
        &|_| {},
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(root);
    report
}

/// The gate's as-written stage holds each bundled scenario to its declared outcomes: a
/// scenario that declares an ending its runs do not reach fails there, naming the line.
#[test]
fn the_gate_holds_each_scenario_as_written_to_its_declared_outcomes() {
    let root = temp_gate_root("gate");
    let text = std::fs::read_to_string(repo().join("scenarios/letta/approval_turn.toml")).unwrap();
    assert!(text.contains("outcomes = [\"stopped: end_turn\"]"));
    let wrong = text.replace(
        "outcomes = [\"stopped: end_turn\"]",
        "outcomes = [\"stopped: requires_approval\"]",
    );
    std::fs::write(root.join("scenarios/letta/approval_turn.toml"), wrong).unwrap();
    let report = gate_of_two_stages(&root, 2, 0);
    let case = report
        .cases
        .iter()
        .find(|c| c.suite == "as-written")
        .expect("an as-written check");
    assert!(!case.ok, "{}", report.render());
    assert!(
        case.message.contains("ends-as-declared"),
        "{}",
        case.message
    );
    assert!(
        case.message.contains("approval_turn.toml:14"),
        "{}",
        case.message
    );
    assert_eq!(report.exit_code, 129, "{}", report.render());
}

/// The gate's published-client stage sweeps each Letta scenario against the published client's
/// model and fails on a violation no known finding's signature explains (here a planted resume
/// from seq 0, dropped into scenarios/letta), with a reproduce line that carries the profile.
#[test]
fn the_gate_sweeps_the_published_clients_model_and_fails_what_no_finding_explains() {
    let root = temp_gate_root("gate-published");
    std::fs::copy(
        repo().join("scenarios/planted/client_resume_from_zero.toml"),
        root.join("scenarios/letta/client_resume_from_zero.toml"),
    )
    .unwrap();
    let report = gate_of_two_stages(&root, 0, 2);
    let case = report
        .cases
        .iter()
        .find(|c| c.suite == "published-client")
        .expect("a published-client check");
    assert!(!case.ok, "{}", report.render());
    assert!(case.message.contains("stream-gapless"), "{}", case.message);
    assert!(
        case.message.contains("--client-profile letta-code"),
        "{}",
        case.message
    );
    assert_eq!(report.exit_code, 129, "{}", report.render());
}

#[test]
fn check_determinism_names_the_first_divergent_event_and_its_time() {
    let s = load("scenarios/planted/nondeterministic_otids.toml");
    let report = run_scenario(&s, 9, 2).unwrap();
    let text = report.render();
    assert!(
        text.contains("first divergence at line 13, simulated time 10 ms")
            && text.contains("client_send turn=1"),
        "{text}"
    );
}

#[test]
fn explicit_fault_kinds_parse_validate_and_run() {
    // The faults are written into the file, so its declared outcomes, the fault-free run's,
    // would be held against them: left out.
    let base = std::fs::read_to_string(repo().join("scenarios/letta/approval_turn.toml"))
        .unwrap()
        .replace("outcomes = [\"stopped: end_turn\"]\n", "");
    let path = repo().join("scenarios/letta/inline.toml");
    let ok = [
        r#"{ kind = "partition", between = ["client", "server"], at_ms = 60, duration_ms = 3000 }"#,
        r#"{ kind = "hold", between = ["server", "provider"], on_event = "chunk_recorded", nth = 3, duration_ms = 500 }"#,
        r#"{ kind = "crash", host = "server", at_ms = 60, restart_after_ms = 500 }"#,
        r#"{ kind = "crash", host = "provider", on_event = "provider_serve", restart_after_ms = 100 }"#,
        r#"{ kind = "latency", at_ms = 0, max_ms = 400 }"#,
        r#"{ kind = "provider_error", call = 0, status = 429, retry_after_s = 3 }"#,
        r#"{ kind = "provider_stream", call = 0, frame = 9, action = "cut_inside" }"#,
        r#"{ kind = "server_stream", response = 1, frame = 6, action = "duplicate" }"#,
        r#"{ kind = "server_stream", response = 1, frame = 9, action = "close" }"#,
    ];
    for f in ok {
        let text = format!("faults = [{f}]\n{base}");
        let s = Scenario::parse(&text, &path).unwrap_or_else(|e| panic!("{f}: {e}"));
        let r = run_scenario(&s, 1, 2).unwrap();
        assert_ne!(r.verdict, Verdict::Correctness, "{f}\n{}", r.render());
        assert!(r.trace_text.contains("harness  fault"), "{f} never fired");
    }
    let bad = [
        (
            r#"{ kind = "crash", host = "databse", at_ms = 1 }"#,
            "unknown host \"databse\"",
        ),
        (
            r#"{ kind = "partition", between = ["client", "server"], duration_ms = 5 }"#,
            "give a trigger",
        ),
        (
            r#"{ kind = "server_stream", response = 1, frame = 0, action = "drop" }"#,
            "frame numbers start at 1",
        ),
        (
            r#"{ kind = "server_stream", response = 1, frame = 2, action = "explode" }"#,
            "unknown variant `explode`",
        ),
        (
            r#"{ kind = "provider_error", call = 0, status = 200 }"#,
            "not an error status",
        ),
    ];
    for (f, want) in bad {
        let text = format!("faults = [{f}]\n{base}");
        let e = Scenario::parse(&text, &path).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:1:", path.display())), "{e}");
        assert!(e.contains(want), "{f}: {e}");
    }
}

/// A shrunk canary keeps its defect: every planted switch that is on is written back, and the
/// written scenario fails as the original did. (The client switches were once left out, so a
/// shrunk client canary passed.)
#[test]
fn a_written_scenario_keeps_every_planted_switch() {
    for entry in std::fs::read_dir(repo().join("scenarios/planted")).unwrap() {
        let path = entry.unwrap().path();
        let s = Scenario::load(&path).unwrap();
        let cassettes: Vec<String> = s
            .provider
            .responses
            .iter()
            .map(|r| r.get_ref().clone())
            .collect();
        let text = s.to_toml(&cassettes, "");
        let back = Scenario::parse(&text, &path).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(
            back.planted.expected_failures(),
            s.planted.expected_failures(),
            "{}:\n{text}",
            path.display()
        );
    }
}

/// A sweep counts the runs that passed only because a finding was expected (XFAIL), per
/// finding: without swarm the local-turns-interleave scenario shows it on every seed.
#[test]
fn a_sweep_counts_expected_failures_per_finding() {
    let s = vec![load("scenarios/letta/server_local_turns_interleave.toml")];
    let r = explore(&s, &options(0..6, 2, false), &|_, _| {}).unwrap();
    assert_eq!(r.passed, 6, "{}", r.render());
    assert_eq!(
        r.expected.get("local-turns-interleave"),
        Some(&6),
        "{}",
        r.render()
    );
    assert!(
        r.render().contains(
            "expected  known findings (XFAIL, docs/findings.md): local-turns-interleave in 6 run(s)"
        ),
        "{}",
        r.render()
    );
    let clean = explore(
        &[load("scenarios/letta/approval_turn.toml")],
        &options(0..4, 1, false),
        &|_, _| {},
    )
    .unwrap();
    assert!(clean.expected.is_empty());
    assert!(!clean.render().contains("expected  "));
}

/// The bare baseline of `sim bench --compare-bare` replays every exchange of a loopsim run:
/// the log holds each request the server answered (as many as the trace shows) with the
/// response bytes, and the bare world runs until the last recorded frame has been sent.
#[test]
fn the_bare_baseline_replays_every_exchange_of_the_run() {
    use loopsim::harness::letta::bare::{BareScript, run_bare};
    use loopsim::harness::letta::world::run_once_logging;
    use loopsim::model::letta::server::ExchangeLog;
    use loopsim::model::port::observe::Observation;
    let s = load("scenarios/letta/standard_fault.toml");
    let mut clean = s.clone();
    clean.faults.clear();
    let log = ExchangeLog::default();
    let out = run_once_logging(&clean, 0, Some(log.clone())).unwrap();
    let exchanges = std::mem::take(&mut *log.lock().unwrap());
    let served = out
        .trace
        .iter()
        .filter(|e| matches!(e.obs, Observation::ServerRequest { .. }))
        .count();
    assert_eq!(exchanges.len(), served);
    assert!(exchanges.iter().any(|x| x.method == "GET"), "{exchanges:?}");
    let streamed: usize = exchanges
        .iter()
        .filter(|x| {
            x.content_type
                .as_deref()
                .is_some_and(|c| c.starts_with("text/event-stream"))
        })
        .map(|x| x.frames.len())
        .sum();
    assert!(streamed > 20, "{streamed} SSE frames");
    let last = exchanges
        .iter()
        .flat_map(|x| x.frames.iter().map(|(t, _)| *t))
        .max()
        .unwrap();
    let script = BareScript::from_run(&clean, &out, exchanges).unwrap();
    assert!(!script.provider_calls.is_empty());
    let bare_ms = run_bare(&clean, 0, &script).unwrap();
    assert!(
        bare_ms >= last,
        "bare ran {bare_ms} ms, the last frame was at {last} ms"
    );
}

fn guided(seeds: std::ops::Range<u64>, jobs: usize) -> ExploreOptions {
    ExploreOptions {
        guided: true,
        ..options(seeds, jobs, false)
    }
}

/// A planted scenario without the faults that make its defect show: what is left to find it
/// is the sweep's own plans.
fn without_faults(path: &str) -> Scenario {
    let mut s = load(path);
    s.faults.clear();
    s
}

#[test]
fn a_guided_sweep_does_not_depend_on_jobs() {
    let s = vec![
        load("scenarios/letta/approval_turn.toml"),
        load("scenarios/kimi/parallel_conflicts.toml"),
    ];
    let one = explore_in_process(&s, &guided(0..40, 1), &|_, _| {}).unwrap();
    let three = explore_in_process(&s, &guided(0..40, 3), &|_, _| {}).unwrap();
    assert_eq!(one, three);
    assert_eq!(one.runs, 80);
    assert!(one.guided && !one.swarm);
    // Faults land at the protocol points the swarm's random times rarely hit.
    for goal in [
        "fault-after-requires-approval",
        "loop-fault-after-tool-call",
    ] {
        assert!(one.coverage[goal] > 0, "{goal}\n{}", one.render());
    }
}

#[test]
fn guided_plans_find_defects_the_swarm_cannot_reach() {
    // The swarm never crashes the client between its tools and their send, never leaves another
    // client's call pending, never answers busy twice in a row, and never starts the client on
    // a conversation that already waits for a call, and never fails a loop's model call twice in
    // a row; the guided client, server and retry families do, so these planted defects (their own faults removed) show only under --guided.
    for (path, invariant) in [
        (
            "scenarios/planted/client_reexecute_after_restart.toml",
            "no-double-execution",
        ),
        (
            "scenarios/planted/dangling_tool_call.toml",
            "tool-call-resolved",
        ),
        (
            "scenarios/planted/client_unbounded_busy_retries.toml",
            "budget-respected",
        ),
        (
            "scenarios/planted/client_stale_denial_as_user.toml",
            "approval-attribution",
        ),
        // The swarm draws one provider error at a time; a guided retry streak spends a step's
        // third attempt.
        (
            "scenarios/planted/loop_retry_default_of_three.toml",
            "recovery-completes",
        ),
    ] {
        let s = vec![without_faults(path)];
        let swarm = explore(&s, &options(0..80, 2, true), &|_, _| {}).unwrap();
        let found = explore_in_process(&s, &guided(0..80, 2), &|_, _| {}).unwrap();
        assert!(
            !swarm.by_invariant().contains_key(invariant),
            "{path}: the swarm found it after all: {}",
            swarm.render()
        );
        assert!(
            found.by_invariant().contains_key(invariant),
            "{path}: guided missed {invariant}: {}",
            found.render()
        );
        // A guided failure reproduces from its reproduce command's plan alone.
        let f = &found.failures[0];
        assert!(
            f.reproduce.contains(" --plan '{ kind = "),
            "{}",
            f.reproduce
        );
        let mut rerun = s[0].clone();
        rerun.faults.extend(
            f.faults
                .iter()
                .cloned()
                .map(|x| toml::Spanned::new(0..0, x)),
        );
        assert_eq!(
            run_scenario(&rerun, f.seed, 1).unwrap().trace_hash,
            f.trace_hash
        );
    }
}

/// The before/after table of docs/finding-power.md: every planted defect with the faults that
/// make it show removed, swept with swarm plans and guided over the same seeds (
/// `LOOPSIM_FINDING_POWER_SEEDS`, 64 by default). Prints one markdown row per defect:
/// `cargo test --release --test harness finding_power_on_the_planted_defects -- --ignored --nocapture`.
#[test]
#[ignore]
fn finding_power_on_the_planted_defects() {
    let seeds: u64 = std::env::var("LOOPSIM_FINDING_POWER_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let mut files: Vec<_> = std::fs::read_dir(repo().join("scenarios/planted"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    println!("| planted defect | swarm: failing seeds (first) | guided: failing seeds (first) |");
    println!("|---|---|---|");
    for p in files {
        let mut sc = Scenario::load(&p).unwrap();
        sc.faults.clear();
        let s = vec![sc];
        let cell = |r: &ExploreReport| match r.failures.iter().map(|f| f.seed).min() {
            Some(first) => format!("{} of {} ({first})", r.failures.len(), r.runs),
            None => format!("0 of {}", r.runs),
        };
        let a = explore(&s, &options(0..seeds, 2, true), &|_, _| {}).unwrap();
        let b = explore_in_process(&s, &guided(0..seeds, 2), &|_, _| {}).unwrap();
        println!(
            "| `{}` | {} | {} |",
            p.file_stem().unwrap().to_string_lossy(),
            cell(&a),
            cell(&b)
        );
    }
}
