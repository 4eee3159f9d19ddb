//! The `sim` binary as a user runs it: exit codes, reports, trace files, input errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("sim runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bundled_scenario_passes_with_the_same_hash_every_time() {
    let a = sim(&["run", "scenarios/letta/approval_turn.toml", "--seed", "1"]);
    assert_eq!(a.status.code(), Some(0), "{}{}", stdout(&a), stderr(&a));
    let out = stdout(&a);
    assert!(out.contains("seed      1"), "{out}");
    assert!(out.contains("tool-call-resolved           pass"), "{out}");
    assert!(
        out.contains("deterministic                pass (2 runs, identical traces)"),
        "{out}"
    );
    assert!(out.contains("verdict   PASS"), "{out}");
    let b = sim(&["run", "scenarios/letta/approval_turn.toml", "--seed", "1"]);
    let hash = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("trace "))
            .map(str::to_string)
    };
    assert_eq!(
        hash(&out),
        hash(&stdout(&b)),
        "two processes, one seed, one hash"
    );
}

#[test]
fn trace_file_is_written_and_matches_print_trace() {
    let dir = std::env::temp_dir().join(format!("loopsim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("trace.txt");
    let o = sim(&[
        "run",
        "scenarios/letta/approval_turn.toml",
        "--seed",
        "4",
        "--trace",
        file.to_str().unwrap(),
        "--print-trace",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.lines().count() > 20);
    assert!(stdout(&o).contains(&written));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn planted_bugs_exit_129_with_a_reproduce_line() {
    for (file, invariant) in [
        (
            "scenarios/planted/dangling_tool_call.toml",
            "tool-call-resolved",
        ),
        (
            "scenarios/planted/nondeterministic_otids.toml",
            "deterministic",
        ),
        // The agent loop.
        (
            "scenarios/planted/loop_results_out_of_order.toml",
            "loop-envelope",
        ),
        (
            "scenarios/planted/loop_scheduler_overlap.toml",
            "lock-safety",
        ),
    ] {
        let o = sim(&["run", file, "--seed", "2"]);
        assert_eq!(o.status.code(), Some(129), "{file}: {}", stdout(&o));
        let out = stdout(&o);
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().eq([invariant, "FAIL"])),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "reproduce cargo run --release -p sim -- run {file} --seed 2"
            )),
            "{out}"
        );
    }
}

#[test]
fn input_errors_exit_2_naming_file_and_line() {
    let o = sim(&["run", "scenarios/does_not_exist.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("scenarios/does_not_exist.toml: cannot read scenario"),
        "{}",
        stderr(&o)
    );

    let dir = std::env::temp_dir().join(format!("loopsim-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[scenario]\nname = \"x\"\nsystem = \"letta\"\ncolour = 1\n",
    )
    .unwrap();
    let o = sim(&["run", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("bad.toml:4:1: unknown field `colour`"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn unknown_flags_exit_2_and_help_lists_exit_codes() {
    let o = sim(&["run", "scenarios/letta/approval_turn.toml", "--sede", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--sede"), "{}", stderr(&o));
    let o = sim(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    for code in ["127", "128", "129"] {
        assert!(out.contains(code), "{out}");
    }
    let o = sim(&["run", "--help"]);
    assert!(stdout(&o).contains("--seed"));
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loopsim-cli-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn shrink_writes_a_scenario_that_fails_the_same_invariant() {
    let dir = temp_dir("shrink");
    let out = dir.join("shrunk");
    let o = sim(&[
        "shrink",
        "scenarios/planted/dangling_tool_call.toml",
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(129), "{}{}", stdout(&o), stderr(&o));
    let file = out.join("scenario.toml");
    let text = stdout(&o);
    assert!(
        text.starts_with(
            "shrunk    tool-call-resolved on scenarios/planted/dangling_tool_call.toml seed 1 in "
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "reproduce cargo run --release -p sim -- run {} --seed 1\n",
            file.display()
        )),
        "{text}"
    );
    let o = sim(&["run", file.to_str().unwrap(), "--seed", "1"]);
    assert_eq!(o.status.code(), Some(129), "{}", stdout(&o));
    assert!(stdout(&o).contains("tool-call-resolved           FAIL"));

    let o = sim(&[
        "shrink",
        "scenarios/letta/approval_turn.toml",
        "--seed",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o),
        "seed 1 passes every invariant on scenarios/letta/approval_turn.toml: nothing to shrink\n"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn explore_shards_merge_into_the_unsharded_report() {
    let dir = temp_dir("merge");
    let scenarios = [
        "scenarios/letta/approval_turn.toml",
        "scenarios/planted/dangling_tool_call.toml",
    ];
    let explore = |extra: &[&str]| {
        let mut args = vec!["explore", scenarios[0], scenarios[1], "--seeds", "0..6"];
        args.extend_from_slice(extra);
        sim(&args)
    };
    let whole = explore(&[]);
    assert_eq!(whole.status.code(), Some(129));
    let mut shards = Vec::new();
    for k in ["1/2", "2/2"] {
        let file = dir.join(format!("shard{}.json", &k[..1]));
        let o = explore(&["--shard", k, "--out", file.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(129));
        assert!(stderr(&o).contains(&format!("report written to {}", file.display())));
        shards.push(file.to_str().unwrap().to_string());
    }
    let o = sim(&["report", "merge", &shards[0], &shards[1]]);
    assert_eq!(o.status.code(), Some(129), "{}", stderr(&o));
    let without_rate: String = stdout(&whole)
        .lines()
        .filter(|l| !l.starts_with("rate "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(stdout(&o), without_rate);

    let o = sim(&["report", "merge", "scenarios/letta/approval_turn.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("scenarios/letta/approval_turn.toml:1:1: not a `sim explore --out` report"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn explore_shrink_writes_the_first_failure_of_each_invariant() {
    let dir = temp_dir("explore-shrink");
    let o = sim(&[
        "explore",
        "scenarios/planted/dangling_tool_call.toml",
        "--seeds",
        "0..3",
        "--shrink",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(129));
    let err = stderr(&o);
    let file = dir.join("dangling_tool_call-seed0-tool-call-resolved/scenario.toml");
    assert!(
        err.contains(&format!(
            "shrunk    tool-call-resolved (seed 0) in 28 runs → {}\n          reproduce: cargo run --release -p sim -- run {} --seed 0\n",
            file.display(),
            file.display()
        )),
        "{err}"
    );
    assert!(file.exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_prints_one_row_per_tick() {
    let o = sim(&[
        "bench",
        "scenarios/letta/approval_turn.toml",
        "--seeds",
        "2",
        "--ticks",
        "1,10",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("scenario        scenarios/letta/approval_turn.toml\nseeds           2 (one run each), 0 not passing\ntick            1 ms\n"), "{out}");
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("   tick ms"))
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows[1].trim_start().starts_with("10 "), "{out}");
}

/// README.md shows what `sim run scenarios/letta/approval_turn.toml --seed 1` prints; the two
/// must not drift apart.
#[test]
fn readme_sample_output_is_what_the_first_command_prints() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("```\nscenario  approval-turn")
        .expect("README shows the sample report");
    let body = &readme[start + 4..];
    let shown = &body[..body.find("```").unwrap()];
    let o = sim(&["run", "scenarios/letta/approval_turn.toml", "--seed", "1"]);
    assert_eq!(stdout(&o), shown, "update README.md's sample output");
}

/// Writes `extra` appended to a bundled scenario (with `from` -> `to` replaced in its text and
/// its cassette paths made absolute) into a temp dir, and returns the file's path.
fn hostile_scenario(name: &str, base: &str, from: &str, to: &str, extra: &str) -> PathBuf {
    let dir = temp_dir(&format!("hostile-{name}"));
    let text = std::fs::read_to_string(root().join(base)).unwrap();
    let cassettes = root().join("cassettes").canonicalize().unwrap();
    let text = text
        .replace("../../cassettes", cassettes.to_str().unwrap())
        .replace(from, to);
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, format!("{text}\n{extra}")).unwrap();
    path
}

fn assert_input_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(o), stderr(o));
    assert!(stderr(o).contains(needle), "{}", stderr(o));
}

#[test]
fn latency_fault_below_the_minimum_latency_is_an_input_error_not_an_abort() {
    let slow = "latency_ms = [100, 200]";
    let p = hostile_scenario(
        "lat-letta",
        "scenarios/letta/approval_turn.toml",
        "latency_ms = [1, 5]",
        slow,
        "[[faults]]\nkind = \"latency\"\nat_ms = 5\nmax_ms = 50\n",
    );
    let o = sim(&["run", p.to_str().unwrap(), "--seed", "0"]);
    assert_input_error(&o, "lat-letta.toml:");
    assert!(stderr(&o).contains("max_ms=50"), "{}", stderr(&o));

    let p = hostile_scenario(
        "lat-loop",
        "scenarios/kimi/user_abort.toml",
        "[provider]",
        &format!("[network]\n{slow}\n\n[provider]"),
        "[[faults]]\nkind = \"latency\"\non_event = \"loop_tool_start\"\nmax_ms = 50\n",
    );
    let o = sim(&["run", p.to_str().unwrap(), "--seed", "0"]);
    assert_input_error(&o, "lat-loop.toml:");
}

#[test]
fn swarm_on_a_slow_network_gives_every_seed_a_verdict() {
    let p = hostile_scenario(
        "lat-swarm",
        "scenarios/letta/approval_turn.toml",
        "latency_ms = [1, 5]",
        "latency_ms = [400, 600]",
        "",
    );
    let o = sim(&[
        "explore",
        p.to_str().unwrap(),
        "--seeds",
        "0..120",
        "--swarm",
    ]);
    let out = stdout(&o);
    assert!(
        matches!(o.status.code(), Some(0) | Some(129)),
        "{out}{}",
        stderr(&o)
    );
    assert!(!out.contains("crash"), "{out}");
}

#[test]
fn latency_ms_with_three_elements_is_an_input_error() {
    let p = hostile_scenario(
        "lat3",
        "scenarios/letta/approval_turn.toml",
        "latency_ms = [1, 5]",
        "latency_ms = [1, 5, 9]",
        "",
    );
    let o = sim(&["run", p.to_str().unwrap()]);
    assert_input_error(&o, "lat3.toml:18:");
}

#[test]
fn probe_requests_that_cannot_be_sent_are_input_errors() {
    for (i, (method, path)) in [
        ("POST", "v1/agents"),
        ("PO ST", "/v1/agents"),
        ("POST\r\nX: y", "/v1/agents"),
        ("GET", "/v1/a b"),
        ("GET", "/v1/a\r\nX: y"),
    ]
    .into_iter()
    .enumerate()
    {
        let p = hostile_scenario(
            &format!("req{i}"),
            "scenarios/letta/approval_turn.toml",
            "",
            "",
            &format!("[[requests]]\nat_ms = 10\nmethod = {method:?}\npath = {path:?}\n",),
        );
        let o = sim(&["run", p.to_str().unwrap()]);
        assert_input_error(&o, &format!("req{i}.toml:"));
        assert!(stderr(&o).contains("[[requests]]"), "{}", stderr(&o));
    }
}

#[test]
fn zero_tick_jobs_and_runs_on_the_command_line_are_input_errors() {
    let s = "scenarios/letta/approval_turn.toml";
    for args in [
        &["run", s, "--tick-ms", "0"][..],
        &["run", s, "--runs", "0"],
        &["explore", s, "--seeds", "0..1", "--tick-ms", "0"],
        &["explore", s, "--seeds", "0..1", "--jobs", "0"],
    ] {
        let o = sim(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let flag = args[args.len() - 2];
        assert!(stderr(&o).contains(flag), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn serve_refuses_an_agent_loop_scenario() {
    let o = sim(&[
        "serve",
        "--scenario",
        "scenarios/kimi/user_abort.toml",
        "--port",
        "0",
    ]);
    assert_input_error(&o, "user_abort.toml:8:");
}

#[test]
fn unknown_on_event_name_is_an_input_error() {
    let p = hostile_scenario(
        "on-event",
        "scenarios/kimi/user_abort.toml",
        "on_event = \"loop_tool_start\"",
        "on_event = \"loop_tool_strat\"",
        "",
    );
    let o = sim(&["run", p.to_str().unwrap()]);
    assert_input_error(&o, "on-event.toml:");
    assert!(stderr(&o).contains("loop_tool_strat"), "{}", stderr(&o));
}

#[test]
fn letta_sections_in_an_agent_loop_scenario_are_input_errors() {
    // The refused section is appended after the base file and a blank line: the error names a
    // line of it.
    let base_lines = std::fs::read_to_string(root().join("scenarios/kimi/user_abort.toml"))
        .unwrap()
        .lines()
        .count();
    for (name, extra) in [
        (
            "loop-requests",
            "[[requests]]\nat_ms = 10\npath = \"/v1/agents\"\n",
        ),
        ("loop-server", "[server]\nprofile = \"cloud\"\n"),
        (
            "loop-expect",
            "[[expect]]\ninvariant = \"deterministic\"\nfinding = \"x\"\n",
        ),
        (
            "loop-planted",
            "[planted]\nclient_resume_from_zero = true\n",
        ),
    ] {
        let p = hostile_scenario(name, "scenarios/kimi/user_abort.toml", "", "", extra);
        let o = sim(&["run", p.to_str().unwrap()]);
        let lines = base_lines + 2..base_lines + 2 + extra.lines().count();
        let named = lines
            .clone()
            .any(|l| stderr(&o).contains(&format!("{name}.toml:{l}:")));
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(named, "{name}: no line in {lines:?}: {}", stderr(&o));
    }
    let p = hostile_scenario(
        "letta-planted",
        "scenarios/letta/approval_turn.toml",
        "",
        "",
        "[planted]\nloop_results_in_completion_order = true\n",
    );
    let o = sim(&["run", p.to_str().unwrap()]);
    assert_input_error(&o, "letta-planted.toml:");
    assert!(stderr(&o).contains("agent-loop"), "{}", stderr(&o));
}

#[test]
fn output_paths_in_a_missing_directory_or_naming_a_directory_fail_before_running() {
    let dir = temp_dir("out-paths");
    let missing = dir.join("no-such-dir").join("r.json");
    let s = "scenarios/letta/approval_turn.toml";
    for args in [
        vec![
            "explore",
            s,
            "--seeds",
            "0..1",
            "--out",
            missing.to_str().unwrap(),
        ],
        vec![
            "explore",
            s,
            "--seeds",
            "0..1",
            "--out",
            dir.to_str().unwrap(),
        ],
        vec!["run", s, "--trace", missing.to_str().unwrap()],
        vec!["run", s, "--trace", dir.to_str().unwrap()],
    ] {
        let o = sim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?} ran: {}", stdout(&o));
    }
    assert!(!dir.join("no-such-dir").exists());
    let o = sim(&["run", s, "--trace", missing.to_str().unwrap()]);
    assert!(
        stderr(&o).contains("no-such-dir does not exist"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_cassette_that_is_a_directory_or_a_device_is_not_reported_as_missing() {
    let cassettes = root().join("cassettes").canonicalize().unwrap();
    let first = format!(
        "{}/provider/anthropic_tool_use_split_args.jsonl",
        cassettes.display()
    );
    for (name, to, needle) in [
        ("cas-dir", cassettes.display().to_string(), "is a directory"),
        ("cas-dev", "/dev/null".to_string(), "is not a regular file"),
    ] {
        let p = hostile_scenario(name, "scenarios/letta/approval_turn.toml", "", "", "");
        let text = std::fs::read_to_string(&p).unwrap().replace(&first, &to);
        std::fs::write(&p, text).unwrap();
        let o = sim(&["run", p.to_str().unwrap()]);
        assert_input_error(&o, &format!("{name}.toml:23:"));
        assert!(stderr(&o).contains(needle), "{}", stderr(&o));
    }
}

#[test]
fn an_expect_naming_an_undocumented_finding_is_an_input_error() {
    let p = hostile_scenario(
        "expect-finding",
        "scenarios/letta/approval_turn.toml",
        "",
        "",
        "[[expect]]\nprofile = \"letta-code\"\ninvariant = \"deterministic\"\nfinding = \"no-such-finding\"\n",
    );
    let o = sim(&["run", p.to_str().unwrap()]);
    assert_input_error(&o, "expect-finding.toml:");
    assert!(stderr(&o).contains("no-such-finding"), "{}", stderr(&o));
}

#[test]
fn html_reports_of_a_run_and_of_a_sweep_are_written_and_linked() {
    let dir = temp_dir("html");
    let run = dir.join("run.html");
    let o = sim(&[
        "run",
        "scenarios/planted/dangling_tool_call.toml",
        "--seed",
        "1",
        "--html",
        run.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(129), "{}", stderr(&o));
    let page = std::fs::read_to_string(&run).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains(r#"data-invariant="tool-call-resolved""#));

    let sweep = dir.join("sweep.html");
    let o = sim(&[
        "explore",
        "scenarios/planted/dangling_tool_call.toml",
        "--seeds",
        "0..2",
        "--html",
        sweep.to_str().unwrap(),
        "--html-dir",
        dir.join("runs").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(129), "{}", stderr(&o));
    let page = std::fs::read_to_string(&sweep).unwrap();
    assert!(page.contains(r#"<a href="runs/dangling_tool_call-seed1.html">run report</a>"#));
    assert!(dir.join("runs/dangling_tool_call-seed1.html").is_file());

    let o = sim(&[
        "explore",
        "scenarios/planted/dangling_tool_call.toml",
        "--html-dir",
        dir.join("runs").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "--html-dir needs --html");
    let o = sim(&[
        "run",
        "scenarios/planted/dangling_tool_call.toml",
        "--html",
        dir.join("no/such/dir/run.html").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
}

#[test]
fn latency_scale_slows_every_hop_and_the_reproduce_line_carries_it() {
    let file = "scenarios/planted/dangling_tool_call.toml";
    let trace = |extra: &[&str]| {
        let mut args = vec!["run", file, "--seed", "2", "--print-trace"];
        args.extend_from_slice(extra);
        let o = sim(&args);
        assert_eq!(o.status.code(), Some(129), "{}{}", stdout(&o), stderr(&o));
        stdout(&o)
    };
    let slow = trace(&["--latency-scale", "10"]);
    assert!(
        slow.contains(&format!(
            "reproduce cargo run --release -p sim -- run {file} --seed 2 --latency-scale 10"
        )),
        "{slow}"
    );
    assert_ne!(slow, trace(&[]), "ten times the latency, the same trace");
    // A sweep's worker children get it too: the failure it reports reproduces with it.
    let o = sim(&[
        "explore",
        file,
        "--seeds",
        "2..3",
        "--latency-scale",
        "10",
        "--format",
        "json",
    ]);
    assert!(
        stdout(&o).contains("--seed 2 --latency-scale 10"),
        "{}",
        stdout(&o)
    );
    // Zero is refused, as a tick of zero is.
    let o = sim(&["run", file, "--latency-scale", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn client_profile_runs_the_published_clients_model_and_the_reproduce_line_carries_it() {
    // The scenario's own letta-code finding is expected.
    let o = sim(&[
        "run",
        "scenarios/letta/client_lost_frame.toml",
        "--client-profile",
        "letta-code",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(
        out.contains("XFAIL (expected for this profile: docs/findings.md#lost-and-duplicated-frames-go-unnoticed)"),
        "{out}"
    );
    // A violation no finding explains fails, and reproduces with the flag, from a sweep's
    // worker children too.
    let file = "scenarios/planted/client_resume_from_zero.toml";
    let o = sim(&["run", file, "--client-profile", "letta-code"]);
    assert_eq!(o.status.code(), Some(129), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(&format!("run {file} --seed 0 --client-profile letta-code")),
        "{}",
        stdout(&o)
    );
    let o = sim(&[
        "explore",
        file,
        "--seeds",
        "0..1",
        "--client-profile",
        "letta-code",
        "--format",
        "json",
    ]);
    assert!(
        stdout(&o).contains("--seed 0 --client-profile letta-code"),
        "{}",
        stdout(&o)
    );
    // An unknown profile is refused with the names that exist.
    let o = sim(&["run", file, "--client-profile", "letta"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("letta-code"), "{}", stderr(&o));
}

#[test]
fn a_guided_failure_reproduces_from_its_plan_flags_and_a_bad_plan_exits_2() {
    // A fault placed at a protocol point, as a guided sweep's reproduce command gives it.
    let o = sim(&[
        "run",
        "scenarios/letta/approval_turn.toml",
        "--seed",
        "1",
        "--plan",
        r#"{ kind = "crash", host = "server", on_event = "run_ended", nth = 1, restart_after_ms = 300 }"#,
    ]);
    let out = stdout(&o);
    assert!(
        out.contains("crash host=server on_event=run_ended nth=1"),
        "{out}"
    );
    // A failing run's reproduce line carries its plan.
    let o = sim(&[
        "run",
        "scenarios/planted/dangling_tool_call.toml",
        "--seed",
        "1",
        "--plan",
        r#"{ kind = "latency", at_ms = 5, max_ms = 40 }"#,
    ]);
    assert_eq!(o.status.code(), Some(129), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(r#"--seed 1 --plan '{ kind = "latency", at_ms = 5, max_ms = 40 }'"#),
        "{}",
        stdout(&o)
    );
    for (plan, says) in [
        (r#"{ kind = "crash" }"#, "is not a fault"),
        (
            r#"{ kind = "server_stream", response = 0, frame = 1, action = "reset" }"#,
            "--plan",
        ),
    ] {
        let o = sim(&["run", "scenarios/letta/approval_turn.toml", "--plan", plan]);
        assert_eq!(o.status.code(), Some(2), "{plan}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{plan}: {}", stderr(&o));
    }
}
