//! `loop-envelope`'s reading of result coercion (kimi-loop.md §4.3): a tool's own result
//! passes `coerceToolResult` untouched and `normalizeToolResult` keeps `isError: true` only
//! when it is `true`, so the host having no `finalizeToolResult` hook, a call's `tool.result`
//! is an error exactly when its execution ended in one. An execution that ended `ok` or
//! `error` (`loop_tool_end`) must be answered with that outcome; one that was aborted, with
//! an error. A garbage value (`client-faults-fire`) or a dropped execution (the grace
//! timeout's text, §4.5) is judged elsewhere.

use std::collections::BTreeMap;

use crate::harness::invariants::{LOOP_ENVELOPE, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// Each execution that ended `ok`, `error` or `aborted`, against the `tool.result` that
/// answers its call next.
pub fn violations(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    // Call id → how its execution ended, until its result comes.
    let mut ended: BTreeMap<&str, &str> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        if e.host != "client" {
            continue;
        }
        match &e.obs {
            Observation::TurnStart { .. } => ended.clear(),
            Observation::LoopToolEnd { tool_call_id, how } => {
                if matches!(how.as_str(), "ok" | "error" | "aborted") {
                    ended.insert(tool_call_id, how);
                } else {
                    ended.remove(tool_call_id.as_str());
                }
            }
            Observation::LoopToolResult {
                tool_call_id,
                is_error,
                output,
            } => {
                let Some(how) = ended.remove(tool_call_id.as_str()) else {
                    continue;
                };
                if *is_error != (how != "ok") {
                    let want = if how == "ok" { "a success" } else { "an error" };
                    out.push(Violation::at(
                        LOOP_ENVELOPE,
                        i,
                        format!(
                            "tool call {tool_call_id}'s execution ended `{how}`, but its tool.result is_error={is_error} {output:?}: coerceToolResult and normalizeToolResult keep a tool's own isError, so it must be {want} (kimi-loop.md §4.3)"
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::kimi::test_events::{ev, messages};

    fn end(how: &str) -> TraceEvent {
        ev(Observation::LoopToolEnd {
            tool_call_id: "a".into(),
            how: how.into(),
        })
    }

    fn result(is_error: bool, output: &str) -> TraceEvent {
        ev(Observation::LoopToolResult {
            tool_call_id: "a".into(),
            is_error,
            output: output.into(),
        })
    }

    /// A result that flips its execution's outcome breaks `loop-envelope`; a garbage or
    /// dropped execution is left to the rules that know its text.
    #[test]
    fn a_tool_result_carries_its_execution_outcome() {
        let faithful = [
            [end("ok"), result(false, "read /a")],
            [end("error"), result(true, "No such file")],
            [end("aborted"), result(true, "Tool \"Read\" was aborted")],
            [
                end("garbage"),
                result(true, "Tool \"Read\" returned no result."),
            ],
            [
                end("dropped"),
                result(true, "Tool \"Read\" aborted by grace timeout (2000ms)"),
            ],
        ];
        for trace in faithful {
            assert_eq!(messages(violations(&trace)), Vec::<String>::new());
        }
        assert_eq!(
            messages(violations(&[end("ok"), result(true, "read /a")])),
            [
                "tool call a's execution ended `ok`, but its tool.result is_error=true \"read /a\": coerceToolResult and normalizeToolResult keep a tool's own isError, so it must be a success (kimi-loop.md §4.3)"
            ]
        );
        assert_eq!(
            messages(violations(&[end("error"), result(false, "No such file")])),
            [
                "tool call a's execution ended `error`, but its tool.result is_error=false \"No such file\": coerceToolResult and normalizeToolResult keep a tool's own isError, so it must be an error (kimi-loop.md §4.3)"
            ]
        );
    }
}
