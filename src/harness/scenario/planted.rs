//! The `[planted]` table: deliberate defects switched on by a canary scenario, the invariants
//! each is there to break, and the check that a switch belongs to the scenario's system.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{InputError, Scenario};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Planted {
    /// Server accepts a plain message while an approval is pending (breaks tool-call-resolved).
    #[serde(default)]
    pub server_accepts_message_while_pending: bool,
    /// Client otids mix in a process-wide counter (breaks deterministic).
    #[serde(default)]
    pub client_nondeterministic_otids: bool,
    // ---- one planted client defect per client invariant ----------------------------------
    /// Breaks no-double-execution: a restarted client executes pending approvals again.
    #[serde(default)]
    pub client_reexecute_pending_on_restart: bool,
    /// Breaks stream-gapless: a resume starts from seq 0 with no threshold.
    #[serde(default)]
    pub client_resume_from_zero: bool,
    /// Breaks stop-reason-consistent: approvals collected before a resume are dropped.
    #[serde(default)]
    pub client_drop_approvals_on_resume: bool,
    /// Breaks args-intact: an approval with no arguments yet merges as `"{}"` + suffix.
    #[serde(default)]
    pub client_braces_args_fallback: bool,
    /// Breaks budget-respected: busy retries ignore their budget and backoff.
    #[serde(default)]
    pub client_unbounded_busy_retries: bool,
    /// Breaks approval-attribution: stale approvals are closed with a user-style denial.
    #[serde(default)]
    pub client_stale_denial_as_user: bool,
    /// Breaks results-ordered: results are sent in completion order.
    #[serde(default)]
    pub client_results_in_completion_order: bool,
    /// Breaks lock-safety: approved tools all run at once.
    #[serde(default)]
    pub client_no_resource_locks: bool,
    /// Client has no stall window: a silent stream is waited on forever (breaks turn-terminates).
    #[serde(default)]
    pub client_waits_forever_on_silence: bool,
    /// Every client process draws the same otids, so a new process's send on a new
    /// conversation repeats an earlier one's request token; the server's global dedupe then
    /// streams the other conversation's run (breaks stream-stays-in-conversation).
    #[serde(default)]
    pub client_otids_repeat_per_process: bool,
    /// Headless gives up on the in-band approval-pending conflict, as the published CLI does,
    /// and leaves the call pending (breaks approval-conflict-recovered).
    #[serde(default)]
    pub client_gives_up_on_in_band_conflict: bool,
    /// The client never reads its resume data at start, so a call pending then is met only
    /// when its first send is refused (breaks pending-denied-at-start).
    #[serde(default)]
    pub client_skips_startup_check: bool,
    /// The client never arms the interrupts and crashes a plan scripts after a chunk (breaks
    /// client-faults-fire).
    #[serde(default)]
    pub client_ignores_chunk_faults: bool,
    /// The approval-pending rebuild keeps the otids of the items it resends (breaks
    /// otids-fresh).
    #[serde(default)]
    pub client_keeps_otids_on_rebuild: bool,
    /// The `X-Letta-Response-State` header is padded standard base64, not base64url (breaks
    /// response-state-reused).
    #[serde(default)]
    pub client_response_state_padded: bool,
    /// The start-up tail is sorted by date alone, without the type rank that breaks ties
    /// (breaks backfill-faithful).
    #[serde(default)]
    pub client_backfill_unranked: bool,
    /// A headless turn given up on a stream error leaves its still-active run running (breaks
    /// abandoned-run-cancelled).
    #[serde(default)]
    pub client_leaves_abandoned_run: bool,
    /// A tool's result goes back with the other status (breaks result-status-intact).
    #[serde(default)]
    pub client_flips_result_status: bool,
    // ---- agent loop ------------------------------------------------------------------------
    /// The loop records tool results in completion order, not provider order (breaks
    /// loop-envelope).
    #[serde(default)]
    pub loop_results_in_completion_order: bool,
    /// The loop's scheduler drains its queue without checking the running tasks (breaks
    /// lock-safety).
    #[serde(default)]
    pub loop_scheduler_drain_ignores_active: bool,
    /// The loop's default attempt budget per step is 3, not 10 (breaks recovery-completes).
    #[serde(default)]
    pub loop_retry_default_of_three: bool,
    /// The loop's host appends a turn's prompt to the context only when the turn has ended,
    /// so the first model call carries an empty conversation (breaks history-valid).
    #[serde(default)]
    pub loop_prompt_appended_after_turn: bool,
    /// The loop's projection shows failed tools' results without their error status (breaks
    /// history-valid).
    #[serde(default)]
    pub loop_errors_shown_as_success: bool,
    /// Server starts a second run for a duplicate request token (breaks one-run-per-request).
    #[serde(default)]
    pub server_ignores_request_token: bool,
    /// Server loses what interrupted runs wrote when it restarts (breaks durable-ack).
    #[serde(default)]
    pub server_volatile_writes: bool,
    /// Local server does not settle orphaned tool calls at a new turn (breaks history-valid).
    #[serde(default)]
    pub server_skips_orphan_settling: bool,
    /// Compaction cuts one message after a tool-call assistant message, evicting the call and
    /// keeping its results (breaks compaction-safe).
    #[serde(default)]
    pub server_compaction_splits_tool_call: bool,
    /// Compaction cuts at the nearest user message before its assistant cut (breaks
    /// compaction-safe).
    #[serde(default)]
    pub server_compaction_cuts_at_user: bool,
    /// Compaction removes one message more than it summarised (breaks compaction-safe).
    #[serde(default)]
    pub server_compaction_loses_message: bool,
    /// A compaction that leaves the context above the threshold goes on with the turn
    /// (breaks compaction-safe).
    #[serde(default)]
    pub server_compaction_ignores_threshold: bool,
    /// Server refuses every resume of a run by its id as not background (breaks
    /// recovery-completes).
    #[serde(default)]
    pub server_refuses_run_resume: bool,
    /// A stream of a run still going closes as soon as it has sent every chunk recorded so
    /// far, so a fault-free turn ends in an error (breaks ends-as-declared).
    #[serde(default)]
    pub server_closes_caught_up_stream: bool,
    /// Server answers `GET /v1/conversations/{id}` without a content type (breaks
    /// answers-typed).
    #[serde(default)]
    pub server_untyped_answers: bool,
    /// Server's token stream leaves the otid off the chunks it translates (breaks
    /// chunks-named).
    #[serde(default)]
    pub server_unnamed_chunks: bool,
    /// Server's router lost `POST /v1/conversations/{id}/cancel` (breaks requests-routed).
    #[serde(default)]
    pub server_unserved_conversation_cancel: bool,
    /// Server's `Retry-After` dates name the wrong weekday (breaks dates-true).
    #[serde(default)]
    pub server_weekday_from_monday: bool,
    /// Server numbers no message send, so no send fault of the plan fires (breaks
    /// send-faults-fire).
    #[serde(default)]
    pub server_uncounted_sends: bool,
}

impl Planted {
    /// The invariants these switches are there to break (a canary must be caught by them).
    pub fn expected_failures(&self) -> Vec<&'static str> {
        use crate::harness::invariants::{DETERMINISTIC, TOOL_CALL_RESOLVED, TURN_TERMINATES};
        let mut v = Vec::new();
        if self.server_accepts_message_while_pending {
            v.push(TOOL_CALL_RESOLVED);
        }
        if self.client_nondeterministic_otids {
            v.push(DETERMINISTIC);
        }
        if self.client_waits_forever_on_silence {
            v.push(TURN_TERMINATES);
        }
        if self.client_otids_repeat_per_process {
            v.push(crate::harness::invariants::STREAM_STAYS_IN_CONVERSATION);
        }
        if self.loop_results_in_completion_order {
            v.push(crate::harness::invariants::LOOP_ENVELOPE);
        }
        if self.loop_scheduler_drain_ignores_active {
            v.push(crate::harness::invariants::LOCK_SAFETY);
        }
        if self.loop_retry_default_of_three {
            v.push(crate::harness::invariants::RECOVERY_COMPLETES);
        }
        if self.loop_prompt_appended_after_turn || self.loop_errors_shown_as_success {
            v.push(crate::harness::invariants::HISTORY_VALID);
        }
        // Server defects.
        if self.server_ignores_request_token {
            v.push(crate::harness::invariants::ONE_RUN_PER_REQUEST);
        }
        if self.server_volatile_writes {
            v.push(crate::harness::invariants::DURABLE_ACK);
        }
        if self.server_skips_orphan_settling {
            v.push(crate::harness::invariants::HISTORY_VALID);
        }
        if self.server_refuses_run_resume {
            v.push(crate::harness::invariants::RECOVERY_COMPLETES);
        }
        if self.server_closes_caught_up_stream {
            v.push(crate::harness::invariants::ENDS_AS_DECLARED);
        }
        if self.server_untyped_answers {
            v.push(crate::harness::invariants::ANSWERS_TYPED);
        }
        if self.server_unserved_conversation_cancel {
            v.push(crate::harness::invariants::REQUESTS_ROUTED);
        }
        if self.server_unnamed_chunks {
            v.push(crate::harness::invariants::CHUNKS_NAMED);
        }
        if self.server_weekday_from_monday {
            v.push(crate::harness::invariants::DATES_TRUE);
        }
        if self.server_uncounted_sends {
            v.push(crate::harness::invariants::SEND_FAULTS_FIRE);
        }
        if self.server_compaction_splits_tool_call
            || self.server_compaction_cuts_at_user
            || self.server_compaction_loses_message
            || self.server_compaction_ignores_threshold
        {
            v.push(crate::harness::invariants::COMPACTION_SAFE);
        }
        // One planted client defect per client invariant.
        use crate::harness::invariants as inv;
        for (on, id) in [
            (
                self.client_reexecute_pending_on_restart,
                inv::NO_DOUBLE_EXECUTION,
            ),
            (self.client_resume_from_zero, inv::STREAM_GAPLESS),
            (
                self.client_drop_approvals_on_resume,
                inv::STOP_REASON_CONSISTENT,
            ),
            (self.client_braces_args_fallback, inv::ARGS_INTACT),
            (self.client_unbounded_busy_retries, inv::BUDGET_RESPECTED),
            (self.client_stale_denial_as_user, inv::APPROVAL_ATTRIBUTION),
            (
                self.client_results_in_completion_order,
                inv::RESULTS_ORDERED,
            ),
            (self.client_no_resource_locks, inv::LOCK_SAFETY),
            (
                self.client_gives_up_on_in_band_conflict,
                inv::APPROVAL_CONFLICT_RECOVERED,
            ),
            (
                self.client_skips_startup_check,
                inv::PENDING_DENIED_AT_START,
            ),
            (self.client_ignores_chunk_faults, inv::CLIENT_FAULTS_FIRE),
            (self.client_keeps_otids_on_rebuild, inv::OTIDS_FRESH),
            (
                self.client_response_state_padded,
                inv::RESPONSE_STATE_REUSED,
            ),
            (self.client_backfill_unranked, inv::BACKFILL_FAITHFUL),
            (
                self.client_leaves_abandoned_run,
                inv::ABANDONED_RUN_CANCELLED,
            ),
            (self.client_flips_result_status, inv::RESULT_STATUS_INTACT),
        ] {
            if on && !v.contains(&id) {
                v.push(id);
            }
        }
        v
    }
}

impl Scenario {
    /// Refuses a `[planted]` switch of the other system: it would sit in a world that never
    /// reads it, and the canary would pass without its defect. Agent-loop switches are the
    /// `loop_` ones.
    pub(super) fn planted_for_this_system(&self) -> Result<(), InputError> {
        #[derive(Deserialize)]
        struct Switches {
            #[serde(default)]
            planted: BTreeMap<String, Spanned<toml::Value>>,
        }
        let Ok(found) = toml::from_str::<Switches>(&self.source) else {
            return Ok(());
        };
        let agent_loop = self.is_agent_loop();
        for (name, value) in &found.planted {
            if value.get_ref().as_bool() == Some(true) && name.starts_with("loop_") != agent_loop {
                let other = if agent_loop { "letta" } else { "agent-loop" };
                return Err(self.error_at(
                    value.span(),
                    format!("[planted] {name} is a switch of system \"{other}\"; this scenario's world never reads it"),
                ));
            }
        }
        Ok(())
    }
}

impl Planted {
    /// The switches that are on, by name (every one, whatever its name: a written canary must
    /// keep its defect).
    pub(crate) fn on(&self) -> toml::Table {
        let mut t = toml::Table::try_from(self).expect("planted switches serialise");
        t.retain(|_, v| v.as_bool() == Some(true));
        t
    }
}
