//! `transcript.e2e.test.ts` (kimi-loop.md §7.3): step ordering and durable linkage.

use std::sync::Arc;

use loopsim::model::kimi::turn_loop::*;
use serde_json::json;

use super::util::*;

fn two_step(executions: &Executions) -> Rig {
    Rig::new(vec![
        tool_use(
            vec![call("echo", json!({"text": "hi"}), "tc-1")],
            usage(1, 1),
        ),
        end_turn("done", usage(1, 1)),
    ])
    .tools(vec![echo(executions)])
}

/// §7.3 #1
#[tokio::test(start_paused = true)]
async fn each_step_has_one_begin_and_one_end_numbered_in_order() {
    let rig = two_step(&Executions::default());
    rig.run().await.unwrap();
    let begins: Vec<u32> = rig
        .transcript
        .step_begins()
        .iter()
        .map(|b| b.step)
        .collect();
    let ends: Vec<u32> = rig.transcript.step_ends().iter().map(|e| e.step).collect();
    assert_eq!(begins, vec![1, 2]);
    assert_eq!(ends, vec![1, 2]);
}

/// §7.3 #2
#[tokio::test(start_paused = true)]
async fn step_uuid_links_begin_end_and_tool_calls() {
    let rig = two_step(&Executions::default());
    rig.run().await.unwrap();
    let begins = rig.transcript.step_begins();
    let ends = rig.transcript.step_ends();
    for (begin, end) in begins.iter().zip(&ends) {
        assert_eq!(begin.uuid, end.uuid);
        assert_eq!(begin.turn_id, "turn-1");
        assert_eq!(end.turn_id, "turn-1");
    }
    assert_ne!(begins[0].uuid, begins[1].uuid);
    let call = &rig.transcript.tool_calls()[0];
    assert_eq!(call.step_uuid, begins[0].uuid);
    assert_eq!(call.turn_id, "turn-1");
}

/// §7.3 #3
#[tokio::test(start_paused = true)]
async fn tool_result_parent_uuid_is_the_call_uuid() {
    let executions = Executions::default();
    let rig = Rig::new(vec![
        tool_use(
            vec![
                call("echo", json!({"text": "a"}), "tc-A"),
                call("echo", json!({"text": "b"}), "tc-B"),
            ],
            usage(1, 1),
        ),
        end_turn("done", usage(1, 1)),
    ])
    .tools(vec![echo(&executions)]);
    rig.run().await.unwrap();
    let calls = rig.transcript.tool_calls();
    let results = rig.transcript.tool_results();
    assert_eq!(calls.len(), 2);
    assert_eq!(results.len(), 2);
    for (call, result) in calls.iter().zip(&results) {
        assert_eq!(result.parent_uuid, call.uuid);
    }
}

/// §7.3 #4
#[tokio::test(start_paused = true)]
async fn step_end_usage_is_the_response_usage_verbatim() {
    let given = TokenUsage {
        input_other: 4,
        output: 22,
        input_cache_read: 3,
        input_cache_creation: 4,
    };
    let rig = Rig::new(vec![end_turn("x", given)]);
    rig.run().await.unwrap();
    let end = &rig.transcript.step_ends()[0];
    assert_eq!(end.usage, given);
    assert_eq!(end.finish_reason, StepStopReason::EndTurn);
}

/// §7.3 #5
#[tokio::test(start_paused = true)]
async fn step_end_usage_has_zero_cache_fields_when_the_fixture_fills_them() {
    let rig = Rig::new(vec![end_turn("x", usage(7, 5))]);
    rig.run().await.unwrap();
    let end = &rig.transcript.step_ends()[0];
    assert_eq!(end.usage.input_cache_read, 0);
    assert_eq!(end.usage.input_cache_creation, 0);
}

/// §7.3 #6
#[tokio::test(start_paused = true)]
async fn abort_during_tool_leaves_step_begin_without_step_end() {
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
    assert!(rig.transcript.count("step.begin") >= 1);
    assert_eq!(rig.transcript.count("step.end"), 0);
}

/// §7.3 #7
#[tokio::test(start_paused = true)]
async fn transcript_starts_with_step_begin_and_tools_sit_inside_the_step() {
    let rig = two_step(&Executions::default());
    rig.run().await.unwrap();
    let kinds = rig.transcript.kinds();
    assert_eq!(kinds[0], "step.begin");
    let end = kinds.iter().position(|k| *k == "step.end").unwrap();
    let call = kinds.iter().position(|k| *k == "tool.call").unwrap();
    let result = kinds.iter().position(|k| *k == "tool.result").unwrap();
    assert!(0 < call && call < end);
    assert!(0 < result && result < end);
}

/// §7.3 #8
#[tokio::test(start_paused = true)]
async fn unknown_tool_still_gets_call_and_result_records() {
    let rig = Rig::new(vec![
        tool_use(vec![call("ghost", json!({}), "tc-g")], usage(1, 1)),
        end_turn("done", usage(1, 1)),
    ]);
    rig.run().await.unwrap();
    let kinds = rig.transcript.kinds();
    let call = kinds.iter().position(|k| *k == "tool.call").unwrap();
    let result = kinds.iter().position(|k| *k == "tool.result").unwrap();
    assert!(call < result);
}

/// §7.3 #9
#[tokio::test(start_paused = true)]
async fn empty_text_part_does_not_disturb_tool_records() {
    let executions = Executions::default();
    let rig = Rig::new(vec![
        raw_response(
            vec![ContentPart::text("")],
            vec![
                call("echo", json!({"text": "a"}), "tc-1"),
                call("echo", json!({"text": "b"}), "tc-2"),
            ],
            Some(FinishReason::ToolCalls),
            usage(1, 1),
        ),
        end_turn("done", usage(1, 1)),
    ])
    .tools(vec![echo(&executions)]);
    rig.run().await.unwrap();
    assert_eq!(rig.transcript.count("tool.call"), 2);
    assert_eq!(rig.transcript.count("tool.result"), 2);
}

/// §7.3 #10
#[tokio::test(start_paused = true)]
async fn tool_call_uuid_is_the_provider_tool_call_id() {
    let executions = Executions::default();
    let rig = Rig::new(vec![
        tool_use(
            vec![call("echo", json!({"text": "a"}), "tc-deadbeef")],
            usage(1, 1),
        ),
        end_turn("done", usage(1, 1)),
    ])
    .tools(vec![echo(&executions)]);
    rig.run().await.unwrap();
    let call = &rig.transcript.tool_calls()[0];
    assert_eq!(call.uuid, "tc-deadbeef");
    assert_eq!(call.tool_call_id, "tc-deadbeef");
}
