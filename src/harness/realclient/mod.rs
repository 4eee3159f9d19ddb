//! `sim explore --real-client CMD`: seed sweeps of a real, unmodified client (the published
//! Letta Code CLI) against the scenario's server model on real TCP (docs/real-client.md).
//!
//! Per seed: draw a plan of the faults `sim serve` applies ([`plan`]), serve the scenario with
//! it in this process ([`serve`]), launch the command with a fresh HOME and working directory
//! and a wall-clock budget ([`launch`]), and judge what the server saw, the request log, the
//! working directory and the client's stdout ([`judge`]). Each failing seed is then run again
//! to say how often it fails (real time makes reruns differ: nothing here is byte-deterministic),
//! and its plan is run in simulation with the `letta-code` client profile to say whether the
//! model fails the same way. Agent-loop scenarios (a coding agent that calls the provider
//! itself, the Kimi Code CLI) are swept by [`agent_loop`], judged by [`loop_judge`].

pub mod agent_loop;
pub mod judge;
pub mod launch;
pub mod loop_judge;
pub mod plan;
pub mod report;
pub mod serve;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use toml::Spanned;

use self::judge::{Evidence, Finding};
use self::launch::{Launch, launch};
use self::report::{ModelRun, RealFailure, RealReport, RunSummary};
use self::serve::Served;
use super::faults::Fault;
use super::report::Verdict;
use super::run::run_scenario;
use super::scenario::{InputError, Scenario};

/// What to sweep and how.
#[derive(Debug, Clone)]
pub struct RealClientOptions {
    /// The client: a shell command line, run with `sh -c`.
    pub command: String,
    pub seeds: std::ops::Range<u64>,
    /// Runs at once.
    pub jobs: usize,
    /// Wall-clock budget of one run of the command.
    pub run_timeout_ms: u64,
    /// Reruns of each failing seed (flakiness).
    pub reruns: u32,
    /// Where each run's HOME, working directory and logs go; kept for failing runs.
    pub dir: PathBuf,
    /// The directory the command line's relative paths mean (`SIM_ROOT`).
    pub root: PathBuf,
    /// Keep the directories of passing runs too.
    pub keep: bool,
}

/// One run of the command: what the judge said and what it was given.
#[derive(Debug, Clone)]
pub struct RealRun {
    pub scenario: String,
    pub seed: u64,
    pub plan: Vec<Fault>,
    pub verdicts: Vec<(&'static str, Vec<Finding>)>,
    pub requests: Vec<serve::Request>,
    pub cli: launch::CliRun,
    pub dir: PathBuf,
}

impl RealRun {
    /// The invariants it broke, in report order.
    pub fn failed(&self) -> Vec<String> {
        self.verdicts
            .iter()
            .filter(|(_, f)| !f.is_empty())
            .map(|(id, _)| id.to_string())
            .collect()
    }
}

/// The plan of every seed of `scenario`, with the baseline it is drawn from.
pub struct Planner {
    baseline: plan::RealBaseline,
}

impl Planner {
    pub fn new(scenario: &Scenario) -> Result<Planner, InputError> {
        Ok(Planner {
            baseline: plan::baseline(scenario)?,
        })
    }

    pub fn plan(&self, seed: u64) -> Vec<Fault> {
        plan::plan(seed, &self.baseline)
    }
}

/// The environment the command gets besides HOME, PATH and the hermetic switches of
/// [`launch`] (docs/real-client.md "The command's environment").
fn command_env(
    scenario: &Scenario,
    seed: u64,
    served: &Served,
    options: &RealClientOptions,
) -> Vec<(String, String)> {
    let turns: Vec<&str> = scenario.client.turns.iter().map(String::as_str).collect();
    vec![
        ("LETTA_BASE_URL".into(), served.base_url.clone()),
        ("SIM_ROOT".into(), options.root.display().to_string()),
        ("SIM_SCENARIO".into(), scenario.path.display().to_string()),
        ("SIM_SEED".into(), seed.to_string()),
        (
            "SIM_TURN".into(),
            turns.first().copied().unwrap_or("").to_string(),
        ),
        (
            "SIM_TURNS".into(),
            serde_json::to_string(&turns).unwrap_or_default(),
        ),
        ("SIM_MODEL".into(), scenario.agent.model.clone()),
        ("SIM_AGENT_ID".into(), scenario.agent.id.clone()),
    ]
}

/// Runs the command once against `scenario` with `plan`, in `dir` (emptied first).
pub fn run_once(
    scenario: &Scenario,
    seed: u64,
    plan: &[Fault],
    options: &RealClientOptions,
    dir: &Path,
) -> Result<RealRun, InputError> {
    let io_error = |what: &str, e: std::io::Error| InputError {
        file: dir.display().to_string(),
        line: None,
        column: None,
        message: format!("{what}: {e}"),
    };
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| io_error("cannot create the run directory", e))?;
    let planned = plan::with_plan(scenario, plan);
    let served = Served::start(&planned, seed)?;
    let cli = launch(&Launch {
        command: &options.command,
        dir,
        env: command_env(scenario, seed, &served, options),
        budget: Duration::from_millis(options.run_timeout_ms),
        start: served.start,
    })
    .map_err(|e| io_error(&format!("cannot start `sh -c {}`", options.command), e))?;
    let (trace, requests) = served.stop();
    let effects = std::fs::read_to_string(cli.work.join(judge::EFFECTS_FILE)).unwrap_or_default();
    let verdicts = judge::judge(&Evidence {
        trace: &trace,
        requests: &requests,
        cli: &cli,
        effects: &effects,
        plan,
        budget_ms: options.run_timeout_ms,
        start: scenario.network.start,
    });
    let run = RealRun {
        scenario: scenario.path.display().to_string(),
        seed,
        plan: plan.to_vec(),
        verdicts,
        requests,
        cli,
        dir: dir.to_path_buf(),
    };
    report::write_run_files(&run, &trace);
    Ok(run)
}

/// The directory of one run: `DIR/<scenario stem>/seed-<n>[-rerun-<k>]`.
fn run_dir(options: &RealClientOptions, scenario: &Scenario, seed: u64, rerun: u32) -> PathBuf {
    let stem = scenario
        .path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".into());
    let name = if rerun == 0 {
        format!("seed-{seed}")
    } else {
        format!("seed-{seed}-rerun-{rerun}")
    };
    options.dir.join(stem).join(name)
}

/// Runs `f` over `items` on `jobs` threads; results in item order.
fn parallel<T: Sync, R: Send>(items: &[T], jobs: usize, f: &(dyn Fn(&T) -> R + Sync)) -> Vec<R> {
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let worker = || {
        loop {
            let k = next.fetch_add(1, Ordering::SeqCst);
            let Some(item) = items.get(k) else { break };
            *slots[k].lock().unwrap() = Some(f(item));
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(worker);
        }
    });
    slots
        .into_iter()
        .map(|s| s.into_inner().unwrap().expect("every item ran"))
        .collect()
}

/// The plan run in simulation with the `letta-code` client profile: which of the judged
/// invariants the model breaks.
pub fn model_run(scenario: &Scenario, seed: u64, plan: &[Fault]) -> Result<ModelRun, InputError> {
    let mut s = plan::with_plan(scenario, plan);
    s.scenario.client_profile = Spanned::new(0..0, "letta-code".to_string());
    let report = run_scenario(&s, seed, 1)?;
    let failed: Vec<String> = report
        .invariants
        .iter()
        .filter(|(id, v)| !v.is_empty() && judge::CHECKED.contains(id))
        .map(|(id, _)| id.to_string())
        .collect();
    let message = report
        .invariants
        .iter()
        .find(|(_, v)| !v.is_empty())
        .and_then(|(_, v)| v.first())
        .map(|v| v.message.clone())
        .unwrap_or_default();
    let outcome = model_outcome(&report.turn_outcomes);
    Ok(ModelRun {
        outcome,
        failed,
        verdict: match &report.verdict {
            Verdict::Pass => "pass".into(),
            other => other
                .failure_kind()
                .map(|k| k.as_str().to_string())
                .unwrap_or_default(),
        },
        outcomes: report.turn_outcomes.clone(),
        message,
        profile: "letta-code".into(),
    })
}

/// The model's turn outcome in the client's terms: `success` when every turn stopped at
/// `end_turn`, `interrupted`, `error` for a turn that ended otherwise, `none` when no turn ended.
fn model_outcome(outcomes: &[String]) -> String {
    if outcomes.is_empty() {
        "none".into()
    } else if outcomes.iter().all(|o| o == "stopped: end_turn") {
        "success".into()
    } else if outcomes.iter().any(|o| o.starts_with("interrupted")) {
        "interrupted".into()
    } else {
        "error".into()
    }
}

/// Runs the sweep: every scenario over every seed of `options.seeds`. `progress(done, total,
/// what)` is called after every run.
pub fn explore(
    scenarios: &[Scenario],
    options: &RealClientOptions,
    progress: &(dyn Fn(u64, u64, &str) + Sync),
) -> Result<RealReport, InputError> {
    if scenarios.iter().any(Scenario::is_agent_loop) {
        return agent_loop::explore(scenarios, options, progress);
    }
    let work: Vec<(usize, u64)> = (0..scenarios.len())
        .flat_map(|i| options.seeds.clone().map(move |s| (i, s)))
        .collect();
    explore_work(scenarios, &work, options, progress)
}

/// Runs the sweep over the given (scenario index, seed) pairs; the report's seed range is
/// `options.seeds`, which should cover them.
pub fn explore_work(
    scenarios: &[Scenario],
    work: &[(usize, u64)],
    options: &RealClientOptions,
    progress: &(dyn Fn(u64, u64, &str) + Sync),
) -> Result<RealReport, InputError> {
    let planners: Vec<Planner> = scenarios
        .iter()
        .map(Planner::new)
        .collect::<Result<_, _>>()?;
    let system = System {
        plan: &|i, seed| planners[i].plan(seed),
        run_once,
        model_run,
        outcome: judge::outcome,
        name_in_progress: false,
        model: "letta-code",
    };
    sweep(scenarios, work, options, &system, progress)
}

/// Runs one seed of the real client: the plan served, the command launched, the run judged.
pub(crate) type RunOnce =
    fn(&Scenario, u64, &[Fault], &RealClientOptions, &Path) -> Result<RealRun, InputError>;

/// What a sweep of one system does with a seed; [`sweep`] is the loop both systems share.
pub(crate) struct System<'a> {
    /// The plan of scenario `i` at a seed.
    pub plan: &'a (dyn Fn(usize, u64) -> Vec<Fault> + Sync),
    pub run_once: RunOnce,
    /// The same plan in simulation.
    pub model_run: fn(&Scenario, u64, &[Fault]) -> Result<ModelRun, InputError>,
    /// How the client said its turn went.
    pub outcome: fn(&launch::CliRun) -> String,
    /// Name the scenario in each progress line.
    pub name_in_progress: bool,
    /// The model the report compares with.
    pub model: &'static str,
}

/// The sweep: every (scenario, seed) of `work` run and judged, the model run on its plan,
/// passing runs' directories removed unless kept, every failing seed rerun
/// `options.reruns` times, and the report.
pub(crate) fn sweep(
    scenarios: &[Scenario],
    work: &[(usize, u64)],
    options: &RealClientOptions,
    system: &System<'_>,
    progress: &(dyn Fn(u64, u64, &str) + Sync),
) -> Result<RealReport, InputError> {
    let done = AtomicUsize::new(0);
    let total = work.len() as u64;
    let runs = parallel(work, options.jobs, &|&(i, seed)| {
        let s = &scenarios[i];
        let plan = (system.plan)(i, seed);
        let r = (system.run_once)(s, seed, &plan, options, &run_dir(options, s, seed, 0))
            .and_then(|r| Ok(((system.model_run)(s, seed, &plan)?, r)));
        if let Ok((m, r)) = &r {
            let d = done.fetch_add(1, Ordering::SeqCst) as u64 + 1;
            let name = if system.name_in_progress {
                format!("{} ", s.path.display())
            } else {
                String::new()
            };
            progress(
                d,
                total,
                &format!(
                    "{name}seed {seed}: {} ({}; the model: {}) in {:.1} s",
                    if r.failed().is_empty() {
                        "pass".to_string()
                    } else {
                        format!("FAIL {}", r.failed().join(","))
                    },
                    (system.outcome)(&r.cli),
                    m.outcome,
                    r.cli.elapsed_ms as f64 / 1000.0
                ),
            );
        }
        r
    });
    let (models, runs): (Vec<ModelRun>, Vec<RealRun>) = runs
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .unzip();
    for r in runs
        .iter()
        .filter(|r| r.failed().is_empty() && !options.keep)
    {
        let _ = std::fs::remove_dir_all(&r.dir);
    }
    // Flakiness: every failing seed again, `reruns` times.
    let failing: Vec<(&RealRun, &ModelRun)> = runs
        .iter()
        .zip(&models)
        .filter(|(r, _)| !r.failed().is_empty())
        .collect();
    let reruns: Vec<(usize, u32)> = (0..failing.len())
        .flat_map(|k| (1..=options.reruns).map(move |n| (k, n)))
        .collect();
    let index = |r: &RealRun| {
        scenarios
            .iter()
            .position(|s| s.path.display().to_string() == r.scenario)
            .expect("a swept scenario")
    };
    let again = parallel(&reruns, options.jobs, &|&(k, n)| {
        let (r, _) = failing[k];
        let s = &scenarios[index(r)];
        let out = (system.run_once)(s, r.seed, &r.plan, options, &run_dir(options, s, r.seed, n));
        if let Ok(x) = &out
            && x.failed().is_empty()
            && !options.keep
        {
            let _ = std::fs::remove_dir_all(&x.dir);
        }
        out.map(|x| x.failed())
    });
    let again: Vec<Vec<String>> = again.into_iter().collect::<Result<_, _>>()?;
    let mut failures = Vec::new();
    for (k, (r, model)) in failing.iter().enumerate() {
        let mine: Vec<Vec<String>> = reruns
            .iter()
            .zip(&again)
            .filter(|((j, _), _)| *j == k)
            .map(|(_, f)| f.clone())
            .collect();
        failures.push(RealFailure::new(r, options, &mine, (*model).clone()));
    }
    Ok(RealReport {
        format: 1,
        command: options.command.clone(),
        scenarios: scenarios
            .iter()
            .map(|s| s.path.display().to_string())
            .collect(),
        seeds: [options.seeds.start, options.seeds.end],
        jobs: options.jobs,
        run_timeout_ms: options.run_timeout_ms,
        reruns: options.reruns,
        tolerance_ms: judge::TOLERANCE_MS,
        runs: runs
            .iter()
            .zip(&models)
            .map(|(r, m)| RunSummary {
                outcome: (system.outcome)(&r.cli),
                ..RunSummary::of(r, m)
            })
            .collect(),
        failures,
        model: system.model.into(),
    })
}
