//! `abort.e2e.test.ts` (kimi-loop.md §7.6): abort convergence at the safe points, plus the
//! untested-upstream grace timeout (§4.5, open question 4).

use std::sync::Arc;

use loopsim::model::kimi::turn_loop::errors::AbortError;
use loopsim::model::kimi::turn_loop::events::{InterruptCause, InterruptReason};
use loopsim::model::kimi::turn_loop::hooks::AfterStepDecision;
use loopsim::model::kimi::turn_loop::*;
use serde_json::json;

use super::util::*;

/// §7.6 #1
#[tokio::test(start_paused = true)]
async fn already_aborted_signal_returns_aborted_without_a_step() {
    let rig = Rig::new(vec![end_turn("x", usage(1, 1))]);
    rig.controller.abort();
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::Aborted);
    assert_eq!(result.steps, 0);
    assert_eq!(rig.llm.call_count(), 0);
    assert_eq!(rig.transcript.count("step.begin"), 0);
    let interrupted = rig.sink.interrupted();
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0].reason, InterruptReason::Aborted);
    assert_eq!(interrupted[0].attempted_steps, 0);
    assert_eq!(interrupted[0].active_step, None);
    assert_eq!(rig.sink.count("step.begin") + rig.sink.count("step.end"), 0);
}

/// §7.6 #2
#[tokio::test(start_paused = true)]
async fn abort_during_the_model_call_returns_aborted() {
    let rig = Rig::new(vec![]);
    rig.llm.push(Script::AbortThenFail(rig.controller.clone()));
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::Aborted);
    assert_eq!(rig.llm.call_count(), 1);
    let interrupted = rig.sink.interrupted();
    assert_eq!(interrupted[0].reason, InterruptReason::Aborted);
    assert_eq!(interrupted[0].active_step, Some(1));
    assert_eq!(result.steps, 1);
    assert_eq!(result.usage, TokenUsage::default());
    assert_eq!(rig.transcript.kinds(), vec!["step.begin"]);
}

/// §7.6 #3 (§1 contract 6)
#[tokio::test(start_paused = true)]
async fn usage_of_a_step_aborted_during_tools_is_reported() {
    let executions = Executions::default();
    let started = Arc::new(Latch::default());
    let rig = Rig::new(vec![
        tool_use(
            vec![call("echo", json!({"text": "x"}), "tc-1")],
            usage(100, 50),
        ),
        tool_use(vec![call("slow", json!({}), "tc-2")], usage(7, 11)),
    ])
    .tools(vec![echo(&executions), slow(&started, None)]);
    let (result, ()) = tokio::join!(rig.run(), async {
        started.wait().await;
        rig.controller.abort();
    });
    let result = result.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::Aborted);
    assert_eq!(result.usage.input_total(), 107);
    assert_eq!(result.usage.output, 61);
    assert!(
        rig.sink
            .interrupted()
            .iter()
            .any(|e| e.reason == InterruptReason::Aborted)
    );
    assert_eq!(rig.sink.interrupted()[0].active_step, Some(2));
}

/// §7.6 #4
#[tokio::test(start_paused = true)]
async fn before_step_abort_returns_aborted_without_a_model_call() {
    let rig = Rig::new(vec![end_turn("x", usage(1, 1))]);
    let controller = rig.controller.clone();
    let rig = rig.hooks(TestHooks {
        before: Some(Box::new(move |_| {
            controller.abort();
            Err(LoopError::Aborted(AbortError::new("aborted")))
        })),
        ..TestHooks::default()
    });
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::Aborted);
    assert_eq!(rig.llm.call_count(), 0);
    assert_eq!(rig.transcript.count("step.begin"), 0);
    let interrupted = rig.sink.interrupted();
    assert_eq!(interrupted[0].reason, InterruptReason::Aborted);
    assert_eq!(interrupted[0].active_step, Some(1));
}

/// §7.6 #5
#[tokio::test(start_paused = true)]
async fn prepare_hook_abort_ends_the_turn_aborted() {
    let executions = Executions::default();
    let rig = Rig::new(vec![tool_use(
        vec![call("echo", json!({"text": "x"}), "tc-1")],
        usage(1, 1),
    )])
    .tools(vec![echo(&executions)]);
    let controller = rig.controller.clone();
    let rig = rig.hooks(TestHooks {
        prepare: Some(Box::new(move |_| {
            controller.abort();
            Err(LoopError::Aborted(AbortError::new("aborted")))
        })),
        ..TestHooks::default()
    });
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::Aborted);
    assert_eq!(executions.count(), 0);
    assert_eq!(rig.sink.interrupted()[0].reason, InterruptReason::Aborted);
    assert_eq!(
        text_of(&rig.transcript.result_for("tc-1")),
        "Tool \"echo\" was aborted during prepareToolExecution hook"
    );
    assert_eq!(rig.transcript.count("step.end"), 0);
}

/// §7.6 #6
#[tokio::test(start_paused = true)]
async fn abort_during_a_tool_emits_exactly_one_interruption() {
    let started = Arc::new(Latch::default());
    let rig = Rig::new(vec![tool_use(
        vec![call("slow", json!({}), "tc-1")],
        usage(1, 1),
    )])
    .tools(vec![slow(&started, None)]);
    let (result, ()) = tokio::join!(rig.run(), async {
        started.wait().await;
        rig.controller.abort();
    });
    assert_eq!(result.unwrap().stop_reason, TurnStopReason::Aborted);
    assert_eq!(rig.sink.interrupted().len(), 1);
    assert_eq!(
        text_of(&rig.transcript.result_for("tc-1")),
        "Tool \"slow\" was aborted"
    );
}

/// §7.6 #7
#[tokio::test(start_paused = true)]
async fn queued_task_started_after_abort_is_not_executed() {
    let gate = Arc::new(Gate::default());
    let executions = Executions::default();
    let rig = Rig::new(vec![tool_use(
        vec![
            call("gated", json!({}), "tc-gated"),
            call("echo", json!({"text": "x"}), "tc-echo"),
        ],
        usage(1, 1),
    )])
    .tools(vec![gated("gated", &gate, None), echo(&executions)]);
    let (result, ()) = tokio::join!(rig.run(), async {
        gate.started.wait().await;
        settle().await;
        assert_eq!(executions.count(), 0);
        rig.controller.abort();
        gate.released.set();
    });
    assert_eq!(result.unwrap().stop_reason, TurnStopReason::Aborted);
    assert_eq!(executions.count(), 0);
    assert_eq!(rig.sink.tool_call_ids(), vec!["tc-gated", "tc-echo"]);
    assert_eq!(rig.sink.tool_result_ids(), vec!["tc-gated", "tc-echo"]);
    let echo_result = serde_json::to_value(rig.transcript.result_for("tc-echo").result).unwrap();
    assert_eq!(
        echo_result,
        json!({"output": "Tool \"echo\" was aborted", "isError": true})
    );
}

/// §7.6 #8 (§9.2, #236)
#[tokio::test(start_paused = true)]
async fn user_cancellation_gets_the_user_interrupt_text() {
    let started = Arc::new(Latch::default());
    let rig = Rig::new(vec![tool_use(
        vec![call("slow", json!({}), "tc-1")],
        usage(1, 1),
    )])
    .tools(vec![slow(&started, None)]);
    let (result, ()) = tokio::join!(rig.run(), async {
        started.wait().await;
        rig.controller.abort_with(AbortError::user_cancellation());
    });
    assert_eq!(result.unwrap().stop_reason, TurnStopReason::Aborted);
    let text = text_of(&rig.transcript.result_for("tc-1"));
    assert_ne!(text, "Tool \"slow\" was aborted");
    assert!(text.contains("not a system error"));
    assert!(text.contains("wait for the user"));
    assert_eq!(
        rig.sink.interrupted()[0].interrupt_reason,
        InterruptCause::UserCancelled
    );
}

/// §7.6 #9
#[tokio::test(start_paused = true)]
async fn concurrent_tools_all_get_results_after_abort() {
    let started = Arc::new(Latch::default());
    let tool = slow(&started, Some(ToolAccesses::read_file("/test/slow")));
    let rig = Rig::new(vec![tool_use(
        vec![
            call("slow", json!({}), "tc-1"),
            call("slow", json!({}), "tc-2"),
            call("slow", json!({}), "tc-3"),
        ],
        usage(1, 1),
    )])
    .tools(vec![tool]);
    let (result, ()) = tokio::join!(rig.run(), async {
        started.wait().await;
        rig.controller.abort();
    });
    assert_eq!(result.unwrap().stop_reason, TurnStopReason::Aborted);
    let mut calls = rig.sink.tool_call_ids();
    let mut results = rig.sink.tool_result_ids();
    calls.sort();
    results.sort();
    assert_eq!(calls, vec!["tc-1", "tc-2", "tc-3"]);
    assert_eq!(results, calls);
}

/// §4.5: a tool that ignores the abort is cut off by the 2000 ms grace timeout with the grace
/// text, which is not replaced by the abort text.
#[tokio::test(start_paused = true)]
async fn tool_ignoring_abort_is_settled_by_the_grace_timeout() {
    let started = Arc::new(Latch::default());
    let rig = Rig::new(vec![tool_use(
        vec![call("hang", json!({}), "tc-h")],
        usage(1, 1),
    )])
    .tools(vec![hang(&started)]);
    let begin = tokio::time::Instant::now();
    let (result, aborted_at) = tokio::join!(rig.run(), async {
        started.wait().await;
        rig.controller.abort();
        tokio::time::Instant::now()
    });
    assert_eq!(result.unwrap().stop_reason, TurnStopReason::Aborted);
    let waited = tokio::time::Instant::now().duration_since(aborted_at);
    assert_eq!(waited.as_millis(), 2000);
    assert!(aborted_at >= begin);
    let record = serde_json::to_value(rig.transcript.result_for("tc-h").result).unwrap();
    assert_eq!(
        record,
        json!({"output": "Tool \"hang\" aborted by grace timeout (2000ms)", "isError": true})
    );
    assert_eq!(rig.transcript.count("step.end"), 0);
}

/// §4.5: without an abort there is no per-tool timeout.
#[tokio::test(start_paused = true)]
async fn hanging_tool_without_abort_hangs_the_turn() {
    let started = Arc::new(Latch::default());
    let rig = Rig::new(vec![tool_use(
        vec![call("hang", json!({}), "tc-h")],
        usage(1, 1),
    )])
    .tools(vec![hang(&started)]);
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(3600), rig.run()).await;
    assert!(outcome.is_err(), "a hanging tool must hang the turn");
    assert!(started.is_set());
}

/// §3.3 C: an abort between steps (during `afterStep`) has no active step.
#[tokio::test(start_paused = true)]
async fn abort_between_steps_has_no_active_step() {
    let executions = Executions::default();
    let rig = Rig::new(vec![tool_use(
        vec![call("echo", json!({"text": "x"}), "tc-1")],
        usage(1, 1),
    )])
    .tools(vec![echo(&executions)]);
    let controller = rig.controller.clone();
    let rig = rig.hooks(TestHooks {
        after_step: Some(Box::new(move |_| {
            controller.abort();
            Ok(Some(AfterStepDecision { stop_turn: false }))
        })),
        ..TestHooks::default()
    });
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::Aborted);
    let interrupted = rig.sink.interrupted();
    assert_eq!(interrupted[0].attempted_steps, 1);
    assert_eq!(interrupted[0].active_step, None);
    assert_eq!(rig.transcript.count("step.end"), 1);
}

/// Open question 5 (chosen as the reference code does): an abort after the final `step.end`
/// with no `shouldContinueAfterStop` hook returns the terminal reason.
#[tokio::test(start_paused = true)]
async fn abort_after_the_final_step_end_keeps_the_terminal_reason() {
    let rig = Rig::new(vec![end_turn("x", usage(1, 1))]);
    let controller = rig.controller.clone();
    let rig = rig.hooks(TestHooks {
        after_step: Some(Box::new(move |_| {
            controller.abort();
            Ok(None)
        })),
        ..TestHooks::default()
    });
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert!(rig.sink.interrupted().is_empty());
}

/// §3.3 E catch-all: a non-abort error that arrives after the abort is treated as an abort.
#[tokio::test(start_paused = true)]
async fn error_after_abort_counts_as_abort() {
    let rig = Rig::new(vec![]);
    let controller = rig.controller.clone();
    let rig = rig.hooks(TestHooks {
        before: Some(Box::new(move |_| {
            controller.abort();
            Err(LoopError::plain("provider 500"))
        })),
        ..TestHooks::default()
    });
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::Aborted
    );
    assert_eq!(rig.sink.interrupted()[0].reason, InterruptReason::Aborted);
    assert_eq!(rig.sink.interrupted()[0].message, None);
}
