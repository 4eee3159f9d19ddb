//! The client's view of the server: the calls letta-code makes through its `Backend`
//! abstraction (letta-protocol.md §0.1, §2.1), as a trait, and its HTTP implementation over any
//! [`Env`].
//!
//! Errors are thrown values shaped like the SDK's `APIError` (see [`super::policy::api_error`]),
//! so the policy functions read them exactly as the TypeScript client does. Every request is
//! logged as a [`RequestRecord`] (method, path, JSON body, status): the log is what the
//! CLI-conformance comparison reads ([`super::conformance`]).

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use indexmap::IndexMap;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::{Value, json};

use super::policy::{self, api_error, transport_error};
use super::sdk_stream::{ChunkSource, SseSource};
use super::stream::RunStatusLookup;
use crate::model::port::clock::Clock;
use crate::model::port::env::Env;
use crate::model::port::http;
use crate::model::port::observe::Observation;
use crate::wire::letta::{MessageItem, SendMessageRequest};

/// `User-Agent` of the published CLI this model follows (captures/letta_e2e: 0.32.18).
pub const USER_AGENT: &str = "letta-code/0.32.18";
/// Message types of the resume tail (letta-protocol.md §6.1; `tool_call_message` is not asked).
pub const TAIL_MESSAGE_TYPES: [&str; 8] = [
    "user_message",
    "assistant_message",
    "reasoning_message",
    "event_message",
    "summary_message",
    "approval_request_message",
    "tool_return_message",
    "approval_response_message",
];
/// The `messages.retrieve` LRU size of the published client (letta-protocol.md §2.8).
pub const MESSAGE_CACHE_SIZE: usize = 32;

/// One request as sent, for the conformance log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestRecord {
    pub t_ms: u64,
    pub method: String,
    /// Path and query.
    pub path: String,
    pub body: Option<Value>,
    pub status: Option<u16>,
}

/// The shared request log.
pub type RequestLog = Arc<Mutex<Vec<RequestRecord>>>;

/// Result of a call: a value, or a thrown `APIError`-shaped error.
pub type Thrown = Value;

/// The server as the client sees it (letta-protocol.md §0.1, §2.1).
pub trait Backend: Clone + Send + Sync + 'static {
    type Stream: ChunkSource + Send + 'static;

    /// `POST /v1/conversations/{id}/messages` (send; `maxRetries: 0`). `response_state` is the
    /// `X-Letta-Response-State` header value (§10.1).
    fn send_message(
        &self,
        conversation_id: &str,
        body: &SendMessageRequest,
        response_state: Option<String>,
    ) -> impl Future<Output = Result<Self::Stream, Thrown>> + Send;
    /// `POST /v1/conversations/{id}/stream` (resume by conversation / otid).
    fn stream_conversation(
        &self,
        conversation_id: &str,
        body: Value,
    ) -> impl Future<Output = Result<Self::Stream, Thrown>> + Send;
    /// `POST /v1/runs/{id}/stream` (resume by run).
    fn stream_run(
        &self,
        run_id: &str,
        body: Value,
    ) -> impl Future<Output = Result<Self::Stream, Thrown>> + Send;
    /// The clock of the host the backend runs on (waits and timeouts around its calls).
    fn clock(&self) -> Clock;
    /// `GET /v1/runs/{id}`.
    fn retrieve_run(&self, run_id: &str) -> impl Future<Output = Result<Value, Thrown>> + Send;
    /// `GET /v1/runs/` with a query (repeated keys for arrays).
    fn list_runs(
        &self,
        query: Vec<(String, String)>,
    ) -> impl Future<Output = Result<Vec<Value>, Thrown>> + Send;
    /// `POST /v1/conversations/{id}/cancel`.
    fn cancel_conversation(&self, id: &str) -> impl Future<Output = Result<Value, Thrown>> + Send;
    /// `POST /v1/agents/{agent_id}/messages/cancel` `{run_ids:[run_id]}`.
    fn cancel_run(
        &self,
        agent_id: &str,
        run_id: &str,
    ) -> impl Future<Output = Result<Value, Thrown>> + Send;
    /// `POST /v1/conversations/?agent_id={id}` with `{}`: a fresh conversation (the CLI's
    /// fresh path, letta-tests-and-real-client.md B.3 row 9).
    fn create_conversation(
        &self,
        agent_id: &str,
    ) -> impl Future<Output = Result<Value, Thrown>> + Send;
    /// `GET /v1/conversations/{id}`.
    fn retrieve_conversation(&self, id: &str)
    -> impl Future<Output = Result<Value, Thrown>> + Send;
    /// `GET /v1/agents/{id}`.
    fn retrieve_agent(&self, id: &str) -> impl Future<Output = Result<Value, Thrown>> + Send;
    /// `GET /v1/conversations/{id}/messages` (a bare JSON array).
    fn list_conversation_messages(
        &self,
        id: &str,
        query: Vec<(String, String)>,
    ) -> impl Future<Output = Result<Vec<Value>, Thrown>> + Send;
    /// `GET /v1/agents/{id}/messages` (default conversation).
    fn list_agent_messages(
        &self,
        agent_id: &str,
        query: Vec<(String, String)>,
    ) -> impl Future<Output = Result<Vec<Value>, Thrown>> + Send;
    /// `GET /v1/messages/{id}`: an array of the variants sharing that id.
    fn retrieve_message(&self, id: &str)
    -> impl Future<Output = Result<Vec<Value>, Thrown>> + Send;
}

/// A [`RunStatusLookup`] through a backend (the stall reconciler's `GET /v1/runs/{id}`).
pub struct BackendLookup<'a, B: Backend>(pub &'a B);

impl<B: Backend> RunStatusLookup for BackendLookup<'_, B> {
    async fn run_status(&self, run_id: &str) -> Result<Option<String>, ()> {
        match self.0.retrieve_run(run_id).await {
            Ok(run) => Ok(run
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_string)),
            Err(_) => Err(()),
        }
    }
}

/// The SDK retry behaviour for calls other than the send (letta-protocol.md §2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdkRetries {
    /// The published client: `maxRetries = 2` on reads, cancels and the resume streams, 409
    /// included (letta-protocol.md §2.5, §2.8, §10.3 item 10). Only the send passes
    /// `maxRetries: 0`. The real CLI 0.32.18 against `sim serve` makes three
    /// `POST /v1/runs/{id}/stream` per resume attempt when each is answered a plain 500
    /// (tests/interop_cli.rs flow 7), as §2.5 reads the source; reference B.5.6 reports one,
    /// which a 500 carrying `x-should-retry: false` would give.
    Default,
    /// The reference: reads (`GET`) keep the SDK's retries, except on 409; writes and streams
    /// (resume, cancel) are never retried behind the caller's back.
    ReadsOnly,
}

/// Configuration of the HTTP backend.
#[derive(Debug, Clone)]
pub struct HttpBackendConfig {
    pub server_addr: String,
    /// Bound on waiting for a response head, and on reading a JSON body.
    pub request_timeout: Duration,
    pub sdk_retries: SdkRetries,
    /// Cache `GET /v1/messages/{id}` results (LRU 32, failures evicted; the published client
    /// assumes messages are immutable, letta-protocol.md §2.8, §10.3 item 12).
    pub cache_messages: bool,
    /// Seed of the SDK retry jitter.
    pub seed: u64,
}

/// The backend over HTTP on an [`Env`].
#[derive(Clone)]
pub struct HttpBackend<E: Env> {
    env: E,
    config: Arc<HttpBackendConfig>,
    log: RequestLog,
    rng: Arc<Mutex<ChaCha8Rng>>,
    cache: Arc<Mutex<IndexMap<String, Vec<Value>>>>,
    turn: Arc<AtomicU32>,
}

impl<E: Env> HttpBackend<E> {
    pub fn new(env: E, config: HttpBackendConfig, log: RequestLog, turn: Arc<AtomicU32>) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        HttpBackend {
            env,
            config: Arc::new(config),
            log,
            rng: Arc::new(Mutex::new(rng)),
            cache: Arc::new(Mutex::new(IndexMap::new())),
            turn,
        }
    }

    fn record(&self, method: &str, path: &str, body: Option<&Value>) -> usize {
        let mut log = self.log.lock().unwrap();
        log.push(RequestRecord {
            t_ms: self.env.now_ms(),
            method: method.into(),
            path: path.into(),
            body: body.cloned(),
            status: None,
        });
        log.len() - 1
    }

    fn set_status(&self, idx: usize, status: u16) {
        if let Some(r) = self.log.lock().unwrap().get_mut(idx) {
            r.status = Some(status);
        }
    }

    /// One HTTP exchange: the response head with its body, or a thrown error. Non-2xx bodies
    /// are read (bounded) into an `APIError`.
    async fn exchange(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        extra_headers: &[(String, String)],
    ) -> Result<hyper::Response<hyper::body::Incoming>, Thrown> {
        let idx = self.record(method, path, body);
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.config.server_addr.as_str())
            .header("accept", "application/json")
            .header("user-agent", USER_AGENT)
            .header("x-letta-source", "letta-code");
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in extra_headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| transport_error(&format!("invalid request: {e}")))?;
        let resp = match http::send(
            &self.env,
            &self.config.server_addr,
            req,
            self.config.request_timeout,
        )
        .await
        {
            Ok(r) => r,
            Err(e) => {
                self.env.observe(Observation::ClientConnectError {
                    method: method.into(),
                    path: path.into(),
                    error: e.to_string(),
                });
                return Err(transport_error(&format!("Connection error: {e}")));
            }
        };
        let status = resp.status().as_u16();
        self.set_status(idx, status);
        let retry_after = (!resp.status().is_success())
            .then(|| resp.headers().get(hyper::header::RETRY_AFTER))
            .flatten()
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        self.env.observe(Observation::ClientResponse {
            method: method.into(),
            path: path.into(),
            status,
            retry_after,
        });
        if let Some(untyped) = http::untyped_answer(&resp, method, path) {
            self.env.observe(untyped);
        }
        if resp.status().is_success() {
            return Ok(resp);
        }
        let headers: Vec<(String, String)> = resp
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let text = match self
            .env
            .clock()
            .timeout(
                self.config.request_timeout,
                http::read_body(resp.into_body(), 1 << 20),
            )
            .await
        {
            Ok(Ok(b)) => String::from_utf8_lossy(&b).into_owned(),
            _ => String::new(),
        };
        Err(api_error(status, &text, &headers))
    }

    /// An exchange with the SDK's retry loop when `retries > 0`.
    async fn exchange_retrying(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        stream: bool,
    ) -> Result<hyper::Response<hyper::body::Incoming>, Thrown> {
        let retries = match (self.config.sdk_retries, method) {
            (SdkRetries::Default, _) => policy::SDK_MAX_RETRIES,
            (SdkRetries::ReadsOnly, _) if stream => 0,
            (SdkRetries::ReadsOnly, "GET") => policy::SDK_MAX_RETRIES,
            (SdkRetries::ReadsOnly, _) => 0,
        };
        let mut done = 0;
        loop {
            let observe_call = Observation::ClientRequest {
                method: method.into(),
                path: path.into(),
                retry: done,
            };
            self.env.observe(observe_call);
            match self.exchange(method, path, body, &[]).await {
                Ok(r) => return Ok(r),
                Err(e) => {
                    let status = policy::error_status(&e);
                    let x_should = policy::error_header(&e, "x-should-retry");
                    let retry = done < retries
                        && policy::sdk_should_retry(status, x_should)
                        && !(self.config.sdk_retries == SdkRetries::ReadsOnly
                            && status == Some(409));
                    if !retry {
                        return Err(e);
                    }
                    let jitter: f64 = self.rng.lock().unwrap().random();
                    let delay = policy::sdk_retry_delay_ms(
                        done,
                        policy::error_header(&e, "retry-after-ms"),
                        policy::error_header(&e, "retry-after"),
                        sdk_wall_clock_ms(self.env.epoch_ms(), self.env.now_ms()),
                        jitter,
                    );
                    self.env.clock().sleep(Duration::from_millis(delay)).await;
                    done += 1;
                }
            }
        }
    }

    async fn json(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Thrown> {
        let resp = self.exchange_retrying(method, path, body, false).await?;
        let read = match self
            .env
            .clock()
            .timeout(
                self.config.request_timeout,
                http::read_body(resp.into_body(), 16 << 20),
            )
            .await
        {
            Err(_) => Err("Request timed out".to_string()),
            Ok(Err(e)) => Err(e),
            Ok(Ok(bytes)) if bytes.is_empty() => Ok(Value::Null),
            Ok(Ok(bytes)) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("Could not parse response JSON: {e}")),
        };
        // The head said success, so nothing else on the timeline says this call failed.
        read.map_err(|error| {
            self.env.observe(Observation::ClientBodyFailed {
                method: method.into(),
                path: path.into(),
                error: error.clone(),
            });
            transport_error(&error)
        })
    }

    async fn json_array(&self, path: &str) -> Result<Vec<Value>, Thrown> {
        match self.json("GET", path, None).await? {
            Value::Array(a) => Ok(a),
            other => Err(transport_error(&format!(
                "expected a JSON array, got {}",
                other.to_string().chars().take(80).collect::<String>()
            ))),
        }
    }

    async fn stream(&self, path: &str, body: Value) -> Result<SseSource, Thrown> {
        let resp = self
            .exchange_retrying("POST", path, Some(&body), true)
            .await?;
        Ok(SseSource::new(resp.into_body(), self.env.clock()))
    }
}

/// The wall clock the SDK dates an HTTP-date `Retry-After` against (letta-protocol.md §2.8,
/// §3.8: "HTTP date minus now"): the run's epoch plus the time since its start, both the
/// host's `Env`'s (simulated under turmoil), never the machine's wall clock.
fn sdk_wall_clock_ms(epoch_ms: u64, now_ms: u64) -> u64 {
    epoch_ms + now_ms
}

/// `?k=v&k=v` with repeated keys for arrays (letta-protocol.md §2.1).
pub fn query_string(query: &[(String, String)]) -> String {
    if query.is_empty() {
        return String::new();
    }
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    format!(
        "?{}",
        query
            .iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect::<Vec<_>>()
            .join("&")
    )
}

/// `user`, or `approval[tool:t1,deny:t2]`: what a request carried, for the trace.
pub fn summarize(messages: &[MessageItem]) -> String {
    use crate::wire::letta::ApprovalItem;
    messages
        .iter()
        .map(|m| match m {
            MessageItem::Message(m) => m.role.clone(),
            MessageItem::Approval(a) => format!(
                "approval[{}]",
                a.approvals
                    .iter()
                    .map(|i| match i {
                        ApprovalItem::Tool {
                            tool_call_id,
                            status,
                            ..
                        } => {
                            if status == "success" {
                                format!("tool:{tool_call_id}")
                            } else {
                                format!("tool-error:{tool_call_id}")
                            }
                        }
                        ApprovalItem::Approval {
                            tool_call_id,
                            approve,
                            ..
                        } => format!(
                            "{}:{tool_call_id}",
                            if *approve { "approve" } else { "deny" }
                        ),
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            MessageItem::Unknown(_) => "unknown".into(),
        })
        .collect::<Vec<_>>()
        .join("+")
}

impl<E: Env> Backend for HttpBackend<E> {
    type Stream = SseSource;

    fn clock(&self) -> Clock {
        self.env.clock()
    }

    async fn send_message(
        &self,
        conversation_id: &str,
        body: &SendMessageRequest,
        response_state: Option<String>,
    ) -> Result<SseSource, Thrown> {
        let path = format!("/v1/conversations/{conversation_id}/messages");
        self.env.observe(Observation::ClientSend {
            turn: self.turn.load(Ordering::SeqCst),
            method: "POST".into(),
            path: path.clone(),
            items: summarize(&body.messages),
            otids: body
                .messages
                .iter()
                .filter_map(|m| m.otid().map(str::to_string))
                .collect(),
            response_state: response_state.is_some(),
        });
        let json = serde_json::to_value(body).map_err(|e| transport_error(&e.to_string()))?;
        let headers: Vec<(String, String)> = response_state
            .map(|v| vec![("x-letta-response-state".to_string(), v)])
            .unwrap_or_default();
        // The send never retries inside the SDK: "retries would violate idempotency" (§2.8).
        let resp = self.exchange("POST", &path, Some(&json), &headers).await?;
        Ok(SseSource::new(resp.into_body(), self.env.clock()))
    }

    async fn stream_conversation(
        &self,
        conversation_id: &str,
        body: Value,
    ) -> Result<SseSource, Thrown> {
        self.stream(&format!("/v1/conversations/{conversation_id}/stream"), body)
            .await
    }

    async fn stream_run(&self, run_id: &str, body: Value) -> Result<SseSource, Thrown> {
        self.stream(&format!("/v1/runs/{run_id}/stream"), body)
            .await
    }

    async fn retrieve_run(&self, run_id: &str) -> Result<Value, Thrown> {
        self.json("GET", &format!("/v1/runs/{run_id}"), None).await
    }

    async fn list_runs(&self, query: Vec<(String, String)>) -> Result<Vec<Value>, Thrown> {
        self.json_array(&format!("/v1/runs/{}", query_string(&query)))
            .await
    }

    async fn cancel_conversation(&self, id: &str) -> Result<Value, Thrown> {
        self.json("POST", &format!("/v1/conversations/{id}/cancel"), None)
            .await
    }

    async fn cancel_run(&self, agent_id: &str, run_id: &str) -> Result<Value, Thrown> {
        self.json(
            "POST",
            &format!("/v1/agents/{agent_id}/messages/cancel"),
            Some(&json!({"run_ids": [run_id]})),
        )
        .await
    }

    async fn create_conversation(&self, agent_id: &str) -> Result<Value, Thrown> {
        self.json(
            "POST",
            &format!("/v1/conversations/?agent_id={agent_id}"),
            Some(&json!({})),
        )
        .await
    }

    async fn retrieve_conversation(&self, id: &str) -> Result<Value, Thrown> {
        self.json("GET", &format!("/v1/conversations/{id}"), None)
            .await
    }

    async fn retrieve_agent(&self, id: &str) -> Result<Value, Thrown> {
        self.json("GET", &format!("/v1/agents/{id}"), None).await
    }

    async fn list_conversation_messages(
        &self,
        id: &str,
        query: Vec<(String, String)>,
    ) -> Result<Vec<Value>, Thrown> {
        self.json_array(&format!(
            "/v1/conversations/{id}/messages{}",
            query_string(&query)
        ))
        .await
    }

    async fn list_agent_messages(
        &self,
        agent_id: &str,
        query: Vec<(String, String)>,
    ) -> Result<Vec<Value>, Thrown> {
        self.json_array(&format!(
            "/v1/agents/{agent_id}/messages{}",
            query_string(&query)
        ))
        .await
    }

    async fn retrieve_message(&self, id: &str) -> Result<Vec<Value>, Thrown> {
        if self.config.cache_messages {
            let mut cache = self.cache.lock().unwrap();
            if let Some(v) = cache.shift_remove(id) {
                // LRU: move to the back.
                cache.insert(id.to_string(), v.clone());
                return Ok(v);
            }
        }
        let v = self.json_array(&format!("/v1/messages/{id}")).await?;
        if self.config.cache_messages {
            remember(&mut self.cache.lock().unwrap(), id, &v);
        }
        Ok(v)
    }
}

/// Puts a retrieved message at the back of the LRU and evicts from the front down to
/// [`MESSAGE_CACHE_SIZE`] (letta-protocol.md §2.8).
fn remember(cache: &mut IndexMap<String, Vec<Value>>, id: &str, v: &[Value]) {
    cache.insert(id.to_string(), v.to_vec());
    while cache.len() > MESSAGE_CACHE_SIZE {
        cache.shift_remove_index(0);
    }
}

#[cfg(test)]
pub(crate) mod mock;

#[cfg(test)]
mod tests {
    use super::*;

    /// The LRU holds exactly the last 32 messages retrieved. No scenario retrieves that many,
    /// so no sweep sees the bound.
    #[test]
    fn the_message_cache_keeps_the_last_32_retrieved() {
        let mut cache = IndexMap::new();
        for i in 0..=MESSAGE_CACHE_SIZE {
            remember(&mut cache, &format!("message-{i}"), &[]);
            assert_eq!(cache.len(), (i + 1).min(MESSAGE_CACHE_SIZE));
        }
        assert_eq!(cache.keys().next().map(String::as_str), Some("message-1"));
        assert!(cache.contains_key(&format!("message-{MESSAGE_CACHE_SIZE}")));
    }

    /// No server behaviour sends the client a `Retry-After` yet, so the SDK's retry delay is
    /// pinned here: an HTTP date is read against the run's epoch plus its simulated time.
    #[test]
    fn an_http_date_retry_after_is_dated_against_the_epoch_plus_simulated_time() {
        // 2026-01-01T00:00:00Z.
        let epoch = 1_767_225_600_000;
        let date = "Thu, 01 Jan 2026 00:00:05 GMT";
        let now = sdk_wall_clock_ms(epoch, 2_000);
        assert_eq!(now, epoch + 2_000);
        assert_eq!(
            policy::sdk_retry_delay_ms(0, None, Some(date), now, 0.0),
            3_000
        );
        // A date already past waits nothing (never a negative delay), whatever the backoff.
        let later = sdk_wall_clock_ms(epoch, 9_000);
        assert_eq!(
            policy::sdk_retry_delay_ms(1, None, Some(date), later, 0.0),
            0
        );
        // `retry-after-ms` wins over `retry-after`.
        assert_eq!(
            policy::sdk_retry_delay_ms(0, Some("250"), Some(date), now, 0.0),
            250
        );
    }
}
