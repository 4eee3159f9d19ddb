//! `sim run`: one scenario, one seed, run `runs` times; invariants checked; a report and its
//! verdict. The flow is the same for every system; what is particular to one (its world, its
//! invariants, its liveness diagnosis, its expectations) it gets through [`System`].

use super::coverage;
use super::declared::ends_as_declared;
use super::guard::guarded;
use super::invariants::{DETERMINISTIC, ENDS_AS_DECLARED, TURN_TERMINATES, Violation};
use super::report::{RunReport, Verdict};
use super::scenario::{InputError, Scenario};
use super::system::System;
use super::trace::{first_divergence, hash_text, render_events};
use super::world::WorldRun;

/// Runs `scenario` with `seed` `runs` times (at least 1; 2 or more checks `deterministic`).
pub fn run_scenario(scenario: &Scenario, seed: u64, runs: u32) -> Result<RunReport, InputError> {
    run_scenario_with(scenario, seed, runs, false)
}

/// [`run_scenario`], and with `guided` the run's guidance for a guided sweep
/// (`harness::guided`).
pub fn run_scenario_with(
    scenario: &Scenario,
    seed: u64,
    runs: u32,
    guided: bool,
) -> Result<RunReport, InputError> {
    let system = scenario.system();
    let runs = runs.max(1);
    let base = empty_report(scenario, seed, runs);
    let first = match guarded(|| system.run_world(scenario, seed))? {
        Ok(run) => run,
        Err(panic) => {
            return Ok(RunReport {
                verdict: Verdict::Crash(panic),
                ..base
            });
        }
    };
    let text = render_events(&first.trace);
    let goals = coverage::reached(system.goals(), &first.trace);
    let mut report = RunReport {
        guidance: guided.then(|| super::guidance::guidance(&goals, &first.trace)),
        turn_outcomes: first.outcomes.clone().unwrap_or_default(),
        trace_hash: hash_text(&text),
        events: first.trace.len(),
        end_ms: first.end_ms,
        pending: first.pending.clone(),
        goals,
        trace_text: text,
        requests: first.requests.clone(),
        invariants: system.invariants(scenario, &first.trace),
        ..base
    };

    if let Some(checked) = ends_as_declared(scenario, first.outcomes.as_deref(), &first.trace) {
        report.invariants.push((ENDS_AS_DECLARED, checked));
    }

    match guarded(|| system.twin_invariants(scenario, seed, &first))? {
        Ok(twin) => report.invariants.extend(twin),
        Err(panic) => {
            report.verdict = Verdict::Crash(format!("on the fault-free twin run: {panic}"));
            return Ok(report);
        }
    }

    if runs > 1 {
        match repeat_runs(scenario, seed, runs, system, &report.trace_text)? {
            Ok(det) => report.invariants.push((DETERMINISTIC, det)),
            Err(panic) => {
                report.verdict = Verdict::Crash(format!("on a repeat run: {panic}"));
                return Ok(report);
            }
        }
    }

    let liveness = first
        .outcomes
        .is_none()
        .then(|| system.liveness_diagnosis(&first, scenario));
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
    let expectations = system.expectations(scenario, &report.invariants, &first.trace);
    report.expected = expectations.expected;
    report.verdict = verdict(&report, expectations.unexpected_pass, liveness);
    Ok(report)
}

/// The report of a run that has not run yet: the scenario, the seed and the fault plan.
fn empty_report(scenario: &Scenario, seed: u64, runs: u32) -> RunReport {
    RunReport {
        scenario_name: scenario.scenario.name.clone(),
        scenario_path: scenario.path.display().to_string(),
        repro_flags: scenario.repro_flags.clone(),
        seed,
        start: (!scenario.network.start.is_default()).then_some(scenario.network.start),
        faults: scenario
            .faults
            .iter()
            .map(|f| f.get_ref().to_string())
            .collect(),
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
        guidance: None,
        verdict: Verdict::Pass,
    }
}

/// Runs the world `runs - 1` more times and compares each trace with the first one's `text`:
/// `deterministic`'s violations (the first divergence, if any), or the panic of a repeat run.
fn repeat_runs(
    scenario: &Scenario,
    seed: u64,
    runs: u32,
    system: System,
    text: &str,
) -> Result<Result<Vec<Violation>, String>, InputError> {
    for _ in 1..runs {
        let again: WorldRun = match guarded(|| system.run_world(scenario, seed))? {
            Ok(again) => again,
            Err(panic) => return Ok(Err(panic)),
        };
        if let Some(v) = divergence(text, &render_events(&again.trace)) {
            return Ok(Ok(vec![v]));
        }
    }
    Ok(Ok(Vec::new()))
}

/// Correctness when an invariant failed that was not expected to (or one expected to fail
/// held), else liveness when a turn did not terminate and no known finding explains it, else a
/// pass.
fn verdict(report: &RunReport, unexpected_pass: bool, liveness: Option<String>) -> Verdict {
    let is_expected = |id: &str| report.expected.iter().any(|(x, _, _)| *x == id);
    if unexpected_pass
        || report
            .invariants
            .iter()
            .any(|(id, v)| *id != TURN_TERMINATES && !v.is_empty() && !is_expected(id))
    {
        Verdict::Correctness
    } else if let Some(d) = liveness.filter(|_| !is_expected(TURN_TERMINATES)) {
        Verdict::Liveness(d)
    } else {
        Verdict::Pass
    }
}

/// `deterministic`'s violation when a repeat run's trace differs from the first: the first
/// divergent line and its simulated time.
fn divergence(first: &str, again: &str) -> Option<Violation> {
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
