//! `history-valid`'s reading of what the model is shown (kimi-loop.md §8.3): a tool result
//! the loop recorded is pushed into the history as a tool message and projected into every
//! later request with `tool-result-render.ts`'s rendering. So each tool message a request
//! shows (`loop_provider_request`'s `results`) must read as the rendering of a result the loop
//! recorded for that call (`loop_tool_result`), followed at most by its note:
//! - an error: `<system>ERROR: Tool execution failed.</system>`, a line break and the output,
//!   or `<system>ERROR: Tool execution failed. Tool output is empty.</system>` when it is empty;
//! - a success whose output is blank or the loop's `Tool output is empty.` placeholder:
//!   `<system>Tool output is empty.</system>`; any other success, its output as it is.
//!
//! The trace cuts both texts to their first characters, so the two are compared on what both
//! still show. A call with no recorded result (the host's backstop, a mid-history repair), or
//! one whose output is not a single text, is left alone.

use std::collections::BTreeMap;

use crate::harness::invariants::{HISTORY_VALID, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::kimi::agent::{TRACE_NON_TEXT_OUTPUT, TRACE_OUTPUT_CHARS};
use crate::model::port::observe::Observation;

/// kimi-loop.md §8.3 step 2 (`tool-result-render.ts`), restated rather than imported so a
/// changed text in the model shows here.
const ERROR_STATUS: &str = "<system>ERROR: Tool execution failed.</system>";
const ERROR_EMPTY: &str = "<system>ERROR: Tool execution failed. Tool output is empty.</system>";
const EMPTY_STATUS: &str = "<system>Tool output is empty.</system>";
/// The loop's placeholder for an empty output (kimi-loop.md §4.3 `Tool output is empty.`).
const LOOP_EMPTY_OUTPUT: &str = "Tool output is empty.";

/// A trace text without the cut mark, and whether it was cut.
fn uncut(text: &str) -> (&str, bool) {
    match text.strip_suffix('…') {
        Some(kept) if kept.chars().count() == TRACE_OUTPUT_CHARS => (kept, true),
        _ => (text, false),
    }
}

/// The start of what the projection shows for a recorded result (all of it when the trace
/// kept the whole output).
fn rendered(is_error: bool, output: &str) -> String {
    let (output, cut) = uncut(output);
    let empty = !cut && (output.trim().is_empty() || output == LOOP_EMPTY_OUTPUT);
    match (is_error, empty) {
        (true, true) => ERROR_EMPTY.to_owned(),
        (true, false) => format!("{ERROR_STATUS}\n{output}"),
        (false, true) => EMPTY_STATUS.to_owned(),
        (false, false) => output.to_owned(),
    }
}

/// Whether a shown text can be `expected` (a rendering, or its start) with a note after it.
fn agrees(expected: &str, shown: &str) -> bool {
    let (shown, cut) = uncut(shown);
    shown.starts_with(expected) || (cut && expected.starts_with(shown))
}

/// Each tool message of each request against the results recorded for its call before it.
pub fn violations(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    // Call id → every (is_error, output) the loop recorded for it so far.
    let mut recorded: BTreeMap<&str, Vec<(bool, &str)>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        if e.host != "client" {
            continue;
        }
        match &e.obs {
            Observation::LoopToolResult {
                tool_call_id,
                is_error,
                output,
            } => recorded
                .entry(tool_call_id)
                .or_default()
                .push((*is_error, output)),
            Observation::LoopProviderRequest { call, results, .. } => {
                for (id, shown) in results {
                    let Some(results) = recorded.get(id.as_str()) else {
                        continue;
                    };
                    if results
                        .iter()
                        .any(|(_, output)| *output == TRACE_NON_TEXT_OUTPUT)
                        || results
                            .iter()
                            .any(|(is_error, output)| agrees(&rendered(*is_error, output), shown))
                    {
                        continue;
                    }
                    let (is_error, output) = results[results.len() - 1];
                    out.push(Violation::at(
                        HISTORY_VALID,
                        i,
                        format!(
                            "model call #{call} shows tool call {id}'s result as {shown:?}, but the loop recorded is_error={is_error} {output:?}, which the projection renders as {:?} (kimi-loop.md §8.3 step 2)",
                            rendered(is_error, output)
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

    fn result(is_error: bool, output: &str) -> TraceEvent {
        ev(Observation::LoopToolResult {
            tool_call_id: "a".into(),
            is_error,
            output: output.into(),
        })
    }

    fn request(shown: &str) -> TraceEvent {
        ev(Observation::LoopProviderRequest {
            call: 1,
            path: "/v1/messages".into(),
            messages: 3,
            tools: 1,
            results: BTreeMap::from([("a".to_owned(), shown.to_owned())]),
        })
    }

    fn judged(is_error: bool, output: &str, shown: &str) -> Vec<String> {
        messages(violations(&[result(is_error, output), request(shown)]))
    }

    /// The four renderings of §8.3 step 2 pass, with a note after them and cut as the trace
    /// cuts; a result shown as another text, or without its error status, breaks
    /// `history-valid`.
    #[test]
    fn a_request_shows_each_tool_result_as_the_loop_recorded_it() {
        let long = "x".repeat(80);
        let cut = |s: &str| {
            format!(
                "{}…",
                s.chars().take(TRACE_OUTPUT_CHARS).collect::<String>()
            )
        };
        let faithful = [
            (false, "read /a", "read /a".to_owned()),
            (
                false,
                "read /a",
                "read /a\n<system>note</system>".to_owned(),
            ),
            (
                true,
                "No such file",
                format!("{ERROR_STATUS}\nNo such file"),
            ),
            (true, "", ERROR_EMPTY.to_owned()),
            (false, " \n", EMPTY_STATUS.to_owned()),
            (false, "Tool output is empty.", EMPTY_STATUS.to_owned()),
            (false, &cut(&long), cut(&long)),
            (true, &cut(&long), cut(&format!("{ERROR_STATUS}\n{long}"))),
            (false, TRACE_NON_TEXT_OUTPUT, "[media]".to_owned()),
        ];
        for (is_error, output, shown) in faithful {
            assert_eq!(
                judged(is_error, output, &shown),
                Vec::<String>::new(),
                "{shown:?}"
            );
        }
        // A call with no recorded result is the backstop's or a repair's: not judged here.
        assert_eq!(
            messages(violations(&[request("xyzzy")])),
            Vec::<String>::new()
        );
        assert_eq!(
            judged(false, "read /a", "xyzzy"),
            [
                "model call #1 shows tool call a's result as \"xyzzy\", but the loop recorded is_error=false \"read /a\", which the projection renders as \"read /a\" (kimi-loop.md §8.3 step 2)"
            ]
        );
        assert_eq!(
            judged(true, "No such file", "No such file"),
            [
                "model call #1 shows tool call a's result as \"No such file\", but the loop recorded is_error=true \"No such file\", which the projection renders as \"<system>ERROR: Tool execution failed.</system>\\nNo such file\" (kimi-loop.md §8.3 step 2)"
            ]
        );
        assert_eq!(judged(false, "", "").len(), 1);
    }
}
