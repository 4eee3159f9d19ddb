//! The Letta server model: agents, conversations, background runs with per-run `seq_id`
//! recording, the approval pause, and the provider call behind each run.
//!
//! Shape of a turn (letta-protocol.md §1.1, §2, §11; captures/letta_server win where they
//! differ): `POST /v1/conversations/{id}/messages` starts a background run. The run task calls
//! the provider, translates its events into Letta chunks and records each one in the run's log
//! with `seq_id` from 1. The HTTP response follows that log live, so a dropped client does not
//! stop the run, and `POST /v1/runs/{id}/stream` replays the same bytes. A run whose model turn
//! called client tools ends `requires_approval`; the conversation then holds those calls pending
//! until an approval continuation answers exactly them.
//!
//! The store (`Arc<Mutex<Store>>`) is the server's durable state: the harness keeps it outside
//! the host task, so it survives a server crash. Runs in flight at a crash stay `running`
//! (their task is gone); later issues add the restart sweep.

// client-model (interim): the routes and send faults the client flows need until the faithful
// server model (issue 3) lands; see client_support.rs.
pub mod client_support;
pub mod ids;
mod provider_call;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::env::Env;
use super::http::{self, Body};
use super::observe::{HistoryEntry, Observation};
use crate::wire::letta::{
    ApprovalItem, ClientTool, LettaChunk, MessageItem, SendMessageRequest, StopReason,
};
use crate::wire::provider::ProviderFormat;

/// Keepalive ping interval (letta-protocol.md §1.1: `keepalive_interval` default 20.0 s).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);

/// Pending-approval conflict text (letta-protocol.md §3.2; captures d1-d8).
pub const APPROVAL_PENDING_DETAIL: &str = "CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call. Please approve or deny the pending request before continuing.";

/// Approval with nothing pending (letta-protocol.md §3.2).
pub const NOTHING_PENDING_DETAIL: &str = "Cannot process approval response: No tool call is currently awaiting approval. Please send a regular message to interact with the agent.";

/// Deliberate defects a test can switch on to prove an invariant can fail. Never on in a
/// faithful run; each names the invariant it is there to break.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerBugs {
    /// Breaks `tool-call-resolved`: a plain message is accepted while an approval is pending,
    /// leaving the pending tool call dangling when the new turn starts.
    pub accept_message_while_pending: bool,
}

/// Where the server injects stream faults: consulted before each frame it writes to a client
/// response. The harness implements it from the scenario's fault plan.
pub trait StreamHooks: Send + Sync + 'static {
    /// `response` numbers the streaming responses this server has sent (1-based, across
    /// restarts); `frame` numbers the frames of that response (1-based).
    fn before_frame(&self, response: u64, frame: u64) -> StreamFault;
    // client-model (interim): the two send-side hooks of the server branch, same names.
    /// `send` numbers the message sends the server has received (1-based, across restarts).
    fn on_send(&self, _send: u64) -> client_support::SendFault {
        client_support::SendFault::Pass
    }
    /// `n` numbers the `POST /v1/runs/{id}/stream` requests (1-based). `true`: answer 500.
    fn fail_run_stream(&self, _n: u64) -> bool {
        false
    }
}

pub use super::faults::StreamFault;

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
    pub bugs: ServerBugs,
    pub hooks: Arc<dyn StreamHooks>,
}

/// One message of a conversation's history, enough to build the next provider request.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredMessage {
    User {
        id: String,
        text: String,
        otid: Option<String>,
    },
    Assistant {
        id: String,
        text: String,
        tool_calls: Vec<StoredToolCall>,
    },
    ToolResult {
        tool_call_id: String,
        content: String,
        is_error: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Default)]
pub struct Conversation {
    pub id: String,
    pub agent_id: String,
    pub history: Vec<StoredMessage>,
    /// Tool calls awaiting an approval continuation, and the message that asked.
    pub pending: Vec<StoredToolCall>,
    pub pending_message_id: Option<String>,
    /// The run holding the conversation lock.
    pub active_run: Option<String>,
}

/// One frame in a run's log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub seq_id: u64,
    /// The JSON payload (seq_id/run_id already set where the frame shows them).
    pub json: String,
    /// `Some("error")` for the `event: error` frame.
    pub event: Option<&'static str>,
}

#[derive(Debug)]
pub struct Run {
    pub id: String,
    pub conversation_id: String,
    // client-model (interim): what `GET /v1/runs/{id}` and run listing need.
    pub agent_id: String,
    pub created_ms: u64,
    /// `metadata.error` of the run object.
    pub error: Option<Value>,
    pub status: crate::wire::letta::RunStatus,
    pub stop_reason: Option<StopReason>,
    pub log: Vec<LogEntry>,
    /// The body ends with `[DONE]` (a success) or without (background error frames, captures g_*).
    pub done_marker: bool,
    pub finished: bool,
    /// Bumped on every append; followers wait on it.
    pub changed: watch::Sender<u64>,
}

/// The server's durable state.
pub struct Store {
    rng: ChaCha8Rng,
    pub conversations: BTreeMap<String, Conversation>,
    pub runs: BTreeMap<String, Run>,
    /// Request token → run id (letta-protocol.md §2.4).
    pub tokens: BTreeMap<String, String>,
    /// otid → run id.
    pub otids: BTreeMap<String, String>,
    /// Streaming responses sent so far (for [`StreamHooks`]).
    pub responses: u64,
    // client-model (interim): counters of the send-side hooks.
    pub sends: u64,
    pub run_stream_requests: u64,
}

impl Store {
    pub fn new(seed: u64, agents: &[AgentConfig]) -> Self {
        let mut conversations = BTreeMap::new();
        for a in agents {
            // The agent's default conversation is addressed by the agent id (captures a4, c2).
            conversations.insert(
                a.id.clone(),
                Conversation {
                    id: a.id.clone(),
                    agent_id: a.id.clone(),
                    ..Conversation::default()
                },
            );
        }
        Store {
            rng: ChaCha8Rng::seed_from_u64(seed),
            conversations,
            runs: BTreeMap::new(),
            tokens: BTreeMap::new(),
            otids: BTreeMap::new(),
            responses: 0,
            sends: 0,
            run_stream_requests: 0,
        }
    }

    fn uuid(&mut self) -> String {
        ids::uuid4(&mut self.rng)
    }

    /// Appends a chunk to a run's log, assigning the next `seq_id`. `show_ids` says whether the
    /// frame carries `seq_id`/`run_id` (stop_reason and usage frames do not, yet use a number).
    fn record(&mut self, run_id: &str, mut chunk: LettaChunk, event: Option<&'static str>) -> u64 {
        let run = self
            .runs
            .get_mut(run_id)
            .expect("recording into a known run");
        // client-model (interim): a cancelled run takes no more chunks from its run task.
        if run.finished {
            return run.log.len() as u64;
        }
        let seq = run.log.len() as u64 + 1;
        if let Some(env) = chunk.envelope_mut() {
            env.seq_id = Some(seq);
            env.run_id = Some(run_id.to_string());
        }
        let json = match (&chunk, event) {
            // The error frame's field order (captures g_*): message_type, run_id, error_type,
            // message, detail, seq_id.
            (LettaChunk::ErrorMessage(e), _) => json!({
                "message_type": "error_message",
                "run_id": run_id,
                "error_type": e.error_type,
                "message": e.message,
                "detail": e.detail,
                "seq_id": seq,
            })
            .to_string(),
            _ => chunk.to_json(),
        };
        run.log.push(LogEntry {
            seq_id: seq,
            json,
            event,
        });
        run.changed.send_modify(|n| *n += 1);
        seq
    }
}

/// Records a chunk and reports it.
fn record<E: Env>(
    env: &E,
    st: &mut Store,
    run_id: &str,
    chunk: LettaChunk,
    event: Option<&'static str>,
) -> u64 {
    let message_type = chunk.message_type().to_string();
    let seq_id = st.record(run_id, chunk, event);
    env.observe(Observation::ChunkRecorded {
        run_id: run_id.to_string(),
        seq_id,
        message_type,
    });
    seq_id
}

/// Shared handle to the store.
pub type SharedStore = Arc<Mutex<Store>>;

/// Runs the server on `env` until the host stops.
pub async fn run<E: Env>(env: E, config: ServerConfig, store: SharedStore) -> std::io::Result<()> {
    let port = config.port;
    let config = Arc::new(config);
    let served = env.clone();
    let handler = move |req: Request<Incoming>| {
        let env = served.clone();
        let config = config.clone();
        let store = store.clone();
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let resp = route(env.clone(), config, store, req).await;
            env.observe(Observation::ServerRequest {
                method,
                path,
                status: resp.status().as_u16(),
            });
            resp
        }
    };
    http::serve(env, port, handler).await
}

fn detail(status: StatusCode, text: &str) -> Response<Body> {
    http::json_response(status, &json!({ "detail": text }))
}

async fn route<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    req: Request<Incoming>,
) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().trim_end_matches('/').to_string();
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    // client-model (interim): routes the client needs that the skeleton server lacks.
    let query = req.uri().query().map(str::to_string);
    if client_support::handles(&method, &parts) {
        let body = http::read_body(req.into_body(), 1 << 20)
            .await
            .unwrap_or_default();
        return client_support::route(
            &env,
            &config,
            &store,
            &method,
            &parts,
            query.as_deref(),
            &body,
        )
        .await;
    }
    match (method, parts.as_slice()) {
        (Method::POST, ["v1", "conversations", conv, "messages"]) => {
            let conv = conv.to_string();
            match http::read_body(req.into_body(), 16 << 20).await {
                Ok(body) => send_message(env, config, store, &conv, &body),
                Err(e) => detail(StatusCode::BAD_REQUEST, &e),
            }
        }
        (Method::POST, ["v1", "runs", run_id, "stream"]) => {
            let run_id = run_id.to_string();
            let body = http::read_body(req.into_body(), 1 << 20)
                .await
                .unwrap_or_default();
            let after = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v.get("starting_after").and_then(Value::as_u64))
                .unwrap_or(0);
            // client-model (interim): the run-stream failure hook.
            let n = {
                let mut st = store.lock().unwrap();
                st.run_stream_requests += 1;
                st.run_stream_requests
            };
            if config.hooks.fail_run_stream(n) {
                return detail(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error");
            }
            let known = store.lock().unwrap().runs.contains_key(&run_id);
            if !known {
                return detail(
                    StatusCode::NOT_FOUND,
                    &format!("Run not found with id='{run_id}'"),
                );
            }
            stream_response(&config, &store, &run_id, after)
        }
        (Method::GET, ["v1", "runs", run_id]) => {
            let st = store.lock().unwrap();
            match st.runs.get(*run_id) {
                Some(r) => http::json_response(
                    StatusCode::OK,
                    &client_support::run_json(r, env.epoch_ms()),
                ),
                None => detail(
                    StatusCode::NOT_FOUND,
                    &format!("Run not found with id='{run_id}'"),
                ),
            }
        }
        _ => detail(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// `POST /v1/conversations/{id}/messages`.
fn send_message<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    conv_path_id: &str,
    body: &[u8],
) -> Response<Body> {
    let req: SendMessageRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return http::json_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                &json!({"detail": [{"type": "json_invalid", "loc": ["body"], "msg": e.to_string()}]}),
            );
        }
    };
    let conv_id = if conv_path_id == "default" {
        match &req.agent_id {
            Some(a) => a.clone(),
            None => {
                return detail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "agent_id is required when conversation_id is 'default'",
                );
            }
        }
    } else {
        conv_path_id.to_string()
    };
    let mut st = store.lock().unwrap();
    if !st.conversations.contains_key(&conv_id) {
        return detail(
            StatusCode::NOT_FOUND,
            &format!("Conversation not found: {conv_id}"),
        );
    }
    // client-model (interim): send-side faults.
    st.sends += 1;
    let send_fault = config.hooks.on_send(st.sends);
    if let Some(resp) = client_support::apply_send_fault(&env, &mut st, &conv_id, &send_fault) {
        return resp;
    }

    // Dedupe: the same request token re-attaches to the existing run (letta-protocol.md §2.4).
    let otids: Vec<&str> = req.messages.iter().filter_map(MessageItem::otid).collect();
    let token = ids::request_token(&otids);
    if let Some(existing) = token.as_ref().and_then(|t| st.tokens.get(t)).cloned() {
        drop(st);
        return stream_response(&config, &store, &existing, 0);
    }

    // Conversation lock: busy while another run is active (captures e1/e2/h1).
    let conv = st.conversations.get(&conv_id).expect("checked above");
    if let Some(active) = conv.active_run.clone() {
        let still_running = st.runs.get(&active).is_some_and(|r| !r.finished);
        if still_running {
            return http::json_response(
                StatusCode::CONFLICT,
                &json!({
                    "detail": format!("CONFLICT: Cannot send a new message: Another request (run_id={active}) is currently being processed for this conversation. Please wait for it to complete."),
                    "run_id": active,
                }),
            );
        }
    }

    let approval = req.messages.iter().find_map(|m| match m {
        MessageItem::Approval(a) => Some(a.approvals.clone()),
        _ => None,
    });
    let has_pending = !conv.pending.is_empty();

    // Validate approvals against the pending set before anything is written.
    if let Some(items) = &approval {
        if !has_pending {
            return detail(StatusCode::BAD_REQUEST, NOTHING_PENDING_DETAIL);
        }
        let mut expected: Vec<&str> = conv.pending.iter().map(|c| c.id.as_str()).collect();
        let mut got: Vec<&str> = items.iter().map(ApprovalItem::tool_call_id).collect();
        expected.sort_unstable();
        got.sort_unstable();
        if expected != got {
            return detail(
                StatusCode::BAD_REQUEST,
                &format!("Invalid tool call IDs. Expected '{expected:?}', but received '{got:?}'."),
            );
        }
    }

    // Start the run.
    let run_id = format!("run-{}", st.uuid());
    let run_agent_id = agent_id_of(&st, &conv_id);
    let (changed, _) = watch::channel(0);
    st.runs.insert(
        run_id.clone(),
        Run {
            id: run_id.clone(),
            conversation_id: conv_id.clone(),
            agent_id: run_agent_id,
            created_ms: env.now_ms(),
            error: None,
            status: crate::wire::letta::RunStatus::Running,
            stop_reason: None,
            log: Vec::new(),
            done_marker: false,
            finished: false,
            changed,
        },
    );
    if let Some(t) = &token {
        st.tokens.insert(t.clone(), run_id.clone());
    }
    for o in &otids {
        st.otids.insert((*o).to_string(), run_id.clone());
    }
    env.observe(Observation::RunStarted {
        run_id: run_id.clone(),
        conversation_id: conv_id.clone(),
        request_token: token.clone().unwrap_or_default(),
    });
    let ping_id = format!("ping-{}", st.uuid());
    let date = ids::iso_date(env.epoch_ms() + env.now_ms());
    record(&env, &mut st, &run_id, ping_chunk(&ping_id, &date), None);
    // client-model (interim): a busy answer naming this very run (a duplicate the server does
    // not dedupe); the client can attach to it by otid.
    let busy_own_run = matches!(send_fault, client_support::SendFault::BusyOwnRun);

    // A plain message while an approval is pending: a streaming request gets a 200 with the
    // error in-band, and a background run ends on the error frame (captures d8).
    if approval.is_none() && has_pending && !config.bugs.accept_message_while_pending {
        fail_run(
            &env,
            &mut st,
            &run_id,
            StopReason::Error,
            "internal_error",
            APPROVAL_PENDING_DETAIL,
            APPROVAL_PENDING_DETAIL,
        );
        drop(st);
        return stream_response(&config, &store, &run_id, 0);
    }

    // Write the request into history.
    let mut new_history = Vec::new();
    if let Some(items) = &approval {
        for item in items {
            match item {
                ApprovalItem::Tool {
                    tool_call_id,
                    tool_return,
                    status,
                    ..
                } => {
                    new_history.push((
                        StoredMessage::ToolResult {
                            tool_call_id: tool_call_id.clone(),
                            content: tool_return.text(),
                            is_error: status == "error",
                        },
                        HistoryEntry::ToolReturn {
                            tool_call_id: tool_call_id.clone(),
                            status: status.clone(),
                        },
                    ));
                }
                ApprovalItem::Approval {
                    tool_call_id,
                    approve,
                    reason,
                } => {
                    // An `approve:true` with no result is ignored (letta-protocol.md §7.3).
                    if !approve {
                        let reason = reason
                            .clone()
                            .unwrap_or_else(|| "Tool execution denied.".into());
                        new_history.push((
                            StoredMessage::ToolResult {
                                tool_call_id: tool_call_id.clone(),
                                content: reason.clone(),
                                is_error: true,
                            },
                            HistoryEntry::Denial {
                                tool_call_id: tool_call_id.clone(),
                                reason,
                            },
                        ));
                    }
                }
            }
        }
    }
    for m in &req.messages {
        if let MessageItem::Message(m) = m
            && m.role == "user"
        {
            let id = format!("message-{}", st.uuid());
            new_history.push((
                StoredMessage::User {
                    id,
                    text: m.content.text(),
                    otid: m.otid.clone(),
                },
                HistoryEntry::User {
                    otid: m.otid.clone(),
                },
            ));
        }
    }
    let conv = st.conversations.get_mut(&conv_id).expect("checked above");
    if approval.is_some() {
        conv.pending.clear();
        conv.pending_message_id = None;
    }
    conv.active_run = Some(run_id.clone());
    for (msg, entry) in new_history {
        conv.history.push(msg);
        env.observe(Observation::History {
            conversation_id: conv_id.clone(),
            entry,
        });
    }
    let history = conv.history.clone();
    let agent_model = config
        .agents
        .iter()
        .find(|a| a.id == conv.agent_id)
        .map(|a| a.model.clone())
        .unwrap_or_default();
    drop(st);

    let job = provider_call::RunJob {
        run_id: run_id.clone(),
        conversation_id: conv_id,
        model: agent_model,
        history,
        client_tools: req.client_tools.clone(),
    };
    let task_env = env.clone();
    let task_store = store.clone();
    let task_config = config.clone();
    tokio::spawn(
        async move { provider_call::execute(task_env, task_config, task_store, job).await },
    );
    if busy_own_run {
        return client_support::busy_response(Some(&run_id));
    }
    stream_response(&config, &store, &run_id, 0)
}

// client-model (interim): the agent of a conversation.
fn agent_id_of(st: &Store, conv_id: &str) -> String {
    st.conversations
        .get(conv_id)
        .map(|c| c.agent_id.clone())
        .unwrap_or_default()
}

fn ping_chunk(id: &str, date: &str) -> LettaChunk {
    LettaChunk::Ping(crate::wire::letta::GenericMessage {
        env: crate::wire::letta::Envelope {
            id: id.to_string(),
            date: date.to_string(),
            message_type: "ping".into(),
            ..Default::default()
        },
        fields: Default::default(),
    })
}

/// Ends a run with an error: the stop_reason frame, then the `event: error` frame; background
/// streams carry no `[DONE]` after an error (captures d8, g_*_bg).
fn fail_run<E: Env>(
    env: &E,
    st: &mut Store,
    run_id: &str,
    stop: StopReason,
    error_type: &str,
    message: &str,
    detail_text: &str,
) {
    record(
        env,
        st,
        run_id,
        LettaChunk::StopReason(crate::wire::letta::StopReasonChunk {
            message_type: "stop_reason".into(),
            stop_reason: stop.clone(),
        }),
        None,
    );
    record(
        env,
        st,
        run_id,
        LettaChunk::ErrorMessage(crate::wire::letta::ErrorMessage {
            error_type: error_type.into(),
            message: message.into(),
            detail: Some(detail_text.into()),
            ..Default::default()
        }),
        Some("error"),
    );
    // client-model (interim): `metadata.error` of the run object (retryable as the server
    // branch sets it: only `llm_error`).
    if let Some(run) = st.runs.get_mut(run_id) {
        run.error = Some(json!({
            "error_type": error_type,
            "message": message,
            "detail": detail_text,
            "retryable": error_type == "llm_error",
            "run_id": run_id,
        }));
    }
    finish_run(env, st, run_id, stop, false);
}

/// Marks a run terminal and releases the conversation lock.
fn finish_run<E: Env>(env: &E, st: &mut Store, run_id: &str, stop: StopReason, done_marker: bool) {
    let run = st.runs.get_mut(run_id).expect("known run");
    // client-model (interim): a cancelled run stays cancelled.
    if run.finished {
        return;
    }
    run.status = stop.run_status();
    run.stop_reason = Some(stop.clone());
    run.done_marker = done_marker;
    run.finished = true;
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

/// A streaming response that follows run `run_id`'s log from `seq_id > after`, live, sending a
/// keepalive ping (repeating the last seq_id, not recorded) after each 20 s of silence.
fn stream_response(
    config: &Arc<ServerConfig>,
    store: &SharedStore,
    run_id: &str,
    after: u64,
) -> Response<Body> {
    let (rx, response_no) = {
        let mut st = store.lock().unwrap();
        st.responses += 1;
        let rx = st.runs[run_id].changed.subscribe();
        (rx, st.responses)
    };
    struct Follow {
        store: SharedStore,
        run_id: String,
        next: usize,
        rx: watch::Receiver<u64>,
        frame: u64,
        response_no: u64,
        hooks: Arc<dyn StreamHooks>,
        ended: bool,
        /// A cut-inside fault wrote half a frame; the next poll resets.
        cut_pending: bool,
        /// A duplicate fault: this frame is written again next.
        repeat: Option<String>,
    }
    let state = Follow {
        store: store.clone(),
        run_id: run_id.to_string(),
        next: after as usize,
        rx,
        frame: 0,
        response_no,
        hooks: config.hooks.clone(),
        ended: false,
        cut_pending: false,
        repeat: None,
    };
    let body = futures::stream::unfold(state, |mut s| async move {
        if s.cut_pending {
            s.cut_pending = false;
            s.ended = true;
            return Some((Err(reset("fault: connection reset inside a frame")), s));
        }
        if let Some(text) = s.repeat.take() {
            return Some((Ok(Frame::data(Bytes::from(text))), s));
        }
        if s.ended {
            return None;
        }
        loop {
            let step = {
                let st = s.store.lock().unwrap();
                let run = &st.runs[&s.run_id];
                if let Some(e) = run.log.get(s.next) {
                    let mut text = String::new();
                    if let Some(ev) = e.event {
                        text.push_str(&format!("event: {ev}\n"));
                    }
                    text.push_str(&format!("data: {}\n\n", e.json));
                    Some(Some(text))
                } else if run.finished {
                    Some(if run.done_marker {
                        Some("data: [DONE]\n\n".to_string())
                    } else {
                        None
                    })
                } else {
                    None
                }
            };
            match step {
                Some(Some(text)) => {
                    s.frame += 1;
                    let is_done = text.starts_with("data: [DONE]");
                    let fault = s.hooks.before_frame(s.response_no, s.frame);
                    let advance = |s: &mut Follow| {
                        if is_done {
                            s.ended = true;
                        } else {
                            s.next += 1;
                        }
                    };
                    match fault {
                        StreamFault::Pass => {}
                        StreamFault::Reset => {
                            s.ended = true;
                            return Some((Err(reset("fault: connection reset")), s));
                        }
                        StreamFault::CutInside => {
                            // Half the frame's bytes, then the reset on the next poll.
                            let bytes = Bytes::from(text);
                            let half = bytes.slice(..bytes.len() / 2);
                            s.cut_pending = true;
                            return Some((Ok(Frame::data(half)), s));
                        }
                        StreamFault::Stall => {
                            std::future::pending::<()>().await;
                        }
                        StreamFault::Close => return None,
                        StreamFault::Drop => {
                            advance(&mut s);
                            continue;
                        }
                        StreamFault::Duplicate => {
                            s.repeat = Some(text.clone());
                        }
                    }
                    advance(&mut s);
                    return Some((Ok(Frame::data(Bytes::from(text))), s));
                }
                Some(None) => return None,
                None => match tokio::time::timeout(KEEPALIVE_INTERVAL, s.rx.changed()).await {
                    Ok(Ok(())) => continue,
                    Ok(Err(_)) => return None,
                    Err(_) => {
                        let st = s.store.lock().unwrap();
                        let last = st.runs[&s.run_id].log.last().map(|e| e.seq_id);
                        drop(st);
                        let ping = json!({
                            "id": "ping-keepalive", "date": null, "name": null,
                            "message_type": "ping", "otid": null, "sender_id": null,
                            "step_id": null, "is_err": null, "seq_id": last,
                            "run_id": s.run_id,
                        });
                        s.frame += 1;
                        let text = format!("data: {ping}\n\n");
                        return Some((Ok(Frame::data(Bytes::from(text))), s));
                    }
                },
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream; charset=utf-8")
        .body(StreamBody::new(body).boxed())
        .expect("valid response")
}

fn reset(why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionReset, why.to_string())
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
