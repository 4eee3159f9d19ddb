//! `recovery-completes` for the agent loop (docs/invariants.md): a run whose faults are all
//! provider errors that `chatWithRetry` retries, within its attempt budget, ends every turn as
//! the scenario's fault-free run ends it, at the same seed.
//!
//! `budget-respected` checks that the loop waits as long as it must between attempts; nothing
//! else checks that it makes them. A loop that gives up a step early, or takes a retryable
//! status for a final one, fails the turn, and a failed turn breaks no other invariant.
//!
//! The budget is the reference's, written here rather than read from the model, so a model
//! whose own constant is wrong is held to the documented one.

use crate::harness::faults::Fault;
use crate::harness::kimi::scenario::REFERENCE_MAX_ATTEMPTS;
use crate::harness::scenario::Scenario;

/// kimi-loop.md §6, kosong `isRetryableGenerateError`: the statuses retried.
const RETRIED_STATUSES: [u16; 8] = [408, 409, 429, 500, 502, 503, 504, 529];

/// Whether `fault` heals: a `provider_error` with a status `chatWithRetry` retries and the
/// fault's default message. The error takes the place of its call's answer, which answers the
/// next call (docs/faults.md), so the retry meets what the fault-free run met.
///
/// Not healing: a `provider_error` with a message of its own (a 429 about quota or balance is
/// final, kimi-loop.md §6, and the message decides that), a provider stream fault (its answer
/// is spent, so the retry gets the next one), and every other kind (a crash, a partition, a
/// hold, an abort, a tool that hangs or throws, latency past the read timeout).
pub fn heals(fault: &Fault) -> bool {
    matches!(
        fault,
        Fault::ProviderError { status, message: None, .. } if RETRIED_STATUSES.contains(status)
    )
}

/// Whether every fault of `plan` heals and together they stay inside one step's retries: at
/// most `max_attempts − 1` errors, counted over the whole run, so a plan is judged only when no
/// step can run out whichever calls its errors land on.
pub fn plan_heals(plan: &[&Fault], max_attempts: Option<u32>) -> bool {
    let attempts = max_attempts.unwrap_or(REFERENCE_MAX_ATTEMPTS);
    plan.iter().all(|f| heals(f)) && (plan.len() as u64) < u64::from(attempts)
}

/// Whether `recovery-completes` judges this agent-loop run: every fault of its plan heals
/// within the scenario's attempt budget (the reference's when it sets none).
pub fn judged(scenario: &Scenario) -> bool {
    let plan: Vec<&Fault> = scenario.faults.iter().map(|f| f.get_ref()).collect();
    let max_attempts = scenario
        .agent_loop
        .as_ref()
        .and_then(|s| s.max_retry_attempts);
    plan_heals(&plan, max_attempts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(toml_line: &str) -> Fault {
        let t: toml::Table = toml::from_str(&format!("f = {toml_line}")).unwrap();
        t["f"].clone().try_into().unwrap()
    }

    fn heals(plan: &[&str], max_attempts: Option<u32>) -> bool {
        let faults: Vec<Fault> = plan.iter().map(|f| fault(f)).collect();
        plan_heals(&faults.iter().collect::<Vec<_>>(), max_attempts)
    }

    const OVERLOADED: &str = r#"{ kind = "provider_error", call = 0, status = 529 }"#;

    #[test]
    fn retried_statuses_heal_within_a_steps_attempts() {
        for status in RETRIED_STATUSES {
            let f = format!(r#"{{ kind = "provider_error", call = 1, status = {status} }}"#);
            assert!(heals(&[&f], None), "{status}");
        }
        assert!(heals(&[OVERLOADED; 9], None));
        assert!(!heals(&[OVERLOADED; 10], None));
        assert!(heals(&[OVERLOADED; 2], Some(3)));
        assert!(!heals(&[OVERLOADED; 3], Some(3)));
        // A single attempt retries nothing.
        assert!(!heals(&[OVERLOADED], Some(1)));
    }

    #[test]
    fn final_errors_and_other_faults_never_heal() {
        for f in [
            r#"{ kind = "provider_error", call = 0, status = 400 }"#,
            r#"{ kind = "provider_error", call = 0, status = 413 }"#,
            r#"{ kind = "provider_error", call = 0, status = 429, message = "You exceeded your current quota" }"#,
            r#"{ kind = "provider_stream", call = 0, frame = 3, action = "reset" }"#,
            r#"{ kind = "crash", host = "provider", at_ms = 5 }"#,
        ] {
            assert!(!heals(&[f], None), "{f}");
        }
    }
}
