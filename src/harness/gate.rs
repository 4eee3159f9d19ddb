//! `sim ci`: the regression gate. Every bundled scenario over a fixed seed list plus a seed
//! range taken from the commit, with swarm faults and a determinism sample; every planted
//! canary must be caught by its invariant; trace snapshots must match. Reports as JUnit XML and
//! JSON; exit code as documented (docs/exit-codes.md).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::explore::{ExploreOptions, ExploreReport, explore};
use super::report::{self, FailureKind};
use super::run::run_scenario;
use super::scenario::{InputError, Scenario};

/// What the gate runs.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// The repository root (scenarios/, tests/snapshots/ are found from here).
    pub root: PathBuf,
    /// Seeds `0..fixed_seeds` for every scenario.
    pub fixed_seeds: u64,
    /// The commit under test; it picks a further seed range so every commit explores new seeds.
    pub commit: Option<String>,
    pub commit_seeds: u64,
    /// Seeds per canary.
    pub canary_seeds: u64,
    /// Run every n-th seed twice (determinism sample).
    pub determinism_every: u64,
    pub jobs: usize,
}

/// One check of the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Case {
    pub suite: String,
    pub name: String,
    pub ok: bool,
    /// For failures: what failed and how to reproduce it; for passes, a short summary.
    pub message: String,
}

/// The gate's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateReport {
    pub format: u32,
    pub commit: Option<String>,
    pub seeds: Vec<[u64; 2]>,
    pub cases: Vec<Case>,
    /// Sweep reports, one per scenario (for `sim report merge` and inspection).
    pub sweeps: Vec<ExploreReport>,
    pub exit_code: i32,
}

/// The seed range a commit adds: 1,000,000 + (first 4 bytes of SHA-256(commit) mod 10^9).
pub fn commit_seed_start(commit: &str) -> u64 {
    let d = Sha256::digest(commit.trim().as_bytes());
    1_000_000 + u64::from(u32::from_le_bytes([d[0], d[1], d[2], d[3]])) % 1_000_000_000
}

/// The folders of bundled scenarios, one per system; every file in them must pass.
pub const BUNDLED_DIRS: [&str; 2] = ["scenarios/letta", "scenarios/kimi"];

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs the gate. `progress(stage)` reports what it is doing.
pub fn run_gate(
    options: &GateOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<GateReport, InputError> {
    // Relative paths when run from the repository root, so names and reproduce lines are short.
    let root: &Path = if options.root == Path::new(".") {
        Path::new("")
    } else {
        &options.root
    };
    let mut cases = Vec::new();
    // The failure kinds behind each case, for the exit code.
    let mut case_kinds: Vec<Vec<FailureKind>> = Vec::new();
    let mut sweeps = Vec::new();
    let mut ranges = vec![[0, options.fixed_seeds]];
    if let Some(c) = &options.commit {
        let start = commit_seed_start(c);
        ranges.push([start, start + options.commit_seeds]);
    }

    // 1. Sweeps: every bundled scenario, swarm faults on, must pass.
    let bundled = BUNDLED_DIRS.iter().flat_map(|d| toml_files(&root.join(d)));
    for file in bundled {
        let scenario = Scenario::load(&file)?;
        let name = file.display().to_string();
        for range in &ranges {
            progress(&format!("sweep {name} seeds {}..{}", range[0], range[1]));
            let report = explore(
                std::slice::from_ref(&scenario),
                &ExploreOptions {
                    seeds: range[0]..range[1],
                    jobs: options.jobs,
                    shard: None,
                    swarm: true,
                    determinism_every: options.determinism_every,
                },
                &|_, _| {},
            )?;
            let ok = report.failures.is_empty();
            let mut message = format!(
                "{} seeds, {} passed, {} failed",
                report.runs,
                report.passed,
                report.failures.len()
            );
            for f in report.failures.iter().take(5) {
                let _ = write!(
                    message,
                    "\nseed {} failed {}: {}\n  reproduce: {}",
                    f.seed,
                    f.invariants.join(","),
                    f.message.lines().next().unwrap_or(""),
                    f.reproduce
                );
            }
            let unreached = report.unreached();
            if !unreached.is_empty() {
                let _ = write!(message, "\nnever reached: {}", unreached.join(", "));
            }
            cases.push(Case {
                suite: "sweep".into(),
                name: format!("{name} seeds {}..{}", range[0], range[1]),
                ok,
                message,
            });
            case_kinds.push(report.failures.iter().map(|f| f.kind).collect());
            sweeps.push(report);
        }
    }

    // 2. Canaries: each planted defect must be caught by exactly the invariants it names.
    for file in toml_files(&root.join("scenarios/planted")) {
        let scenario = Scenario::load(&file)?;
        let name = file.display().to_string();
        progress(&format!("canary {name}"));
        let expected = scenario.planted.expected_failures();
        let report = explore(
            std::slice::from_ref(&scenario),
            &ExploreOptions {
                seeds: 0..options.canary_seeds,
                jobs: options.jobs,
                shard: None,
                swarm: false,
                determinism_every: 1,
            },
            &|_, _| {},
        )?;
        let caught = report.by_invariant();
        let missed: Vec<&str> = expected
            .iter()
            .copied()
            .filter(|id| !caught.contains_key(*id))
            .collect();
        let ok = !expected.is_empty() && missed.is_empty();
        let message = if expected.is_empty() {
            "plants nothing: every file in scenarios/planted/ must switch on a [planted] defect"
                .into()
        } else if missed.is_empty() {
            format!(
                "caught by {} in {} of {} seeds",
                expected.join(", "),
                report.failures.len(),
                report.runs
            )
        } else {
            format!(
                "NOT caught: {} (expected to fail in seeds 0..{})",
                missed.join(", "),
                options.canary_seeds
            )
        };
        cases.push(Case {
            suite: "canary".into(),
            name,
            ok,
            message,
        });
        case_kinds.push(vec![FailureKind::Correctness]);
    }

    // 3. Snapshots: traces of bundled scenarios that insta snapshots pin.
    for (snap, scenario_file, seed) in SNAPSHOTS {
        progress(&format!("snapshot {snap}"));
        let snap_path = root.join("tests/snapshots").join(snap);
        let expected = std::fs::read_to_string(&snap_path)
            .ok()
            .map(|t| snapshot_body(&t));
        let scenario = Scenario::load(&root.join(scenario_file))?;
        let report = run_scenario(&scenario, *seed, 1)?;
        let (ok, message) = match expected {
            None => (
                false,
                format!("snapshot {} is missing", snap_path.display()),
            ),
            Some(e) if e == report.trace_text.trim_end() => {
                (true, format!("{} events match", report.events))
            }
            Some(e) => {
                let d = super::trace::first_divergence(&e, report.trace_text.trim_end());
                (
                    false,
                    match d {
                        Some((line, l, r)) => format!(
                            "trace differs from the snapshot at line {line}:\n  snapshot: {l}\n  now:      {r}"
                        ),
                        None => "trace differs from the snapshot".into(),
                    },
                )
            }
        };
        cases.push(Case {
            suite: "snapshot".into(),
            name: format!("{scenario_file} seed {seed}"),
            ok,
            message,
        });
        case_kinds.push(vec![FailureKind::Correctness]);
    }

    // A failed sweep counts with its seeds' failure kinds; a canary not caught or a snapshot
    // that differs is a correctness failure of the gate.
    let kinds: Vec<FailureKind> = cases
        .iter()
        .zip(&case_kinds)
        .filter(|(c, _)| !c.ok)
        .flat_map(|(_, k)| k.iter().copied())
        .collect();
    let exit_code = report::exit_code_of(kinds);
    Ok(GateReport {
        format: 1,
        commit: options.commit.clone(),
        seeds: ranges,
        cases,
        sweeps,
        exit_code,
    })
}

/// Snapshots the gate checks: (insta file, scenario, seed).
pub const SNAPSHOTS: &[(&str, &str, u64)] = &[
    (
        "skeleton__approval_turn_seed_1.snap",
        "scenarios/letta/approval_turn.toml",
        1,
    ),
    // ---- agent loop (issue 5) ----
    (
        "loop_harness__loop_parallel_conflicts_seed_1.snap",
        "scenarios/kimi/parallel_conflicts.toml",
        1,
    ),
];

/// The body of an insta snapshot file (after its `---` header).
fn snapshot_body(text: &str) -> String {
    let mut parts = text.splitn(3, "---\n");
    let _ = parts.next();
    let _ = parts.next();
    parts.next().unwrap_or("").trim_end().to_string()
}

impl GateReport {
    pub fn render(&self) -> String {
        let mut s = String::new();
        for c in &self.cases {
            let _ = writeln!(
                s,
                "{} {:<8} {}",
                if c.ok { "ok  " } else { "FAIL" },
                c.suite,
                c.name
            );
            if !c.ok || c.suite == "canary" {
                for line in c.message.lines() {
                    let _ = writeln!(s, "              {line}");
                }
            }
        }
        let failed = self.cases.iter().filter(|c| !c.ok).count();
        let _ = writeln!(
            s,
            "gate      {} checks, {} passed, {failed} failed",
            self.cases.len(),
            self.cases.len() - failed
        );
        s
    }

    /// JUnit XML: one testsuite per suite, one testcase per check.
    pub fn to_junit(&self) -> String {
        let esc = |t: &str| {
            t.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
        };
        let mut s = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"sim ci\">\n",
        );
        let mut suites: Vec<&str> = self.cases.iter().map(|c| c.suite.as_str()).collect();
        suites.dedup();
        for suite in suites {
            let cases: Vec<&Case> = self.cases.iter().filter(|c| c.suite == suite).collect();
            let failures = cases.iter().filter(|c| !c.ok).count();
            let _ = writeln!(
                s,
                "  <testsuite name=\"{suite}\" tests=\"{}\" failures=\"{failures}\">",
                cases.len()
            );
            for c in cases {
                if c.ok {
                    let _ = writeln!(
                        s,
                        "    <testcase classname=\"{suite}\" name=\"{}\"><system-out>{}</system-out></testcase>",
                        esc(&c.name),
                        esc(&c.message)
                    );
                } else {
                    let _ = writeln!(
                        s,
                        "    <testcase classname=\"{suite}\" name=\"{}\"><failure message=\"{}\">{}</failure></testcase>",
                        esc(&c.name),
                        esc(c.message.lines().next().unwrap_or("")),
                        esc(&c.message)
                    );
                }
            }
            s.push_str("  </testsuite>\n");
        }
        s.push_str("</testsuites>\n");
        s
    }
}
