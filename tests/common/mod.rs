//! Helpers shared by every test binary: each `tests/<area>/main.rs` includes this file as
//! `mod common` (`#[path = "../common/mod.rs"]`). Not every binary uses every helper.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use loopsim::harness::invariants::Violation;
use loopsim::harness::report::RunReport;
use loopsim::harness::run::run_scenario;
use loopsim::harness::scenario::{Fault, Scenario};
use loopsim::wire::provider::ProviderFormat;
use toml::Spanned;

/// The crate root (scenarios/, tests/ and the sibling ../shared are found from here).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A Letta scenario by file name: `scenarios/letta/<name>`.
pub fn scenario_path(name: &str) -> PathBuf {
    repo().join("scenarios/letta").join(name)
}

/// `s` with the faults of a reproduce command's `--plan` arguments added.
pub fn with_plan(mut s: Scenario, plan: &[&str]) -> Scenario {
    s.faults.extend(plan.iter().map(|f| {
        Spanned::new(
            0..0,
            loopsim::harness::guidance::parse_plan_fault(f).expect("a plan fault"),
        )
    }));
    s
}

/// Loads a scenario; a relative path is taken from the crate root. Panics with the load error.
pub fn load(path: impl AsRef<Path>) -> Scenario {
    Scenario::load(&repo().join(path)).unwrap_or_else(|e| panic!("{e}"))
}

/// Every `.toml` file of a folder under the crate root whose name starts with `prefix`, sorted.
pub fn scenarios_in(dir: &str, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "toml")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    files.sort();
    files
}

/// Every `scenarios/letta/client_*.toml`, sorted.
pub fn client_scenarios() -> Vec<PathBuf> {
    scenarios_in("scenarios/letta", "client_")
}

pub fn with_profile(mut s: Scenario, profile: &str) -> Scenario {
    s.scenario.client_profile = Spanned::new(0..0, profile.to_string());
    s
}

pub fn with_mode(mut s: Scenario, mode: &str) -> Scenario {
    s.client.mode = Spanned::new(0..0, mode.to_string());
    s
}

pub fn with_faults(mut s: Scenario, faults: Vec<Fault>) -> Scenario {
    s.faults = faults.into_iter().map(|f| Spanned::new(0..0, f)).collect();
    s
}

pub fn run(s: &Scenario, seed: u64, runs: u32) -> RunReport {
    run_scenario(s, seed, runs).unwrap_or_else(|e| panic!("{e}"))
}

pub fn outcomes(r: &RunReport) -> Vec<&str> {
    r.turn_outcomes.iter().map(String::as_str).collect()
}

/// The violations of one invariant in a report; panics, showing the report, if it was not
/// checked.
/// The invariants the run broke, in report order.
pub fn failed_invariants(r: &RunReport) -> Vec<&'static str> {
    r.invariants
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(id, _)| *id)
        .collect()
}

pub fn violations<'a>(report: &'a RunReport, id: &str) -> &'a [Violation] {
    report
        .invariants
        .iter()
        .find(|(i, _)| *i == id)
        .map(|(_, v)| v.as_slice())
        .unwrap_or_else(|| panic!("invariant {id} was not checked:\n{}", report.render()))
}

/// Trace lines containing `needle`.
pub fn lines_with<'a>(r: &'a RunReport, needle: &str) -> Vec<&'a str> {
    r.trace_text
        .lines()
        .filter(|l| l.contains(needle))
        .collect()
}

/// The shared captures (`../shared/captures`, PROVENANCE.md there describes each file).
pub fn captures() -> PathBuf {
    repo().join("../shared/captures")
}

/// Every `.sse` file of one capture folder, sorted by name; panics if there is none.
pub fn sse_captures(dir: &str) -> Vec<PathBuf> {
    let dir = captures().join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sse"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .sse files in {}", dir.display());
    files
}

/// The provider stream captures the decoders read (Anthropic Messages and OpenAI Chat), with
/// their format.
pub fn provider_captures() -> Vec<(ProviderFormat, PathBuf)> {
    let mut all = Vec::new();
    for (dir, format) in [
        ("anthropic", ProviderFormat::Anthropic),
        ("openai_chat", ProviderFormat::OpenAiChat),
    ] {
        all.extend(sse_captures(dir).into_iter().map(|p| (format, p)));
    }
    all
}

/// insta settings that keep every binary's snapshots in tests/snapshots/ (the `sim ci` gate
/// reads the same files) rather than beside each test file. Use as
/// `common::snapshots().bind(|| insta::assert_snapshot!(name, text))`; the file is named after
/// the caller's module path: `<binary>__<module>__<name>.snap`.
pub fn snapshots() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(repo().join("tests/snapshots"));
    settings
}

/// Runs an install script of the tests (`tests/.../setup*.sh`, run from the crate root) and
/// returns the last line it prints, the path it installed. `None`, after printing why, when it
/// exits 75: a package registry is unreachable, the one reason a test may skip. Any other
/// failure panics with the script's error output.
pub fn installed_by(script: &str) -> Option<PathBuf> {
    let out = std::process::Command::new("bash")
        .arg(repo().join(script))
        .output()
        .expect("bash runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Some(PathBuf::from(
            String::from_utf8_lossy(&out.stdout).trim().lines().last()?,
        )),
        Some(75) => {
            println!("SKIPPED: {}", stderr.trim());
            None
        }
        _ => panic!("{script} failed:\n{stderr}"),
    }
}

/// Runs a Node script of the tests (`node SCRIPT ARGS…`, with `envs`) that reads JSON lines on
/// stdin and answers one JSON line each, and returns the answers in order.
pub fn node_answers(
    script: &str,
    args: &[&std::ffi::OsStr],
    envs: &[(&str, &std::ffi::OsStr)],
    lines: &[serde_json::Value],
) -> Vec<serde_json::Value> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new("node")
        .arg(repo().join(script))
        .args(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("node runs");
    writer
        .join()
        .expect("writer")
        .expect("node reads its input");
    assert!(
        out.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("the script writes JSON lines"))
        .collect();
    assert_eq!(answers.len(), lines.len(), "{script}: one answer per line");
    answers
}
