//! `sim explore`: sweep seeds over scenarios, optionally with swarm faults, in parallel, and
//! report every failure grouped by invariant plus the coverage table.
//!
//! Results depend only on (scenarios, seeds, options), never on `jobs` or timing: workers take
//! seeds in any order, and the report is assembled in (scenario, seed) order. Only failures are
//! kept in full, so memory stays flat however many seeds run.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::faults::Fault;
use super::guidance::Guidance;
use super::report::{self, FailureKind, RunReport, Verdict};
use super::run::run_scenario_with;
use super::scenario::{InputError, Scenario};
use super::system::{Baseline, System};

/// What to sweep.
#[derive(Debug, Clone)]
pub struct ExploreOptions {
    /// Seeds `start..end`.
    pub seeds: std::ops::Range<u64>,
    /// Worker threads (1 = run on the calling thread).
    pub jobs: usize,
    /// Shard `(k, n)`, 1-based: this process runs the seeds with `seed % n == k - 1`.
    pub shard: Option<(u64, u64)>,
    /// Add a swarm-drawn fault plan to each seed's run.
    pub swarm: bool,
    /// Run every n-th seed twice to check `deterministic` (0 = never).
    pub determinism_every: u64,
    /// Guided exploration (`harness::guided`): explicit plans drawn round by round from the
    /// runs that showed something new; the swarm's plans are among them (`swarm` is then off).
    pub guided: bool,
}

/// One failing seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    pub scenario: String,
    pub seed: u64,
    pub kind: FailureKind,
    /// Invariant ids that failed (`crash` for a caught panic).
    pub invariants: Vec<String>,
    /// The first violation's message.
    pub message: String,
    /// The fault plan of the run, one fault per line.
    pub plan: Vec<String>,
    pub trace_hash: String,
    /// The command that reproduces it.
    pub reproduce: String,
    /// A guided run's plan (added to the scenario's own faults), for rerunning and shrinking
    /// it: a guided plan is not a function of the seed alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
}

impl Failure {
    /// The first line of the message as shown in invariant `inv`'s group. The message is the
    /// first broken invariant's, so a run listed under another of its invariants names that
    /// one: a group's lines never read as its own invariant's words when they are not.
    pub fn summary_under(&self, inv: &str) -> String {
        let line = first_line(&self.message);
        match self.invariants.first() {
            Some(first) if first != inv => format!("(first broken: {first}) {line}"),
            _ => line.to_string(),
        }
    }
}

/// A sweep's results. Equal for equal inputs, whatever `jobs` was. Read back strictly (`sim
/// report merge`): an unknown key is an error, not something dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExploreReport {
    pub format: u32,
    pub scenarios: Vec<String>,
    pub seeds: [u64; 2],
    pub shard: Option<[u64; 2]>,
    pub swarm: bool,
    /// A guided sweep (`sim explore --guided`).
    #[serde(default)]
    pub guided: bool,
    /// Seeds run, summed over scenarios.
    pub runs: u64,
    pub passed: u64,
    pub failures: Vec<Failure>,
    /// Coverage goal → seeds that reached it (every goal is listed, reached or not).
    pub coverage: BTreeMap<String, u64>,
    /// Finding → passing runs that showed it as an expected failure (XFAIL, a scenario's
    /// `[[expect]]`): counted, so a sweep says what it let through.
    #[serde(default)]
    pub expected: BTreeMap<String, u64>,
}

impl ExploreReport {
    /// The exit code of `sim explore` for this report (docs/exit-codes.md).
    pub fn exit_code(&self) -> i32 {
        report::exit_code_of(self.failures.iter().map(|f| f.kind))
    }

    /// Failures grouped by invariant id: id → (scenario, seed) list, in order.
    pub fn by_invariant(&self) -> BTreeMap<String, Vec<(String, u64)>> {
        let mut m: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
        for f in &self.failures {
            for i in &f.invariants {
                m.entry(i.clone())
                    .or_default()
                    .push((f.scenario.clone(), f.seed));
            }
        }
        m
    }

    /// Goals no seed reached.
    pub fn unreached(&self) -> Vec<String> {
        self.coverage
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// Combines shard reports of one sweep (`sim report merge`); each is named by its place in
    /// the list in errors.
    pub fn merge(reports: &[ExploreReport]) -> Result<ExploreReport, String> {
        let named: Vec<(String, &ExploreReport)> = reports
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("report {}", i + 1), r))
            .collect();
        Self::merge_named(&named)
    }

    /// Combines the shard reports of one sweep, each with the name errors call it by (its
    /// file). Refuses anything that is not one complete, disjoint set of shards of one sweep:
    /// reports of different sweeps (scenarios, seeds, swarm), shards of different splits, a
    /// shard given twice, a missing shard, a report whose runs do not add up to its shard's
    /// seeds. A single unsharded report merges to itself.
    pub fn merge_named(reports: &[(String, &ExploreReport)]) -> Result<ExploreReport, String> {
        let Some((first_name, first)) = reports.first() else {
            return Err("no reports to merge".into());
        };
        for (name, r) in reports {
            if r.format != first.format
                || r.scenarios != first.scenarios
                || r.seeds != first.seeds
                || r.swarm != first.swarm
                || r.guided != first.guided
            {
                return Err(format!(
                    "{name} and {first_name} are not shards of one sweep: {name} swept {} over seeds {}..{}{}, {first_name} {} over seeds {}..{}{}",
                    r.scenarios.join(" "),
                    r.seeds[0],
                    r.seeds[1],
                    if r.swarm { " with --swarm" } else { "" },
                    first.scenarios.join(" "),
                    first.seeds[0],
                    first.seeds[1],
                    if first.swarm { " with --swarm" } else { "" },
                ));
            }
            let expected = expected_runs(r);
            if r.runs != expected || r.passed + r.failures.len() as u64 != r.runs {
                return Err(format!(
                    "{name} is not a whole report: it counts {} runs ({} passed, {} failed), and its sweep{} runs {expected}",
                    r.runs,
                    r.passed,
                    r.failures.len(),
                    r.shard
                        .map(|[k, n]| format!("'s shard {k}/{n}"))
                        .unwrap_or_default()
                ));
            }
        }
        // The shards: one split, each part once, none missing.
        let n = match first.shard {
            None if reports.len() == 1 => 1,
            None => {
                return Err(format!(
                    "{first_name} is a whole sweep (no --shard), not a shard: merge it with nothing"
                ));
            }
            Some([_, n]) => n,
        };
        let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
        for (name, r) in reports {
            match r.shard {
                Some([k, m]) if m == n => {
                    if let Some(other) = seen.insert(k, name) {
                        return Err(format!("shard {k}/{n} is given twice: {other} and {name}"));
                    }
                }
                Some([k, m]) => {
                    return Err(format!(
                        "shards of different splits: {first_name} is a shard of {n}, {name} is shard {k}/{m}"
                    ));
                }
                None if n == 1 => {}
                None => {
                    return Err(format!(
                        "{name} is a whole sweep (no --shard), not a shard of {n}"
                    ));
                }
            }
        }
        let missing: Vec<String> = (1..=n)
            .filter(|k| n > 1 && !seen.contains_key(k))
            .map(|k| format!("{k}/{n}"))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "incomplete set of shards: missing {} (given {})",
                missing.join(", "),
                seen.iter()
                    .map(|(k, name)| format!("{k}/{n} {name}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let mut out = (*first).clone();
        out.shard = None;
        for (_, r) in &reports[1..] {
            out.runs += r.runs;
            out.passed += r.passed;
            out.failures.extend(r.failures.iter().cloned());
            for (g, n) in &r.coverage {
                *out.coverage.entry(g.clone()).or_insert(0) += n;
            }
            for (f, n) in &r.expected {
                *out.expected.entry(f.clone()).or_insert(0) += n;
            }
        }
        out.failures
            .sort_by(|a, b| (&a.scenario, a.seed).cmp(&(&b.scenario, b.seed)));
        Ok(out)
    }

    /// The human-readable summary.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "explored  {} runs over {} scenario(s), seeds {}..{}{}{}",
            self.runs,
            self.scenarios.len(),
            self.seeds[0],
            self.seeds[1],
            self.shard
                .map(|[k, n]| format!(", shard {k}/{n}"))
                .unwrap_or_default(),
            if self.guided {
                ", guided"
            } else if self.swarm {
                ", swarm faults"
            } else {
                ""
            }
        );
        let _ = writeln!(s, "passed    {}", self.passed);
        let _ = writeln!(s, "failed    {}", self.failures.len());
        if !self.expected.is_empty() {
            let shown: Vec<String> = self
                .expected
                .iter()
                .map(|(f, n)| format!("{f} in {n} run(s)"))
                .collect();
            let _ = writeln!(
                s,
                "expected  known findings (XFAIL, docs/findings.md): {}",
                shown.join(", ")
            );
        }
        for (inv, seeds) in self.by_invariant() {
            let _ = writeln!(s, "  {inv}: {} seed(s)", seeds.len());
            for (scenario, seed) in seeds.iter().take(10) {
                let f = self
                    .failures
                    .iter()
                    .find(|f| &f.scenario == scenario && f.seed == *seed)
                    .expect("grouped from failures");
                let _ = writeln!(s, "    seed {seed} {scenario}: {}", f.summary_under(&inv));
                let _ = writeln!(s, "      reproduce: {}", f.reproduce);
            }
            if seeds.len() > 10 {
                let _ = writeln!(s, "    … and {} more", seeds.len() - 10);
            }
        }
        let _ = writeln!(s, "coverage  (seeds that reached each goal)");
        // The goals of the systems swept, each system's in its own order.
        for g in System::ALL
            .iter()
            .flat_map(|s| s.goals())
            .filter(|g| self.coverage.contains_key(g.id))
        {
            let n = self.coverage.get(g.id).copied().unwrap_or(0);
            let mark = if n == 0 { "  NEVER REACHED" } else { "" };
            let _ = writeln!(s, "  {:<40} {n:>7}{mark}", g.id);
        }
        let unreached = self.unreached();
        if !unreached.is_empty() {
            let _ = writeln!(
                s,
                "note      this sweep never reached: {}",
                unreached.join(", ")
            );
        }
        s
    }
}

/// The runs a report of its sweep (and shard) makes: one per scenario and seed in its shard.
fn expected_runs(r: &ExploreReport) -> u64 {
    let [a, b] = r.seeds;
    let per_scenario = match r.shard {
        None => b.saturating_sub(a),
        Some([k, n]) if n > 0 && k >= 1 => {
            // Seeds s in a..b with s % n == k - 1.
            let below = |x: u64| x / n + u64::from(x % n > k - 1);
            below(b).saturating_sub(below(a))
        }
        Some(_) => 0,
    };
    per_scenario.saturating_mul(r.scenarios.len() as u64)
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// The fault-free baseline of a scenario (seed 0, its explicit faults removed): where swarm
/// faults can land.
pub fn baseline(scenario: &Scenario) -> Result<Baseline, InputError> {
    let mut clean = scenario.clone();
    clean.faults.clear();
    clean.system().baseline(&clean)
}

/// The scenario a swarm seed runs: its explicit faults plus the seed's swarm plan, and the
/// seed's start ([`with_swarm_start`]).
pub fn with_swarm(scenario: &Scenario, seed: u64, baseline: &Baseline) -> Scenario {
    let mut s = with_swarm_start(scenario, seed);
    s.faults
        .extend(baseline.plan(seed).into_iter().map(|mut f| {
            // The swarm draws latency faults from a fixed range; one below the
            // scenario's minimum latency is raised to it, so the plan stays valid.
            if let Fault::Latency { max_ms, .. } = &mut f {
                *max_ms = (*max_ms).max(scenario.network.latency_ms[0]);
            }
            Spanned::new(0..0, f)
        }));
    s
}

/// `scenario` with the world's start a swarm seed draws (`swarm::swarm_start`), when the
/// scenario names none: a start it names is what it is about.
pub fn with_swarm_start(scenario: &Scenario, seed: u64) -> Scenario {
    let mut s = scenario.clone();
    if s.network.start.is_default()
        && let Some(start) = super::swarm::swarm_start(seed)
    {
        s.network.start = start;
    }
    s
}

/// A guided seed's scenario before its plan: the start the seed draws as a swarm seed would
/// ([`with_swarm_start`]), named in the reproduce command (`--start`), since a guided run is
/// reproduced from its plan and not from its seed's draws.
pub fn with_guided_start(scenario: &Scenario, seed: u64) -> Scenario {
    let moved = with_swarm_start(scenario, seed);
    if moved.network.start == scenario.network.start {
        return moved;
    }
    let start = moved.network.start;
    moved.with_start(Some(start))
}

/// The scenario a shrink of a failing seed starts from, before its plan is written in: for a
/// swarm or guided seed, with the start the seed drew.
pub fn shrink_base(scenario: &Scenario, seed: u64, drawn_start: bool) -> Scenario {
    if drawn_start {
        with_swarm_start(scenario, seed)
    } else {
        scenario.clone()
    }
}

/// The command that reproduces one seed of a sweep.
pub fn reproduce_command(scenario: &Scenario, seed: u64, swarm: bool) -> String {
    let flags = format!(
        "{}{}",
        if swarm { " --swarm" } else { "" },
        scenario.repro_flags
    );
    report::reproduce_command(&scenario.path.display().to_string(), seed, &flags)
}

/// Runs the sweep. `progress(done, total)` is called after every seed (from worker threads).
pub fn explore(
    scenarios: &[Scenario],
    options: &ExploreOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<ExploreReport, InputError> {
    let work = work_items(scenarios, options);
    if options.guided {
        return Err(InputError {
            file: scenarios
                .first()
                .map(|s| s.path.display().to_string())
                .unwrap_or_default(),
            line: None,
            column: None,
            message: "a guided sweep runs through harness::guided::explore_in_process".into(),
        });
    }
    let items: Vec<usize> = (0..work.len()).collect();
    let total = work.len() as u64;
    let done = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<SeedResult, InputError>>>> =
        work.iter().map(|_| Mutex::new(None)).collect();
    run_items(
        scenarios,
        options,
        &work,
        &items,
        &BTreeMap::new(),
        &|_| {},
        &|i, r| {
            *results[i].lock().unwrap() = Some(r);
            let d = done.fetch_add(1, Ordering::SeqCst) as u64 + 1;
            progress(d, total);
        },
    )?;
    let results = results
        .into_iter()
        .map(|slot| slot.into_inner().unwrap().expect("every seed ran"));
    assemble(scenarios, options, results)
}

/// The (scenario index, seed) pairs a sweep runs, in report order.
pub fn work_items(scenarios: &[Scenario], options: &ExploreOptions) -> Vec<(usize, u64)> {
    let seeds: Vec<u64> = options
        .seeds
        .clone()
        .filter(|s| match options.shard {
            Some((k, n)) => s % n == k - 1,
            None => true,
        })
        .collect();
    (0..scenarios.len())
        .flat_map(|i| seeds.iter().map(move |s| (i, *s)))
        .collect()
}

/// Runs the work items `items` (indexes into `work`) on `options.jobs` threads; an item in
/// `plans` runs with that plan added to its scenario's faults (a guided sweep's). `started(i)`
/// is called on the thread that runs item `i` just before it runs, `finished(i, result)` after.
/// A process that runs a sweep in a child (so that an abort kills only the child) prints these.
pub fn run_items(
    scenarios: &[Scenario],
    options: &ExploreOptions,
    work: &[(usize, u64)],
    items: &[usize],
    plans: &BTreeMap<usize, Vec<Fault>>,
    started: &(dyn Fn(usize) + Sync),
    finished: &(dyn Fn(usize, Result<SeedResult, InputError>) + Sync),
) -> Result<(), InputError> {
    let baselines: Vec<Option<Baseline>> = scenarios
        .iter()
        .map(|s| options.swarm.then(|| baseline(s)).transpose())
        .collect::<Result<_, _>>()?;
    let next = AtomicUsize::new(0);
    let worker = || {
        loop {
            let k = next.fetch_add(1, Ordering::SeqCst);
            let Some(&i) = items.get(k) else {
                break;
            };
            let (si, seed) = work[i];
            started(i);
            let r = match plans.get(&i) {
                Some(plan) => run_planned_seed(&scenarios[si], seed, plan, options),
                None => run_seed(&scenarios[si], baselines[si].as_ref(), seed, options),
            };
            finished(i, r);
        }
    };
    let jobs = options.jobs.max(1);
    if jobs == 1 {
        worker();
    } else {
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                scope.spawn(worker);
            }
        });
    }
    Ok(())
}

/// What one seed of a sweep gave: its failure, if it failed; the coverage goals it reached;
/// the findings it showed as expected failures; in a guided sweep, what its trace tells the
/// next rounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedResult {
    pub failure: Option<Failure>,
    pub goals: Vec<String>,
    pub findings: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guidance: Option<Guidance>,
}

impl SeedResult {
    /// The verdict of a seed whose run took its process down (an abort-type panic, which no
    /// unwinding catches): a crash with `message`, its plan and its reproduce command. `guided`
    /// is a guided run's plan.
    pub fn aborted(
        base: &Scenario,
        seed: u64,
        swarm: bool,
        guided: Option<&[Fault]>,
        message: String,
    ) -> SeedResult {
        let (faults, reproduce): (Vec<Fault>, String) = match guided {
            Some(plan) => (
                base.faults
                    .iter()
                    .map(|f| f.get_ref().clone())
                    .chain(plan.iter().cloned())
                    .collect(),
                planned_reproduce_command(&with_guided_start(base, seed), seed, plan),
            ),
            None => (
                plan_of(base, seed, swarm).unwrap_or_default(),
                reproduce_command(base, seed, swarm),
            ),
        };
        SeedResult {
            failure: Some(Failure {
                scenario: base.path.display().to_string(),
                seed,
                kind: FailureKind::Crash,
                invariants: vec!["crash".to_string()],
                message,
                plan: faults.iter().map(Fault::to_string).collect(),
                trace_hash: String::new(),
                reproduce,
                faults: guided.map(<[Fault]>::to_vec).unwrap_or_default(),
            }),
            goals: Vec::new(),
            findings: Vec::new(),
            guidance: None,
        }
    }
}

/// Runs one seed of `base` (with the seed's swarm plan when there is a baseline).
fn run_seed(
    base: &Scenario,
    baseline: Option<&Baseline>,
    seed: u64,
    options: &ExploreOptions,
) -> Result<SeedResult, InputError> {
    let scenario = match baseline {
        Some(b) => with_swarm(base, seed, b),
        None => base.clone(),
    };
    let reproduce = reproduce_command(base, seed, options.swarm);
    run_seed_of(base, &scenario, seed, options, reproduce, None)
}

/// Runs one seed of `base` with a guided plan added to its faults.
fn run_planned_seed(
    base: &Scenario,
    seed: u64,
    plan: &[Fault],
    options: &ExploreOptions,
) -> Result<SeedResult, InputError> {
    let mut scenario = with_guided_start(base, seed);
    let reproduce = planned_reproduce_command(&scenario, seed, plan);
    scenario
        .faults
        .extend(plan.iter().cloned().map(|f| Spanned::new(0..0, f)));
    run_seed_of(base, &scenario, seed, options, reproduce, Some(plan))
}

/// The command that reproduces one seed of a guided sweep: its plan given explicitly.
pub fn planned_reproduce_command(scenario: &Scenario, seed: u64, plan: &[Fault]) -> String {
    let flags = format!(
        "{}{}",
        super::guidance::plan_flags(plan),
        scenario.repro_flags
    );
    report::reproduce_command(&scenario.path.display().to_string(), seed, &flags)
}

/// Runs `scenario` (a seed of `base`) and reads its result; a guided run (`guided`, its plan)
/// keeps its guidance and its plan.
fn run_seed_of(
    base: &Scenario,
    scenario: &Scenario,
    seed: u64,
    options: &ExploreOptions,
    reproduce: String,
    guided: Option<&[Fault]>,
) -> Result<SeedResult, InputError> {
    let runs = if options.determinism_every > 0 && seed.is_multiple_of(options.determinism_every) {
        2
    } else {
        1
    };
    let report = run_scenario_with(scenario, seed, runs, guided.is_some())?;
    let failure = (report.verdict != Verdict::Pass).then(|| Failure {
        scenario: base.path.display().to_string(),
        seed,
        kind: report.verdict.failure_kind().expect("not a pass"),
        invariants: failed_invariants(&report),
        message: first_message(&report),
        plan: scenario
            .faults
            .iter()
            .map(|f| f.get_ref().to_string())
            .collect(),
        trace_hash: report.trace_hash.clone(),
        reproduce,
        faults: guided.map(<[Fault]>::to_vec).unwrap_or_default(),
    });
    // One finding may explain several invariants of a run (a dead end breaks both
    // `approval-conflict-recovered` and `recovery-completes`): the sweep counts runs.
    let findings: std::collections::BTreeSet<String> = report
        .expected
        .iter()
        .filter(|(_, _, failed)| *failed)
        .map(|(_, f, _)| f.clone())
        .collect();
    let findings = findings.into_iter().collect();
    Ok(SeedResult {
        failure,
        goals: report.goals.iter().map(|g| g.to_string()).collect(),
        findings,
        guidance: report.guidance,
    })
}

/// The ids of the invariants a failing run broke (`crash` for a caught panic).
fn failed_invariants(report: &RunReport) -> Vec<String> {
    match &report.verdict {
        Verdict::Crash(_) => vec!["crash".to_string()],
        _ => report
            .invariants
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(id, _)| id.to_string())
            .collect(),
    }
}

/// The panic of a crash, or the first violation's message.
fn first_message(report: &RunReport) -> String {
    match &report.verdict {
        Verdict::Crash(p) => p.clone(),
        _ => report
            .invariants
            .iter()
            .find(|(_, v)| !v.is_empty())
            .and_then(|(_, v)| v.first())
            .map(|v| v.message.clone())
            .unwrap_or_default(),
    }
}

/// The sweep's report from its seeds' results, in (scenario, seed) order.
pub fn assemble(
    scenarios: &[Scenario],
    options: &ExploreOptions,
    results: impl Iterator<Item = Result<SeedResult, InputError>>,
) -> Result<ExploreReport, InputError> {
    let mut report = ExploreReport {
        format: 1,
        scenarios: scenarios
            .iter()
            .map(|s| s.path.display().to_string())
            .collect(),
        seeds: [options.seeds.start, options.seeds.end],
        shard: options.shard.map(|(k, n)| [k, n]),
        swarm: options.swarm,
        guided: options.guided,
        runs: 0,
        passed: 0,
        failures: Vec::new(),
        coverage: scenarios
            .iter()
            .flat_map(|s| s.system().goals())
            .map(|g| (g.id.to_string(), 0))
            .collect(),
        expected: BTreeMap::new(),
    };
    for r in results {
        let SeedResult {
            failure,
            goals,
            findings,
            ..
        } = r?;
        report.runs += 1;
        match failure {
            Some(f) => report.failures.push(f),
            None => {
                report.passed += 1;
                for f in findings {
                    *report.expected.entry(f).or_insert(0) += 1;
                }
            }
        }
        for g in goals {
            *report.coverage.entry(g).or_insert(0) += 1;
        }
    }
    Ok(report)
}

/// The explicit plan a failing seed ran with (for shrinking).
pub fn plan_of(scenario: &Scenario, seed: u64, swarm: bool) -> Result<Vec<Fault>, InputError> {
    let s = if swarm {
        with_swarm(scenario, seed, &baseline(scenario)?)
    } else {
        scenario.clone()
    };
    Ok(s.faults.iter().map(|f| f.get_ref().clone()).collect())
}
