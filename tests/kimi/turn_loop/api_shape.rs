//! `api-shape.e2e.test.ts` (kimi-loop.md §7.14): type-level locks.
//!
//! How each lock is carried over:
//!
//! | upstream lock | Rust port |
//! |---|---|
//! | `runTurn`, `createLoopEventDispatcher` are functions | not a test: the crate would not compile otherwise (a runtime check could not fail) |
//! | `RunTurnInput` rejects `context`, `config`, `turn`, `events`, `emit`, `emitLiveEvent`, `appendTranscriptRecord`, `limits`, `sinks` | struct fields are closed; `compile_fail` doctest on `input::RunTurnInput` (`context`, `emit`) |
//! | `LLMChatParams` rejects `onDelta`, `onAtomicPart`, `onContentPart` | the callbacks are the four methods of `ChatStreamSink`; `compile_fail` doctest on `llm::ChatStreamSink` |
//! | `LLMChatResponse` rejects `stopReason` | `compile_fail` doctest on `llm::ChatResponse` |
//! | `LoopTurnStopReason` rejects `error`, `max_steps`, `tool_use` | `compile_fail` doctests on `types::TurnStopReason` |
//! | hook step context rejects `modelName`; tool hook context rejects `input`, `context` | `compile_fail` doctests on `hooks::StepHookContext`, `hooks::ToolHookContext` |
//! | `ToolCall` has no `args`; `ExecutableToolContext` has no `args` | `compile_fail` doctests on `types::ToolCall`, `tool::ToolExecuteContext` |
//! | `ExecutableTool` has no `inputSchema` | the trait has `parameters()`; `compile_fail` doctest on `tool::ExecutableTool` |
//! | `LoopEvent` is a closed union of exactly the 11 variants | the test below (wire names round-trip) plus exhaustive `match`es in `events.rs` |

use loopsim::model::kimi::turn_loop::events::*;
use loopsim::model::kimi::turn_loop::*;
use serde_json::json;

fn samples() -> Vec<serde_json::Value> {
    vec![
        json!({"type": "step.begin", "uuid": "u", "turnId": "t", "step": 1}),
        json!({"type": "step.end", "uuid": "u", "turnId": "t", "step": 1, "finishReason": "end_turn",
               "usage": {"inputOther": 0, "output": 0, "inputCacheRead": 0, "inputCacheCreation": 0}}),
        json!({"type": "content.part", "uuid": "p", "turnId": "t", "step": 1, "stepUuid": "u", "part": {"type": "text", "text": "x"}}),
        json!({"type": "tool.call", "uuid": "c", "turnId": "t", "step": 1, "stepUuid": "u", "toolCallId": "c", "name": "echo", "args": {}}),
        json!({"type": "tool.result", "parentUuid": "c", "toolCallId": "c", "result": {"output": "x"}}),
        json!({"type": "turn.interrupted", "reason": "aborted", "attemptedSteps": 0, "interruptReason": "user_cancelled"}),
        json!({"type": "step.retrying", "turnId": "t", "step": 1, "stepUuid": "u", "failedAttempt": 1, "nextAttempt": 2,
               "maxAttempts": 10, "delayMs": 500, "errorName": "APIConnectionError", "errorMessage": "terminated"}),
        json!({"type": "text.delta", "delta": "x"}),
        json!({"type": "thinking.delta", "delta": "x"}),
        json!({"type": "tool.call.delta", "toolCallId": "c", "argumentsPart": "{"}),
        json!({"type": "tool.progress", "toolCallId": "c", "update": {"kind": "stdout", "text": "x"}}),
    ]
}

/// §7.14: `LoopEvent` is the closed union of the 11 documented variants; five are recorded.
#[test]
fn loop_event_is_a_closed_union_of_eleven_variants() {
    let mut recorded = 0;
    for sample in samples() {
        let event: LoopEvent =
            serde_json::from_value(sample.clone()).unwrap_or_else(|e| panic!("{sample}: {e}"));
        assert_eq!(event.type_name(), sample["type"].as_str().unwrap());
        assert_eq!(serde_json::to_value(&event).unwrap(), sample);
        recorded += usize::from(matches!(event, LoopEvent::Recorded(_)));
    }
    assert_eq!(recorded, 5);
    let unknown: Result<LoopEvent, _> = serde_json::from_value(json!({"type": "turn.completed"}));
    assert!(unknown.is_err());
}

/// §3.2: a `tool.result` carries no turn id, step or step uuid.
#[test]
fn tool_result_has_no_step_linkage() {
    let result = LoopRecordedEvent::ToolResult(ToolResultEvent {
        parent_uuid: "c".into(),
        tool_call_id: "c".into(),
        result: ToolResult::error("x"),
        trace_id: None,
    });
    let encoded = serde_json::to_value(result).unwrap();
    for key in ["turnId", "step", "stepUuid", "traceId"] {
        assert!(encoded.get(key).is_none(), "{key}");
    }
}
