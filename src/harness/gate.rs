//! `sim ci`: the regression gate. Every bundled scenario as written over a few seeds (held to
//! its declared outcomes), then over a fixed seed list plus a seed range taken from the
//! commit, guided (swarm plans and faults at protocol points) with a determinism sample; every planted
//! canary must be caught by its invariant; trace snapshots must match; every bug cassette
//! (cassettes/bugs/) must replay to its expected verdicts. Reports as JUnit XML and
//! JSON; exit code as documented (docs/exit-codes.md).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::explore::{ExploreOptions, ExploreReport, explore};
use super::faults::Fault;
use super::realclient::{self, RealClientOptions};
use super::report::{self, FailureKind};
use super::run::run_scenario;
use super::scenario::{InputError, Scenario};
use super::trace::first_divergence;

/// What the gate runs.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// The repository root (scenarios/ and the snapshots under tests/ are found from here).
    pub root: PathBuf,
    /// Seeds `0..as_written_seeds` for every scenario as written: its own faults only, so
    /// `ends-as-declared` holds each run to its `[scenario] outcomes` and probe statuses.
    pub as_written_seeds: u64,
    /// Seeds `0..fixed_seeds` for every scenario, guided.
    pub fixed_seeds: u64,
    /// Seeds `0..published_seeds` for every Letta scenario, guided, with the published
    /// client's profile (`letta-code`).
    pub published_seeds: u64,
    /// The commit under test; it picks a further seed range so every commit explores new seeds.
    pub commit: Option<String>,
    pub commit_seeds: u64,
    /// Seeds per canary.
    pub canary_seeds: u64,
    /// Run every n-th seed twice (determinism sample).
    pub determinism_every: u64,
    pub jobs: usize,
    /// The real-client stage, when a real client is given (docs/real-client.md "In `sim ci`").
    pub real_client: Option<RealClientStage>,
}

/// The gate's optional last stage: a real client over the scenarios of
/// `scenarios/real-client/`. Each plain scenario runs the first `seeds` seeds whose plans hold
/// no stall (a stall costs the Letta Code CLI its 60 s stall reconciler); each planted one
/// (a `[planted]` server defect) runs once with its own faults only and must be caught.
#[derive(Debug, Clone)]
pub struct RealClientStage {
    /// The client command line (`sh -c`), as `sim explore --real-client` takes it.
    pub command: String,
    /// Where the runs' directories go.
    pub dir: PathBuf,
    pub seeds: usize,
    pub run_timeout_ms: u64,
}

/// Where the real-client stage's scenarios live.
pub const REAL_CLIENT_DIR: &str = "scenarios/real-client";

/// Reruns of a failing real-client seed in the gate: the seed fails the gate when one of them
/// fails again; a failure neither rerun repeats is reported as flaky (real time) and passes.
pub const REAL_CLIENT_RERUNS: u32 = 2;

/// How the gate runs one sweep of one scenario file (its sweeps and its canaries). In-process
/// ([`sweep_in_process`]) for tests; `sim ci` runs each in child processes, as `sim explore`
/// does, so a seed that aborts its process becomes that seed's crash, not the gate's end.
pub type Sweeper<'a> =
    dyn Fn(&Path, &Scenario, &ExploreOptions) -> Result<ExploreReport, InputError> + Sync + 'a;

/// A sweep in this process: a panic that unwinds is caught (the seed's crash), an abort is not.
pub fn sweep_in_process(
    _file: &Path,
    scenario: &Scenario,
    options: &ExploreOptions,
) -> Result<ExploreReport, InputError> {
    let one = std::slice::from_ref(scenario);
    if options.guided {
        super::guided::explore_in_process(one, options, &|_, _| {})
    } else {
        explore(one, options, &|_, _| {})
    }
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
    /// Stages that did not run, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
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
    sweeper: &Sweeper<'_>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<GateReport, InputError> {
    // Relative paths when run from the repository root, so names and reproduce lines are short.
    let root: &Path = if options.root == Path::new(".") {
        Path::new("")
    } else {
        &options.root
    };
    let mut ranges = vec![[0, options.fixed_seeds]];
    if let Some(c) = &options.commit {
        let start = commit_seed_start(c);
        ranges.push([start, start + options.commit_seeds]);
    }
    let bundled = BUNDLED_DIRS
        .iter()
        .flat_map(|d| toml_files(&root.join(d)))
        .map(|file| Ok((Scenario::load(&file)?, file)))
        .collect::<Result<Vec<_>, InputError>>()?;

    // Each case, with the failure kinds it stands for when it fails (for the exit code).
    let mut cases: Vec<(Case, Vec<FailureKind>)> = Vec::new();
    let mut sweeps = Vec::new();
    // 1. As written: every bundled scenario with its own faults only. A guided plan changes
    //    the scenario, so its runs meet the declared outcomes only through fault-free twins;
    //    these runs are held to them directly, and cost little (no plan, mostly no faults).
    for (scenario, file) in &bundled {
        if options.as_written_seeds == 0 {
            break;
        }
        let range = [0, options.as_written_seeds];
        let report = sweep(scenario, file, range, false, options, sweeper, progress)?;
        cases.push((
            sweep_case("as-written", &report, file, range),
            report.failures.iter().map(|f| f.kind).collect(),
        ));
        sweeps.push(report);
    }
    // 2. Sweeps: every bundled scenario, guided plans, must pass.
    for (scenario, file) in &bundled {
        for range in &ranges {
            let report = sweep(scenario, file, *range, true, options, sweeper, progress)?;
            cases.push((
                sweep_case("sweep", &report, file, *range),
                report.failures.iter().map(|f| f.kind).collect(),
            ));
            sweeps.push(report);
        }
    }
    // 2b. The published client's model: every Letta scenario guided with the `letta-code`
    //     profile; its known findings are expected where the trace shows their signature
    //     (harness::letta::findings::OF_PROFILE), any other violation fails.
    for (scenario, file) in &bundled {
        if options.published_seeds == 0 || scenario.scenario.system.get_ref() != "letta" {
            continue;
        }
        let range = [0, options.published_seeds];
        let published = scenario.clone().with_client_profile(Some("letta-code"));
        let report = sweep(&published, file, range, true, options, sweeper, progress)?;
        cases.push((
            sweep_case("published-client", &report, file, range),
            report.failures.iter().map(|f| f.kind).collect(),
        ));
        sweeps.push(report);
    }
    // 3. Canaries: each planted defect must be caught by exactly the invariants it names.
    for file in toml_files(&root.join("scenarios/planted")) {
        progress(&format!("canary {}", file.display()));
        let case = canary_case(&Scenario::load(&file)?, &file, options, sweeper)?;
        cases.push((case, vec![FailureKind::Correctness]));
    }
    // 4. Snapshots: traces of bundled scenarios that insta snapshots pin.
    for case in snapshot_cases(root, &bundled, progress)? {
        cases.push((case, vec![FailureKind::Correctness]));
    }
    // 5. Bug cassettes: each recording replays to the verdicts its sidecar states.
    for file in toml_files(&root.join("cassettes/bugs")) {
        progress(&format!("bug cassette {}", file.display()));
        cases.push((bug_cassette_case(&file)?, vec![FailureKind::Correctness]));
    }

    // 6. The real client, when one is given.
    let mut skipped = Vec::new();
    match &options.real_client {
        Some(stage) => {
            for case in real_client_cases(root, stage, options.jobs, progress)? {
                cases.push((case, vec![FailureKind::Correctness]));
            }
        }
        None => skipped.push(
            "real-client: no --real-client CMD given (docs/real-client.md \"In sim ci\")".into(),
        ),
    }

    // A failed sweep counts with its seeds' failure kinds; a canary not caught or a snapshot
    // that differs is a correctness failure of the gate.
    let kinds: Vec<FailureKind> = cases
        .iter()
        .filter(|(c, _)| !c.ok)
        .flat_map(|(_, k)| k.iter().copied())
        .collect();
    Ok(GateReport {
        format: 1,
        commit: options.commit.clone(),
        seeds: ranges,
        cases: cases.into_iter().map(|(c, _)| c).collect(),
        skipped,
        sweeps,
        exit_code: report::exit_code_of(kinds),
    })
}

/// One sweep of a bundled scenario over a seed range: guided, or as written.
fn sweep(
    scenario: &Scenario,
    file: &Path,
    range: [u64; 2],
    guided: bool,
    options: &GateOptions,
    sweeper: &Sweeper<'_>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<ExploreReport, InputError> {
    progress(&format!(
        "{} {} seeds {}..{}",
        if guided { "sweep" } else { "as written" },
        file.display(),
        range[0],
        range[1]
    ));
    sweeper(
        file,
        scenario,
        &ExploreOptions {
            seeds: range[0]..range[1],
            jobs: options.jobs,
            shard: None,
            // Guided plans (harness/guided.rs): the swarm's, and faults at protocol points,
            // server behaviours and client interrupts and crashes, drawn from what is new.
            swarm: false,
            determinism_every: options.determinism_every,
            guided,
        },
    )
}

/// A sweep's case: passed when no seed failed; the first failures with their reproduce lines,
/// and the goals a guided sweep never reached.
fn sweep_case(suite: &str, report: &ExploreReport, file: &Path, range: [u64; 2]) -> Case {
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
    // Coverage goals are what a guided sweep aims at; a run as written aims at none.
    let unreached = if report.guided {
        report.unreached()
    } else {
        Vec::new()
    };
    if !unreached.is_empty() {
        let _ = write!(message, "\nnever reached: {}", unreached.join(", "));
    }
    Case {
        suite: suite.into(),
        name: format!("{} seeds {}..{}", file.display(), range[0], range[1]),
        ok: report.failures.is_empty(),
        message,
    }
}

/// A bug cassette's case: passed when every replay its sidecar lists gives the stated verdict
/// (`harness::replay::bugs`).
fn bug_cassette_case(file: &Path) -> Result<Case, InputError> {
    let results = crate::harness::replay::bugs::check(file)?;
    let wrong: Vec<String> = results
        .iter()
        .flat_map(|(r, w)| w.iter().map(move |m| format!("{} side: {m}", r.side)))
        .collect();
    Ok(Case {
        suite: "bug-cassette".into(),
        name: file.display().to_string(),
        ok: wrong.is_empty(),
        message: if wrong.is_empty() {
            format!("{} replays gave their expected verdicts", results.len())
        } else {
            wrong.join("\n")
        },
    })
}

/// A canary's case: passed when its planted defect is caught by every invariant it names.
fn canary_case(
    scenario: &Scenario,
    file: &Path,
    options: &GateOptions,
    sweeper: &Sweeper<'_>,
) -> Result<Case, InputError> {
    let expected = scenario.planted.expected_failures();
    let report = sweeper(
        file,
        scenario,
        &ExploreOptions {
            seeds: 0..options.canary_seeds,
            jobs: options.jobs,
            shard: None,
            swarm: false,
            determinism_every: 1,
            guided: false,
        },
    )?;
    let caught = report.by_invariant();
    let missed: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|id| !caught.contains_key(*id))
        .collect();
    let message = if expected.is_empty() {
        "plants nothing: every file in scenarios/planted/ must switch on a [planted] defect".into()
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
    Ok(Case {
        suite: "canary".into(),
        name: file.display().to_string(),
        ok: !expected.is_empty() && missed.is_empty(),
        message,
    })
}

/// The real-client stage's checks: every scenario of [`REAL_CLIENT_DIR`] under `root`, a
/// sweep for a plain one, a canary for a planted one.
pub fn real_client_cases(
    root: &Path,
    stage: &RealClientStage,
    jobs: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Vec<Case>, InputError> {
    let mut cases = Vec::new();
    for file in toml_files(&root.join(REAL_CLIENT_DIR)) {
        progress(&format!("real client {}", file.display()));
        let scenario = Scenario::load(&file)?;
        cases.push(if scenario.planted.expected_failures().is_empty() {
            real_client_sweep_case(&scenario, &file, root, stage, jobs)?
        } else {
            real_client_canary_case(&scenario, &file, root, stage)?
        });
    }
    Ok(cases)
}

fn real_client_options(
    stage: &RealClientStage,
    root: &Path,
    seeds: std::ops::Range<u64>,
    jobs: usize,
) -> RealClientOptions {
    RealClientOptions {
        command: stage.command.clone(),
        seeds,
        jobs,
        run_timeout_ms: stage.run_timeout_ms,
        reruns: REAL_CLIENT_RERUNS,
        dir: stage.dir.clone(),
        root: if root.as_os_str().is_empty() {
            std::env::current_dir().unwrap_or_default()
        } else {
            root.to_path_buf()
        },
        keep: false,
    }
}

/// A stall fault: the real client waits it out (its stall reconciler), which costs a minute.
fn is_stall(f: &Fault) -> bool {
    f.to_string().contains("action=stall")
}

/// A real-client sweep's case: the first stall-free seeds; passed when every failing seed is
/// flaky (no rerun failed again).
fn real_client_sweep_case(
    scenario: &Scenario,
    file: &Path,
    root: &Path,
    stage: &RealClientStage,
    jobs: usize,
) -> Result<Case, InputError> {
    let planner = realclient::Planner::new(scenario)?;
    let seeds: Vec<u64> = (0..10_000)
        .filter(|&k| !planner.plan(k).iter().any(is_stall))
        .take(stage.seeds)
        .collect();
    let range = seeds.first().copied().unwrap_or(0)..seeds.last().map_or(0, |l| l + 1);
    let options = real_client_options(stage, root, range, jobs);
    let work: Vec<(usize, u64)> = seeds.iter().map(|&s| (0, s)).collect();
    let report = realclient::explore_work(
        std::slice::from_ref(scenario),
        &work,
        &options,
        &|_, _, _| {},
    )?;
    let repeated: Vec<&realclient::report::RealFailure> = report
        .failures
        .iter()
        .filter(|f| f.failed_again > 0)
        .collect();
    let mut message = format!(
        "{} seeds ({}), {} passed, {} failed, {} of them flaky",
        report.runs.len(),
        seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
        report.runs.iter().filter(|r| r.failed.is_empty()).count(),
        report.failures.len(),
        report.failures.len() - repeated.len()
    );
    for f in &report.failures {
        let _ = write!(
            message,
            "\nseed {} failed {} ({} of {} reruns again): {}\n  rerun: {}\n  runs kept in {}",
            f.seed,
            f.invariants.join(","),
            f.failed_again,
            f.reruns,
            f.findings.first().map(|x| x.message.as_str()).unwrap_or(""),
            f.rerun,
            f.dir
        );
    }
    Ok(Case {
        suite: "real-client".into(),
        name: format!("{} seeds {}", file.display(), seeds.len()),
        ok: repeated.is_empty(),
        message,
    })
}

/// A planted real-client scenario's case: one run with its own faults, which must break every
/// invariant its `[planted]` defect names (the judge is shown to bite on a real client).
fn real_client_canary_case(
    scenario: &Scenario,
    file: &Path,
    root: &Path,
    stage: &RealClientStage,
) -> Result<Case, InputError> {
    let expected = scenario.planted.expected_failures();
    let options = real_client_options(stage, root, 0..1, 1);
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let run = realclient::run_once(
        scenario,
        0,
        &[],
        &options,
        &stage.dir.join(stem).join("canary"),
    )?;
    let failed = run.failed();
    let missed: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|id| !failed.iter().any(|f| f == id))
        .collect();
    let message = if missed.is_empty() {
        format!(
            "caught by {} (the real client broke {})",
            expected.join(", "),
            failed.join(", ")
        )
    } else {
        format!(
            "NOT caught: {} (the real client broke {}; its run is in {})",
            missed.join(", "),
            if failed.is_empty() {
                "nothing".to_string()
            } else {
                failed.join(", ")
            },
            run.dir.display()
        )
    };
    if missed.is_empty() {
        let _ = std::fs::remove_dir_all(&run.dir);
    }
    Ok(Case {
        suite: "real-client".into(),
        name: file.display().to_string(),
        ok: missed.is_empty(),
        message,
    })
}

/// An insta snapshot that pins the trace of a bundled scenario at one seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSnapshot {
    /// The `.snap` file.
    pub file: PathBuf,
    /// The scenario file it pins.
    pub scenario: PathBuf,
    pub seed: u64,
}

/// The trace snapshots under `root/tests` (in any `snapshots/` folder, where insta writes
/// them), in the order of the bundled scenarios, then seed. insta names a snapshot
/// `<module>__<name>.snap`; a snapshot pins a bundled scenario's trace when its name is the
/// scenario's `[scenario] name` (with `_` for `-`) followed by `_seed_<N>`. Other snapshots
/// are not the gate's.
pub fn trace_snapshots(root: &Path, bundled: &[(Scenario, PathBuf)]) -> Vec<TraceSnapshot> {
    let mut found = Vec::new();
    for file in snap_files(&root.join("tests")) {
        let Some(stem) = file.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let name = stem.rsplit_once("__").map_or(stem, |(_, n)| n);
        let Some((scenario_name, seed)) = name.rsplit_once("_seed_") else {
            continue;
        };
        let Ok(seed) = seed.parse::<u64>() else {
            continue;
        };
        let Some(index) = bundled
            .iter()
            .position(|(s, _)| s.scenario.name.replace('-', "_") == scenario_name)
        else {
            continue;
        };
        found.push((index, seed, file));
    }
    found.sort();
    found
        .into_iter()
        .map(|(index, seed, file)| TraceSnapshot {
            file,
            scenario: bundled[index].1.clone(),
            seed,
        })
        .collect()
}

/// Every `.snap` file in a `snapshots/` folder under `dir`, sorted.
fn snap_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "snap")
                && d.file_name().is_some_and(|n| n == "snapshots")
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// One case per trace snapshot, or one failing case when there is none.
fn snapshot_cases(
    root: &Path,
    bundled: &[(Scenario, PathBuf)],
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Vec<Case>, InputError> {
    let snapshots = trace_snapshots(root, bundled);
    if snapshots.is_empty() {
        return Ok(vec![Case {
            suite: "snapshot".into(),
            name: "tests/**/snapshots".into(),
            ok: false,
            message: "no insta snapshot pins the trace of a bundled scenario".into(),
        }]);
    }
    snapshots
        .iter()
        .map(|snap| {
            progress(&format!("snapshot {}", snap.file.display()));
            snapshot_case(snap)
        })
        .collect()
}

/// A snapshot's case: passed when the scenario's trace at the seed is the snapshot's body.
fn snapshot_case(snap: &TraceSnapshot) -> Result<Case, InputError> {
    let expected = std::fs::read_to_string(&snap.file)
        .ok()
        .map(|t| snapshot_body(&t));
    let report = run_scenario(&Scenario::load(&snap.scenario)?, snap.seed, 1)?;
    let (ok, message) = match expected {
        None => (
            false,
            format!("snapshot {} is missing", snap.file.display()),
        ),
        Some(e) if e == report.trace_text.trim_end() => {
            (true, format!("{} events match", report.events))
        }
        Some(e) => (
            false,
            match first_divergence(&e, report.trace_text.trim_end()) {
                Some((line, l, r)) => format!(
                    "trace differs from the snapshot at line {line}:\n  snapshot: {l}\n  now:      {r}"
                ),
                None => "trace differs from the snapshot".into(),
            },
        ),
    };
    Ok(Case {
        suite: "snapshot".into(),
        name: format!("{} seed {}", snap.scenario.display(), snap.seed),
        ok,
        message,
    })
}

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
            if !c.ok || c.suite == "canary" || c.suite == "real-client" {
                for line in c.message.lines() {
                    let _ = writeln!(s, "              {line}");
                }
            }
        }
        for why in &self.skipped {
            let _ = writeln!(s, "skip {why}");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_finds_the_trace_snapshots_of_bundled_scenarios() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let bundled: Vec<(Scenario, PathBuf)> = BUNDLED_DIRS
            .iter()
            .flat_map(|d| toml_files(&root.join(d)))
            .map(|f| (Scenario::load(&f).unwrap(), f))
            .collect();
        let found: Vec<(String, u64)> = trace_snapshots(root, &bundled)
            .into_iter()
            .map(|s| {
                let file = s.scenario.strip_prefix(root).unwrap();
                (file.display().to_string(), s.seed)
            })
            .collect();
        assert_eq!(
            found,
            [
                ("scenarios/letta/approval_turn.toml".to_string(), 1),
                ("scenarios/kimi/parallel_conflicts.toml".to_string(), 1),
            ]
        );
    }
}
