//! `sim run`: one scenario, one seed, run twice; invariants checked; a report and an exit code.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use super::invariants::{self, DETERMINISTIC, TOOL_CALL_RESOLVED, TURN_TERMINATES, Violation};
use super::letta::world::{RunOutput, run_once};
use super::scenario::{InputError, Scenario};
use super::trace::{first_divergence, hash_text, render_events};
use crate::model::port::observe::Observation;

/// Exit codes of `sim` (docs/exit-codes.md).
pub mod exit {
    pub const PASS: i32 = 0;
    /// Bad command line or bad input file.
    pub const USAGE: i32 = 2;
    /// A panic in the harness or a model, caught.
    pub const CRASH: i32 = 127;
    /// Something did not finish within its simulated-time budget.
    pub const LIVENESS: i32 = 128;
    /// An invariant was violated.
    pub const CORRECTNESS: i32 = 129;
}

/// The overall result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Correctness,
    Liveness(String),
    Crash(String),
}

impl Verdict {
    pub fn exit_code(&self) -> i32 {
        match self {
            Verdict::Pass => exit::PASS,
            Verdict::Correctness => exit::CORRECTNESS,
            Verdict::Liveness(_) => exit::LIVENESS,
            Verdict::Crash(_) => exit::CRASH,
        }
    }
}

/// What `sim run` reports.
#[derive(Debug)]
pub struct RunReport {
    pub scenario_name: String,
    pub scenario_path: String,
    /// Flags the reproduce command needs besides the seed (e.g. ` --swarm`).
    pub repro_flags: String,
    pub seed: u64,
    pub faults: Vec<String>,
    pub turn_outcomes: Vec<String>,
    pub trace_text: String,
    pub trace_hash: String,
    pub events: usize,
    pub end_ms: u64,
    pub runs: u32,
    /// (invariant id, violations); an empty list is a pass.
    pub invariants: Vec<(&'static str, Vec<Violation>)>,
    pub pending: Vec<(String, String)>,
    /// client-model: invariants the scenario expects this profile to violate, with the
    /// finding that explains it: (invariant, finding, whether it did fail).
    pub expected: Vec<(&'static str, String, bool)>,
    /// client-model: the client's requests (the conformance log).
    pub requests: Vec<crate::model::letta::client::backend::RequestRecord>,
    /// Coverage goals this run reached (`harness::coverage`).
    pub goals: Vec<&'static str>,
    pub verdict: Verdict,
}

thread_local! {
    /// Panic messages caught on this thread while a run is in progress. turmoil runs every host
    /// on the calling thread, so a panic in any model task lands here even when tokio swallows
    /// it in a spawned task's JoinHandle.
    static PANICS: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

fn install_panic_recorder() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let recorded = PANICS.with(|p| {
                if let Some(list) = p.borrow_mut().as_mut() {
                    let loc = info
                        .location()
                        .map(|l| format!(" at {}:{}", l.file(), l.line()))
                        .unwrap_or_default();
                    let msg = info
                        .payload()
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| info.payload().downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "panic".into());
                    list.push(format!("{msg}{loc}"));
                    true
                } else {
                    false
                }
            });
            if !recorded {
                default(info);
            }
        }));
    });
}

/// Runs the scenario once, turning panics anywhere in the world into `Err(message)`.
fn run_guarded(scenario: &Scenario, seed: u64) -> Result<Result<RunOutput, String>, InputError> {
    guarded(|| run_once(scenario, seed))
}

/// Runs one world (`run`), turning panics anywhere in it into `Err(message)`.
pub(crate) fn guarded<T>(
    run: impl FnOnce() -> Result<T, InputError>,
) -> Result<Result<T, String>, InputError> {
    install_panic_recorder();
    PANICS.with(|p| *p.borrow_mut() = Some(Vec::new()));
    let result = catch_unwind(AssertUnwindSafe(run));
    let panics = PANICS.with(|p| p.borrow_mut().take()).unwrap_or_default();
    match result {
        Ok(Ok(out)) if panics.is_empty() => Ok(Ok(out)),
        Ok(Ok(_)) => Ok(Err(panics.join("; "))),
        Ok(Err(input)) => Err(input),
        Err(_) => Ok(Err(if panics.is_empty() {
            "panic".into()
        } else {
            panics.join("; ")
        })),
    }
}

/// Runs `scenario` with `seed` `runs` times (at least 1; 2 checks `deterministic`).
pub fn run_scenario(scenario: &Scenario, seed: u64, runs: u32) -> Result<RunReport, InputError> {
    if scenario.is_agent_loop() {
        // The agent-loop world has its own hosts, oracles and diagnosis (`loop_run`).
        return super::kimi::run::run_scenario(scenario, seed, runs);
    }
    let runs = runs.max(1);
    let faults = scenario
        .faults
        .iter()
        .map(|f| f.get_ref().to_string())
        .collect();
    let base = RunReport {
        scenario_name: scenario.scenario.name.clone(),
        scenario_path: scenario.path.display().to_string(),
        repro_flags: scenario.repro_flags.clone(),
        seed,
        faults,
        turn_outcomes: Vec::new(),
        trace_text: String::new(),
        trace_hash: String::new(),
        events: 0,
        end_ms: 0,
        runs,
        invariants: Vec::new(),
        pending: Vec::new(),
        expected: Vec::new(),
        requests: Vec::new(),
        goals: Vec::new(),
        verdict: Verdict::Pass,
    };
    let first = match run_guarded(scenario, seed)? {
        Ok(out) => out,
        Err(panic) => {
            return Ok(RunReport {
                verdict: Verdict::Crash(panic),
                ..base
            });
        }
    };
    let text = render_events(&first.trace);
    let mut report = RunReport {
        turn_outcomes: first
            .outcomes
            .as_ref()
            .map(|o| o.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
        trace_hash: hash_text(&text),
        events: first.trace.len(),
        end_ms: first.end_ms,
        pending: invariants::pending_tool_calls(&first.trace),
        goals: super::coverage::reached(&first.trace),
        trace_text: text,
        requests: first.requests.clone(),
        ..base
    };

    report.invariants.push((
        TOOL_CALL_RESOLVED,
        invariants::tool_call_resolved(&first.trace),
    ));
    // Server invariants (issue 3).
    report.invariants.push((
        invariants::ONE_RUN_PER_REQUEST,
        invariants::one_run_per_request(&first.trace),
    ));
    report.invariants.push((
        invariants::HISTORY_VALID,
        invariants::history_valid(&first.trace),
    ));
    if scenario.faults.iter().any(
        |f| matches!(f.get_ref(), super::scenario::Fault::Crash { host, .. } if host == "server"),
    ) {
        report.invariants.push((
            invariants::DURABLE_ACK,
            invariants::durable_ack(&first.trace),
        ));
    }
    // client-model: the client invariants, on every run.
    for (id, check) in invariants::client_invariants() {
        report.invariants.push((id, check(&first.trace)));
    }

    let mut det = Vec::new();
    for _ in 1..runs {
        match run_guarded(scenario, seed)? {
            Ok(again) => {
                if let Some(v) = divergence(&report.trace_text, &render_events(&again.trace)) {
                    det.push(v);
                    break;
                }
            }
            Err(panic) => {
                report.verdict = Verdict::Crash(format!("on a repeat run: {panic}"));
                return Ok(report);
            }
        }
    }
    if runs > 1 {
        report.invariants.push((DETERMINISTIC, det));
    }

    let liveness = first
        .outcomes
        .is_none()
        .then(|| liveness_diagnosis(&first, scenario));
    report.invariants.push((
        TURN_TERMINATES,
        liveness
            .iter()
            .map(|d| Violation {
                invariant: TURN_TERMINATES,
                event: None,
                message: d.clone(),
            })
            .collect(),
    ));
    // client-model: expected failures of this profile (docs/findings.md) are reported, not
    // counted; an expected failure that does not happen is itself a failure (the finding no
    // longer reproduces).
    let profile = scenario.scenario.client_profile.get_ref();
    let mode = scenario.client.mode.get_ref();
    let server = scenario.server.profile.get_ref();
    let mut unexpected_pass = false;
    for e in &scenario.expect {
        let e = e.get_ref();
        if !e.applies(profile, mode, server) {
            continue;
        }
        if let Some((id, violations)) = report
            .invariants
            .iter()
            .find(|(id, _)| *id == e.invariant.as_str())
        {
            let failed = !violations.is_empty();
            if e.sometimes {
                // Seed-dependent: expected only where the trace shows this finding.
                if failed && super::letta::findings::shows(&e.finding, &first.trace) {
                    report.expected.push((id, e.finding.clone(), true));
                }
                continue;
            }
            unexpected_pass |= !failed;
            report.expected.push((id, e.finding.clone(), failed));
        }
    }
    let is_expected = |id: &str| report.expected.iter().any(|(x, _, _)| *x == id);
    report.verdict = if unexpected_pass
        || report
            .invariants
            .iter()
            .any(|(id, v)| *id != TURN_TERMINATES && !v.is_empty() && !is_expected(id))
    {
        Verdict::Correctness
    } else if let Some(d) = liveness {
        Verdict::Liveness(d)
    } else {
        Verdict::Pass
    };
    Ok(report)
}

fn liveness_diagnosis(out: &RunOutput, scenario: &Scenario) -> String {
    let last_client = out.trace.iter().rev().find(|e| e.host == "client");
    let turn = out
        .trace
        .iter()
        .rev()
        .find_map(|e| match &e.obs {
            Observation::TurnStart { turn, .. } => Some(*turn),
            _ => None,
        })
        .unwrap_or(0);
    let waiting = match last_client.map(|e| &e.obs) {
        Some(Observation::ClientSend { path, .. }) => {
            format!("waiting for the response to POST {path}")
        }
        Some(Observation::ClientResponse { .. }) | Some(Observation::ClientChunk { .. }) => {
            let last = out.trace.iter().rev().find_map(|e| match &e.obs {
                Observation::ClientChunk { run_id, seq_id, .. } => Some(format!(
                    "run {} after seq {}",
                    run_id.as_deref().unwrap_or("?"),
                    seq_id.map_or("-".to_string(), |s| s.to_string())
                )),
                _ => None,
            });
            format!(
                "reading a stream ({})",
                last.unwrap_or_else(|| "no chunk yet".into())
            )
        }
        Some(_) | None => "between requests".into(),
    };
    let pending = invariants::pending_tool_calls(&out.trace);
    let pending = if pending.is_empty() {
        String::new()
    } else {
        format!(
            "; tool calls awaiting approval: {}",
            pending
                .iter()
                .map(|(_, id)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "turn {turn} stuck {waiting}{pending}; the world healed at {} ms and the run stopped at {} ms ({}); last client event: {}",
        scenario.limits.heal_at_ms,
        out.end_ms,
        out.stopped.as_deref().unwrap_or("stopped"),
        last_client
            .map(|e| e.render().trim().to_string())
            .unwrap_or_else(|| "none".into())
    )
}

impl RunReport {
    /// The one command that reproduces this run.
    pub fn repro_command(&self) -> String {
        format!(
            "cargo run --release -p sim -- run {} --seed {}{}",
            self.scenario_path, self.seed, self.repro_flags
        )
    }

    /// The human-readable report `sim run` prints.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "scenario  {} ({})",
            self.scenario_name, self.scenario_path
        );
        let _ = writeln!(s, "seed      {}", self.seed);
        let _ = writeln!(
            s,
            "faults    {}",
            if self.faults.is_empty() {
                "none".to_string()
            } else {
                self.faults.join("; ")
            }
        );
        for (i, o) in self.turn_outcomes.iter().enumerate() {
            let _ = writeln!(s, "turn {}    {o}", i + 1);
        }
        if !self.pending.is_empty() {
            let list: Vec<String> = self
                .pending
                .iter()
                .map(|(c, id)| format!("{id} ({c})"))
                .collect();
            let _ = writeln!(
                s,
                "pending   tool calls awaiting approval at the end: {}",
                list.join(", ")
            );
        }
        let _ = writeln!(
            s,
            "trace     {} events, {} ms simulated, hash {}",
            self.events, self.end_ms, self.trace_hash
        );
        let _ = writeln!(s, "invariants");
        let trace_lines: Vec<&str> = self.trace_text.lines().collect();
        for (id, violations) in &self.invariants {
            // client-model: expected failures.
            if let Some((_, finding, failed)) = self.expected.iter().find(|(x, _, _)| x == id) {
                if *failed {
                    let _ = writeln!(
                        s,
                        "  {id:<22} XFAIL (expected for this profile: docs/findings.md#{finding})"
                    );
                    if let Some(v) = violations.first() {
                        let _ = writeln!(s, "    {}", v.message);
                    }
                } else {
                    let _ = writeln!(
                        s,
                        "  {id:<22} XPASS (expected to fail, docs/findings.md#{finding}, but held)"
                    );
                }
                continue;
            }
            if violations.is_empty() {
                let note = if *id == DETERMINISTIC {
                    format!(" ({} runs, identical traces)", self.runs)
                } else {
                    String::new()
                };
                let _ = writeln!(s, "  {id:<22} pass{note}");
            } else {
                let _ = writeln!(s, "  {id:<22} FAIL");
                for v in violations {
                    let _ = writeln!(s, "    {}", v.message);
                    if let Some(i) = v.event
                        && *id != DETERMINISTIC
                        && let Some(line) = trace_lines.get(i)
                    {
                        let _ = writeln!(s, "    at event {}: {}", i + 1, line.trim());
                    }
                }
            }
        }
        match &self.verdict {
            Verdict::Pass => {
                let _ = writeln!(s, "verdict   PASS");
            }
            Verdict::Correctness => {
                let _ = writeln!(s, "verdict   FAIL (correctness)");
            }
            Verdict::Liveness(_) => {
                let _ = writeln!(s, "verdict   FAIL (liveness)");
            }
            Verdict::Crash(p) => {
                let _ = writeln!(s, "verdict   CRASH: {p}");
            }
        }
        if self.verdict != Verdict::Pass {
            let _ = writeln!(s, "reproduce {}", self.repro_command());
        }
        s
    }
}

/// `deterministic`'s violation when a repeat run's trace differs from the first: the first
/// divergent line and its simulated time.
pub(crate) fn divergence(first: &str, again: &str) -> Option<Violation> {
    let (line, left, right) = first_divergence(first, again)?;
    let t = left
        .split_whitespace()
        .next()
        .or_else(|| right.split_whitespace().next())
        .unwrap_or("?");
    Some(Violation {
        invariant: DETERMINISTIC,
        event: Some(line - 1),
        message: format!(
            "the same seed gave a different trace; first divergence at line {line}, simulated time {t} ms:\n    run 1: {left}\n    run 2: {right}"
        ),
    })
}
