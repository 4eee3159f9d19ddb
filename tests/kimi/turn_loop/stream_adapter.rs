//! `StreamingLlm` over a scripted `ChatProvider` (the host adapter of kimi-loop.md §2.7):
//! deltas while streaming, parts only after a full drain, provider errors classified for
//! `chatWithRetry`, and the provider event model of `wire::provider` driving a whole turn.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use loopsim::model::kimi::turn_loop::events::LoopLiveOnlyEvent;
use loopsim::model::kimi::turn_loop::provider::ProviderEventStream;
use loopsim::model::kimi::turn_loop::*;
use loopsim::wire::provider::{ProviderEvent, ProviderStop, ProviderUsage};
use serde_json::json;

use super::util::*;

enum Reply {
    Refuse(ProviderError),
    Stream(Vec<Result<ProviderEvent, ProviderError>>),
    /// Emits the events, then never ends.
    Stall(Vec<ProviderEvent>),
}

struct ScriptedProvider {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl ScriptedProvider {
    fn new(replies: Vec<Reply>) -> Arc<Self> {
        Arc::new(Self {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
        })
    }
}

impl ChatProvider for ScriptedProvider {
    fn open(
        &self,
        request: ChatRequest,
    ) -> BoxFuture<'_, Result<ProviderEventStream, ProviderError>> {
        self.requests.lock().unwrap().push(request);
        let reply = self.replies.lock().unwrap().pop_front();
        Box::pin(async move {
            match reply {
                None => Err(ProviderError::status(500, "script exhausted")),
                Some(Reply::Refuse(error)) => Err(error),
                Some(Reply::Stream(items)) => Ok(stream::iter(items).boxed()),
                Some(Reply::Stall(events)) => Ok(stream::iter(events.into_iter().map(Ok))
                    .chain(stream::pending())
                    .boxed()),
            }
        })
    }
}

fn rig(provider: Arc<ScriptedProvider>) -> Rig {
    let mut rig = Rig::new(vec![]);
    let clock = Arc::new(TokioClock::new(0));
    rig.input.llm = Arc::new(StreamingLlm::new(provider, clock, "sim-model", "be brief"));
    rig
}

fn text(index: u32, text: &str) -> ProviderEvent {
    ProviderEvent::TextDelta {
        index,
        text: text.into(),
    }
}

fn stop(reason: ProviderStop, raw: &str) -> ProviderEvent {
    ProviderEvent::Stop {
        reason,
        raw: raw.into(),
    }
}

fn ok(events: Vec<ProviderEvent>) -> Reply {
    Reply::Stream(events.into_iter().map(Ok).collect())
}

fn answer(words: &str) -> Reply {
    ok(vec![
        ProviderEvent::MessageStart {
            id: Some("msg_2".into()),
            model: None,
        },
        text(0, words),
        ProviderEvent::Usage(ProviderUsage {
            input_tokens: Some(3),
            output_tokens: Some(2),
            ..ProviderUsage::default()
        }),
        stop(ProviderStop::EndTurn, "end_turn"),
        ProviderEvent::Done,
    ])
}

/// A tool call whose JSON arguments are split mid-string survives byte for byte (args-intact),
/// and the wire events drive a two-step turn.
#[tokio::test(start_paused = true)]
async fn provider_events_drive_a_tool_turn() {
    let executions = Executions::default();
    let provider = ScriptedProvider::new(vec![
        ok(vec![
            ProviderEvent::MessageStart {
                id: Some("msg_1".into()),
                model: Some("sim".into()),
            },
            ProviderEvent::ThinkingDelta {
                index: 0,
                text: "let me ".into(),
            },
            ProviderEvent::ThinkingDelta {
                index: 0,
                text: "echo".into(),
            },
            text(1, "Calling echo."),
            ProviderEvent::ToolCallStart {
                index: 2,
                id: "toolu_1".into(),
                name: "echo".into(),
            },
            ProviderEvent::ToolCallArgsDelta {
                index: 2,
                delta: "{\"text\": \"hel".into(),
            },
            ProviderEvent::ToolCallArgsDelta {
                index: 2,
                delta: "lo wor\\u006cd\"}".into(),
            },
            ProviderEvent::ToolCallEnd { index: 2 },
            ProviderEvent::Usage(ProviderUsage {
                input_tokens: Some(10),
                output_tokens: Some(5),
                cache_read_tokens: Some(2),
                ..ProviderUsage::default()
            }),
            stop(ProviderStop::ToolUse, "tool_use"),
            ProviderEvent::Done,
        ]),
        answer("done"),
    ]);
    let rig = rig(provider.clone()).tools(vec![echo(&executions)]);
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::EndTurn);
    assert_eq!(
        result.usage,
        TokenUsage {
            input_other: 13,
            output: 7,
            input_cache_read: 2,
            input_cache_creation: 0
        }
    );
    assert_eq!(executions.all()[0].args, json!({"text": "hello world"}));
    assert_eq!(
        rig.transcript.kinds(),
        vec![
            "step.begin",
            "content.part",
            "content.part",
            "tool.call",
            "tool.result",
            "step.end",
            "step.begin",
            "content.part",
            "step.end",
        ]
    );
    let ends = rig.transcript.step_ends();
    assert_eq!(ends[0].message_id.as_deref(), Some("msg_1"));
    assert_eq!(ends[0].provider_finish_reason, None);
    assert!(ends[0].llm_stream_duration_ms.is_some());
    let deltas = rig
        .sink
        .live_only()
        .iter()
        .filter(|e| matches!(e, LoopLiveOnlyEvent::ToolCallDelta(_)))
        .count();
    assert_eq!(deltas, 3);
    let requests = provider.requests.lock().unwrap();
    assert_eq!(requests[0].system_prompt, "be brief");
    assert_eq!(requests[0].tools[0].name, "echo");
    assert_eq!(
        requests[1].request_log_fields.turn_step.as_deref(),
        Some("turn-1.2")
    );
}

/// A connection drop mid-stream is retried; the failed attempt's deltas were published but
/// it never produced a `content.part`.
#[tokio::test(start_paused = true)]
async fn stream_cut_is_retried_and_leaves_no_parts() {
    let provider = ScriptedProvider::new(vec![
        Reply::Stream(vec![
            Ok(text(0, "partial ")),
            Err(ProviderError::connection("terminated")),
        ]),
        answer("whole answer"),
    ]);
    let rig = rig(provider);
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(rig.sink.count("step.retrying"), 1);
    assert_eq!(rig.sink.count("text.delta"), 2);
    let parts: Vec<_> = rig
        .transcript
        .records()
        .into_iter()
        .filter_map(|e| match e {
            LoopRecordedEvent::ContentPart(p) => Some(p.part),
            _ => None,
        })
        .collect();
    assert_eq!(parts, vec![ContentPart::text("whole answer")]);
}

/// An in-stream `overloaded_error` is a retryable 529.
#[tokio::test(start_paused = true)]
async fn in_stream_overload_is_retried() {
    let provider = ScriptedProvider::new(vec![
        ok(vec![ProviderEvent::Error {
            error_type: "overloaded_error".into(),
            message: "Overloaded".into(),
        }]),
        answer("ok"),
    ]);
    let rig = rig(provider);
    rig.run().await.unwrap();
    let retrying: Vec<_> = rig
        .sink
        .live_only()
        .into_iter()
        .filter_map(|e| match e {
            LoopLiveOnlyEvent::StepRetrying(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(retrying[0].status_code, Some(529));
}

/// A quota 429 at open fails the turn at once.
#[tokio::test(start_paused = true)]
async fn quota_429_fails_without_retry() {
    let provider = ScriptedProvider::new(vec![Reply::Refuse(ProviderError::from_http(
        429,
        "You exceeded your current quota",
        Some(1000),
    ))]);
    let rig = rig(provider.clone());
    let error = rig.run().await.unwrap_err();
    assert_eq!(error.name(), "APIProviderQuotaExhaustedError");
    assert_eq!(provider.requests.lock().unwrap().len(), 1);
}

/// An empty stream is `APIEmptyResponseError`, which is retried.
#[tokio::test(start_paused = true)]
async fn empty_response_is_retried() {
    let provider = ScriptedProvider::new(vec![ok(vec![ProviderEvent::Done]), answer("ok")]);
    let rig = rig(provider);
    rig.run().await.unwrap();
    let retrying: Vec<_> = rig
        .sink
        .live_only()
        .into_iter()
        .filter_map(|e| match e {
            LoopLiveOnlyEvent::StepRetrying(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(retrying[0].error_name, "APIEmptyResponseError");
}

/// An abort while the stream stalls ends the turn `aborted`.
#[tokio::test(start_paused = true)]
async fn abort_during_a_stalled_stream() {
    let provider = ScriptedProvider::new(vec![Reply::Stall(vec![text(0, "thinking about it")])]);
    let rig = rig(provider);
    let (result, ()) = tokio::join!(rig.run(), async {
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        rig.controller.abort();
    });
    assert_eq!(result.unwrap().stop_reason, TurnStopReason::Aborted);
    assert_eq!(rig.transcript.kinds(), vec!["step.begin"]);
}

/// Stop-reason mapping from the wire: refusal → filtered, anything else → unknown.
#[tokio::test(start_paused = true)]
async fn wire_stop_reasons_map_to_loop_reasons() {
    for (reason, expected) in [
        (ProviderStop::Refusal, TurnStopReason::Filtered),
        (ProviderStop::Other("weird".into()), TurnStopReason::Unknown),
        (ProviderStop::MaxTokens, TurnStopReason::MaxTokens),
        (ProviderStop::PauseTurn, TurnStopReason::Paused),
        (ProviderStop::StopSequence, TurnStopReason::EndTurn),
    ] {
        let provider = ScriptedProvider::new(vec![ok(vec![
            text(0, "x"),
            stop(reason, "raw"),
            ProviderEvent::Done,
        ])]);
        let rig = rig(provider);
        assert_eq!(rig.run().await.unwrap().stop_reason, expected);
    }
}
