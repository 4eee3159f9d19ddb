//! Trace signatures of findings that only some seeds show.
//!
//! A finding that a fixed fault plan shows on every run is stated with a plain `[[expect]]`
//! (XFAIL, or XPASS when it stops reproducing). A finding that a swarm sweep meets on some
//! seeds only needs more: the sweep must not count those seeds as failures, yet a different
//! bug that breaks the same invariant in the same scenario must still fail. So such an
//! `[[expect]]` says `sometimes = true`, and the violation is expected only on a run whose
//! trace shows the finding's own signature, recognised here (docs/invariants.md).

use crate::model::port::observe::{HistoryEntry, Observation};

use crate::harness::trace::TraceEvent;

/// docs/findings.md#local-turns-interleave: the local backend takes no lock (letta-protocol.md
/// §7.1 step 4), and its conversation-stream "resume" runs a new turn (§7.1, §10.3 item 7), so
/// two turns of one conversation can run at once and write the transcript interleaved.
pub const LOCAL_TURNS_INTERLEAVE: &str = "local-turns-interleave";

/// The findings with a signature (the ones `sometimes = true` may name).
pub const WITH_SIGNATURE: [&str; 1] = [LOCAL_TURNS_INTERLEAVE];

/// Whether the trace shows the finding's signature (false for a finding without one).
pub fn shows(finding: &str, events: &[TraceEvent]) -> bool {
    match finding {
        LOCAL_TURNS_INTERLEAVE => turns_interleaved(events),
        _ => false,
    }
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
