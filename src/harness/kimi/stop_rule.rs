//! `loop-envelope`'s reading of a `step.end`'s stop reason and diagnostics (kimi-loop.md §4.1,
//! §3.2) and of the tool calls its step recorded (§4.1's post-adjustments, §4.2), written from
//! the reference rather than taken from the step, so a step that derives or reports its reason
//! wrongly cannot also judge itself right. The inputs are the words of the trace: the
//! normalised provider reason of the step's response (`loop_model_return`'s `provider_finish`,
//! kosong's `FinishReason`), its number of tool calls, the effective reason `step.end`
//! reports, and the step's `tool.call`s with their results.

/// §4.1's table (`deriveStepStopReason`): the step's reason from the provider's reason and
/// whether the response carried tool calls.
pub fn derived(provider: Option<&str>, has_tool_calls: bool) -> &'static str {
    match provider {
        Some("truncated") => "max_tokens",
        Some("filtered") => "filtered",
        Some("paused") => "paused",
        Some("completed") | None if has_tool_calls => "tool_use",
        Some("completed") | None => "end_turn",
        Some("tool_calls") if has_tool_calls => "tool_use",
        // `tool_calls` without calls, `other`, and any word kosong does not have.
        Some(_) => "unknown",
    }
}

/// Whether `effective` may follow from `derived`: it is the derived reason, or `end_turn`
/// where the step derived `tool_use` and then stopped the turn (§4.1 post-adjustments 1 and
/// 2: the usage hook or the batch asked to stop). Adjustment 4 changes only what `runTurn`
/// is told, after `step.end`.
pub fn effective_follows(derived: &str, effective: &str) -> bool {
    effective == derived || (derived == "tool_use" && effective == "end_turn")
}

/// §3.2's diagnostic rule: `step.end` omits both the provider's reason and its raw one when
/// the provider said `completed` and the step ended `end_turn`, or said `tool_calls` and the
/// step ended `tool_use`; otherwise it carries each one the response had.
pub fn diagnostics<'a>(
    provider: Option<&'a str>,
    raw: Option<&'a str>,
    effective: &str,
) -> (Option<&'a str>, Option<&'a str>) {
    let unremarkable = matches!(
        (provider, effective),
        (Some("completed"), "end_turn") | (Some("tool_calls"), "tool_use")
    );
    if unremarkable {
        (None, None)
    } else {
        (provider, raw)
    }
}

/// What a `step.end` reported: its effective reason and the diagnostics it carried.
pub struct Reported<'a> {
    pub finish_reason: &'a str,
    pub provider: Option<&'a str>,
    pub raw: Option<&'a str>,
}

/// What the step's response was, as `loop_model_return` reported it.
pub struct Response<'a> {
    pub tool_calls: usize,
    pub provider: Option<&'a str>,
    pub raw: Option<&'a str>,
}

/// kimi-loop.md §4.2, `UNEXECUTED_TOOL_CALL_OUTPUT`: the error result of a call its response
/// ended before it could run (the oracle's own copy; the dash is an em dash, U+2014).
pub const UNEXECUTED_OUTPUT: &str = "This tool call was not executed: the model response ended \
before tool execution could start (the provider stream was interrupted). Do not assume the tool \
ran \u{2014} re-issue the call if it is still needed.";

/// Whether a `tool.result`'s output, as the trace shortens it, is §4.2's unexecuted text.
pub fn is_unexecuted_output(output: &str) -> bool {
    let shown = output.trim_end_matches('\u{2026}');
    !shown.is_empty() && UNEXECUTED_OUTPUT.starts_with(shown)
}

/// A `tool.call` the step recorded, and its `tool.result` once one came: whether it is an
/// error and the start of its output, as the trace shortens it.
pub struct Recorded {
    pub id: String,
    pub result: Option<(bool, String)>,
}

/// Where a `step.end` disagrees with its response under §4.1 and §3.2, or its step recorded
/// the response's tool calls other than §4.1's post-adjustments and §4.2 say: each message
/// says what it reports and what the rule gives (the caller names the turn and step).
pub fn violations(
    reported: &Reported<'_>,
    response: &Response<'_>,
    recorded: &[Recorded],
) -> Vec<String> {
    let derived = derived(response.provider, response.tool_calls > 0);
    let mut out = Vec::new();
    if !effective_follows(derived, reported.finish_reason) {
        out.push(format!(
            "reports finishReason {} but its response ({}, {} tool calls) derives {derived} (kimi-loop.md §4.1)",
            reported.finish_reason,
            response.provider.unwrap_or("no provider reason"),
            response.tool_calls
        ));
    }
    let want = diagnostics(response.provider, response.raw, reported.finish_reason);
    let got = (reported.provider, reported.raw);
    if got != want {
        let shown = |(provider, raw): (Option<&str>, Option<&str>)| {
            format!(
                "providerFinishReason {}, rawFinishReason {}",
                provider.unwrap_or("absent"),
                raw.unwrap_or("absent")
            )
        };
        out.push(format!(
            "({}) carries {}; for its response ({}, raw {}) kimi-loop.md §3.2's diagnostic rule gives {}",
            reported.finish_reason,
            shown(got),
            response.provider.unwrap_or("no provider reason"),
            response.raw.unwrap_or("absent"),
            shown(want)
        ));
    }
    out.extend(recorded_violations(
        derived,
        reported.finish_reason,
        response,
        recorded,
    ));
    out
}

/// §4.1's post-adjustments and §4.2: a step that runs its batch records each of the
/// response's calls (skipped ones too, §4.4); one whose usage hook stopped the turn before the
/// batch records none, so a `tool_use` response that ended the turn records all or none; a
/// `paused`, `unknown` or `max_tokens` response's calls are each recorded with the unexecuted
/// error result; a `filtered` response's calls vanish.
fn recorded_violations(
    derived: &str,
    effective: &str,
    response: &Response<'_>,
    recorded: &[Recorded],
) -> Vec<String> {
    let (n, calls) = (response.tool_calls, recorded.len());
    let unexecuted = matches!(derived, "paused" | "unknown" | "max_tokens");
    let allowed = match (derived, effective) {
        ("tool_use", "end_turn") => calls == 0 || calls == n,
        ("filtered", _) => calls == 0,
        _ => calls == n,
    };
    let mut out = Vec::new();
    if !allowed {
        let rule = match derived {
            "filtered" => "a filtered response's calls vanish (kimi-loop.md §4.1 item 3)",
            "tool_use" => "a batch records every call (kimi-loop.md §4.1, §4.4)",
            _ if unexecuted => "each is recorded unexecuted (kimi-loop.md §4.2)",
            _ => "a response without calls records none",
        };
        out.push(format!(
            "({effective}) recorded {calls} tool.call(s) for its response's {n} tool calls: {rule}"
        ));
    }
    if unexecuted {
        for call in recorded {
            let ok = call
                .result
                .as_ref()
                .is_some_and(|(is_error, output)| *is_error && is_unexecuted_output(output));
            if !ok {
                let got = match &call.result {
                    Some((is_error, output)) => format!("is_error={is_error} {output:?}"),
                    None => "no result".into(),
                };
                out.push(format!(
                    "({effective}) gave its unexecuted call {} {got}, not the error result of kimi-loop.md §4.2",
                    call.id
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kimi::turn_loop::step::derive_step_stop_reason;
    use crate::model::kimi::turn_loop::types::FinishReason;

    /// The rule agrees with the loop's own table on every row of §4.1: the two were written
    /// apart, so a disagreement is a mistake in one of them.
    #[test]
    fn the_rule_agrees_with_the_loops_table() {
        let reasons = [
            None,
            Some(FinishReason::Completed),
            Some(FinishReason::ToolCalls),
            Some(FinishReason::Truncated),
            Some(FinishReason::Filtered),
            Some(FinishReason::Paused),
            Some(FinishReason::Other),
        ];
        for reason in reasons {
            for calls in [false, true] {
                assert_eq!(
                    derived(reason.map(FinishReason::as_str), calls),
                    derive_step_stop_reason(reason, calls).as_str(),
                    "{reason:?} with calls {calls}"
                );
            }
        }
    }

    /// `loop-envelope` on a step whose provider said `completed` with a tool call: the step
    /// runs its tool (`tool_use`) and must say what the provider said (§4.1's example); a loop
    /// that drops the diagnostic, or one that ends the step with a reason the table does not
    /// give, breaks it.
    #[test]
    fn loop_envelope_holds_step_end_to_its_response() {
        use crate::harness::kimi::invariants::loop_envelope;
        use crate::harness::kimi::test_events::{begin, ev, messages, step_uuid, turn_start};
        use crate::model::port::observe::Observation;
        let trace = |finish_reason: &str, provider: Option<&str>, raw: Option<&str>| {
            vec![
                turn_start(),
                begin(1),
                ev(Observation::LoopModelReturn {
                    turn_step: None,
                    usage: Default::default(),
                    tool_calls: 1,
                    finish: Some("stop".into()),
                    provider_finish: Some("completed".into()),
                }),
                ev(Observation::LoopToolCall {
                    step: 1,
                    tool_call_id: "a".into(),
                    name: "T".into(),
                    args: "{}".into(),
                }),
                ev(Observation::LoopToolResult {
                    tool_call_id: "a".into(),
                    is_error: false,
                    output: String::new(),
                }),
                ev(Observation::LoopStepEnd {
                    turn_id: "1".into(),
                    step: 1,
                    uuid: step_uuid(1),
                    finish_reason: finish_reason.into(),
                    usage: Default::default(),
                    provider_finish_reason: provider.map(str::to_string),
                    raw_finish_reason: raw.map(str::to_string),
                }),
            ]
        };
        let faithful = trace("tool_use", Some("completed"), Some("stop"));
        assert_eq!(messages(loop_envelope(&faithful)), Vec::<String>::new());
        assert_eq!(
            messages(loop_envelope(&trace("tool_use", None, None))),
            [
                "turn 1: step.end of step 1 (tool_use) carries providerFinishReason absent, rawFinishReason absent; for its response (completed, raw stop) kimi-loop.md §3.2's diagnostic rule gives providerFinishReason completed, rawFinishReason stop"
            ]
        );
        // A batch that stopped the turn ends the step `end_turn`, and `completed` then agrees.
        assert_eq!(
            messages(loop_envelope(&trace("end_turn", None, None))),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(loop_envelope(&trace(
                "max_tokens",
                Some("completed"),
                Some("stop")
            ))),
            [
                "turn 1: step.end of step 1 reports finishReason max_tokens but its response (completed, 1 tool calls) derives tool_use (kimi-loop.md §4.1)"
            ]
        );
    }

    /// A step of one response with `calls` tool calls that ended `finish_reason` as the provider
    /// said `provider` (raw `raw`), having recorded `recorded` (id, result output), then the
    /// turn's end.
    fn step_with_calls(
        provider: &str,
        raw: &str,
        finish_reason: &str,
        calls: usize,
        recorded: &[(&str, &str)],
        outcome: &str,
    ) -> Vec<crate::harness::trace::TraceEvent> {
        use crate::harness::kimi::test_events::{begin, ev, step_uuid, turn_start};
        use crate::model::port::observe::Observation;
        let mut trace = vec![
            turn_start(),
            begin(1),
            ev(Observation::LoopModelReturn {
                turn_step: None,
                usage: Default::default(),
                tool_calls: calls,
                finish: Some(raw.into()),
                provider_finish: Some(provider.into()),
            }),
        ];
        for (id, output) in recorded {
            trace.push(ev(Observation::LoopToolCall {
                step: 1,
                tool_call_id: id.to_string(),
                name: "T".into(),
                args: "{}".into(),
            }));
            trace.push(ev(Observation::LoopToolResult {
                tool_call_id: id.to_string(),
                is_error: true,
                output: output.to_string(),
            }));
        }
        let (provider_finish_reason, raw_finish_reason) =
            diagnostics(Some(provider), Some(raw), finish_reason);
        trace.push(ev(Observation::LoopStepEnd {
            turn_id: "1".into(),
            step: 1,
            uuid: step_uuid(1),
            finish_reason: finish_reason.into(),
            usage: Default::default(),
            provider_finish_reason: provider_finish_reason.map(str::to_string),
            raw_finish_reason: raw_finish_reason.map(str::to_string),
        }));
        trace.push(ev(Observation::TurnEnd {
            turn: 1,
            outcome: outcome.into(),
        }));
        trace
    }

    /// kimi-loop.md §4.2: a truncated response's calls are each recorded with the unexecuted
    /// error result; a loop that drops them, or answers them with another text, breaks
    /// `loop-envelope`; a filtered response's calls must vanish (§4.1 item 3), and the host fails
    /// its turn (§8.1).
    #[test]
    fn a_response_that_ended_early_records_its_calls_unexecuted() {
        use crate::harness::kimi::invariants::loop_envelope;
        use crate::harness::kimi::test_events::messages;
        let shown: String = UNEXECUTED_OUTPUT.chars().take(60).collect::<String>() + "\u{2026}";
        let done = "completed: max_tokens (1 step)";
        let faithful = step_with_calls(
            "truncated",
            "max_tokens",
            "max_tokens",
            2,
            &[("a", &shown), ("b", &shown)],
            done,
        );
        assert_eq!(messages(loop_envelope(&faithful)), Vec::<String>::new());
        let dropped = step_with_calls("truncated", "max_tokens", "max_tokens", 2, &[], done);
        assert_eq!(
            messages(loop_envelope(&dropped)),
            [
                "turn 1: step.end of step 1 (max_tokens) recorded 0 tool.call(s) for its response's 2 tool calls: each is recorded unexecuted (kimi-loop.md §4.2)"
            ]
        );
        let other_text = step_with_calls(
            "paused",
            "pause_turn",
            "paused",
            1,
            &[("a", "Tool \"Read\" was aborted")],
            "completed: paused (1 step)",
        );
        assert_eq!(
            messages(loop_envelope(&other_text)),
            [
                "turn 1: step.end of step 1 (paused) gave its unexecuted call a is_error=true \"Tool \\\"Read\\\" was aborted\", not the error result of kimi-loop.md §4.2"
            ]
        );
        let filtered = "failed: provider.filtered: Provider safety policy blocked the response.";
        let vanished = step_with_calls("filtered", "refusal", "filtered", 1, &[], filtered);
        assert_eq!(messages(loop_envelope(&vanished)), Vec::<String>::new());
        let kept = step_with_calls(
            "filtered",
            "refusal",
            "filtered",
            1,
            &[("a", &shown)],
            filtered,
        );
        assert_eq!(
            messages(loop_envelope(&kept)),
            [
                "turn 1: step.end of step 1 (filtered) recorded 1 tool.call(s) for its response's 1 tool calls: a filtered response's calls vanish (kimi-loop.md §4.1 item 3)"
            ]
        );
        let completed = step_with_calls(
            "filtered",
            "refusal",
            "filtered",
            0,
            &[],
            "completed: filtered (1 step)",
        );
        assert_eq!(
            messages(loop_envelope(&completed)),
            [
                "turn 1 ended (completed: filtered (1 step)) without a turn.interrupted, its last step filtered: kimi-loop.md §8.1 fails a filtered step with \"failed: provider.filtered: Provider safety policy blocked the response.\" and completes any other"
            ]
        );
    }

    /// The oracle's copy of the unexecuted text is the reference's, as the model has it too.
    #[test]
    fn the_unexecuted_text_is_the_references() {
        assert_eq!(
            UNEXECUTED_OUTPUT,
            crate::model::kimi::turn_loop::tool_call::UNEXECUTED_TOOL_CALL_OUTPUT
        );
    }

    #[test]
    fn a_stopped_tool_step_may_end_the_turn_and_nothing_else_moves() {
        assert!(effective_follows("tool_use", "end_turn"));
        assert!(effective_follows("max_tokens", "max_tokens"));
        assert!(!effective_follows("end_turn", "tool_use"));
        assert!(!effective_follows("max_tokens", "end_turn"));
    }

    /// kimi-loop.md §4.1's examples: `completed` with tool calls keeps the provider's reason;
    /// `filtered` with `content_filter` keeps both.
    #[test]
    fn the_diagnostics_follow_the_references_examples() {
        assert_eq!(
            diagnostics(Some("completed"), Some("stop"), "end_turn"),
            (None, None)
        );
        assert_eq!(
            diagnostics(Some("tool_calls"), Some("tool_calls"), "tool_use"),
            (None, None)
        );
        assert_eq!(
            diagnostics(Some("completed"), Some("stop"), "tool_use"),
            (Some("completed"), Some("stop"))
        );
        assert_eq!(
            diagnostics(Some("filtered"), Some("content_filter"), "filtered"),
            (Some("filtered"), Some("content_filter"))
        );
        assert_eq!(
            diagnostics(Some("tool_calls"), Some("tool_calls"), "end_turn"),
            (Some("tool_calls"), Some("tool_calls"))
        );
        assert_eq!(diagnostics(None, None, "end_turn"), (None, None));
    }
}
