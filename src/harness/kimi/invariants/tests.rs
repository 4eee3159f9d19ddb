//! The agent-loop oracles on hand-made traces: each rule passes a well-formed turn and names
//! what a broken one broke.

use super::*;
use crate::harness::kimi::test_events::{begin, ev, messages, step_uuid, turn_start};
use crate::model::kimi::turn_loop::access::ToolAccesses;
use crate::model::port::observe::AccessList;

fn usage(input: u64, output: u64) -> TokenUsage {
    TokenUsage {
        input_other: input,
        output,
        ..TokenUsage::default()
    }
}

fn end(step: u32, u: TokenUsage) -> TraceEvent {
    ev(Observation::LoopStepEnd {
        turn_id: "1".into(),
        step,
        uuid: step_uuid(step),
        finish_reason: "tool_use".into(),
        usage: u,
        provider_finish_reason: None,
        raw_finish_reason: None,
    })
}

/// A response with one tool call.
fn ret(u: TokenUsage) -> TraceEvent {
    ret_calls(u, 1)
}

/// A response with `calls` tool calls (`tool_calls`), or a text answer (`completed`).
fn ret_calls(u: TokenUsage, calls: usize) -> TraceEvent {
    let (raw, provider) = if calls > 0 {
        ("tool_calls", "tool_calls")
    } else {
        ("stop", "completed")
    };
    ev(Observation::LoopModelReturn {
        turn_step: None,
        usage: u,
        tool_calls: calls,
        finish: Some(raw.into()),
        provider_finish: Some(provider.into()),
    })
}

fn call(id: &str) -> TraceEvent {
    call_in(1, id)
}

fn call_in(step: u32, id: &str) -> TraceEvent {
    ev(Observation::LoopToolCall {
        step,
        tool_call_id: id.into(),
        name: "T".into(),
        args: "{}".into(),
    })
}

fn result(id: &str) -> TraceEvent {
    ev(Observation::LoopToolResult {
        tool_call_id: id.into(),
        is_error: false,
        output: String::new(),
    })
}

/// A `turn.interrupted` of step 1 (`active_step` when the step was still open).
fn interrupted(
    reason: &str,
    cause: &str,
    active_step: Option<u32>,
    message: Option<&str>,
) -> TraceEvent {
    ev(Observation::LoopInterrupted {
        reason: reason.into(),
        cause: cause.into(),
        attempted_steps: 1,
        active_step,
        message: message.map(str::to_string),
    })
}

/// How each turn of a run ended, as the report writes it (`None`: the agent never finished).
fn turn_ends(run: &crate::harness::kimi::world::LoopRunOutput) -> Option<Vec<String>> {
    run.outcomes
        .as_ref()
        .map(|o| o.iter().map(ToString::to_string).collect())
}

fn turn_end(outcome: &str) -> TraceEvent {
    ev(Observation::TurnEnd {
        turn: 1,
        outcome: outcome.into(),
    })
}

/// `runTurn`'s result, with the context counting what a one-step run's `step.end` reported.
fn turn_result(u: TokenUsage) -> TraceEvent {
    let tokens = u.input_other + u.output + u.input_cache_read + u.input_cache_creation;
    turn_result_counting(u, tokens)
}

fn turn_result_counting(u: TokenUsage, context_tokens: u64) -> TraceEvent {
    ev(Observation::LoopTurnResult {
        turn: 1,
        stop_reason: "end_turn".into(),
        steps: 1,
        usage: u,
        context_tokens,
    })
}

#[test]
fn a_well_formed_turn_passes() {
    let u = usage(10, 2);
    let trace = vec![
        turn_start(),
        begin(1),
        ret_calls(u, 2),
        call("a"),
        call("b"),
        result("a"),
        result("b"),
        end(1, u),
        turn_result(u),
        turn_end("completed: end_turn"),
    ];
    assert_eq!(messages(loop_envelope(&trace)), Vec::<String>::new());
}

/// Each `step.begin` draws its own random UUIDv4 (kimi-loop.md §3.2): an empty uuid, or
/// the uuid of an earlier step, is a PRNG that no longer draws.
#[test]
fn a_step_uuid_is_a_fresh_uuid_v4() {
    let u = usage(10, 2);
    let with_uuid = |step: u32, uuid: &str| {
        ev(Observation::LoopStepBegin {
            turn_id: "1".into(),
            step,
            uuid: uuid.into(),
        })
    };
    let end_with = |step: u32, uuid: &str| {
        ev(Observation::LoopStepEnd {
            turn_id: "1".into(),
            step,
            uuid: uuid.into(),
            finish_reason: "end_turn".into(),
            usage: u,
            provider_finish_reason: None,
            raw_finish_reason: None,
        })
    };
    let trace = vec![
        turn_start(),
        with_uuid(1, ""),
        ret_calls(u, 0),
        end_with(1, ""),
        with_uuid(2, &step_uuid(7)),
        ret_calls(u, 0),
        end_with(2, &step_uuid(7)),
        with_uuid(3, &step_uuid(7)),
        ret_calls(u, 0),
        end_with(3, &step_uuid(7)),
        turn_end("completed: end_turn"),
    ];
    assert_eq!(
        messages(loop_envelope(&trace)),
        [
            "step.begin of step 1 has uuid \"\", not a random UUIDv4 (kimi-loop.md §3.2)"
                .to_string(),
            format!(
                "step.begin of step 3 reuses uuid {} of the step begun at event 5: each step draws its own (kimi-loop.md §3.2)",
                step_uuid(7)
            ),
        ]
    );
    assert!(is_uuid_v4("f47ac10b-58cc-4372-a567-0e02b2c3d479"));
    assert!(!is_uuid_v4("f47ac10b-58cc-1372-a567-0e02b2c3d479"));
    assert!(!is_uuid_v4("F47AC10B-58CC-4372-A567-0E02B2C3D479"));
}

#[test]
fn each_envelope_rule_has_its_message() {
    let u = usage(10, 2);
    let trace = vec![
        turn_start(),
        begin(2),
        ret(u),
        call_in(2, "a"),
        call("b"),
        end(2, usage(99, 2)),
        ev(Observation::LoopBackstopResult {
            tool_call_id: "a".into(),
        }),
        turn_result(usage(11, 2)),
        turn_end("completed: end_turn"),
    ];
    assert_eq!(
        messages(loop_envelope(&trace)),
        [
            "turn 1: step.begin numbered 2, expected step 1",
            "turn 1: tool.call of step 1 inside step 2",
            "turn 1: step 2 ended with tool calls still without a result: a",
            "turn 1: step.end of step 2 reports usage in=99 out=2 cache_read=0 cache_creation=0 but its response returned in=10 out=2 cache_read=0 cache_creation=0",
            "turn 1: the host had to close tool call a, left without a result by a run that was not interrupted",
            "turn 1: runTurn reported usage in=11 out=2 cache_read=0 cache_creation=0 but the responses its run returned sum to in=10 out=2 cache_read=0 cache_creation=0",
            "turn 1: the context counts 13 tokens at the turn's end, but its last step.end reported usage summing to 101 (kimi-loop.md §8.3: the count is the sum of all four fields)",
        ]
    );
}

/// The context's token count at a turn's end is the last `step.end`'s four usage fields
/// summed (kimi-loop.md §8.3); a step that reported none, or a compaction, makes it an estimate
/// the oracle does not judge.
#[test]
fn the_context_counts_the_last_step_ends_usage() {
    let cached = TokenUsage {
        input_other: 1200,
        output: 180,
        input_cache_read: 800,
        input_cache_creation: 20,
    };
    let turn = |u: TokenUsage, tokens: u64, extra: Option<TraceEvent>| {
        let mut trace = vec![
            turn_start(),
            begin(1),
            ret_calls(u, 1),
            call("a"),
            result("a"),
            end(1, u),
        ];
        trace.extend(extra);
        trace.push(turn_result_counting(u, tokens));
        trace.push(turn_end("completed: end_turn"));
        trace
    };
    assert_eq!(
        messages(loop_envelope(&turn(cached, 2200, None))),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(loop_envelope(&turn(cached, 1380, None))),
        [
            "turn 1: the context counts 1380 tokens at the turn's end, but its last step.end reported usage summing to 2200 (kimi-loop.md §8.3: the count is the sum of all four fields)"
        ]
    );
    let estimated = usage(0, 0);
    assert_eq!(
        messages(loop_envelope(&turn(estimated, 41, None))),
        Vec::<String>::new()
    );
    let compaction = ev(Observation::LoopCompaction { removed_count: 3 });
    assert_eq!(
        messages(loop_envelope(&turn(cached, 41, Some(compaction)))),
        Vec::<String>::new()
    );
}

#[test]
fn an_open_step_is_allowed_only_when_the_run_was_interrupted() {
    let u = usage(1, 1);
    let interrupted = interrupted("aborted", "user_cancelled", Some(1), None);
    let ok = vec![
        turn_start(),
        begin(1),
        ret(u),
        call("a"),
        interrupted,
        turn_result(u),
        turn_end("cancelled"),
    ];
    assert_eq!(messages(loop_envelope(&ok)), Vec::<String>::new());
    let bad = vec![turn_start(), begin(1), ret(u), turn_end("cancelled")];
    assert_eq!(
        messages(loop_envelope(&bad)),
        [
            "turn 1 ended (cancelled) with step 1 open and no turn.interrupted",
            "turn 1 ended (cancelled) without a turn.interrupted",
        ]
    );
}

/// A turn whose one step makes and answers one call, then is interrupted with `reason` and
/// ends with `outcome`.
fn one_step_turn_interrupted(reason: &str, outcome: &str) -> Vec<TraceEvent> {
    let u = usage(1, 1);
    vec![
        turn_start(),
        begin(1),
        ret(u),
        call("a"),
        result("a"),
        end(1, u),
        interrupted(reason, reason, None, Some(outcome)),
        turn_end(outcome),
    ]
}

/// Case D of kimi-loop.md §3.3: the run that exhausts `maxSteps` is interrupted with
/// `max_steps` and the turn fails with `loop.max_steps_exceeded`; any other failure is
/// interrupted with `error`.
#[test]
fn only_a_run_out_of_steps_is_interrupted_for_max_steps() {
    const OUT_OF_STEPS: &str = "failed: loop.max_steps_exceeded: Turn exceeded maxSteps=1.";
    const OTHER: &str = "failed: APIStatusError: model: the requested model does not exist";
    let turn = one_step_turn_interrupted;
    assert_eq!(
        messages(loop_envelope(&turn("max_steps", OUT_OF_STEPS))),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(loop_envelope(&turn("error", OTHER))),
        Vec::<String>::new()
    );
    for (reason, outcome) in [("error", OUT_OF_STEPS), ("max_steps", OTHER)] {
        assert_eq!(
            messages(loop_envelope(&turn(reason, outcome))),
            [format!(
                "turn 1 ended ({outcome}) after a turn.interrupted with reason {reason}: a run interrupted for max_steps fails with loop.max_steps_exceeded, and only such a run"
            )]
        );
    }
}

/// The loop checks `maxSteps` before each step, so a run out of steps began exactly the steps
/// the error names: one that stops sooner (or later) breaks `loop-envelope`.
#[test]
fn a_run_out_of_steps_began_exactly_the_steps_its_error_names() {
    let turn = |limit: u32| {
        let outcome = format!("failed: loop.max_steps_exceeded: Turn exceeded maxSteps={limit}.");
        one_step_turn_interrupted("max_steps", &outcome)
    };
    assert_eq!(messages(loop_envelope(&turn(1))), Vec::<String>::new());
    for limit in [0, 2] {
        assert_eq!(
            messages(loop_envelope(&turn(limit))),
            [format!(
                "turn 1 failed for maxSteps={limit} after its last run began 1 step(s): a run is out of steps after exactly {limit}"
            )]
        );
    }
}

#[test]
fn an_aborted_run_names_the_cause_its_abort_gave() {
    let abort = |reason: &str| {
        ev(Observation::LoopUserAbort {
            turn: 1,
            reason: reason.into(),
        })
    };
    let aborted = |cause: &str| interrupted("aborted", cause, Some(1), None);
    let u = usage(1, 1);
    let turn = |reason: &str, cause: &str| {
        vec![
            turn_start(),
            begin(1),
            ret(u),
            abort(reason),
            aborted(cause),
            turn_result(u),
            turn_end("cancelled"),
        ]
    };
    assert_eq!(
        messages(loop_envelope(&turn("user", "user_cancelled"))),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(loop_envelope(&turn("signal", "aborted"))),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(loop_envelope(&turn("signal", "user_cancelled"))),
        [
            "turn 1: turn.interrupted names the cause user_cancelled after a signal abort; its signal's reason makes it aborted"
        ]
    );
    assert_eq!(
        messages(loop_envelope(&turn("user", "aborted"))),
        [
            "turn 1: turn.interrupted names the cause aborted after a user abort; its signal's reason makes it user_cancelled"
        ]
    );
}

/// The catch-all of kimi-loop.md §3.3: once the user's abort fired, an error the run then
/// throws (a rejected model call here) ends it `aborted`, not `error`.
#[test]
fn a_run_that_fails_after_the_users_abort_is_aborted() {
    const REJECTED: &str = "failed: APIStatusError: model: the requested model does not exist";
    let abort = ev(Observation::LoopUserAbort {
        turn: 1,
        reason: "user".into(),
    });
    let turn = |reason: &str, cause: &str| {
        vec![
            turn_start(),
            begin(1),
            abort.clone(),
            interrupted(reason, cause, Some(1), Some(REJECTED)),
            turn_end(REJECTED),
        ]
    };
    assert_eq!(
        messages(loop_envelope(&turn("aborted", "user_cancelled"))),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(loop_envelope(&turn("error", "error"))),
        [
            "turn 1: turn.interrupted with reason error after a user abort; once the signal fired, runTurn ends any run as aborted"
        ]
    );
}

#[test]
fn lock_safety_flags_overlap_and_provider_order() {
    let start = |id: &str, a: ToolAccesses| {
        ev(Observation::LoopToolStart {
            tool_call_id: id.into(),
            tool: "T".into(),
            execution: 1,
            accesses: AccessList(a),
        })
    };
    let stop = |id: &str| {
        ev(Observation::LoopToolEnd {
            tool_call_id: id.into(),
            how: "ok".into(),
        })
    };
    // Disjoint or read-only overlap is fine.
    let fine = vec![
        begin(1),
        call("a"),
        call("b"),
        start("a", ToolAccesses::read_file("/x")),
        start("b", ToolAccesses::read_tree("/")),
        stop("a"),
        stop("b"),
    ];
    assert!(lock_safety(&fine).is_empty());
    // b starts before the earlier conflicting a, and they overlap.
    let bad = vec![
        begin(1),
        call("a"),
        call("b"),
        start("b", ToolAccesses::write_file("/X")),
        start("a", ToolAccesses::search_tree("/")),
        stop("a"),
        stop("b"),
    ];
    assert_eq!(
        messages(lock_safety(&bad)),
        [
            "T a (search-tree:/) started while T b (write:/X), which conflicts with it, was still running (since event 4)",
            "T a (search-tree:/) started after b (write:/X), a later call in provider order that conflicts with it",
        ]
    );
}

/// The planted canary: a host that compacts without recording it. Every turn ends as the
/// faithful host's do; only a session resumed from its `wire.jsonl` would see the whole
/// history come back, and `transcript-resumes` is the one oracle that says so.
#[test]
fn transcript_resumes_fails_on_a_host_that_compacts_unrecorded() {
    use crate::harness::kimi::test_events::bundled;
    use crate::harness::kimi::world::{run_once, run_once_planted};
    let s = bundled("context_overflow.toml");
    let faithful = run_once(&s, 1).unwrap();
    assert_eq!(transcript_resumes(&faithful.trace), Vec::new());
    let planted = run_once_planted(&s, 1, |b| b.compaction_unrecorded = true).unwrap();
    let found: Vec<String> = transcript_resumes(&planted.trace)
        .iter()
        .map(|v| format!("{}: {}", v.invariant, v.message))
        .collect();
    println!("{}", found.join("\n"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("transcript-resumes: turn 2: a session resumed from the host's wire.jsonl would hold another context: message 0 differs: live ContextMessage"),
        "{found:?}"
    );
    assert_eq!(
        turn_ends(&planted),
        turn_ends(&faithful),
        "the turns end the same"
    );
}

/// `LoopBugs::context_count_without_cache` sums a `step.end`'s input and output only. Every
/// turn of `parallel_conflicts.toml` reads part of its prompt from the cache, so each ends
/// with the context counting fewer tokens than its last step reported, while every turn ends as
/// the faithful loop's do: nothing but the count the status line shows is wrong.
#[test]
fn loop_envelope_fails_on_a_context_that_counts_without_cache() {
    use crate::harness::kimi::test_events::bundled;
    use crate::harness::kimi::world::{run_once, run_once_planted};
    let s = bundled("parallel_conflicts.toml");
    let faithful = run_once(&s, 1).unwrap();
    assert_eq!(
        messages(loop_envelope(&faithful.trace)),
        Vec::<String>::new()
    );
    let planted = run_once_planted(&s, 1, |b| b.context_count_without_cache = true).unwrap();
    let found = messages(loop_envelope(&planted.trace));
    println!("{}", found.join("\n"));
    assert!(!found.is_empty());
    assert!(
        found.iter().all(|m| m.contains("the context counts")
            && m.contains("(kimi-loop.md §8.3: the count is the sum of all four fields)")),
        "{found:?}"
    );
    assert_eq!(
        turn_ends(&planted),
        turn_ends(&faithful),
        "the turns end the same"
    );
}
