//! `events.e2e.test.ts` (kimi-loop.md §7.8): containment of live events; recorded events reach
//! the transcript before live listeners.

use std::sync::{Arc, Mutex};

use loopsim::model::kimi::turn_loop::events::{ToolUpdate, ToolUpdateKind};
use loopsim::model::kimi::turn_loop::*;
use serde_json::json;

use super::util::*;

fn echo_and_progress() -> (Vec<Script>, Vec<Arc<dyn ExecutableTool>>, Executions) {
    let executions = Executions::default();
    let script = vec![
        tool_use(
            vec![
                call("echo", json!({"text": "x"}), "tc-1"),
                call("progress", json!({}), "tc-2"),
            ],
            usage(1, 1),
        ),
        end_turn("done", usage(1, 1)),
    ];
    let tools = vec![
        echo_with(
            &executions,
            Some(ToolAccesses::read_file("/test/echo")),
            None,
        ),
        progress(
            vec![ToolUpdate::text(ToolUpdateKind::Stdout, "working...")],
            Some(ToolAccesses::read_file("/test/progress")),
        ),
    ];
    (script, tools, executions)
}

/// §7.8 #1
#[tokio::test(start_paused = true)]
async fn panicking_live_sink_does_not_affect_the_turn() {
    let rig = Rig::with_sink(vec![end_turn("x", usage(1, 1))], SinkMode::Panic);
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(
        rig.transcript.kinds(),
        vec!["step.begin", "content.part", "step.end"]
    );
}

/// §7.8 #2
#[tokio::test(start_paused = true)]
async fn rejecting_live_sink_does_not_affect_the_turn() {
    let rig = Rig::with_sink(vec![end_turn("x", usage(1, 1))], SinkMode::Reject);
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert!(rig.sink.events().len() >= 2);
}

/// §7.8 #3
#[tokio::test(start_paused = true)]
async fn sink_failing_after_recording_does_not_affect_a_multi_step_turn() {
    let (script, tools, executions) = echo_and_progress();
    let rig = Rig::with_sink(script, SinkMode::RecordThenPanic).tools(tools);
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(rig.transcript.count("step.begin"), 2);
    assert_eq!(rig.transcript.count("step.end"), 2);
    assert_eq!(executions.count(), 1);
    assert_eq!(rig.transcript.count("tool.result"), 2);
}

/// A host fan-out: forwards to several sinks, catching each sink's failure itself.
struct FanOut(Vec<Arc<CollectingSink>>);

impl LiveListener for FanOut {
    fn emit(&self, event: &LoopEvent) -> Result<(), String> {
        for sink in &self.0 {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink.emit(event)));
        }
        Ok(())
    }
}

fn rig_with_listener(script: Vec<Script>, listener: Arc<dyn LiveListener>) -> Rig {
    let mut rig = Rig::new(script);
    rig.input.dispatcher = Arc::new(LoopEventDispatcher::new(rig.transcript.clone(), listener));
    rig
}

/// §7.8 #4
#[tokio::test(start_paused = true)]
async fn fan_out_sinks_see_identical_sequences() {
    let a = Arc::new(CollectingSink::default());
    let b = Arc::new(CollectingSink::default());
    let rig = rig_with_listener(
        vec![end_turn("x", usage(1, 1))],
        Arc::new(FanOut(vec![a.clone(), b.clone()])),
    );
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert!(!a.types().is_empty());
    assert_eq!(a.types(), b.types());
}

/// §7.8 #5
#[tokio::test(start_paused = true)]
async fn broken_fan_out_sink_does_not_starve_the_good_one() {
    let good = Arc::new(CollectingSink::default());
    let broken = Arc::new(CollectingSink::new(SinkMode::Panic));
    let rig = rig_with_listener(
        vec![end_turn("x", usage(1, 1))],
        Arc::new(FanOut(vec![broken, good.clone()])),
    );
    rig.run().await.unwrap();
    assert_eq!(good.count("step.begin"), 1);
    assert_eq!(good.count("step.end"), 1);
}

fn is_subsequence(needle: &[&str], haystack: &[&str]) -> bool {
    let mut rest = haystack.iter();
    needle.iter().all(|wanted| rest.any(|seen| seen == wanted))
}

/// §7.8 #6
#[tokio::test(start_paused = true)]
async fn live_order_follows_the_step_envelope() {
    let (script, tools, _executions) = echo_and_progress();
    let rig = Rig::new(script).tools(tools);
    rig.run().await.unwrap();
    let types = rig.sink.types();
    let expected = [
        "step.begin",
        "tool.call",
        "tool.call",
        "tool.result",
        "tool.result",
        "step.end",
        "step.begin",
        "step.end",
    ];
    assert!(is_subsequence(&expected, &types), "{types:?}");
    assert_eq!(rig.sink.count("tool.progress"), 1);
}

/// §7.8 #7
#[tokio::test(start_paused = true)]
async fn live_tool_events_carry_call_fields() {
    let executions = Executions::default();
    let rig = Rig::new(vec![
        tool_use(
            vec![call("echo", json!({"text": "hi"}), "tc-99")],
            usage(1, 1),
        ),
        end_turn("x", usage(1, 1)),
    ])
    .tools(vec![echo(&executions)]);
    rig.run().await.unwrap();
    let call = rig.sink.recorded().into_iter().find_map(|e| match e {
        LoopRecordedEvent::ToolCall(call) => Some(call),
        _ => None,
    });
    let call = call.unwrap();
    assert_eq!(
        (call.tool_call_id.as_str(), call.name.as_str()),
        ("tc-99", "echo")
    );
    assert_eq!(call.args, json!({"text": "hi"}));
    let result = rig.sink.live_result("tc-99");
    assert!(matches!(result.result.output, ToolOutput::Text(_)));
}

/// §7.8 #8
#[tokio::test(start_paused = true)]
async fn step_end_records_the_message_id() {
    let script = map_response(end_turn("x", usage(1, 1)), |r| {
        r.message_id = Some("chatcmpl-test".into())
    });
    let rig = Rig::new(vec![script]);
    rig.run().await.unwrap();
    assert_eq!(
        rig.transcript.step_ends()[0].message_id.as_deref(),
        Some("chatcmpl-test")
    );
}

/// A custom listener object.
struct Custom(Mutex<usize>);

impl LiveListener for Custom {
    fn emit(&self, _event: &LoopEvent) -> Result<(), String> {
        *self.0.lock().unwrap() += 1;
        Ok(())
    }
}

/// §7.8 #9
#[tokio::test(start_paused = true)]
async fn custom_listener_object_receives_events() {
    let custom = Arc::new(Custom(Mutex::new(0)));
    let rig = rig_with_listener(vec![end_turn("x", usage(1, 1))], custom.clone());
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert!(*custom.0.lock().unwrap() > 0);
}

/// §3.1: a recorded event is persisted before any live listener hears it.
#[tokio::test(start_paused = true)]
async fn recorded_events_are_persisted_before_live_emit() {
    struct Checker {
        transcript: Arc<RecordingTranscript>,
        violations: Mutex<Vec<String>>,
    }
    impl LiveListener for Checker {
        fn emit(&self, event: &LoopEvent) -> Result<(), String> {
            if let LoopEvent::Recorded(recorded) = event
                && self.transcript.records().last() != Some(recorded)
            {
                self.violations
                    .lock()
                    .unwrap()
                    .push(recorded.type_name().to_owned());
            }
            Ok(())
        }
    }
    let (script, tools, _executions) = echo_and_progress();
    let mut rig = Rig::new(script).tools(tools);
    let checker = Arc::new(Checker {
        transcript: rig.transcript.clone(),
        violations: Mutex::new(Vec::new()),
    });
    rig.input.dispatcher = Arc::new(LoopEventDispatcher::new(
        rig.transcript.clone(),
        checker.clone(),
    ));
    rig.run().await.unwrap();
    assert!(checker.violations.lock().unwrap().is_empty());
}

/// §3.1: if the transcript append fails, the live emit is skipped.
#[tokio::test(start_paused = true)]
async fn failed_append_skips_the_live_emit() {
    let rig = Rig::new(vec![end_turn("x", usage(1, 1))]);
    rig.transcript.fail_on("content.part");
    assert!(rig.run().await.is_err());
    assert_eq!(rig.sink.count("content.part"), 0);
    assert_eq!(rig.sink.count("step.begin"), 1);
}

/// §3.1: `turn.interrupted` is live only: never persisted.
#[tokio::test(start_paused = true)]
async fn interruption_is_never_persisted() {
    let rig = Rig::new(vec![Script::Fail(LoopError::plain("boom"))]);
    assert!(rig.run().await.is_err());
    let encoded: Vec<String> = rig
        .transcript
        .records()
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    assert!(
        encoded
            .iter()
            .all(|line| !line.contains("turn.interrupted"))
    );
    assert_eq!(rig.sink.count("turn.interrupted"), 1);
}
