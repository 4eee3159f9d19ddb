//! The fault-free twin of a run, as `recovery-completes` uses it in every system
//! (docs/invariants.md): the same scenario and seed with the plan removed. A run whose faults
//! all heal within the budgets the reference documents must end each turn as its twin does.
//! What heals, and within which budget, is each system's own (`letta::recovery_completes`,
//! `kimi::recovery_completes`); the comparison is here, and running the twin is
//! `System::twin_invariants`.

use crate::harness::invariants::{RECOVERY_COMPLETES, Violation};
use crate::harness::trace::TraceEvent;

/// The turns whose outcome differs from the fault-free run's, each pointing at its `turn_end`.
pub fn compare(outcomes: &[String], expected: &[String], trace: &[TraceEvent]) -> Vec<Violation> {
    let ends = crate::harness::trace::turn_ends(trace);
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
