//! The report of a real-client sweep: a line per seed, and for each failing seed what a
//! simulated run's failure shows (seed, plan, invariant, the request log around the breaking
//! request, the client's last output, the command that reruns it) plus how often it failed
//! again and whether the model fails the same way. The JSON form is `--out`'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::judge::{CLI_RESULT, Finding};
use super::{RealClientOptions, RealRun};
use crate::harness::invariants::TURN_TERMINATES;
use crate::harness::report::{FailureKind, exit_code_of};
use crate::harness::trace::{TraceEvent, render_events};

/// One seed's line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    pub scenario: String,
    pub seed: u64,
    pub plan: Vec<String>,
    /// Invariants broken (empty: the seed passed).
    pub failed: Vec<String>,
    /// How the client said its turn went ([`super::judge::outcome`]).
    pub outcome: String,
    /// The model's outcome on the same plan (`letta-code` profile, simulation).
    pub model_outcome: String,
    /// The judged invariants the model broke on the same plan.
    pub model_failed: Vec<String>,
    pub exit_code: Option<i32>,
    pub killed: bool,
    pub elapsed_ms: u64,
    pub requests: usize,
}

impl RunSummary {
    pub fn of(r: &RealRun, model: &ModelRun) -> RunSummary {
        RunSummary {
            scenario: r.scenario.clone(),
            seed: r.seed,
            plan: r.plan.iter().map(ToString::to_string).collect(),
            failed: r.failed(),
            outcome: super::judge::outcome(&r.cli),
            model_outcome: model.outcome.clone(),
            model_failed: model.failed.clone(),
            exit_code: r.cli.code,
            killed: r.cli.killed,
            elapsed_ms: r.cli.elapsed_ms,
            requests: r.requests.len(),
        }
    }
}

/// The same plan in simulation, `letta-code` profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRun {
    /// The turn's outcome in the client's terms (`success`, `error`, `interrupted`, `none`).
    pub outcome: String,
    /// The judged invariants the model broke.
    pub failed: Vec<String>,
    /// `pass`, `correctness`, `liveness` or `crash`.
    pub verdict: String,
    pub outcomes: Vec<String>,
    /// The model's first violation.
    pub message: String,
    /// What ran the plan in simulation: the `letta-code` client profile, or the agent-loop
    /// model.
    #[serde(default)]
    pub profile: String,
}

/// One failing seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealFailure {
    pub scenario: String,
    pub seed: u64,
    pub plan: Vec<String>,
    pub invariants: Vec<String>,
    pub findings: Vec<Finding>,
    /// The request log around the first breaking request (`#n  t ms  METHOD path -> status`).
    pub requests: Vec<String>,
    pub last_stdout: Vec<String>,
    pub last_stderr: Vec<String>,
    pub exit_code: Option<i32>,
    /// The command that reruns this seed against the real client.
    pub rerun: String,
    /// Reruns, and how many of them broke one of the same invariants.
    pub reruns: u32,
    pub failed_again: u32,
    pub model: ModelRun,
    /// The model broke exactly the invariants the real client broke (`cli-result` counted as
    /// `turn-terminates`, the model's only notion of a turn without an outcome).
    pub model_agrees: bool,
    /// The run's directory: HOME, work dir, requests.jsonl, trace.txt, stdout.txt, stderr.txt.
    pub dir: String,
}

/// Quotes `s` for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The invariants as the model can break them.
fn as_model(invariants: &[String]) -> Vec<String> {
    let mut out: Vec<String> = invariants
        .iter()
        .map(|i| {
            if i == CLI_RESULT {
                TURN_TERMINATES.to_string()
            } else {
                i.clone()
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

impl RealFailure {
    pub fn new(
        r: &RealRun,
        options: &RealClientOptions,
        reruns: &[Vec<String>],
        model: ModelRun,
    ) -> RealFailure {
        let invariants = r.failed();
        let findings: Vec<Finding> = r
            .verdicts
            .iter()
            .flat_map(|(_, f)| f.iter().cloned())
            .collect();
        // The request log around the first breaking request.
        let at = findings
            .iter()
            .find_map(|f| f.t_ms)
            .and_then(|t| r.requests.iter().position(|q| q.t_ms >= t))
            .unwrap_or(r.requests.len().saturating_sub(1));
        let from = at.saturating_sub(5);
        let to = (at + 4).min(r.requests.len());
        let requests = r.requests[from..to].iter().map(|q| q.line()).collect();
        let (last_stdout, last_stderr) = r.cli.tail(12);
        let failed_again = reruns
            .iter()
            .filter(|f| f.iter().any(|i| invariants.contains(i)))
            .count() as u32;
        let mut model_failed = model.failed.clone();
        model_failed.sort();
        RealFailure {
            scenario: r.scenario.clone(),
            seed: r.seed,
            plan: r.plan.iter().map(ToString::to_string).collect(),
            model_agrees: as_model(&invariants) == model_failed,
            invariants,
            findings,
            requests,
            last_stdout,
            last_stderr,
            exit_code: r.cli.code,
            rerun: format!(
                "cargo run --release -p sim -- explore {} --real-client {} --seeds {}..{} --run-timeout-ms {}",
                r.scenario,
                sh_quote(&options.command),
                r.seed,
                r.seed + 1,
                options.run_timeout_ms
            ),
            reruns: reruns.len() as u32,
            failed_again,
            model,
            dir: r.dir.display().to_string(),
        }
    }
}

/// A sweep's results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealReport {
    pub format: u32,
    pub command: String,
    pub scenarios: Vec<String>,
    pub seeds: [u64; 2],
    pub jobs: usize,
    pub run_timeout_ms: u64,
    pub reruns: u32,
    pub tolerance_ms: u64,
    pub runs: Vec<RunSummary>,
    pub failures: Vec<RealFailure>,
    /// What the real client is compared with in simulation (`letta-code`, the agent-loop
    /// model).
    #[serde(default)]
    pub model: String,
}

impl RealReport {
    /// 0 when every seed passed; 128 when every failure was `turn-terminates` alone; 129
    /// otherwise (docs/exit-codes.md).
    pub fn exit_code(&self) -> i32 {
        exit_code_of(self.failures.iter().map(|f| {
            if f.invariants.iter().all(|i| i == TURN_TERMINATES) {
                FailureKind::Liveness
            } else {
                FailureKind::Correctness
            }
        }))
    }

    /// Failing seeds per invariant.
    pub fn by_invariant(&self) -> BTreeMap<&str, Vec<u64>> {
        let mut m: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for f in &self.failures {
            for i in &f.invariants {
                m.entry(i.as_str()).or_default().push(f.seed);
            }
        }
        m
    }

    /// The human-readable report.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "real client  {}\nscenarios    {}\nseeds        {}..{} ({} runs, {} job(s), budget {} ms per run, tolerance {} ms)",
            self.command,
            self.scenarios.join(" "),
            self.seeds[0],
            self.seeds[1],
            self.runs.len(),
            self.jobs,
            self.run_timeout_ms,
            self.tolerance_ms
        );
        for r in &self.runs {
            let verdict = if r.failed.is_empty() {
                "pass".to_string()
            } else {
                format!("FAIL {}", r.failed.join(","))
            };
            let model = if r.model_outcome == r.outcome {
                String::new()
            } else {
                format!(" (model: {})", r.model_outcome)
            };
            // With several scenarios, each line names its own.
            let name = if self.scenarios.len() > 1 {
                let stem = std::path::Path::new(&r.scenario)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!("{stem} ")
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "  {name}seed {:<5} {:<40} outcome={}{model} exit={} {:.1} s, {} requests; plan: {}",
                r.seed,
                verdict,
                r.outcome,
                match (r.killed, r.exit_code) {
                    (true, _) => "killed".to_string(),
                    (false, Some(c)) => c.to_string(),
                    (false, None) => "signal".to_string(),
                },
                r.elapsed_ms as f64 / 1000.0,
                r.requests,
                if r.plan.is_empty() {
                    "none".to_string()
                } else {
                    r.plan.join("; ")
                }
            );
        }
        for f in &self.failures {
            let _ = writeln!(s, "\nFAIL seed {} {}", f.seed, f.scenario);
            let _ = writeln!(s, "  plan       {}", f.plan.join("; "));
            for x in &f.findings {
                let at = x.t_ms.map(|t| format!(" (at {t} ms)")).unwrap_or_default();
                let _ = writeln!(s, "  {:<22} {}{at}", x.invariant, x.message);
            }
            let _ = writeln!(s, "  requests around the breaking one:");
            for l in &f.requests {
                let _ = writeln!(s, "    {}", clip(l, 300));
            }
            let _ = writeln!(s, "  client stdout (last lines):");
            for l in &f.last_stdout {
                let _ = writeln!(s, "    {}", clip(l, 300));
            }
            if !f.last_stderr.is_empty() {
                let _ = writeln!(s, "  client stderr (last lines):");
                for l in &f.last_stderr {
                    let _ = writeln!(s, "    {}", clip(l, 300));
                }
            }
            let _ = writeln!(
                s,
                "  flakiness  failed again in {}/{} reruns (real time: reruns are not byte-identical)",
                f.failed_again, f.reruns
            );
            let _ = writeln!(
                s,
                "  model      {} in simulation: {} [{}] -> {}",
                f.model.profile,
                f.model.verdict,
                f.model.failed.join(","),
                if f.model_agrees {
                    "agrees"
                } else {
                    "DISAGREES"
                }
            );
            let _ = writeln!(s, "  files      {}", f.dir);
            let _ = writeln!(s, "  rerun      {}", f.rerun);
        }
        let passed = self.runs.iter().filter(|r| r.failed.is_empty()).count();
        let _ = writeln!(
            s,
            "\nruns {}  passed {passed}  failed {}",
            self.runs.len(),
            self.failures.len()
        );
        let differ: Vec<u64> = self
            .runs
            .iter()
            .filter(|r| r.outcome != r.model_outcome)
            .map(|r| r.seed)
            .collect();
        let _ = writeln!(
            s,
            "  outcome as the model's ({}, simulation): {}/{}{}",
            self.model,
            self.runs.len() - differ.len(),
            self.runs.len(),
            if differ.is_empty() {
                String::new()
            } else {
                format!("; differs on seeds {differ:?}")
            }
        );
        let model_only: Vec<String> = self
            .runs
            .iter()
            .filter(|r| r.failed.is_empty() && !r.model_failed.is_empty())
            .map(|r| format!("{} [{}]", r.seed, r.model_failed.join(",")))
            .collect();
        if !model_only.is_empty() {
            let _ = writeln!(
                s,
                "  the model fails where the real client passed: {}",
                model_only.join(", ")
            );
        }
        for (inv, seeds) in self.by_invariant() {
            let agree = self
                .failures
                .iter()
                .filter(|f| f.invariants.iter().any(|i| i == inv) && f.model_agrees)
                .count();
            let _ = writeln!(
                s,
                "  {inv}: {} seed(s) {:?}, the model agrees on {agree}",
                seeds.len(),
                seeds
            );
        }
        s
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// Writes a run's evidence into its directory: `requests.jsonl`, `trace.txt`, `stdout.txt`,
/// `stderr.txt`, `verdict.json`. Best effort: a run is judged whether or not they can be kept.
pub fn write_run_files(run: &RealRun, trace: &[TraceEvent]) {
    let dir = &run.dir;
    let requests: String = run
        .requests
        .iter()
        .map(|r| serde_json::to_string(r).unwrap_or_default() + "\n")
        .collect();
    let stdout: String = run
        .cli
        .stdout
        .iter()
        .map(|(t, l)| format!("{t:>8} {l}\n"))
        .collect();
    let verdict = serde_json::json!({
        "seed": run.seed,
        "plan": run.plan.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "failed": run.failed(),
        "findings": run.verdicts.iter().flat_map(|(_, f)| f.iter().cloned()).collect::<Vec<_>>(),
        "exit_code": run.cli.code,
        "killed": run.cli.killed,
        "elapsed_ms": run.cli.elapsed_ms,
    });
    let _ = std::fs::write(dir.join("requests.jsonl"), requests);
    let _ = std::fs::write(dir.join("trace.txt"), render_events(trace));
    let _ = std::fs::write(dir.join("stdout.txt"), stdout);
    let _ = std::fs::write(dir.join("stderr.txt"), &run.cli.stderr);
    let _ = std::fs::write(
        dir.join("verdict.json"),
        serde_json::to_string_pretty(&verdict).unwrap_or_default(),
    );
}
