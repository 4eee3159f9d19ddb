//! `loop-envelope`'s reading of a `step.end`'s stop reason and diagnostics (kimi-loop.md §4.1,
//! §3.2), written from the reference rather than taken from the step, so a step that derives
//! or reports its reason wrongly cannot also judge itself right. The inputs are the words of
//! the trace: the normalised provider reason of the step's response (`loop_model_return`'s
//! `provider_finish`, kosong's `FinishReason`) and the effective reason `step.end` reports.

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

/// Where a `step.end` disagrees with its response under §4.1 and §3.2: each message says what
/// it reports and what the rule gives (the caller names the turn and step).
pub fn violations(reported: &Reported<'_>, response: &Response<'_>) -> Vec<String> {
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
                    name: "Read".into(),
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
