//! `recovery-completes` (docs/invariants.md): a run whose faults all heal inside the client's
//! budgets ends every turn as the scenario's fault-free run ends it, at the same seed.
//!
//! The other oracles judge what a run did; none judges what it failed to do. A client that stops
//! retrying, resuming or attaching, or a server that refuses a resume, ends the turn in an error,
//! and an error breaks no safety invariant. This oracle names the faults that cannot end a turn
//! by design (each heals within a budget of letta-protocol.md §3 and §4), and holds a run made
//! only of them to its fault-free twin: the same scenario and seed with the plan removed.
//!
//! The twin costs a second run, so it is run only when the faulted run ended some turn in a way
//! other than a stop reason (an error, a pause, an interrupt). A run whose turns all ended on a
//! stop reason is not compared: a recovery that fails shows as an error, and a different stop
//! reason (`max_steps` where the twin has `end_turn`) is left unjudged.

use crate::harness::faults::Fault;
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::trace::TraceEvent;
use crate::harness::world::WorldRun;
use crate::model::letta::client::Mode;
use crate::model::letta::client::policy::{
    CLOUD_API_SHUTDOWN_MAX_RETRIES, CONVERSATION_BUSY_MAX_RETRIES, MAX_TRANSIENT_RETRIES,
    ResumePolicy,
};
use crate::model::letta::server::Profile as ServerProfile;
use crate::model::port::inject::StreamFault;
use crate::model::port::observe::Observation;
use crate::model::provider::NO_CASSETTE;

/// Whether `fault` is of a kind that heals within a budget (how many a plan may hold is
/// [`plan_heals`]'s).
///
/// Healing (each one answered by a recovery the reference documents):
/// - `drop_connection` and the `server_stream` cuts (`reset`, `cut_inside`, `close`, `stall`,
///   `duplicate`): the client resumes the run by `run_id` or otid from its last `seq_id`
///   (letta-protocol.md §4.4), or retries a send that got no stream (§3.4);
/// - `run_stream_fail`: the resume request's 500s are transient retries (§4.4);
/// - `busy_on_send`, `busy_own_run`: the busy wait or the attach by otid (§3.5, §2.4);
/// - `shutting_down_on_send`: the 503 retry (§3.6);
/// - `approval_pending_on_send`, `approval_pending_in_band`, `stale_approval`: the client
///   denies the stale call and resends (§3.2, reference B.5.3, B.5.4);
/// - `latency`: slower, never lost.
///
/// Not healing: an interrupt, a client crash (they end a turn by design); a provider error or
/// stream fault (the server's run may end in a non-retryable error, §3.8); a partition, a hold
/// or a server crash (they can outlast every budget, or end a run the server cannot resume);
/// a lost frame (`drop`: the client may read a tool call without its arguments and run it as
/// the stream had it, difference 4 of docs/client.md); a failed run lookup (`run_read_fail`: the
/// client judges an error by its stream's line alone, and cannot tell that a run stopped in a
/// generic error is replayable, §3.7, §4.4 step 3).
pub fn heals(fault: &Fault) -> bool {
    match fault {
        Fault::DropConnection { .. }
        | Fault::RunStreamFail { .. }
        | Fault::BusyOnSend { .. }
        | Fault::BusyOwnRun { .. }
        | Fault::ShuttingDownOnSend { .. }
        | Fault::ApprovalPendingOnSend { .. }
        | Fault::ApprovalPendingInBand { .. }
        | Fault::StaleApproval { .. }
        | Fault::Latency { .. } => true,
        Fault::ServerStream { action, .. } => *action != StreamFault::Drop,
        Fault::ProviderStream { .. }
        | Fault::ProviderError { .. }
        | Fault::RunReadFail { .. }
        | Fault::Partition { .. }
        | Fault::Hold { .. }
        | Fault::Crash { .. }
        | Fault::Interrupt { .. }
        | Fault::ClientCrash { .. }
        | Fault::UserAbort { .. }
        | Fault::ToolHang { .. }
        | Fault::ToolGarbage { .. }
        | Fault::ListenerThrows { .. }
        | Fault::TranscriptRejects { .. } => false,
    }
}

/// Whether every fault of `plan` heals and, together, they stay inside the budgets they share.
/// The connection faults (a cut stream, a failed resume request) stay within the mode's resume
/// attempts, one in the TUI and 20 headless (letta-protocol.md §3.9, §4.4 step 7), and below the
/// turn's transient retries (3, §3.9): a second cut can land on the resume itself, and the TUI
/// then ends the turn in the stream's error by design (§3.10 step 8). The busy retries (3, §3.5;
/// a busy answer naming the send's own run counts too) and the 503 retries (3, §3.6) bound
/// their faults. Counted over the whole run, so a plan that
/// could spend one turn's budget is out even when its faults land in different turns.
///
/// On the `local` server profile no connection fault heals: the local backend's run replay has
/// no live tail, and its conversation-stream "resume" starts a new turn (letta-protocol.md
/// §10.3 item 7, docs/findings.md#local-turns-interleave), so a resumed turn ends in an error
/// or beside a second one.
pub fn plan_heals(plan: &[&Fault], mode: Mode, server: ServerProfile) -> bool {
    let mut connection = 0u64;
    let mut busy = 0u64;
    let mut shutdown = 0u64;
    for fault in plan {
        if !heals(fault) {
            return false;
        }
        connection += connection_faults(fault);
        match fault {
            // A busy answer naming the send's own run spends a busy retry too: the client
            // counts it before it tries the busy-resume stream (§3.4).
            Fault::BusyOnSend { .. } | Fault::BusyOwnRun { .. } => busy += 1,
            Fault::ShuttingDownOnSend { .. } => shutdown += 1,
            _ => {}
        }
    }
    if server == ServerProfile::Local && connection > 0 {
        return false;
    }
    connection <= connection_budget(mode)
        && busy <= u64::from(CONVERSATION_BUSY_MAX_RETRIES)
        && shutdown <= u64::from(CLOUD_API_SHUTDOWN_MAX_RETRIES)
}

/// How many resumes a connection fault costs the client: one per cut, one per refused resume.
fn connection_faults(fault: &Fault) -> u64 {
    match fault {
        Fault::DropConnection { .. } | Fault::ServerStream { .. } => 1,
        Fault::RunStreamFail { times, .. } => *times,
        _ => 0,
    }
}

/// The resumes a run's connection faults may cost: the mode's resume attempts (one in the TUI,
/// 20 headless, letta-protocol.md §3.9, §4.4 step 7), below the turn's transient retries (3).
fn connection_budget(mode: Mode) -> u64 {
    let resume_attempts = match mode {
        Mode::Interactive => ResumePolicy::INTERACTIVE.max_attempts,
        Mode::Headless => ResumePolicy::HEADLESS.max_attempts,
    };
    u64::from(resume_attempts.min(MAX_TRANSIENT_RETRIES - 1))
}

/// Whether `recovery-completes` judges this Letta run: every fault of its plan heals
/// ([`plan_heals`], in the scenario's client mode and on its server profile).
pub fn judged(scenario: &Scenario) -> Result<bool, InputError> {
    let (plan, mode) = plan_and_mode(scenario);
    Ok(plan_heals(&plan, mode, scenario.server_profile()?))
}

/// The scenario's fault plan and the client mode its budgets are counted in.
fn plan_and_mode(scenario: &Scenario) -> (Vec<&Fault>, Mode) {
    let plan = scenario.faults.iter().map(|f| f.get_ref()).collect();
    let mode = Mode::from_name(scenario.client.mode.get_ref()).unwrap_or_default();
    (plan, mode)
}

/// The runs `recovery-completes` leaves uncompared once the twin has run: the plan moved which
/// model call got the scripted answers, a retry resent a consumed stale denial, or the twin's
/// own resumes and the plan's connection faults together outrun the resume budget.
pub fn uncompared(scenario: &Scenario, run: &WorldRun, twin: &WorldRun) -> bool {
    let (plan, mode) = plan_and_mode(scenario);
    unscripted_model_calls(&run.trace) > unscripted_model_calls(&twin.trace)
        || resent_a_recorded_stale_denial(&plan, &run.trace)
        || plan.iter().map(|f| connection_faults(f)).sum::<u64>() + resumes(&twin.trace)
            > connection_budget(mode)
}

/// The resumes a run made. A fault-free run resumes too when the reference reads a tool call's
/// arguments that are not JSON: it replays the run once in case a fragment was lost (docs/
/// client.md difference 18). That replay spends the budget the plan's cuts were counted
/// against, so a cut the twin's budget had no room for may end the turn by design.
fn resumes(trace: &[TraceEvent]) -> u64 {
    trace
        .iter()
        .filter(|e| matches!(&e.obs, Observation::ClientResume { .. }))
        .count() as u64
}

/// Model calls the fake provider answered with no cassette left (its 500). The cassettes answer
/// model calls in order, whoever makes them; a plan that moves a call (a headless denial-only
/// request runs the model, a delayed client lets a probe's send take the next answer) changes
/// what the model says, and the outcome with it. Such a run is not compared.
fn unscripted_model_calls(trace: &[TraceEvent]) -> usize {
    trace
        .iter()
        .filter(|e| matches!(&e.obs, Observation::ProviderServe { cassette, .. } if cassette == NO_CASSETTE))
        .count()
}

/// The plan left a stale approval, and the client retried a send that denied it after the
/// server had started a run for it: the retry resends the denial, which the server model has
/// already written to the history and now refuses ("No tool call is currently awaiting
/// approval"). Whether the real server keeps a failed run's input (and so refuses the resend)
/// is open (docs/client.md, "Open: a retry resends a consumed denial"); such a run is not
/// compared.
fn resent_a_recorded_stale_denial(plan: &[&Fault], trace: &[TraceEvent]) -> bool {
    let stale = plan.iter().any(|f| {
        matches!(
            f,
            Fault::StaleApproval { .. }
                | Fault::ApprovalPendingOnSend { .. }
                | Fault::ApprovalPendingInBand { .. }
        )
    });
    stale
        && trace.iter().any(|e| {
            matches!(&e.obs, Observation::ClientRetry { kind, .. }
                if matches!(kind.as_str(), "empty_response" | "post_stream" | "quota_swap"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(toml_line: &str) -> Fault {
        let t: toml::Table = toml::from_str(&format!("f = {toml_line}")).unwrap();
        t["f"].clone().try_into().unwrap()
    }

    fn heals(plan: &[&str], mode: Mode, server: ServerProfile) -> bool {
        let faults: Vec<Fault> = plan.iter().map(|f| fault(f)).collect();
        plan_heals(&faults.iter().collect::<Vec<_>>(), mode, server)
    }

    const CUT: &str = r#"{ kind = "server_stream", response = 1, frame = 3, action = "reset" }"#;
    const RESUME_500: &str = r#"{ kind = "run_stream_fail", times = 1 }"#;
    const BUSY: &str = r#"{ kind = "busy_on_send", send = 1 }"#;

    #[test]
    fn one_cut_heals_in_both_modes_on_a_cloud_server() {
        for mode in [Mode::Interactive, Mode::Headless] {
            assert!(heals(&[CUT], mode, ServerProfile::Cloud));
        }
    }

    #[test]
    fn a_cut_and_a_failed_resume_spend_the_tuis_single_resume_attempt() {
        assert!(!heals(
            &[CUT, RESUME_500],
            Mode::Interactive,
            ServerProfile::Cloud
        ));
        assert!(heals(
            &[CUT, RESUME_500],
            Mode::Headless,
            ServerProfile::Cloud
        ));
        // Three connection faults reach the turn's transient budget even headless.
        assert!(!heals(
            &[CUT, RESUME_500, CUT],
            Mode::Headless,
            ServerProfile::Cloud
        ));
    }

    #[test]
    fn no_cut_heals_on_the_local_backend() {
        assert!(!heals(&[CUT], Mode::Interactive, ServerProfile::Local));
        assert!(heals(&[BUSY], Mode::Interactive, ServerProfile::Local));
    }

    #[test]
    fn busy_answers_heal_up_to_the_busy_budget() {
        let three = [BUSY; 3];
        let four = [BUSY; 4];
        assert!(heals(&three, Mode::Interactive, ServerProfile::Cloud));
        assert!(!heals(&four, Mode::Interactive, ServerProfile::Cloud));
        let own = r#"{ kind = "busy_own_run", send = 1 }"#;
        assert!(!heals(
            &[own, BUSY, BUSY, BUSY],
            Mode::Interactive,
            ServerProfile::Cloud
        ));
    }

    #[test]
    fn faults_that_can_end_a_turn_by_design_never_heal() {
        for f in [
            r#"{ kind = "provider_error", call = 0, status = 500 }"#,
            r#"{ kind = "partition", between = ["client", "server"], at_ms = 5, duration_ms = 10 }"#,
            r#"{ kind = "crash", host = "server", at_ms = 5 }"#,
            r#"{ kind = "interrupt", turn = 1, during = "stream", after_chunk = 1 }"#,
            r#"{ kind = "server_stream", response = 1, frame = 2, action = "drop" }"#,
        ] {
            assert!(!heals(&[f], Mode::Headless, ServerProfile::Cloud), "{f}");
        }
    }
}
