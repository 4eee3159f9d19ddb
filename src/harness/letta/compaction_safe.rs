//! `compaction-safe` (DESIGN.md §5, docs/invariants.md) over the server's `compaction` events:
//! a compaction never separates a tool call from its result, cuts only at an assistant
//! message, summarises exactly the messages it removes (none lost, none twice), and brings the
//! estimate under the threshold, or the turn ends with the documented error (the run ends
//! `error`); each step of the overflow ladder offers the summariser no more than its budget.
//! Pure: it reads a finished trace.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::harness::invariants::{COMPACTION_SAFE, Violation};
use crate::harness::trace::TraceEvent;
use crate::harness::world_start::WorldStart;
use crate::model::letta::server::compaction::threshold;
use crate::model::port::observe::Observation;

/// A message as the `compaction` event describes it: `role:id[calls]`.
struct Described<'a> {
    role: &'a str,
    id: &'a str,
    calls: Vec<&'a str>,
}

fn parse(s: &str) -> Described<'_> {
    let (role, rest) = s.split_once(':').unwrap_or((s, ""));
    let (id, calls) = match rest.split_once('[') {
        Some((id, c)) => (
            id,
            c.trim_end_matches(']')
                .split(',')
                .filter(|x| !x.is_empty())
                .collect(),
        ),
        None => (rest, Vec::new()),
    };
    Described { role, id, calls }
}

/// How many `history` trace entries the messages a compaction removed stand for: one per user
/// message and tool result, one per assistant message plus one per tool call it made.
pub fn removed_history_units(removed: &[String]) -> u64 {
    removed
        .iter()
        .map(|s| {
            let d = parse(s);
            match d.role {
                "assistant" => 1 + d.calls.len() as u64,
                "summary" => 0,
                _ => 1,
            }
        })
        .sum()
}

/// `compaction-safe`. `start` is the world's simulated time zero on the wall clock, which the
/// summary's time text counts from.
pub fn compaction_safe(events: &[TraceEvent], start: WorldStart) -> Vec<Violation> {
    let mut out = Vec::new();
    // What each summary message written so far stands for: the ids its compaction summarised.
    let mut summaries: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let Observation::Compaction {
            conversation_id,
            run_id,
            mode,
            removed,
            summarized,
            kept,
            appended,
            tokens_after,
            threshold,
            trigger,
            fell_back,
            summary,
            ..
        } = &e.obs
        else {
            continue;
        };
        let mut violation = |message: String| {
            out.push(Violation {
                invariant: COMPACTION_SAFE,
                event: Some(i),
                message: format!("compaction of {conversation_id}: {message}"),
            })
        };
        let kept: Vec<Described> = kept.iter().map(|s| parse(s)).collect();
        let removed_d: Vec<Described> = removed.iter().map(|s| parse(s)).collect();
        // 1. No tool call on one side of the cut with its result on the other; for that, each
        // result names the one call it answers.
        for m in kept.iter().chain(&removed_d).filter(|m| m.role == "tool") {
            if m.calls.len() != 1 {
                violation(format!(
                    "the tool result {} names {} tool calls, not the one it answers, so the cut cannot be held to its call",
                    m.id,
                    m.calls.len()
                ));
            }
        }
        let kept_calls: BTreeSet<&str> = kept
            .iter()
            .filter(|m| m.role == "assistant")
            .flat_map(|m| m.calls.iter().copied())
            .collect();
        for m in kept.iter().filter(|m| m.role == "tool") {
            for c in &m.calls {
                if !kept_calls.contains(c) {
                    violation(format!(
                        "the result {} of tool call {c} was kept but its call was removed",
                        m.id
                    ));
                }
            }
        }
        for m in removed_d.iter().filter(|m| m.role == "tool") {
            for c in &m.calls {
                if kept_calls.contains(c) {
                    violation(format!(
                        "the result {} of tool call {c} was removed but its call was kept",
                        m.id
                    ));
                }
            }
        }
        // 2. The kept part starts at an assistant message (the sliding window), or is empty or
        // one trailing tool-call assistant message (`all`). Messages written while the
        // summariser ran follow the cut and are not part of it.
        let appended: BTreeSet<&str> = appended.iter().map(|s| parse(s).id).collect();
        let rest: Vec<&Described> = kept
            .iter()
            .filter(|m| m.role != "summary" && !appended.contains(m.id))
            .collect();
        if let Some(first) = rest.first()
            && first.role != "assistant"
        {
            violation(format!(
                "the {mode} cut is not at an assistant message: the kept part starts with {}:{}",
                first.role, first.id
            ));
        }
        // 3. Summarised exactly what it removed: none lost, none twice.
        let summarized_ids: BTreeSet<&str> = summarized.iter().map(|s| parse(s).id).collect();
        // Two compactions of one conversation can plan from the same list (a cancelled run's
        // compaction still applies, and the local backend's summariser call takes no abort
        // signal: letta-protocol.md §7.4, §8.6); the one that applies later replaces the
        // other's summary. That loses nothing when every message the replaced summary stood
        // for, unfolding the summaries it summarised in turn, is one this compaction
        // summarises or keeps, directly or through a summary.
        let kept_ids: BTreeSet<&str> = kept.iter().map(|m| m.id).collect();
        let accounted = originals(&summaries, summarized_ids.union(&kept_ids).copied());
        let covered = |id: &str| {
            summaries.contains_key(id) && originals(&summaries, [id]).is_subset(&accounted)
        };
        for m in removed_d.iter().filter(|m| !summarized_ids.contains(m.id)) {
            if m.role == "summary" && covered(m.id) {
                continue;
            }
            violation(format!(
                "{} was removed from context without being summarised",
                m.id
            ));
        }
        for id in summarized_ids.intersection(&kept_ids) {
            violation(format!("{id} was summarised and also kept"));
        }
        if let Some(new_summary) = kept.iter().find(|m| m.role == "summary") {
            summaries.insert(new_summary.id, summarized_ids.clone());
        }
        // 4. Under the threshold, or the run ends with the documented error.
        if let Some(t) = threshold
            && tokens_after > t
        {
            let ended_error = run_id.as_ref().is_some_and(|r| {
                events[i..].iter().any(|e| {
                    matches!(&e.obs, Observation::RunEnded { run_id, stop_reason }
                        if run_id == r && stop_reason == "error")
                })
            });
            if run_id.is_some() && !ended_error {
                violation(format!(
                    "{tokens_after} tokens after compaction, above the threshold {t}, and the run did not end with the error"
                ));
            }
        }
        // 5. The summary message tells the truth about the compaction that wrote it.
        let told = Told {
            at_unix_ms: start.unix_ms() + e.t_ms,
            trigger,
            threshold: *threshold,
            fell_back: *fell_back,
            summarized: summarized.len() as u64,
            after: kept.len().saturating_sub(appended.len()) as u64,
        };
        for message in told.check(&summary.summary_time, &summary.summary_stats) {
            violation(message);
        }
    }
    out.extend(ladder_overruns(events));
    out
}

/// The `time` text Letta stamps on what it writes (`2026-11-30 12:46:10 AM UTC+0000`,
/// captures/letta_e2e b) for `unix_ms`, on a 12-hour clock. Written from the harness's own
/// calendar and arithmetic, so the server's formatter is not judged by itself.
fn letta_time_text(unix_ms: u64) -> String {
    let day = WorldStart(unix_ms).to_string();
    let of_day = unix_ms / 1000 % 86_400;
    let hour = of_day / 3600;
    format!(
        "{} {:02}:{:02}:{:02} {} UTC+0000",
        &day[..10],
        (hour + 11) % 12 + 1,
        of_day / 60 % 60,
        of_day % 60,
        if hour < 12 { "AM" } else { "PM" }
    )
}

/// What the trace knows of a compaction, against which its stored summary's `time` and
/// `compaction_stats` are read (letta-protocol.md §8.4, §8.6).
struct Told<'a> {
    /// When the compaction ran, on the wall clock.
    at_unix_ms: u64,
    trigger: &'a str,
    threshold: Option<u64>,
    fell_back: bool,
    /// Messages its plan summarised: what it took out of context, as planned (a compaction
    /// planned while another ran may find less to remove when it applies).
    summarized: u64,
    /// The in-context messages it left, its summary first, less what was written meanwhile.
    after: u64,
}

impl Told<'_> {
    fn check(&self, time: &str, stats: &Value) -> Vec<String> {
        let mut out = Vec::new();
        // The time the summary is packed at is the compaction's own. Over real TCP the model
        // reads the clock once for the packing and once for the trace event, so the second
        // before also holds.
        let at = self.at_unix_ms;
        let stamped = [at, at.saturating_sub(1000)].map(letta_time_text);
        if !stamped.iter().any(|s| s == time) {
            out.push(format!(
                "the summary message says it was written at {time:?}, not {:?}",
                stamped[0]
            ));
        }
        let count = |key: &str| stats.get(key).and_then(Value::as_u64);
        if stats.get("trigger").and_then(Value::as_str) != Some(self.trigger) {
            out.push(format!(
                "the summary's compaction_stats {stats} do not name the trigger {}",
                self.trigger
            ));
        }
        let window = count("context_window");
        if window.map(threshold) != self.threshold {
            out.push(format!(
                "the summary's context_window {window:?} does not give the compaction's threshold {:?}",
                self.threshold
            ));
        }
        let (Some(before), Some(after)) = (
            count("messages_count_before"),
            count("messages_count_after"),
        ) else {
            out.push(format!(
                "the summary's compaction_stats {stats} lack the message counts"
            ));
            return out;
        };
        if after != self.after {
            out.push(format!(
                "the summary says {after} messages are left, the conversation holds {}",
                self.after
            ));
        }
        // Without the fallback the counts are those of one cut: what it summarised and what
        // it left, the summary standing in for the summarised. The `all` fallback after a
        // sliding pass counts from that pass's result, which is no shorter than what is left
        // (§8.2, §8.4).
        let planned = (self.summarized + self.after).saturating_sub(1);
        let fits = if self.fell_back {
            (self.after.min(planned)..=planned).contains(&before)
        } else {
            before == planned
        };
        if !fits {
            out.push(format!(
                "the summary says {before} messages were in context before, but the compaction summarised {} and left {}",
                self.summarized, self.after
            ));
        }
        out
    }
}

/// The messages `ids` stand for: a summary stands for what its compaction summarised, in turn
/// unfolded; any other message for itself. A summary only summarises messages written before
/// it, so the unfolding ends.
fn originals<'a>(
    summaries: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    ids: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<&'a str> {
    let mut out = BTreeSet::new();
    let mut todo: Vec<&str> = ids.into_iter().collect();
    while let Some(id) = todo.pop() {
        match summaries.get(id) {
            Some(stood_for) => todo.extend(stood_for.iter().copied()),
            None => {
                out.insert(id);
            }
        }
    }
    out
}

/// Each step of the overflow ladder offers the summariser at most its budget of characters
/// (letta-protocol.md §8.2: the transcript is "rebuilt with a middle truncation budget").
fn ladder_overruns(events: &[TraceEvent]) -> Vec<Violation> {
    events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.obs {
            Observation::SummariserCall {
                budget: Some(budget),
                transcript_chars,
                ..
            } if transcript_chars > budget => Some(Violation {
                invariant: COMPACTION_SAFE,
                event: Some(i),
                message: format!(
                    "the overflow ladder's {budget}-character step offered the summariser {transcript_chars} characters"
                ),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::port::observe::StoredSummary;

    fn summariser_call(budget: Option<u64>, transcript_chars: u64) -> TraceEvent {
        TraceEvent {
            t_ms: 0,
            host: "server".into(),
            obs: Observation::SummariserCall {
                conversation_id: "conv-1".into(),
                budget,
                transcript_chars,
                outcome: "ok chars=12".into(),
            },
        }
    }

    /// A sliding-window compaction at time 0 whose summary's stats count what it summarised
    /// and kept.
    fn compaction(removed: &[&str], summarized: &[&str], kept: &[&str]) -> TraceEvent {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        let stats = serde_json::json!({
            "trigger": "context_window_overflow",
            "context_tokens_before": 120,
            "context_tokens_after": 10,
            "context_window": 128,
            "messages_count_before": summarized.len() + kept.len() - 1,
            "messages_count_after": kept.len(),
        });
        TraceEvent {
            t_ms: 0,
            host: "server".into(),
            obs: Observation::Compaction {
                conversation_id: "conv-1".into(),
                run_id: None,
                trigger: "context_window_overflow".into(),
                mode: "sliding_window".into(),
                removed: list(removed),
                summarized: list(summarized),
                kept: list(kept),
                appended: Vec::new(),
                tokens_after: 10,
                threshold: Some(threshold(128)),
                fell_back: false,
                laddered: false,
                summary: Box::new(StoredSummary {
                    summary_time: letta_time_text(WorldStart::default().unix_ms()),
                    summary_stats: stats,
                }),
            },
        }
    }

    /// Two compactions planned from one list (a cancelled run's and the next run's): the one
    /// that applies later replaces the other's summary, which stood for what it summarises too,
    /// directly or through an earlier summary of the same messages. Replacing a summary that
    /// stood for more loses what it stood for.
    #[test]
    fn a_summary_replaced_by_one_of_the_same_messages_is_not_lost() {
        let first = compaction(
            &["user:m1", "assistant:m2", "user:m3"],
            &["user:m1", "assistant:m2", "user:m3"],
            &["summary:s1", "assistant:m4", "user:m5"],
        );
        let second_of_the_same = compaction(
            &["summary:s1"],
            &["user:m1", "assistant:m2", "user:m3"],
            &["summary:s2", "assistant:m4", "user:m5"],
        );
        let ok = [first.clone(), second_of_the_same];
        assert_eq!(compaction_safe(&ok, WorldStart::default()), []);
        // A third, planned before the second applied, summarised s1 and replaces s2.
        let third_through_s1 = compaction(
            &["summary:s2"],
            &["summary:s1"],
            &["summary:s3", "assistant:m4", "user:m5"],
        );
        let ok3 = [ok[0].clone(), ok[1].clone(), third_through_s1];
        assert_eq!(compaction_safe(&ok3, WorldStart::default()), []);
        let second_of_less = compaction(
            &["summary:s1"],
            &["user:m1", "assistant:m2"],
            &["summary:s2", "assistant:m4", "user:m5"],
        );
        let v = compaction_safe(&[first, second_of_less], WorldStart::default());
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            v[0].message,
            "compaction of conv-1: s1 was removed from context without being summarised"
        );
    }

    /// The stored summary carries the compaction's time and counts; a summary stamped at
    /// another time, or counting other messages than the cut removed and kept, is not what
    /// the model will be told on its next step.
    /// A tool result that names no call (or several) cannot be held to the cut, so it breaks
    /// the rule itself: otherwise a cut between a call and its unnamed result would pass.
    #[test]
    fn a_tool_result_names_the_one_call_it_answers() {
        let fine = compaction(
            &["user:m1", "assistant:m2[t1]", "tool:m3[t1]"],
            &["user:m1", "assistant:m2[t1]", "tool:m3[t1]"],
            &["summary:s1", "assistant:m4[t2]", "tool:m5[t2]"],
        );
        assert_eq!(compaction_safe(&[fine], WorldStart::default()), []);
        let unnamed = compaction(
            &["user:m1", "assistant:m2[t1]"],
            &["user:m1", "assistant:m2[t1]"],
            &["summary:s1", "tool:m3[]", "assistant:m4"],
        );
        let messages: Vec<String> = compaction_safe(&[unnamed], WorldStart::default())
            .into_iter()
            .map(|v| v.message)
            .collect();
        assert_eq!(
            messages[0],
            "compaction of conv-1: the tool result m3 names 0 tool calls, not the one it answers, so the cut cannot be held to its call"
        );
    }

    #[test]
    fn a_summary_that_misstates_its_compaction_breaks_compaction_safety() {
        let fine = compaction(
            &["user:m1", "assistant:m2[t1]", "tool:m3[t1]"],
            &["user:m1", "assistant:m2[t1]", "tool:m3[t1]"],
            &["summary:s1", "assistant:m4", "user:m5"],
        );
        assert_eq!(
            compaction_safe(std::slice::from_ref(&fine), WorldStart::default()),
            []
        );
        let mut later = fine.clone();
        later.t_ms = 61_000;
        let mut miscounted = fine.clone();
        let Observation::Compaction { summary, .. } = &mut miscounted.obs else {
            unreachable!()
        };
        summary.summary_stats["messages_count_after"] = 4.into();
        summary.summary_stats["messages_count_before"] = 7.into();
        let mut unpacked = fine;
        let Observation::Compaction { summary, .. } = &mut unpacked.obs else {
            unreachable!()
        };
        summary.summary_time = String::new();
        summary.summary_stats = Value::Null;
        let messages = |e: TraceEvent| -> Vec<String> {
            compaction_safe(&[e], WorldStart::default())
                .into_iter()
                .map(|v| v.message)
                .collect()
        };
        assert_eq!(
            messages(later),
            [
                "compaction of conv-1: the summary message says it was written at \"2026-01-01 12:00:00 AM UTC+0000\", not \"2026-01-01 12:01:01 AM UTC+0000\""
            ]
        );
        assert_eq!(
            messages(miscounted),
            [
                "compaction of conv-1: the summary says 4 messages are left, the conversation holds 3",
                "compaction of conv-1: the summary says 7 messages were in context before, but the compaction summarised 3 and left 3",
            ]
        );
        assert_eq!(
            messages(unpacked),
            [
                "compaction of conv-1: the summary message says it was written at \"\", not \"2026-01-01 12:00:00 AM UTC+0000\"",
                "compaction of conv-1: the summary's compaction_stats null do not name the trigger context_window_overflow",
                "compaction of conv-1: the summary's context_window None does not give the compaction's threshold Some(103)",
                "compaction of conv-1: the summary's compaction_stats null lack the message counts",
            ]
        );
    }

    /// A ladder step whose middle truncation kept the whole budget as its head and then added
    /// the marker (a 30 % split that became 100 %) offers more than the budget.
    #[test]
    fn a_ladder_step_over_its_budget_breaks_compaction_safety() {
        let fine = [
            summariser_call(None, 250_000),
            summariser_call(Some(2000), 1270),
            summariser_call(Some(2000), 2000),
        ];
        assert_eq!(compaction_safe(&fine, WorldStart::default()), []);
        let v = compaction_safe(&[summariser_call(Some(2000), 2070)], WorldStart::default());
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            v[0].message,
            "the overflow ladder's 2000-character step offered the summariser 2070 characters"
        );
    }

    /// The oracle's time text and the server's agree at every hour of a day, on both sides of
    /// noon and midnight, and across a February that 2100 does not extend to a 29th.
    #[test]
    fn the_oracles_time_text_is_the_servers_at_every_hour() {
        use crate::model::letta::server::ids::letta_time;
        for start in ["2026-01-01T00:00:00Z", "2100-02-28T00:30:07Z"] {
            let t0 = WorldStart::parse(start).unwrap().unix_ms();
            for hour in 0..26 {
                let ms = t0 + hour * 3_600_000 + 999;
                assert_eq!(letta_time_text(ms), letta_time(ms), "{start} + {hour} h");
            }
        }
        assert_eq!(
            letta_time_text(WorldStart::parse("2100-03-01T13:05:09Z").unwrap().unix_ms()),
            "2100-03-01 01:05:09 PM UTC+0000"
        );
    }
}
