//! `retry.test.ts` (kimi-loop.md §7.10): `chatWithRetry` called directly with kosong's
//! classifier, turn id `t`, step 1.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use loopsim::model::kimi::turn_loop::errors::{KimiError, StatusClass};
use loopsim::model::kimi::turn_loop::events::{
    LoopLiveOnlyEvent, StepRetryingEvent, ToolCallDeltaEvent,
};
use loopsim::model::kimi::turn_loop::llm::{
    Projection, RequestLogFields, RequestTrace, RetryClassifier,
};
use loopsim::model::kimi::turn_loop::log::MemoryLog;
use loopsim::model::kimi::turn_loop::provider::is_retryable_generate_error;
use loopsim::model::kimi::turn_loop::retry::{
    ChatWithRetryInput, chat_with_retry, retry_backoff_delays,
};
use loopsim::model::kimi::turn_loop::*;
use serde_json::json;

use super::util::*;

type Respond = dyn Fn(usize) -> Result<ChatResponse, LoopError> + Send + Sync;

/// An LLM whose n-th call (0-based) is answered by a function; always uses kosong's classifier.
struct ScriptedLlm {
    respond: Box<Respond>,
    fields: Mutex<Vec<RequestLogFields>>,
    classifier: Option<RetryClassifier>,
}

impl ScriptedLlm {
    fn new(
        respond: impl Fn(usize) -> Result<ChatResponse, LoopError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            respond: Box::new(respond),
            fields: Mutex::new(Vec::new()),
            classifier: Some(is_retryable_generate_error),
        }
    }

    fn calls(&self) -> usize {
        self.fields.lock().unwrap().len()
    }
}

impl Llm for ScriptedLlm {
    fn system_prompt(&self) -> &str {
        "fake system prompt"
    }
    fn model_name(&self) -> &str {
        "fake-model"
    }
    fn retry_classifier(&self) -> Option<RetryClassifier> {
        self.classifier
    }
    fn chat<'a>(
        &'a self,
        params: ChatParams<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LoopError>> {
        let index = {
            let mut fields = self.fields.lock().unwrap();
            fields.push(params.request_log_fields.clone());
            fields.len() - 1
        };
        let outcome = (self.respond)(index);
        Box::pin(async move { outcome })
    }
}

struct NullSink;

impl ChatStreamSink for NullSink {
    fn on_text_delta(&self, _delta: &str) {}
    fn on_think_delta(&self, _delta: &str) {}
    fn on_tool_call_delta(&self, _delta: ToolCallDeltaEvent) {}
    fn on_part<'a>(&'a self, _part: ContentPart) -> BoxFuture<'a, Result<(), LoopError>> {
        Box::pin(async { Ok(()) })
    }
}

struct Env {
    sink: Arc<CollectingSink>,
    dispatcher: LoopEventDispatcher,
    clock: TokioClock,
    prng: LoopPrng,
    log: MemoryLog,
    trace: RequestTrace,
}

impl Env {
    fn new() -> Self {
        let sink = Arc::new(CollectingSink::default());
        Self {
            dispatcher: LoopEventDispatcher::new(
                Arc::new(RecordingTranscript::default()),
                sink.clone(),
            ),
            sink,
            clock: TokioClock::new(0),
            prng: LoopPrng::from_seed(1),
            log: MemoryLog::new(),
            trace: RequestTrace::new(),
        }
    }

    async fn call(
        &self,
        llm: &dyn Llm,
        signal: &AbortSignal,
        fields: RequestLogFields,
    ) -> Result<ChatResponse, LoopError> {
        chat_with_retry(ChatWithRetryInput {
            llm,
            messages: vec![Message::user("hi")],
            tools: vec![],
            signal,
            sink: &NullSink,
            request_log_fields: fields,
            trace: &self.trace,
            turn_id: "t",
            step: 1,
            step_uuid: "step-uuid",
            max_attempts: None,
            dispatcher: &self.dispatcher,
            clock: &self.clock,
            prng: &self.prng,
            log: &self.log,
            bugs: LoopBugs::default(),
        })
        .await
    }

    fn retrying(&self) -> Vec<StepRetryingEvent> {
        self.sink
            .live_only()
            .into_iter()
            .filter_map(|e| match e {
                LoopLiveOnlyEvent::StepRetrying(r) => Some(r),
                _ => None,
            })
            .collect()
    }
}

fn ok_response() -> ChatResponse {
    ChatResponse {
        provider_finish_reason: Some(FinishReason::Completed),
        usage: usage(3, 4),
        ..ChatResponse::default()
    }
}

fn terminated() -> LoopError {
    LoopError::Provider(ProviderError::connection("terminated"))
}

/// §7.10 #1
#[tokio::test(start_paused = true)]
async fn each_attempt_carries_turn_step_and_from_the_second_the_attempt() {
    let env = Env::new();
    let llm = ScriptedLlm::new(|n| {
        if n == 0 {
            Err(terminated())
        } else {
            Ok(ok_response())
        }
    });
    let fields = RequestLogFields {
        projection: Some(Projection::Strict),
        ..RequestLogFields::default()
    };
    env.call(&llm, &AbortSignal::never(), fields).await.unwrap();
    let seen: Vec<_> = llm
        .fields
        .lock()
        .unwrap()
        .iter()
        .map(|f| serde_json::to_value(f).unwrap())
        .collect();
    assert_eq!(
        seen,
        vec![
            json!({"projection": "strict", "turnStep": "t.1"}),
            json!({"projection": "strict", "turnStep": "t.1", "attempt": "2/10"}),
        ]
    );
}

/// §7.10 #2 (§9.13, #201)
#[tokio::test(start_paused = true)]
async fn mid_stream_drop_is_retried_once() {
    let env = Env::new();
    let llm = ScriptedLlm::new(|n| {
        if n == 0 {
            Err(terminated())
        } else {
            Ok(ok_response())
        }
    });
    let response = env
        .call(&llm, &AbortSignal::never(), RequestLogFields::default())
        .await
        .unwrap();
    assert_eq!(llm.calls(), 2);
    assert_eq!(response, ok_response());
}

/// §7.10 #3
#[tokio::test(start_paused = true)]
async fn retryable_error_on_an_aborted_signal_becomes_the_abort() {
    let env = Env::new();
    let controller = AbortController::new();
    controller.abort();
    let llm = ScriptedLlm::new(|_| Err(terminated()));
    let error = env
        .call(&llm, &controller.signal(), RequestLogFields::default())
        .await
        .unwrap_err();
    assert_eq!(error.name(), "AbortError");
    assert_eq!(llm.calls(), 1);
    assert!(env.retrying().is_empty());
}

/// §7.10 #4 (§9.14, #838)
#[tokio::test(start_paused = true)]
async fn oauth_token_failure_is_not_retried() {
    let env = Env::new();
    let tokens = Counter::default();
    let mut fake =
        FakeLlm::new(vec![end_turn("x", usage(1, 1))]).with_classifier(is_retryable_generate_error);
    let token_calls = tokens.clone();
    fake.before_chat = Some(Arc::new(move || {
        token_calls.bump();
        Err(LoopError::Kimi(KimiError {
            code: "provider.connection_error".into(),
            message: "token fetch failed".into(),
            details: json!({}),
        }))
    }));
    let error = env
        .call(&fake, &AbortSignal::never(), RequestLogFields::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some("provider.connection_error"));
    assert_eq!(fake.call_count(), 1);
    assert_eq!(tokens.get(), 1);
}

/// §7.10 #5
#[test]
fn backoff_has_nine_jittered_delays_for_ten_attempts() {
    let delays = retry_backoff_delays(10, &LoopPrng::from_seed(5));
    assert_eq!(delays.len(), 9);
    assert!(delays.iter().all(|&d| d > 0 && d <= 40_000));
    assert!((500..=625).contains(&delays[0]));
    let bases = [500, 1000, 2000, 4000, 8000, 16000, 32000, 32000, 32000];
    for (delay, base) in delays.iter().zip(bases) {
        assert!(
            *delay >= base && *delay <= base + base / 4,
            "{delay} vs base {base}"
        );
    }
}

/// §7.10 #6
#[test]
fn backoff_reaches_the_cap() {
    let prng = LoopPrng::from_seed(6);
    let max = (0..50)
        .flat_map(|_| retry_backoff_delays(12, &prng))
        .max()
        .unwrap();
    assert!(max > 30_000);
    assert!(max <= 40_000);
}

/// §7.10 #7
#[test]
fn three_attempts_have_two_short_delays() {
    let delays = retry_backoff_delays(3, &LoopPrng::from_seed(7));
    assert_eq!(delays.len(), 2);
    assert!(delays.iter().sum::<u64>() < 3000);
    assert!(retry_backoff_delays(1, &LoopPrng::from_seed(7)).is_empty());
    assert!(retry_backoff_delays(0, &LoopPrng::from_seed(7)).is_empty());
}

/// The jitter comes from the seeded PRNG: the same seed gives the same delays.
#[test]
fn backoff_jitter_is_deterministic_per_seed() {
    assert_eq!(
        retry_backoff_delays(10, &LoopPrng::from_seed(9)),
        retry_backoff_delays(10, &LoopPrng::from_seed(9))
    );
    assert_ne!(
        retry_backoff_delays(10, &LoopPrng::from_seed(9)),
        retry_backoff_delays(10, &LoopPrng::from_seed(10))
    );
}

fn rate_limited(retry_after_ms: u64) -> LoopError {
    LoopError::Provider(
        ProviderError::status_class(429, StatusClass::RateLimit, "rate limited")
            .with_retry_after_ms(retry_after_ms),
    )
}

/// §7.10 #8 (§9.11)
#[tokio::test(start_paused = true)]
async fn rate_limit_uses_the_whole_budget() {
    let env = Env::new();
    let llm = ScriptedLlm::new(|_| Err(rate_limited(1)));
    let error = env
        .call(&llm, &AbortSignal::never(), RequestLogFields::default())
        .await
        .unwrap_err();
    assert_eq!(error.name(), "APIProviderRateLimitError");
    assert_eq!(llm.calls(), 10);
    let retrying = env.retrying();
    assert_eq!(retrying.len(), 9);
    assert_eq!(retrying[0].failed_attempt, 1);
    assert_eq!(retrying[8].next_attempt, 10);
    assert!(
        retrying
            .iter()
            .all(|r| r.max_attempts == 10 && r.status_code == Some(429) && r.delay_ms == 1)
    );
    let warnings = env.log.entries();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].payload["attempt"], "10/10");
    assert_eq!(warnings[0].payload["statusCode"], 429);
}

/// §7.10 #9 (§9.12, #1857)
#[tokio::test(start_paused = true)]
async fn quota_exhausted_is_never_retried() {
    let env = Env::new();
    let llm = ScriptedLlm::new(|_| {
        Err(LoopError::Provider(
            ProviderError::status_class(429, StatusClass::QuotaExhausted, "quota exhausted")
                .with_retry_after_ms(1),
        ))
    });
    let error = env
        .call(&llm, &AbortSignal::never(), RequestLogFields::default())
        .await
        .unwrap_err();
    assert_eq!(error.name(), "APIProviderQuotaExhaustedError");
    assert_eq!(llm.calls(), 1);
    assert!(env.retrying().is_empty());
}

/// §7.10 #10
#[tokio::test(start_paused = true)]
async fn retry_after_is_used_verbatim() {
    let env = Env::new();
    let llm = ScriptedLlm::new(|n| {
        if n == 0 {
            Err(rate_limited(42))
        } else {
            Ok(ok_response())
        }
    });
    let started = tokio::time::Instant::now();
    env.call(&llm, &AbortSignal::never(), RequestLogFields::default())
        .await
        .unwrap();
    assert_eq!(llm.calls(), 2);
    assert_eq!(env.retrying()[0].delay_ms, 42);
    assert_eq!(
        tokio::time::Instant::now()
            .duration_since(started)
            .as_millis(),
        42
    );
}

/// §6: without `Retry-After` the delay follows the ramp and the sleep is that long.
#[tokio::test(start_paused = true)]
async fn backoff_sleeps_follow_the_ramp() {
    let env = Env::new();
    let llm = ScriptedLlm::new(|n| {
        if n < 2 {
            Err(LoopError::Provider(ProviderError::status(
                503,
                "unavailable",
            )))
        } else {
            Ok(ok_response())
        }
    });
    let started = tokio::time::Instant::now();
    env.call(&llm, &AbortSignal::never(), RequestLogFields::default())
        .await
        .unwrap();
    let retrying = env.retrying();
    assert!((500..=625).contains(&retrying[0].delay_ms));
    assert!((1000..=1250).contains(&retrying[1].delay_ms));
    let slept = tokio::time::Instant::now()
        .duration_since(started)
        .as_millis() as u64;
    assert_eq!(slept, retrying[0].delay_ms + retrying[1].delay_ms);
    assert_eq!(retrying[0].error_name, "APIStatusError");
}

/// §6: the retry sleep is abortable.
#[tokio::test(start_paused = true)]
async fn abort_during_the_retry_sleep_stops_retrying() {
    let env = Env::new();
    let controller = AbortController::new();
    let llm = ScriptedLlm::new(|_| Err(terminated()));
    let signal = controller.signal();
    let (outcome, ()) = tokio::join!(
        env.call(&llm, &signal, RequestLogFields::default()),
        async {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            controller.abort();
        }
    );
    assert_eq!(outcome.unwrap_err().name(), "AbortError");
    assert_eq!(llm.calls(), 1);
}

/// §6: non-retryable statuses fail at once; a single attempt budget never retries.
#[tokio::test(start_paused = true)]
async fn non_retryable_status_and_single_attempt_do_not_retry() {
    for status in [400u16, 401, 403, 404, 413, 422] {
        let env = Env::new();
        let llm = ScriptedLlm::new(move |_| {
            Err(LoopError::Provider(ProviderError::status(status, "no")))
        });
        assert!(
            env.call(&llm, &AbortSignal::never(), RequestLogFields::default())
                .await
                .is_err()
        );
        assert_eq!(llm.calls(), 1, "status {status}");
    }
    for status in [408u16, 409, 429, 500, 502, 503, 504, 529] {
        assert!(
            is_retryable_generate_error(&LoopError::Provider(ProviderError::status(status, "x"))),
            "{status}"
        );
    }
    assert!(!is_retryable_generate_error(&LoopError::plain("plain")));
    // kosong's own image refusal, thrown before the request, is not retried; a provider's
    // image wording without a status is an unclassified failure, and those are.
    assert!(!is_retryable_generate_error(&LoopError::Provider(
        ProviderError::new(
            errors::ProviderErrorKind::Other,
            "Unsupported media type for base64 image: image/bmp"
        )
    )));
    assert!(is_retryable_generate_error(&LoopError::Provider(
        ProviderError::new(errors::ProviderErrorKind::Other, "unsupported image format")
    )));
}
