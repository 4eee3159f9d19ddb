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
    assert!(out.contains("tool-call-resolved     pass"), "{out}");
    assert!(
        out.contains("deterministic          pass (2 runs, identical traces)"),
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
        // ---- agent loop (issue 5) ----
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
        assert!(out.contains(&format!("{invariant:<22} FAIL")), "{out}");
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
