//! The Letta server model: agents, conversations, background runs with per-run `seq_id`
//! recording and live replay, request-token dedupe and otid attach, the 409 conflicts, the
//! approval pause, cancel, the provider call behind each run, and a durable store.
//!
//! Shape of a turn (letta-protocol.md §1.1, §2, §11; captures/letta_server win where they
//! differ): `POST /v1/conversations/{id}/messages` starts a run. The run task calls the
//! provider, translates its events into Letta chunks and records each one in the run's log with
//! `seq_id` from 1. The HTTP response follows that log live, so a dropped client does not stop
//! the run, and `POST /v1/runs/{id}/stream` replays the same bytes. A run whose model turn
//! called client tools ends `requires_approval`; the conversation then holds those calls pending
//! until an approval continuation answers exactly them.
//!
//! The HTTP surface, the three profiles (`cloud`, `local`, `letta-oss-0.16`) and the durable
//! store are documented in docs/server.md. Module map: [`store`] (state and durability), `send` (the message
//! endpoint), `stream` (response framing and replay), `api` (every other route, with `parse`
//! for what a request carries, `views` for the JSON of stored objects, `cancel`, `compact` and
//! `errors` for the error answers), `history` (a send written into the conversation),
//! `provider_call` (the run task).

mod api;
mod cancel;
pub mod compact;
pub mod compaction;
mod errors;
mod history;
pub mod ids;
mod parse;
mod provider_call;
mod send;
pub mod store;
mod stream;
mod views;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use self::errors::detail;
use crate::model::port::env::Env;
use crate::model::port::http::{self, Body};
use crate::model::port::observe::{HistoryEntry, Observation};
use crate::wire::letta::{ClientTool, LettaChunk, StopReason};
use crate::wire::provider::ProviderFormat;

pub use store::{
    Agent, Conversation, IdKind, LogEntry, Message, MessageBody, Run, Store, StoredToolCall,
};

/// Keepalive ping interval (letta-protocol.md §1.1: `keepalive_interval` default 20.0 s).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);

/// A replay that finds nothing to send gives up after this much silence
/// (captures/letta_server PROVENANCE f3: "The code has a 1800 s silence cap").
pub const REPLAY_SILENCE_CAP: Duration = Duration::from_secs(1800);

/// How long attach-by-otid polls for the run before answering 404: three polls, 0.25 + 0.5 +
/// 1 s (captures/letta_e2e PROVENANCE flow e: the 404 "came after ≈1.76 s").
pub const OTID_ATTACH_POLLS_MS: [u64; 3] = [250, 500, 1000];

/// Pending-approval conflict text (letta-protocol.md §3.2; captures d1-d8).
pub const APPROVAL_PENDING_DETAIL: &str = "CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call. Please approve or deny the pending request before continuing.";

/// Approval with nothing pending (letta-protocol.md §3.2).
pub const NOTHING_PENDING_DETAIL: &str = "Cannot process approval response: No tool call is currently awaiting approval. Please send a regular message to interact with the agent.";

/// Busy conflict without a known lock holder (letta-protocol.md §3.2).
pub const BUSY_DETAIL: &str = "CONFLICT: Cannot send a new message: Another request is currently being processed for this conversation. Please wait for the current request to complete.";

/// Busy conflict naming the lock holder (letta-protocol.md §3.2; captures e1, e2, h1).
pub fn busy_detail(run_id: &str) -> String {
    format!(
        "CONFLICT: Cannot send a new message: Another request (run_id={run_id}) is currently being processed for this conversation. Please wait for it to complete."
    )
}

/// Attach by an otid no run has (captures/letta_e2e flow e).
pub fn no_run_for_otid(otid: &str) -> String {
    format!("No run found for otid={otid}. The run may have expired or never existed.")
}

/// The `stream_incomplete` synthesis message (letta-protocol.md §1.1).
pub const STREAM_INCOMPLETE_MESSAGE: &str = "Stream ended unexpectedly without a terminal event.";

/// Replay of a foreground run (captures f4).
pub const NOT_BACKGROUND_DETAIL: &str =
    "INVALID_ARGUMENT: Run was not created in background mode, so it cannot be retrieved.";

/// The 503 body of a shutting-down cloud API (letta-protocol.md §3.3, the client test's body).
pub fn shutting_down_body() -> Value {
    json!({
        "error": "Service temporarily unavailable. Please retry your request.",
        "errorCode": "cloud_api_shutting_down",
        "admitted": false,
        "retryable": true,
    })
}

/// Denial reason of the local backend for `approve:false` without a reason
/// (letta-protocol.md §7.3).
pub const DEFAULT_DENIAL_REASON: &str = "Tool execution denied.";
/// Settlement reason at the start of a new local turn (letta-protocol.md §7.1 step 2, §7.2).
pub const TURN_DID_NOT_COMPLETE: &str = "Turn did not complete";
/// Settlement reason on cancel (letta-protocol.md §7.2, §3.12).
pub const INTERRUPTED_BY_USER: &str = "Interrupted by user";

/// Which Letta server the model behaves like (letta-protocol.md §7; DESIGN.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// The hosted / legacy server: 409s, validation, dedupe, live replay (captures win).
    #[default]
    Cloud,
    /// The permissive in-process backend of §7: no busy check, no dedupe, unknown approval ids
    /// ignored, orphaned calls settled at each new turn, replay ends at what is recorded,
    /// sequential ids.
    Local,
    /// The open-source Letta server 0.16.8 exactly as captured
    /// (captures/letta_server/PROVENANCE.md): the cloud behaviour plus the agents endpoints
    /// (`/v1/agents/{id}/messages`, the lock-free deprecated `/v1/agents/{id}/messages/stream`),
    /// step streaming (`stream_tokens:false`), tool results wrapped as Letta's
    /// `{"status","message","time"}` JSON, no `x-should-retry` on 409s. docs/server.md.
    LettaOss016,
}

impl Profile {
    pub fn from_name(name: &str) -> Option<Profile> {
        match name {
            "cloud" => Some(Profile::Cloud),
            "local" => Some(Profile::Local),
            "letta-oss-0.16" => Some(Profile::LettaOss016),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Cloud => "cloud",
            Profile::Local => "local",
            Profile::LettaOss016 => "letta-oss-0.16",
        }
    }

    /// Every profile name `from_name` accepts, for error messages and `--help`.
    pub const NAMES: [&'static str; 3] = ["cloud", "local", "letta-oss-0.16"];

    /// The real 0.16.8 server as captured: cloud behaviour, byte-faithful where the cloud
    /// profile deliberately differs (docs/server.md "Profiles").
    pub fn oss(self) -> bool {
        self == Profile::LettaOss016
    }
}

/// How a cloud server answers a plain streaming message while an approval is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalConflict {
    /// HTTP 200 with the conflict in-band (stop_reason `error`, `event: error`): what Letta
    /// 0.16.8 does for every streaming send (captures d1-d8, letta_e2e d3).
    #[default]
    InBand,
    /// HTTP 409 `{"detail": …}` before any stream (letta-protocol.md §3.2 / reference B.5.3; what
    /// 0.16.8 does for a non-streaming send, capture d7). The only answer the real CLI recovers
    /// from.
    Http409,
}

/// Deliberate defects a test can switch on to prove an invariant can fail. Never on in a
/// faithful run; each names the invariant it is there to break.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerBugs {
    /// Breaks `tool-call-resolved`: a plain message is accepted while an approval is pending,
    /// leaving the pending tool call dangling when the new turn starts.
    pub accept_message_while_pending: bool,
    /// Breaks `one-run-per-request`: a duplicate request token starts a second run instead of
    /// re-attaching to the first.
    pub ignore_request_token: bool,
    /// Breaks `durable-ack`: what runs in flight at a crash had written is lost on restart.
    pub volatile_writes: bool,
    /// Breaks `history-valid`: a new local turn does not settle orphaned tool calls, so the
    /// provider receives a tool use without its result.
    pub skip_orphan_settling: bool,
    /// Breaks `compaction-safe`: the cut moves one past a tool-call assistant message, so the
    /// call is evicted and its results kept.
    pub compaction_splits_tool_call: bool,
    /// Breaks `compaction-safe`: the cut moves back onto the nearest user message before it.
    pub compaction_cuts_at_user: bool,
    /// Breaks `compaction-safe`: one message more than was summarised leaves the context.
    pub compaction_loses_message: bool,
    /// Breaks `compaction-safe`: a compaction that leaves the context above the threshold does
    /// not end the turn.
    pub compaction_ignores_threshold: bool,
    /// Breaks `recovery-completes`: every `POST /v1/runs/{id}/stream` is refused as not
    /// background, so a client cannot resume a cut stream by its run.
    pub refuse_run_resume: bool,
    /// A stream that has sent every chunk of a run still going ends there instead of waiting
    /// for the next: the send's own response closes after its first ping.
    pub close_caught_up_stream: bool,
    /// Breaks `answers-typed`: `GET /v1/conversations/{id}` answers its JSON without a
    /// content type.
    pub untyped_answers: bool,
    /// Breaks `chunks-named`: the token stream leaves the otid off every chunk it translates
    /// from the provider's stream.
    pub unnamed_chunks: bool,
    /// Breaks `requests-routed`: the router has lost `POST /v1/conversations/{id}/cancel`, so
    /// a cancel gets FastAPI's 405 for a known path.
    pub unserved_conversation_cancel: bool,
    /// Breaks `dates-true`: a `Retry-After` HTTP date names its day under the wrong weekday,
    /// which the client's parser skips, so the wait it reads is right.
    pub weekday_from_monday: bool,
    /// Breaks `send-faults-fire`: message sends go unnumbered, so no send fault of the plan
    /// (`busy_on_send`, `approval_pending_on_send`, …) ever fires.
    pub uncounted_sends: bool,
}

/// Where the server injects faults. The harness implements it from the scenario's fault plan
/// (and `sim serve` from the same plan); every method has a no-fault default.
pub trait StreamHooks: Send + Sync + 'static {
    /// `response` numbers the streaming responses this server has sent (1-based, across
    /// restarts); `frame` numbers the frames of that response (1-based).
    fn before_frame(&self, response: u64, frame: u64) -> StreamFault;
    /// `send` numbers the message sends the server has received (1-based, across restarts).
    fn on_send(&self, _send: u64) -> SendFault {
        SendFault::Pass
    }
    /// `n` numbers the `POST /v1/runs/{id}/stream` requests (1-based).
    fn fail_run_stream(&self, _n: u64) -> RunStreamFault {
        RunStreamFault::Pass
    }
    /// `n` numbers the `GET /v1/runs/{id}` requests (1-based); `true` answers it 500.
    fn fail_run_read(&self, _n: u64) -> bool {
        false
    }
}

/// What happens to a `POST /v1/runs/{id}/stream` before the server looks at the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStreamFault {
    Pass,
    /// Answer 500 `Internal Server Error` as uvicorn writes it, with a `Retry-After` header
    /// when one is given.
    Fail500(Option<RetryAfter>),
}

pub use crate::model::port::inject::{RetryAfter, StreamFault};

/// What happens to a message send before the server looks at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFault {
    Pass,
    /// Answer 409 busy (letta-protocol.md §3.2, without a lock holder).
    Busy,
    /// Answer 503 `cloud_api_shutting_down` (letta-protocol.md §3.3), with a `Retry-After`
    /// header when one is given (the client waits what it says, else 1000 ms).
    ShuttingDown(Option<RetryAfter>),
    /// A pending approval appears on the conversation now (as if another client had left one),
    /// and this send is answered with the 409 approval-pending conflict (reference B.5.3).
    ApprovalAppears(StoredToolCall),
    // ---- answers only the client flows need --------------------------------------------
    /// The send starts its run as usual, then is answered 409 busy naming that very run (a
    /// duplicate the server did not dedupe): the client's attach by otid finds its own run.
    BusyOwnRun,
    /// A pending approval appears on the conversation now, and the send then meets it the way
    /// any streaming send does (in-band on 0.16.8, captures d1-d8).
    ApprovalAppearsInBand(StoredToolCall),
}

/// No faults.
pub struct NoHooks;
impl StreamHooks for NoHooks {
    fn before_frame(&self, _: u64, _: u64) -> StreamFault {
        StreamFault::Pass
    }
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub id: String,
    pub model: String,
}

/// Server configuration.
#[derive(Clone)]
pub struct ServerConfig {
    pub port: u16,
    /// "host:port" of the provider.
    pub provider_addr: String,
    pub provider_api: ProviderFormat,
    pub agents: Vec<AgentConfig>,
    /// How long the server waits for provider bytes before failing the run.
    pub provider_idle_timeout: Duration,
    pub profile: Profile,
    /// Seconds of silence before a keepalive ping: [`KEEPALIVE_INTERVAL`] unless the server was
    /// started with `LETTA_KEEPALIVE_INTERVAL` (captures k1/k2 used 2 s).
    pub keepalive_interval: Duration,
    pub approval_conflict: ApprovalConflict,
    /// Send a `response_state` chunk before each `requires_approval` stop, as a server that
    /// offers response-state reuse does (letta-protocol.md §10.1), so the client's
    /// `X-Letta-Response-State` header is exercised. Letta 0.16.8 sends none (no capture has
    /// one), so it is off unless a scenario asks. Choices, since the references give only the
    /// client's half: the chunk goes after the approval requests, before `stop_reason`, and its
    /// `response_id` is `resp-` and the run id.
    pub response_state: bool,
    pub bugs: ServerBugs,
    pub hooks: Arc<dyn StreamHooks>,
    /// Every request, for `sim serve`'s request log.
    pub request_log: Option<RequestLog>,
    /// Every exchange with its response bytes and their times, for `sim bench --compare-bare`
    /// (which replays them with no models); `None` costs nothing.
    pub exchange_log: Option<ExchangeLog>,
}

impl ServerConfig {
    fn local(&self) -> bool {
        self.profile == Profile::Local
    }
}

/// Shared handle to the store.
pub type SharedStore = Arc<Mutex<Store>>;

/// Records a chunk and reports it.
pub(crate) fn record<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    run_id: &str,
    chunk: LettaChunk,
    event: Option<&'static str>,
) -> u64 {
    let message_type = chunk.message_type().to_string();
    let seq_id = st.record(run_id, chunk, event, config.local());
    env.observe(Observation::ChunkRecorded {
        run_id: run_id.to_string(),
        seq_id,
        message_type,
    });
    seq_id
}

/// Runs the server on `env` until the host stops. On start it recovers the store (runs a crash
/// interrupted end `stream_incomplete`) and reports what it found.
pub async fn run<E: Env>(env: E, config: ServerConfig, store: SharedStore) -> std::io::Result<()> {
    {
        let mut st = store.lock().unwrap();
        let restarted = st.starts > 0;
        if restarted && config.bugs.volatile_writes {
            st.lose_unflushed_writes();
        }
        let now = env.now_ms();
        let rec = st.recover(config.profile, now);
        for run_id in &rec.interrupted {
            let run = &st.runs[run_id];
            for e in &run.log[run.log.len() - 2..] {
                env.observe(Observation::ChunkRecorded {
                    run_id: run_id.clone(),
                    seq_id: e.seq_id,
                    message_type: e.message_type.clone(),
                });
            }
            env.observe(Observation::RunEnded {
                run_id: run_id.clone(),
                stop_reason: "error".into(),
            });
        }
        if restarted {
            env.observe(Observation::ServerRecovered {
                histories: rec
                    .histories
                    .iter()
                    .map(|(c, n)| format!("{c}={n}"))
                    .collect(),
                runs: rec.runs.iter().map(|(r, n)| format!("{r}={n}")).collect(),
                interrupted: rec.interrupted.clone(),
            });
        }
    }
    let port = config.port;
    let config = Arc::new(config);
    let served = env.clone();
    let handler = move |req: Request<Incoming>| {
        let env = served.clone();
        let config = config.clone();
        let store = store.clone();
        async move {
            let arrived_ms = env.now_ms();
            let (parts, body) = req.into_parts();
            let method = parts.method.to_string();
            let path = parts.uri.path().to_string();
            let mut request_bytes = Bytes::new();
            let resp = match http::read_body(body, MAX_BODY).await {
                Ok(bytes) => {
                    request_bytes = bytes.clone();
                    match errors::not_json_content(&parts, &bytes) {
                        Some(refused) => refused,
                        None => {
                            api::route(env.clone(), config.clone(), store, &parts, bytes.clone())
                                .await
                        }
                    }
                }
                Err(e) => detail(StatusCode::PAYLOAD_TOO_LARGE, &e),
            };
            // Every request is logged, a refused body too (with what of it arrived: nothing).
            if let Some(log) = &config.request_log {
                log(RequestRecord {
                    method: method.clone(),
                    path: parts
                        .uri
                        .path_and_query()
                        .map_or(path.clone(), |p| p.to_string()),
                    body: request_bytes.clone(),
                    status: resp.status().as_u16(),
                });
            }
            env.observe(Observation::ServerRequest {
                method: method.clone(),
                path,
                status: resp.status().as_u16(),
            });
            match &config.exchange_log {
                Some(log) => record_exchange(
                    &env,
                    log,
                    arrived_ms,
                    &method,
                    &parts.uri,
                    request_bytes,
                    resp,
                ),
                None => resp,
            }
        }
    };
    http::serve(env, port, handler).await
}

/// One request and the response the server sent for it, with simulated times.
#[derive(Debug, Clone, Default)]
pub struct Exchange {
    /// When the request reached the server (ms since the start).
    pub arrived_ms: u64,
    pub method: String,
    /// Path and query.
    pub path: String,
    pub body: Bytes,
    pub status: u16,
    pub content_type: Option<String>,
    /// Each body frame as the server wrote it: (ms since the start, bytes).
    pub frames: Vec<(u64, Bytes)>,
}

/// The exchanges of a run, in arrival order.
pub type ExchangeLog = Arc<Mutex<Vec<Exchange>>>;

/// Logs the exchange and taps the response body so each frame is logged as it is written.
fn record_exchange<E: Env>(
    env: &E,
    log: &ExchangeLog,
    arrived_ms: u64,
    method: &str,
    uri: &hyper::Uri,
    body: Bytes,
    resp: Response<Body>,
) -> Response<Body> {
    use http_body_util::BodyExt as _;
    let index = {
        let mut l = log.lock().unwrap();
        l.push(Exchange {
            arrived_ms,
            method: method.to_string(),
            path: uri
                .path_and_query()
                .map_or_else(|| uri.path().to_string(), |p| p.to_string()),
            body,
            status: resp.status().as_u16(),
            content_type: resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            frames: Vec::new(),
        });
        l.len() - 1
    };
    let env = env.clone();
    let log = log.clone();
    resp.map(move |b| {
        b.map_frame(move |f| {
            if let Some(d) = f.data_ref() {
                log.lock().unwrap()[index]
                    .frames
                    .push((env.now_ms(), d.clone()));
            }
            f
        })
        .boxed()
    })
}

/// Largest request body the server reads.
pub const MAX_BODY: usize = 16 << 20;

/// One request as `sim serve` logs it.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    pub body: bytes::Bytes,
    /// The status of the response head.
    pub status: u16,
}

/// Called once per request after its response head is ready.
pub type RequestLog = Arc<dyn Fn(RequestRecord) + Send + Sync>;

/// Ends a run with an error: the stop_reason frame, then the error frame (`event: error` in
/// the cloud profile; a plain `error_message` chunk before the stop_reason in the local one,
/// letta-protocol.md §7.6). A background cloud stream carries no `[DONE]` after an error
/// (captures d8, g_*_bg); a foreground one does when nothing else was streamed (captures d1, g
/// fg) and does not after output (captures g_cutstream fg).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fail_run<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    run_id: &str,
    stop: StopReason,
    error_type: &str,
    message: &str,
    detail_text: &str,
) {
    let error = LettaChunk::ErrorMessage(crate::wire::letta::ErrorMessage {
        env: crate::wire::letta::Envelope {
            message_type: "error_message".into(),
            ..Default::default()
        },
        error_type: error_type.into(),
        message: message.into(),
        detail: Some(detail_text.into()),
    });
    let stop_chunk = LettaChunk::StopReason(crate::wire::letta::StopReasonChunk::new(stop.clone()));
    if config.local() {
        record(env, config, st, run_id, error, None);
        record(env, config, st, run_id, stop_chunk, None);
    } else {
        record(env, config, st, run_id, stop_chunk, None);
        record(env, config, st, run_id, error, Some("error"));
    }
    let run = st.runs.get_mut(run_id).expect("known run");
    run.error = Some(run_error_metadata(
        config.local(),
        run_id,
        error_type,
        message,
        detail_text,
    ));
    let output_before = run.log.iter().any(|e| {
        !matches!(
            e.message_type.as_str(),
            "ping" | "stop_reason" | "error_message"
        )
    });
    let done = config.local() || (!run.background && !output_before);
    finish_run(env, config, st, run_id, stop, done);
}

/// The run object's `metadata.error` after `fail_run`.
///
/// The local backend writes `{message, detail, error_type, retryable, run_id}` (letta-protocol.md
/// §7.4). The server writes the error message it streamed, as pydantic dumps it:
/// `{message_type, run_id, error_type, message, detail, seq_id}` with `seq_id` null, and no
/// `retryable`, a field its `LettaErrorMessage` does not have (letta-ai/letta
/// `letta/services/streaming_service.py`, the error-aware stream's `finally`; the SDK's
/// `LettaErrorMessage`; captures g_fail500 fg show the same fields on the wire). So a client
/// judges a server run's error by its type and detail (§3.7), never by a flag.
pub(crate) fn run_error_metadata(
    local: bool,
    run_id: &str,
    error_type: &str,
    message: &str,
    detail: &str,
) -> Value {
    if local {
        json!({
            "error_type": error_type,
            "message": message,
            "detail": detail,
            "retryable": error_type == "llm_error",
            "run_id": run_id,
        })
    } else {
        json!({
            "message_type": "error_message",
            "run_id": run_id,
            "error_type": error_type,
            "message": message,
            "detail": detail,
            "seq_id": null,
        })
    }
}

/// Marks a run terminal and releases the conversation lock.
pub(crate) fn finish_run<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    run_id: &str,
    stop: StopReason,
    done_marker: bool,
) {
    let now = env.now_ms();
    let run = st.runs.get_mut(run_id).expect("known run");
    run.status = status_for(config.profile, &stop);
    run.stop_reason = Some(stop.clone());
    run.done_marker = done_marker;
    run.finished = true;
    run.completed_ms = Some(now);
    run.changed.send_modify(|n| *n += 1);
    let conv_id = run.conversation_id.clone();
    if let Some(c) = st.conversations.get_mut(&conv_id)
        && c.active_run.as_deref() == Some(run_id)
    {
        c.active_run = None;
    }
    env.observe(Observation::RunEnded {
        run_id: run_id.to_string(),
        stop_reason: stop.as_str().to_string(),
    });
}

/// Run status for a terminal stop reason: the legacy server mapping in the cloud profile, the
/// local mapping (`error`/`llm_api_error` failed, `cancelled` cancelled, everything else
/// completed) in the local one (letta-protocol.md §1.5).
pub fn status_for(profile: Profile, stop: &StopReason) -> crate::wire::letta::RunStatus {
    use crate::wire::letta::RunStatus;
    match profile {
        Profile::Cloud | Profile::LettaOss016 => stop.run_status(),
        Profile::Local => match stop {
            StopReason::Error | StopReason::LlmApiError => RunStatus::Failed,
            StopReason::Cancelled => RunStatus::Cancelled,
            _ => RunStatus::Completed,
        },
    }
}

/// Settles every tool call of a conversation that has no result with an error tool result
/// carrying `reason` (letta-protocol.md §7.2), and clears the pending set.
pub(crate) fn settle_unresolved<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    conversation_id: &str,
    run_id: Option<&str>,
    reason: &str,
) {
    let msgs: Vec<Message> = st
        .conversation_messages(conversation_id)
        .into_iter()
        .cloned()
        .collect();
    let mut resolved: Vec<String> = Vec::new();
    for m in &msgs {
        if let MessageBody::Tool { tool_call_id, .. } = &m.body {
            resolved.push(tool_call_id.clone());
        }
    }
    let now = env.now_ms();
    for m in &msgs {
        let MessageBody::Assistant { tool_calls, .. } = &m.body else {
            continue;
        };
        for c in tool_calls {
            if resolved.contains(&c.id) {
                continue;
            }
            let id = st.new_id(config.profile, IdKind::Message);
            st.push_message(
                conversation_id,
                Message {
                    id,
                    otid: None,
                    run_id: run_id.map(str::to_string),
                    step_id: None,
                    at_ms: now,
                    body: MessageBody::Tool {
                        tool_call_id: c.id.clone(),
                        content: reason.to_string(),
                        tool_return: reason.to_string(),
                        status: "error".into(),
                        is_error: true,
                    },
                },
            );
            env.observe(Observation::History {
                conversation_id: conversation_id.to_string(),
                entry: HistoryEntry::Settled {
                    tool_call_id: c.id.clone(),
                    reason: reason.to_string(),
                },
            });
        }
    }
    if let Some(c) = st.conversations.get_mut(conversation_id) {
        c.pending.clear();
        c.pending_message_id = None;
    }
}

/// Leaves a stale pending approval on `conversation_id` (creating the conversation for
/// `agent_id` if it does not exist): a user message, then an assistant message calling `call`,
/// with no result. What a client that crashed mid-approval leaves behind (reference B.5.4).
pub fn plant_pending_approval(
    st: &mut Store,
    profile: Profile,
    conversation_id: &str,
    agent_id: &str,
    call: StoredToolCall,
    at_ms: u64,
) {
    if !st.conversations.contains_key(conversation_id) {
        st.conversations.insert(
            conversation_id.to_string(),
            Conversation {
                id: conversation_id.to_string(),
                agent_id: agent_id.to_string(),
                created_ms: at_ms,
                updated_ms: at_ms,
                ..Conversation::default()
            },
        );
    }
    st.ensure_system_message(profile, conversation_id, at_ms);
    let user_id = st.new_id(profile, IdKind::Message);
    st.push_message(
        conversation_id,
        Message {
            id: user_id,
            otid: None,
            run_id: None,
            step_id: None,
            at_ms,
            body: MessageBody::User {
                content: json!("(an earlier turn whose approval was never answered)"),
            },
        },
    );
    let msg_id = st.new_id(profile, IdKind::Message);
    st.push_message(
        conversation_id,
        Message {
            id: msg_id.clone(),
            otid: Some(msg_id.clone()),
            run_id: None,
            step_id: None,
            at_ms,
            body: MessageBody::Assistant {
                text: String::new(),
                tool_calls: vec![call.clone()],
            },
        },
    );
    let conv = st
        .conversations
        .get_mut(conversation_id)
        .expect("created above");
    conv.pending = vec![call];
    conv.pending_message_id = Some(msg_id);
}

/// The history a [`plant_pending_approval`] wrote, as trace observations (a user message, then
/// the tool call): `tool-call-resolved` only accepts resolutions of calls the trace shows the
/// server asking about, and a client that closes a planted call resolves it.
pub fn planted_history(conversation_id: &str, call: &StoredToolCall) -> [Observation; 2] {
    [
        Observation::History {
            conversation_id: conversation_id.to_string(),
            entry: HistoryEntry::User { otid: None },
        },
        Observation::History {
            conversation_id: conversation_id.to_string(),
            entry: HistoryEntry::ToolCall {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            },
        },
    ]
}

/// The client tools of a request, for the provider request's tool list.
pub(crate) fn tool_defs(tools: &[ClientTool]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description.clone().unwrap_or_default(),
                "input_schema": t.parameters.clone().unwrap_or_else(|| json!({"type": "object"})),
            })
        })
        .collect()
}
