//! `error-paths.e2e.test.ts` (kimi-loop.md §7.7): error propagation, one interruption each.

use loopsim::model::kimi::turn_loop::errors::AbortError;
use loopsim::model::kimi::turn_loop::events::InterruptReason;
use loopsim::model::kimi::turn_loop::log::LogLevel;
use loopsim::model::kimi::turn_loop::*;
use serde_json::json;

use super::util::*;

/// §7.7 #1
#[tokio::test(start_paused = true)]
async fn model_error_is_rethrown_after_one_interruption() {
    let thrown = LoopError::plain("upstream blew up");
    let rig = Rig::new(vec![Script::Fail(thrown.clone())]);
    let error = rig.run().await.unwrap_err();
    assert_eq!(error, thrown);
    let interrupted = rig.sink.interrupted();
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0].reason, InterruptReason::Error);
    assert_eq!(interrupted[0].attempted_steps, 1);
    assert_eq!(interrupted[0].active_step, Some(1));
    assert_eq!(interrupted[0].message.as_deref(), Some("upstream blew up"));
    assert_eq!(rig.transcript.count("step.begin"), 1);
    assert_eq!(rig.transcript.count("step.end"), 0);
}

/// §7.7 #2
#[tokio::test(start_paused = true)]
async fn model_error_logs_exactly_one_warning() {
    let rig = Rig::new(vec![Script::Fail(LoopError::plain("upstream blew up"))]);
    let _ = rig.run().await;
    let entries = rig.log.entries();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].level, LogLevel::Warn);
    assert_eq!(entries[0].message, "llm request failed");
    assert_eq!(
        entries[0].payload,
        json!({
            "turnStep": "turn-1.1",
            "attempt": "1/10",
            "model": "fake-model",
            "errorName": "Error",
            "errorMessage": "upstream blew up"
        })
    );
}

/// §7.7 #3
#[tokio::test(start_paused = true)]
async fn abort_during_the_model_call_logs_nothing() {
    let rig = Rig::new(vec![]);
    rig.llm.push(Script::AbortThenFail(rig.controller.clone()));
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::Aborted
    );
    assert!(rig.log.entries().is_empty());
}

/// §7.7 #4
#[tokio::test(start_paused = true)]
async fn max_steps_interruption_has_no_active_step() {
    let executions = Executions::default();
    let mut rig = Rig::new(vec![
        tool_use(vec![call("echo", json!({"text": "1"}), "a")], usage(1, 1)),
        tool_use(vec![call("echo", json!({"text": "2"}), "b")], usage(1, 1)),
    ])
    .tools(vec![echo(&executions)]);
    rig.input.max_steps = Some(2);
    let error = rig.run().await.unwrap_err();
    assert_eq!(error.code(), Some("loop.max_steps_exceeded"));
    assert_eq!(
        error.message(),
        "Turn exceeded maxSteps=2. If max_steps_per_turn is too small, raise it in config.toml (loop_control.max_steps_per_turn), or run \"/update-config\" to update it, then \"/reload\"."
    );
    let interrupted = rig.sink.interrupted();
    let reasons: Vec<_> = interrupted.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, vec![InterruptReason::MaxSteps]);
    assert_eq!(interrupted[0].attempted_steps, 2);
    assert_eq!(interrupted[0].active_step, None);
    assert_eq!(interrupted[0].message.as_deref(), Some(error.message()));
}

/// §7.7 #5
#[tokio::test(start_paused = true)]
async fn before_step_error_is_the_thrown_error() {
    let hook_error = LoopError::named("HookError", "hook failed");
    let thrown = hook_error.clone();
    let rig = Rig::new(vec![]).hooks(TestHooks {
        before: Some(Box::new(move |_| Err(thrown.clone()))),
        ..TestHooks::default()
    });
    assert_eq!(rig.run().await.unwrap_err(), hook_error);
    let interrupted = rig.sink.interrupted();
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0].reason, InterruptReason::Error);
}

/// §7.7 #6
#[tokio::test(start_paused = true)]
async fn before_step_abort_error_returns_aborted() {
    let rig = Rig::new(vec![]);
    let controller = rig.controller.clone();
    let rig = rig.hooks(TestHooks {
        before: Some(Box::new(move |_| {
            controller.abort();
            Err(LoopError::Aborted(AbortError::new("aborted")))
        })),
        ..TestHooks::default()
    });
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::Aborted
    );
    let interrupted = rig.sink.interrupted();
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0].reason, InterruptReason::Aborted);
}

/// §3.3 E: an abort-shaped error from a hook counts as an abort even if the signal is quiet.
#[tokio::test(start_paused = true)]
async fn abort_shaped_error_without_signal_returns_aborted() {
    let rig = Rig::new(vec![]).hooks(TestHooks {
        before: Some(Box::new(|_| {
            Err(LoopError::Aborted(AbortError::new("aborted")))
        })),
        ..TestHooks::default()
    });
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::Aborted
    );
}

/// §7.7 #7
#[tokio::test(start_paused = true)]
async fn one_failure_one_interruption() {
    let rig = Rig::new(vec![Script::Fail(LoopError::plain("once"))]);
    assert!(rig.run().await.is_err());
    assert_eq!(rig.sink.interrupted().len(), 1);
}

/// §7.7 #8
#[tokio::test(start_paused = true)]
async fn failed_step_is_live_as_begin_without_end() {
    let rig = Rig::new(vec![Script::Fail(LoopError::plain("boom"))]);
    assert!(rig.run().await.is_err());
    assert_eq!(rig.sink.count("step.begin"), 1);
    assert_eq!(rig.sink.count("step.end"), 0);
    assert_eq!(rig.sink.count("turn.interrupted"), 1);
}

/// §4.6 / open question 7: a transcript append failure mid-batch propagates as a turn error
/// after the batch's tasks settled.
#[tokio::test(start_paused = true)]
async fn transcript_failure_mid_batch_propagates() {
    let executions = Executions::default();
    let rig = Rig::new(vec![tool_use(
        vec![
            call("echo", json!({"text": "a"}), "tc-a"),
            call("echo", json!({"text": "b"}), "tc-b"),
        ],
        usage(1, 1),
    )])
    .tools(vec![echo(&executions)]);
    rig.transcript.fail_on("tool.result");
    let error = rig.run().await.unwrap_err();
    assert_eq!(error.message(), "transcript append failed");
    assert_eq!(executions.ids(), vec!["tc-a", "tc-b"]);
    assert_eq!(rig.transcript.count("tool.call"), 2);
    assert_eq!(rig.transcript.count("tool.result"), 0);
    assert_eq!(rig.sink.interrupted()[0].reason, InterruptReason::Error);
}

/// §9.17 (#1724): the failed attempt's trace id names the interruption.
#[tokio::test(start_paused = true)]
async fn interruption_carries_the_failed_requests_trace_id() {
    let executions = Executions::default();
    let ok = map_response(
        tool_use(
            vec![call("echo", json!({"text": "a"}), "tc-a")],
            usage(1, 1),
        ),
        |r| r.trace_id = Some("trace-A".into()),
    );
    let failure = LoopError::Provider(ProviderError::status(400, "bad").with_trace_id("trace-B"));
    let rig = Rig::new(vec![ok, Script::Fail(failure)]).tools(vec![echo(&executions)]);
    assert!(rig.run().await.is_err());
    assert_eq!(
        rig.transcript.step_ends()[0].trace_id.as_deref(),
        Some("trace-A")
    );
    assert_eq!(
        rig.sink.interrupted()[0].trace_id.as_deref(),
        Some("trace-B")
    );
}
