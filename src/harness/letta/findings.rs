//! Trace signatures of findings that only some seeds show.
//!
//! A finding that a fixed fault plan shows on every run is stated with a plain `[[expect]]`
//! (XFAIL, or XPASS when it stops reproducing). A finding that a swarm sweep meets on some
//! seeds only needs more: the sweep must not count those seeds as failures, yet a different
//! bug that breaks the same invariant in the same scenario must still fail. So such an
//! `[[expect]]` says `sometimes = true`, and the violation is expected only on a run whose
//! trace shows the finding's own signature, recognised here (docs/invariants.md).

use crate::model::port::observe::{HistoryEntry, Observation};

use crate::harness::invariants::{
    APPROVAL_CONFLICT_RECOVERED, ARGS_INTACT, HISTORY_VALID, NO_DOUBLE_EXECUTION,
    RECOVERY_COMPLETES, STOP_REASON_CONSISTENT, STREAM_GAPLESS, TURN_TERMINATES,
};
use crate::harness::trace::TraceEvent;
use crate::model::letta::client::policy::APPROVAL_DRAIN_ENDED;
use crate::model::letta::server::APPROVAL_PENDING_DETAIL;

/// docs/findings.md#local-turns-interleave: the local backend takes no lock (letta-protocol.md
/// §7.1 step 4), and its conversation-stream "resume" runs a new turn (§7.1, §10.3 item 7), so
/// two turns of one conversation can run at once and write the transcript interleaved.
pub const LOCAL_TURNS_INTERLEAVE: &str = "local-turns-interleave";

/// docs/findings.md#threshold-not-reset-for-new-runs: the TUI keeps the last drain's
/// `highestSeqIdSeen` into a new run's stream (letta-protocol.md §4.5, §10.3 item 1).
pub const THRESHOLD_NOT_RESET: &str = "threshold-not-reset-for-new-runs";

/// docs/findings.md#lost-and-duplicated-frames-go-unnoticed: the published stream processor
/// compares a chunk's `seq_id` with the resume threshold only (§4.1 rule 1).
pub const LOST_AND_DUPLICATED_FRAMES: &str = "lost-and-duplicated-frames-go-unnoticed";

/// docs/findings.md#resume-drops-approvals-completed-before-the-cut: after a resume the
/// published client keeps only the approvals the resumed stream mentioned (§4.4 step 8 case 2).
pub const RESUME_DROPS_APPROVALS: &str = "resume-drops-approvals-completed-before-the-cut";

/// docs/findings.md#in-band-approval-conflict-is-a-dead-end-headless: headless, the published
/// client treats the conflict Letta 0.16.8 answers in band (HTTP 200, an `event: error`) as a
/// plain stream error and ends the turn (captures/letta_e2e flow d3).
pub const IN_BAND_CONFLICT_DEAD_END: &str = "in-band-approval-conflict-is-a-dead-end-headless";

/// docs/findings.md#stale-denial-drain-is-never-resumed-headless: headless, the published client
/// drains the denial of a stale approval without the turn's abort signal, so a broken denial
/// stream is never resumed and its `error` ends the turn (headless.ts, 0.32.18).
pub const STALE_DENIAL_DRAIN: &str = "stale-denial-drain-is-never-resumed-headless";

/// docs/findings.md#silent-empty-retry-waits-for-the-sdk-timeout: against its local backend the
/// TUI retries with `messages: []` (letta-protocol.md §3.10 step 7), a request without an otid,
/// and its stall reconciler ends a read with no run id only when the request carried one
/// (`canResumeWithoutRunId`), so a retry whose stream stays silent waits for the SDK's timeout.
pub const SILENT_EMPTY_RETRY: &str = "silent-empty-retry-waits-for-the-sdk-timeout";

/// The findings with a signature (the ones `sometimes = true` may name).
pub const WITH_SIGNATURE: [&str; 7] = [
    LOCAL_TURNS_INTERLEAVE,
    THRESHOLD_NOT_RESET,
    LOST_AND_DUPLICATED_FRAMES,
    RESUME_DROPS_APPROVALS,
    IN_BAND_CONFLICT_DEAD_END,
    STALE_DENIAL_DRAIN,
    SILENT_EMPTY_RETRY,
];

/// The findings a client profile shows wherever its trace has their signature, whatever the
/// scenario, and the invariants each breaks: a sweep of any scenario with that profile
/// (`--client-profile letta-code`) expects them on the seeds that show them, as a scenario's
/// `sometimes = true` entry would, and fails on every other violation.
pub const OF_PROFILE: [(&str, &str, &[&str]); 6] = [
    ("letta-code", THRESHOLD_NOT_RESET, &[STREAM_GAPLESS]),
    (
        "letta-code",
        LOST_AND_DUPLICATED_FRAMES,
        // A fragment lost or doubled breaks the arguments; a lost approval request leaves the
        // run acted on without it and the call without a result.
        &[
            STREAM_GAPLESS,
            ARGS_INTACT,
            STOP_REASON_CONSISTENT,
            HISTORY_VALID,
        ],
    ),
    (
        "letta-code",
        RESUME_DROPS_APPROVALS,
        // A dropped call left without a result: the cloud server refuses the answer ("Invalid
        // tool call IDs"), the local backend sends the model a `tool_use` with no result.
        &[STOP_REASON_CONSISTENT, NO_DOUBLE_EXECUTION, HISTORY_VALID],
    ),
    (
        "letta-code",
        IN_BAND_CONFLICT_DEAD_END,
        &[APPROVAL_CONFLICT_RECOVERED, RECOVERY_COMPLETES],
    ),
    ("letta-code", STALE_DENIAL_DRAIN, &[RECOVERY_COMPLETES]),
    ("letta-code", SILENT_EMPTY_RETRY, &[TURN_TERMINATES]),
];

/// Whether the trace shows the finding's signature (false for a finding without one).
pub fn shows(finding: &str, events: &[TraceEvent]) -> bool {
    match finding {
        LOCAL_TURNS_INTERLEAVE => turns_interleaved(events),
        THRESHOLD_NOT_RESET => threshold_kept_into_a_new_run(events),
        LOST_AND_DUPLICATED_FRAMES => frame_lost_or_duplicated(events),
        RESUME_DROPS_APPROVALS => resume_dropped_approvals(events),
        IN_BAND_CONFLICT_DEAD_END => headless_send_refused_in_band(events),
        STALE_DENIAL_DRAIN => turn_ended_by_a_denial_drain(events),
        SILENT_EMPTY_RETRY => still_reading_a_send_without_otids(events),
        _ => false,
    }
}

/// A run's first chunk the client processed is not its first (`seq_id` k > 1), and the chunks
/// it skipped are all at or below the last drain's highest `seq_id`, which belonged to another
/// run: the threshold the client carried over dropped them as replays.
fn threshold_kept_into_a_new_run(events: &[TraceEvent]) -> bool {
    // The highest seq_id of the last drain that read one, and the run it was acted on as.
    let mut threshold: Option<u64> = None;
    let mut carried: Option<(&str, u64)> = None;
    let mut seen: Vec<&str> = Vec::new();
    for e in events.iter().filter(|e| e.host == "client") {
        match &e.obs {
            Observation::ClientStarted { .. } => {
                threshold = None;
                carried = None;
            }
            // A drain that read no numbered chunk leaves the threshold as it was.
            Observation::ClientDrained {
                last_seq_id: Some(t),
                ..
            } => threshold = Some(*t),
            Observation::ClientActedOn {
                run_id: Some(run), ..
            } => carried = threshold.map(|t| (run.as_str(), t)),
            Observation::ClientChunk {
                run_id: Some(run),
                seq_id: Some(k),
                ..
            } if !seen.contains(&run.as_str()) => {
                seen.push(run);
                if *k > 1 && carried.is_some_and(|(r, t)| r != run && *k <= t + 1) {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// A `server_stream` fault dropped or duplicated one SSE event while the connection stayed up.
fn frame_lost_or_duplicated(events: &[TraceEvent]) -> bool {
    events.iter().any(|e| match &e.obs {
        Observation::Fault { fault } => {
            fault.starts_with("server_stream ")
                && (fault.ends_with(" action=drop") || fault.ends_with(" action=duplicate"))
        }
        _ => false,
    })
}

/// A drain collected approvals, the client resumed the run, and acted on it as
/// `requires_approval` without one of them: an approval whose chunks all came before the cut.
fn resume_dropped_approvals(events: &[TraceEvent]) -> bool {
    // The approvals the drains before the resume collected.
    let mut collected: Vec<&str> = Vec::new();
    let mut resumed = false;
    for e in events.iter().filter(|e| e.host == "client") {
        match &e.obs {
            Observation::ClientResume { .. } => resumed = true,
            Observation::ClientDrained { approvals, .. } if !resumed => {
                collected.extend(approvals.iter().map(String::as_str));
            }
            Observation::ClientActedOn {
                stop_reason,
                approvals,
                ..
            } => {
                if resumed
                    && stop_reason == "requires_approval"
                    && collected.iter().any(|a| !approvals.iter().any(|b| b == a))
                {
                    return true;
                }
                collected.clear();
                resumed = false;
            }
            Observation::TurnStart { .. } | Observation::ClientStarted { .. } => {
                collected.clear();
                resumed = false;
            }
            _ => {}
        }
    }
    false
}

/// A headless client's send was answered with the approval-pending conflict in band: the
/// server's `approval_pending_in_band` fault fired, or a turn ended on the conflict's in-band
/// error (`stop_reason=error` carrying [`APPROVAL_PENDING_DETAIL`]), which a server profile that
/// answers in band by itself raises with no fault note: a stale call's denial refused busy
/// leaves the call pending, and the message sent next meets it.
fn headless_send_refused_in_band(events: &[TraceEvent]) -> bool {
    let in_band_end = format!("error: stop_reason=error ({APPROVAL_PENDING_DETAIL})");
    let mut headless = false;
    for e in events {
        match &e.obs {
            Observation::ClientStarted { mode, .. } => headless = mode == "headless",
            Observation::Fault { fault }
                if headless && fault.starts_with("approval_pending_in_band ") =>
            {
                return true;
            }
            Observation::TurnEnd { outcome, .. } if headless && *outcome == in_band_end => {
                return true;
            }
            _ => {}
        }
    }
    false
}

/// A headless client's turn ended on the stop reason of a stale approval's denial drain, the
/// error only that drain raises ([`APPROVAL_DRAIN_ENDED`]).
fn turn_ended_by_a_denial_drain(events: &[TraceEvent]) -> bool {
    let mut headless = false;
    events.iter().any(|e| match &e.obs {
        Observation::ClientStarted { mode, .. } => {
            headless = mode == "headless";
            false
        }
        Observation::TurnEnd { outcome, .. } => {
            headless
                && outcome
                    .strip_prefix("error: ")
                    .is_some_and(|o| o.starts_with(APPROVAL_DRAIN_ENDED))
        }
        _ => false,
    })
}

/// The client's last send carried no otid (a `messages: []` retry), and the trace ends with the
/// client still reading a stream of that send, its answer or a resume of its run, that has
/// brought no chunk since it opened; the turn did not end.
fn still_reading_a_send_without_otids(events: &[TraceEvent]) -> bool {
    let mut send_without_otid = false;
    let mut silent_stream = false;
    for e in events.iter().filter(|e| e.host == "client") {
        match &e.obs {
            Observation::ClientSend { otids, .. } => {
                send_without_otid = otids.is_empty();
                silent_stream = true;
            }
            Observation::ClientResume { .. } => silent_stream = true,
            Observation::ClientChunk { .. } | Observation::ClientDrained { .. } => {
                silent_stream = false;
            }
            Observation::TurnEnd { .. } | Observation::ClientStarted { .. } => {
                send_without_otid = false;
                silent_stream = false;
            }
            _ => {}
        }
    }
    send_without_otid && silent_stream
}

/// Two runs of one conversation were open at once, and the transcript got an assistant
/// message between a tool call and its result (the other turn's answer), or one run stored a
/// tool call while the other was open (whose next model call, after a compaction that keeps the
/// call, sees it without its result), or the two runs' compactions overlapped: one summarised
/// messages the other had already removed, and its swap removed the other's summary unread.
fn turns_interleaved(events: &[TraceEvent]) -> bool {
    // (run id, conversation id) of every run started and not yet ended.
    let mut open: Vec<(&str, &str)> = Vec::new();
    let mut concurrent = false;
    // Tool calls stored and not yet answered.
    let mut unanswered: Vec<&str> = Vec::new();
    let mut interleaved = false;
    // (conversation id, message id) of every message a compaction removed.
    let mut compacted: Vec<(&str, &str)> = Vec::new();
    for e in events {
        match &e.obs {
            Observation::RunStarted {
                run_id,
                conversation_id,
                ..
            } => {
                concurrent |= open.iter().any(|&(_, c)| c == conversation_id);
                open.push((run_id, conversation_id));
            }
            Observation::RunEnded { run_id, .. } => open.retain(|&(r, _)| r != run_id),
            Observation::Compaction {
                conversation_id,
                removed,
                summarized,
                ..
            } => {
                let id = |s: &'_ str| -> String {
                    let rest = s.split_once(':').map_or(s, |(_, r)| r);
                    rest.split('[').next().unwrap_or(rest).to_string()
                };
                interleaved |= summarized.iter().any(|m| {
                    let m = id(m);
                    compacted
                        .iter()
                        .any(|&(c, r)| c == conversation_id && id(r) == m)
                });
                compacted.extend(
                    removed
                        .iter()
                        .map(|r| (conversation_id.as_str(), r.as_str())),
                );
            }
            Observation::History {
                entry,
                conversation_id,
            } => match entry {
                HistoryEntry::ToolCall { tool_call_id, .. } => {
                    unanswered.push(tool_call_id);
                    interleaved |= open.iter().filter(|&&(_, c)| c == conversation_id).count() > 1;
                }
                HistoryEntry::ToolReturn { tool_call_id, .. }
                | HistoryEntry::Denial { tool_call_id, .. }
                | HistoryEntry::Settled { tool_call_id, .. } => {
                    unanswered.retain(|c| c != tool_call_id)
                }
                HistoryEntry::Assistant { .. } => interleaved |= !unanswered.is_empty(),
                HistoryEntry::User { .. } => {}
            },
            _ => {}
        }
    }
    concurrent && interleaved
}

/// The findings docs/findings.md documents: its `## ` headings, which are also their anchors.
/// An `[[expect]]` must name one of them.
pub fn documented() -> Vec<&'static str> {
    include_str!("../../../docs/findings.md")
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(str::trim)
        .collect()
}
