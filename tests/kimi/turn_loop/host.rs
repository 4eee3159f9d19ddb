//! The simulated host (kimi-loop.md §8): the record log rebuilds the next request's messages,
//! projection rules, compaction as a host retry, and the turn-end mapping.

use std::sync::Arc;

use loopsim::model::kimi::turn_loop::errors::StatusClass;
use loopsim::model::kimi::turn_loop::events::{
    InterruptReason, LoopRecordedEvent, StepBeginEvent, StepEndEvent, ToolCallEvent,
    ToolResultEvent,
};
use loopsim::model::kimi::turn_loop::host::context::{INTERRUPTED_TOOL_OUTPUT, estimate_tokens};
use loopsim::model::kimi::turn_loop::host::projector::RESULT_NOT_AVAILABLE;
use loopsim::model::kimi::turn_loop::host::session::{abandoned_tool_output, is_safe_cut};
use loopsim::model::kimi::turn_loop::host::*;
use loopsim::model::kimi::turn_loop::types::Role;
use loopsim::model::kimi::turn_loop::*;
use serde_json::json;

use super::util::*;

fn host(script: Vec<Script>, sink: &Arc<CollectingSink>) -> (Host, Arc<FakeLlm>) {
    let llm = Arc::new(FakeLlm::new(script));
    let executions = Executions::default();
    let mut parts = HostParts::new(
        llm.clone(),
        Arc::new(TokioClock::new(1_000)),
        Arc::new(LoopPrng::from_seed(3)),
        sink.clone(),
    );
    parts.tools = vec![echo(&executions)];
    (Host::new(parts), llm)
}

fn tool_turn() -> Vec<Script> {
    vec![
        raw_response(
            vec![ContentPart::text("Calling echo.")],
            vec![call("echo", json!({"text": "x"}), "tc-1")],
            Some(FinishReason::ToolCalls),
            usage(10, 2),
        ),
        end_turn("done", usage(12, 1)),
    ]
}

fn texts(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// §8.3: every recorded event is visible to the next request; the tool exchange is adjacent.
#[tokio::test(start_paused = true)]
async fn recorded_events_rebuild_the_next_request() {
    let sink = Arc::new(CollectingSink::default());
    let mut script = tool_turn();
    script.push(end_turn("you're welcome", usage(1, 1)));
    let (host, llm) = host(script, &sink);
    let signal = AbortSignal::never();
    let first = host.prompt("read it", &signal).await;
    assert_eq!(first.status, TurnStatus::Completed(TurnStopReason::EndTurn));
    assert_eq!(first.turn_id, "1");
    let second = host.prompt("thanks", &signal).await;
    assert_eq!(second.turn_id, "2");
    let calls = llm.calls();
    assert_eq!(calls.len(), 3);
    let step_two: Vec<Role> = calls[1].messages.iter().map(|m| m.role).collect();
    assert_eq!(step_two, vec![Role::User, Role::Assistant, Role::Tool]);
    let request = &calls[2].messages;
    let roles: Vec<Role> = request.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        vec![
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::User
        ]
    );
    assert_eq!(texts(&request[1]), "Calling echo.");
    assert_eq!(request[1].tool_calls[0].id, "tc-1");
    assert_eq!(
        request[1].tool_calls[0].arguments.as_deref(),
        Some("{\"text\":\"x\"}")
    );
    assert_eq!(request[2].tool_call_id.as_deref(), Some("tc-1"));
    assert_eq!(texts(&request[2]), "x");
    assert_eq!(texts(&request[3]), "done");
    assert_eq!(texts(&request[4]), "thanks");
}

/// §8.2: the JSONL log round-trips, and replaying it rebuilds the same messages.
#[tokio::test(start_paused = true)]
async fn wire_log_round_trips_and_replays_to_the_same_context() {
    let sink = Arc::new(CollectingSink::default());
    let (host, _llm) = host(tool_turn(), &sink);
    host.prompt("read it", &AbortSignal::never()).await;
    let jsonl = host.wire_log().to_jsonl();
    let first: serde_json::Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(
        first,
        json!({"type": "metadata", "protocol_version": "1.4", "created_at": 1000})
    );
    assert!(
        jsonl
            .lines()
            .any(|l| l.contains("\"type\":\"context.append_loop_event\"")
                && l.contains("\"step.begin\""))
    );
    let records = WireLog::parse(&jsonl, "session-a").unwrap();
    let replayed = Host::replay(&records).unwrap();
    assert_eq!(replayed.history(), host.history().as_slice());
    assert_eq!(
        project(replayed.history(), ProjectionMode::Normal),
        host.messages()
    );
}

/// §8.1: context overflow is a host retry: compact, rerun with the same turn id; the failed run
/// already emitted its own `turn.interrupted{error}`; step numbers restart at 1.
#[tokio::test(start_paused = true)]
async fn context_overflow_compacts_and_reruns_the_turn() {
    let sink = Arc::new(CollectingSink::default());
    let overflow = LoopError::Provider(ProviderError::status_class(
        400,
        StatusClass::ContextOverflow,
        "prompt is too long",
    ));
    let mut script = tool_turn();
    script.push(Script::Fail(overflow));
    script.push(end_turn("short answer", usage(1, 1)));
    let (host, llm) = host(script, &sink);
    let signal = AbortSignal::never();
    host.prompt("read it", &signal).await;
    let outcome = host.prompt("and now?", &signal).await;
    assert_eq!(
        outcome.status,
        TurnStatus::Completed(TurnStopReason::EndTurn)
    );
    assert_eq!(outcome.compactions, 1);
    assert_eq!(outcome.turn_id, "2");
    assert_eq!(outcome.result.unwrap().steps, 1);
    let interrupted = sink.interrupted();
    assert_eq!(interrupted.len(), 1);
    assert_eq!(interrupted[0].reason, InterruptReason::Error);
    let retried = &llm.calls()[3].messages;
    assert!(texts(&retried[0]).contains("compacted"));
    assert_eq!(texts(retried.last().unwrap()), "and now?");
    let begins: Vec<(String, u32)> = sink
        .recorded()
        .into_iter()
        .filter_map(|e| match e {
            LoopRecordedEvent::StepBegin(b) => Some((b.turn_id, b.step)),
            _ => None,
        })
        .collect();
    assert_eq!(&begins[2..], &[("2".to_owned(), 1), ("2".to_owned(), 1)]);
    assert!(
        host.wire_log()
            .to_jsonl()
            .contains("\"type\":\"context.compaction\"")
    );
}

/// §8.1: the overflow budget is bounded; the last overflow is reported as a failure.
#[tokio::test(start_paused = true)]
async fn repeated_overflow_fails_after_the_compaction_budget() {
    let sink = Arc::new(CollectingSink::default());
    let overflow = || {
        Script::Fail(LoopError::Provider(ProviderError::status_class(
            400,
            StatusClass::ContextOverflow,
            "too long",
        )))
    };
    let mut script = tool_turn();
    script.extend([overflow(), overflow(), overflow()]);
    let (host, llm) = host(script, &sink);
    let signal = AbortSignal::never();
    host.prompt("read it", &signal).await;
    let outcome = host.prompt("second", &signal).await;
    assert!(
        matches!(outcome.status, TurnStatus::Failed { ref code, .. } if code == "APIContextOverflowError")
    );
    assert_eq!(outcome.compactions, 2);
    assert_eq!(llm.call_count(), 2 + 3);
    assert_eq!(sink.interrupted().len(), 3);
}

/// §8.1: filtered and aborted turn ends map to failed/cancelled.
#[tokio::test(start_paused = true)]
async fn turn_end_mapping() {
    let sink = Arc::new(CollectingSink::default());
    let (host, _) = host(
        vec![response(
            vec![ContentPart::text("no")],
            vec![],
            StepStopReason::Filtered,
        )],
        &sink,
    );
    let outcome = host.prompt("x", &AbortSignal::never()).await;
    assert_eq!(
        outcome.status,
        TurnStatus::Failed {
            code: "provider.filtered".into(),
            message: "Provider safety policy blocked the response.".into()
        }
    );
    let controller = AbortController::new();
    controller.abort();
    let (host, _) = host_with_empty(&sink);
    assert_eq!(
        host.prompt("x", &controller.signal()).await.status,
        TurnStatus::Cancelled
    );
}

fn host_with_empty(sink: &Arc<CollectingSink>) -> (Host, Arc<FakeLlm>) {
    host(vec![], sink)
}

fn begin(uuid: &str) -> LoopRecordedEvent {
    LoopRecordedEvent::StepBegin(StepBeginEvent {
        uuid: uuid.into(),
        turn_id: "1".into(),
        step: 1,
    })
}

fn tool_call_event(step_uuid: &str, id: &str) -> LoopRecordedEvent {
    LoopRecordedEvent::ToolCall(ToolCallEvent {
        uuid: id.into(),
        turn_id: "1".into(),
        step: 1,
        step_uuid: step_uuid.into(),
        tool_call_id: id.into(),
        name: "echo".into(),
        args: json!({"text": "x"}),
        description: None,
        display: None,
        extras: None,
        trace_id: None,
    })
}

fn result_event(id: &str, result: ToolResult) -> LoopRecordedEvent {
    LoopRecordedEvent::ToolResult(ToolResultEvent {
        parent_uuid: id.into(),
        tool_call_id: id.into(),
        result,
        trace_id: None,
    })
}

/// §8.3: a new `step.begin` closes calls left pending; a result for an unknown id is dropped;
/// a message appended while results are pending waits for the exchange to close.
#[test]
fn fold_closes_pending_calls_drops_strays_and_defers_messages() {
    let mut context = ContextMemory::new();
    context.append_message(ContextMessage::user(vec![ContentPart::text("go")]));
    context.apply(&begin("s1")).unwrap();
    context.apply(&tool_call_event("s1", "tc-1")).unwrap();
    context.apply(&tool_call_event("s1", "tc-2")).unwrap();
    context.append_message(ContextMessage::user(vec![ContentPart::text("steer")]));
    context
        .apply(&result_event("tc-1", ToolResult::error("x")))
        .unwrap();
    context
        .apply(&result_event("tc-ghost", ToolResult::error("y")))
        .unwrap();
    assert_eq!(context.pending_tool_calls(), ["tc-2"]);
    assert_eq!(context.history().len(), 3);
    context.apply(&begin("s2")).unwrap();
    let history = context.history();
    assert_eq!(history[3].tool_call_id.as_deref(), Some("tc-2"));
    assert_eq!(
        history[3].content,
        vec![ContentPart::text(INTERRUPTED_TOOL_OUTPUT)]
    );
    assert_eq!(texts(&history[4].to_message()), "steer");
    assert!(
        context
            .apply(&tool_call_event("no-such-step", "tc-3"))
            .is_err()
    );
}

fn end(uuid: &str, usage: TokenUsage) -> LoopRecordedEvent {
    // Every optional field (timings, ids, diagnostics) left out, as a record may leave them.
    LoopRecordedEvent::StepEnd(
        serde_json::from_value::<StepEndEvent>(json!({
            "uuid": uuid, "turnId": "1", "step": 1, "usage": usage, "finishReason": "end_turn",
        }))
        .unwrap(),
    )
}

/// §8.3 `step.end`: the context's token count becomes the sum of the four usage fields; a step
/// that reports no usage leaves an estimate instead (the model's named choice: of the whole
/// history, where the reference adds one for the uncovered messages).
#[test]
fn a_step_end_sets_the_token_count_from_its_usage_or_an_estimate_without_one() {
    let mut context = ContextMemory::new();
    context.append_message(ContextMessage::user(vec![ContentPart::text(
        "a prompt long enough to estimate",
    )]));
    context.apply(&begin("s1")).unwrap();
    let usage = TokenUsage {
        input_other: 7,
        output: 3,
        input_cache_read: 11,
        input_cache_creation: 13,
    };
    context.apply(&end("s1", usage)).unwrap();
    assert_eq!(context.token_count(), 34);
    context.apply(&begin("s2")).unwrap();
    context.apply(&end("s2", TokenUsage::empty())).unwrap();
    let estimate = estimate_tokens(context.history());
    assert!(estimate > 0 && estimate != 34, "{estimate}");
    assert_eq!(context.token_count(), estimate);
}

/// §8.3 rendering: error status, empty placeholder, note.
#[test]
fn projector_renders_tool_results() {
    let mut context = ContextMemory::new();
    context.append_message(ContextMessage::user(vec![ContentPart::text("go")]));
    context.apply(&begin("s1")).unwrap();
    for id in ["a", "b", "c"] {
        context.apply(&tool_call_event("s1", id)).unwrap();
    }
    context
        .apply(&result_event("a", ToolResult::error("boom")))
        .unwrap();
    context
        .apply(&result_event(
            "b",
            ToolResult {
                output: ToolOutput::Text("Tool output is empty.".into()),
                is_error: false,
                note: None,
                truncated: false,
            },
        ))
        .unwrap();
    context
        .apply(&result_event(
            "c",
            ToolResult {
                output: ToolOutput::Text("ok".into()),
                is_error: false,
                note: Some("<system>n</system>".into()),
                truncated: false,
            },
        ))
        .unwrap();
    let messages = project(context.history(), ProjectionMode::Normal);
    assert_eq!(
        texts(&messages[2]),
        "<system>ERROR: Tool execution failed.</system>\nboom"
    );
    assert_eq!(
        texts(&messages[3]),
        "<system>Tool output is empty.</system>"
    );
    assert_eq!(texts(&messages[4]), "ok\n<system>n</system>");
}

/// §8.3 rules 4, 6, 7 and 8, and the strict extras.
#[test]
fn projector_repairs_the_tool_exchange() {
    let mut context = ContextMemory::new();
    context.append_message(ContextMessage::user(vec![ContentPart::text("one")]));
    context.append_message(ContextMessage::user(vec![ContentPart::text("two")]));
    context.apply(&begin("s1")).unwrap();
    context.apply(&tool_call_event("s1", "mid")).unwrap();
    context.apply(&begin("s2")).unwrap();
    context.apply(&begin("s3")).unwrap();
    context.apply(&tool_call_event("s3", "trailing")).unwrap();
    let normal = project(context.history(), ProjectionMode::Normal);
    assert_eq!(texts(&normal[0]), "one\n\ntwo");
    let roles: Vec<Role> = normal.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert!(texts(&normal[2]).contains("interrupted"));
    let strict = project(context.history(), ProjectionMode::Strict);
    assert_eq!(strict.last().unwrap().role, Role::Tool);
    assert!(texts(strict.last().unwrap()).contains(RESULT_NOT_AVAILABLE));
}

/// The strict extras' merge: an assistant message without tool calls and the assistant message
/// after it go out as one; the normal projection keeps both.
#[test]
fn strict_projection_merges_an_assistant_message_without_calls_into_the_next() {
    use loopsim::model::kimi::turn_loop::host::context::Origin;
    let said = |text: &str| ContextMessage {
        role: Role::Assistant,
        origin: Origin::Assistant,
        ..ContextMessage::user(vec![ContentPart::text(text)])
    };
    let mut context = ContextMemory::new();
    context.append_message(ContextMessage::user(vec![ContentPart::text("go")]));
    context.append_message(said("first"));
    context.append_message(said("second"));
    let roles = |m: &[Message]| m.iter().map(|m| m.role).collect::<Vec<Role>>();
    let normal = project(context.history(), ProjectionMode::Normal);
    assert_eq!(
        roles(&normal),
        vec![Role::User, Role::Assistant, Role::Assistant]
    );
    let strict = project(context.history(), ProjectionMode::Strict);
    assert_eq!(roles(&strict), vec![Role::User, Role::Assistant]);
    assert!(
        texts(&strict[1]).contains("first") && texts(&strict[1]).contains("second"),
        "{}",
        texts(&strict[1])
    );
}

/// Replay closes calls still pending at the end of the log (`finishResume`).
#[test]
fn replay_closes_pending_calls() {
    let records = vec![
        WireRecord::AppendMessage {
            message: ContextMessage::user(vec![ContentPart::text("go")]),
            time: 0,
        },
        WireRecord::AppendLoopEvent {
            event: begin("s1"),
            time: 0,
        },
        WireRecord::AppendLoopEvent {
            event: tool_call_event("s1", "tc-1"),
            time: 0,
        },
    ];
    let context = Host::replay(&records).unwrap();
    assert!(context.pending_tool_calls().is_empty());
    assert_eq!(
        context.history().last().unwrap().content,
        vec![ContentPart::text(INTERRUPTED_TOOL_OUTPUT)]
    );
    assert_eq!(
        abandoned_tool_output("the turn was cancelled"),
        "Tool call did not complete: the turn was cancelled before its result was recorded. Do not assume the tool completed successfully."
    );
}

/// compaction-safe: cuts only at an assistant message and never between a call and its result.
#[test]
fn compaction_cuts_are_safe() {
    let mut context = ContextMemory::new();
    context.append_message(ContextMessage::user(vec![ContentPart::text("go")]));
    context.apply(&begin("s1")).unwrap();
    context.apply(&tool_call_event("s1", "tc-1")).unwrap();
    context
        .apply(&result_event("tc-1", ToolResult::error("x")))
        .unwrap();
    context.apply(&begin("s2")).unwrap();
    let history = context.history();
    assert!(!is_safe_cut(history, 0));
    assert!(is_safe_cut(history, 1));
    assert!(!is_safe_cut(history, 2));
    assert!(is_safe_cut(history, 3));
}

async fn conversation_log(seed: u64) -> String {
    let sink = Arc::new(CollectingSink::default());
    let llm =
        Arc::new(FakeLlm::new(tool_turn()).with_classifier(
            loopsim::model::kimi::turn_loop::provider::is_retryable_generate_error,
        ));
    let executions = Executions::default();
    let mut parts = HostParts::new(
        llm,
        Arc::new(TokioClock::new(0)),
        Arc::new(LoopPrng::from_seed(seed)),
        sink,
    );
    parts.tools = vec![echo(&executions)];
    let host = Host::new(parts);
    host.prompt("read it", &AbortSignal::never()).await;
    host.wire_log().to_jsonl()
}

/// deterministic: the same seed gives the same record log byte for byte; uuids come from it.
#[tokio::test(start_paused = true)]
async fn same_seed_same_bytes() {
    let first = conversation_log(11).await;
    assert_eq!(first, conversation_log(11).await);
    assert_ne!(first, conversation_log(12).await);
}
