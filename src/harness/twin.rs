//! The fault-free twin of a run, as `recovery-completes` uses it in every system
//! (docs/invariants.md): the same scenario and seed with the plan removed. A run whose faults
//! all heal within the budgets the reference documents must end each turn as its twin does.
//! What heals, and within which budget, is each system's own (`letta::recovery_completes`,
//! `kimi::recovery_completes`); running the twin and the comparison are here.
//!
//! When the scenario as written has no faults of its own, the twin is the scenario as written,
//! so it is also held to the scenario's `[scenario] outcomes` (`ends-as-declared`): a model
//! that ends a fault-free turn wrongly fails the twin comparison's own baseline, which the
//! comparison alone cannot see, and the sweeps (whose runs all carry a plan) meet it here.

use crate::harness::invariants::{ENDS_AS_DECLARED, RECOVERY_COMPLETES, Violation};
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::system::System;
use crate::harness::trace::TraceEvent;
use crate::harness::world::WorldRun;
use crate::model::port::observe::Observation;

/// The invariants that hold `run` (of `scenario` at `seed`) against its fault-free twin, which
/// is run here only when needed: the plan is one the system's `recovery-completes` judges, and
/// some turn ended other than settled (a Letta stop reason, an agent-loop completion).
pub fn twin_invariants(
    system: System,
    scenario: &Scenario,
    seed: u64,
    run: &WorldRun,
) -> Result<Vec<(&'static str, Vec<Violation>)>, InputError> {
    let Some(outcomes) = &run.outcomes else {
        return Ok(Vec::new()); // `turn-terminates` judges a run that did not finish.
    };
    let (judged, settled) = match system {
        System::Letta => (
            crate::harness::letta::recovery_completes::judged(scenario)?,
            "stopped: ",
        ),
        System::Kimi => (
            crate::harness::kimi::recovery_completes::judged(scenario),
            "completed: ",
        ),
    };
    if scenario.faults.is_empty() || !judged || outcomes.iter().all(|o| o.starts_with(settled)) {
        return Ok(vec![(RECOVERY_COMPLETES, Vec::new())]);
    }
    let mut clean = scenario.clone();
    clean.faults.clear();
    let twin = system.run_world(&clean, seed)?;
    let mut declared_check = None;
    if let Some(declared) =
        crate::harness::run::ends_as_declared(&clean, twin.outcomes.as_deref(), None)
    {
        let prefix = format!(
            "the fault-free twin of this run (the scenario as written, seed {seed}, reproduced without the plan): "
        );
        let declared = declared
            .into_iter()
            .map(|v| Violation {
                message: format!("{prefix}{}", v.message),
                ..v
            })
            .collect();
        declared_check = Some((ENDS_AS_DECLARED, declared));
    }
    let uncompared = match system {
        System::Letta => {
            crate::harness::letta::recovery_completes::uncompared(scenario, run, &twin)
        }
        System::Kimi => false,
    };
    // A twin that did not finish holds this run to nothing.
    let compared = match &twin.outcomes {
        Some(expected) if !uncompared => compare(outcomes, expected, &run.trace),
        _ => Vec::new(),
    };
    Ok(std::iter::once((RECOVERY_COMPLETES, compared))
        .chain(declared_check)
        .collect())
}

/// The turns whose outcome differs from the fault-free run's, each pointing at its `turn_end`.
pub fn compare(outcomes: &[String], expected: &[String], trace: &[TraceEvent]) -> Vec<Violation> {
    let ends: Vec<usize> = trace
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.obs, Observation::TurnEnd { .. }))
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    for (n, want) in expected.iter().enumerate() {
        let got = outcomes.get(n);
        if got.is_some_and(|got| same_end(got, want)) {
            continue;
        }
        out.push(Violation {
            invariant: RECOVERY_COMPLETES,
            event: ends.get(n).copied(),
            message: format!(
                "turn {} ended `{}`, but the fault-free run at this seed ends it `{want}`, and every fault of the plan heals within a budget",
                n + 1,
                got.map_or("(not run)", String::as_str),
            ),
        });
    }
    out
}

/// Two turn outcomes end the same way: the same outcome, or both an error (what an error says
/// depends on where the client met it: in-band, or by reading the run after a stall). A Letta
/// turn's error reads `error: …`, an agent-loop turn's `failed: …`.
fn same_end(got: &str, want: &str) -> bool {
    let error = |o: &str| o.starts_with("error: ") || o.starts_with("failed: ");
    got == want || (error(got) && error(want))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_matches_an_error_and_nothing_else() {
        let want = ["stopped: end_turn".to_string(), "error: x".to_string()];
        let same = ["stopped: end_turn".to_string(), "error: y".to_string()];
        assert!(compare(&same, &want, &[]).is_empty());
        let worse = [
            "error: stop_reason=error".to_string(),
            "error: y".to_string(),
        ];
        let v = compare(&worse, &want, &[]);
        assert_eq!(v.len(), 1);
        assert!(
            v[0].message
                .starts_with("turn 1 ended `error: stop_reason=error`")
        );
        let short = ["stopped: end_turn".to_string()];
        assert!(compare(&short, &want, &[])[0].message.contains("(not run)"));
    }

    #[test]
    fn an_agent_loop_turn_that_fails_where_its_twin_completes_differs() {
        let want = ["completed: end_turn (2 steps)".to_string()];
        let failed = ["failed: provider.api_error: overloaded (1 step)".to_string()];
        assert_eq!(compare(&failed, &want, &[]).len(), 1);
        let also_failed = ["failed: provider.rate_limit: slow down (1 step)".to_string()];
        assert!(compare(&failed, &also_failed, &[]).is_empty());
        let more_steps = ["completed: end_turn (3 steps)".to_string()];
        assert_eq!(compare(&more_steps, &want, &[]).len(), 1);
    }
}
