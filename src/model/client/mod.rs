//! The Letta Code client model: the turn loop of the approval protocol.
//!
//! One user turn is several round trips (seeds/000 §6.4): send the user message, drain the SSE
//! stream, and while the run stops at `requires_approval`, classify the requested tool calls,
//! execute the allowed ones on the local workspace and send the results (and denials) back as
//! the next message. The drain follows the StreamProcessor rules (letta-protocol.md §4.1) and
//! the end_turn → requires_approval coercion (§4.2), with the terminal-EOF guard (§4.3).
//!
//! Not yet modelled (later issues): resume after a broken stream, pre-stream 409 recovery,
//! retries with budgets, interrupts, restart recovery. A broken stream ends the turn with an
//! error; every wait is bounded.

pub mod approvals;
pub mod stream_processor;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use self::approvals::{Decision, HumanAnswer, PermissionRules, classify};
use self::stream_processor::{Approval, StreamProcessor};
use super::env::Env;
use super::http;
use super::observe::Observation;
use super::server::ids::uuid4;
use super::tools::Workspace;
use crate::wire::letta::{
    ApprovalCreate, ApprovalItem, ClientTool, Content, LettaChunk, MessageCreate, MessageItem,
    SendMessageRequest, StopReason,
};
use crate::wire::sse::SseDecoder;

/// Terminal-EOF guard: after a stop_reason, wait this long for the body to close
/// (letta-protocol.md §4.3, `LETTA_STREAM_TERMINAL_EOF_GRACE_MS` = 2000).
pub const TERMINAL_EOF_GRACE: Duration = Duration::from_millis(2000);

/// Stall window: silence this long with no stop reason ends the drain (letta-protocol.md §4.3,
/// `LETTA_STREAM_STALL_RECONCILE_MS` = 60000; the run-status reconciler itself is a later issue).
pub const STALL_WINDOW: Duration = Duration::from_millis(60_000);

/// Deliberate defects a test can switch on to prove an invariant can fail.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientBugs {
    /// Breaks `deterministic`: otids mix in a process-wide counter, so two runs of the same seed
    /// in one process differ.
    pub nondeterministic_otids: bool,
    /// Breaks `turn-terminates`: no stall window, so a stream that goes silent without closing
    /// is waited on forever.
    pub waits_forever_on_silence: bool,
}

/// Client configuration.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// "host:port" of the server.
    pub server_addr: String,
    pub agent_id: String,
    /// `default` (the agent's default conversation) or a conversation id.
    pub conversation_id: String,
    pub client_tools: Vec<ClientTool>,
    pub permissions: PermissionRules,
    /// How the simulated human answers `ask` decisions, in order; the last one repeats.
    pub human: Vec<HumanAnswer>,
    /// The user's messages, one per turn.
    pub turns: Vec<String>,
    /// Seed of the client's PRNG (otids).
    pub seed: u64,
    /// Upper bound on requests in one turn (everything is bounded, DESIGN.md §4 rule 5).
    pub max_requests_per_turn: u32,
    /// Upper bound on waiting for a response head.
    pub request_timeout: Duration,
    pub bugs: ClientBugs,
}

/// How one turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnOutcome {
    /// A terminal stop reason from the server (`end_turn`, `max_steps`, …).
    Stopped(String),
    /// The turn waits for a human who never answers.
    Paused(String),
    /// The turn failed: pre-stream HTTP error, broken stream, or a bound hit.
    Error(String),
}

impl std::fmt::Display for TurnOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnOutcome::Stopped(s) => write!(f, "stopped: {s}"),
            TurnOutcome::Paused(s) => write!(f, "paused: {s}"),
            TurnOutcome::Error(s) => write!(f, "error: {s}"),
        }
    }
}

/// The result of one drain (letta-protocol.md §4.2).
#[derive(Debug, Clone)]
pub struct DrainResult {
    pub stop_reason: StopReason,
    pub saw_stop_chunk: bool,
    pub approvals: Vec<Approval>,
    pub last_run_id: Option<String>,
    pub last_seq_id: Option<u64>,
    pub fallback_error: Option<String>,
    pub terminal_eof_guard_fired: bool,
}

static PLANTED_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The client: config, PRNG and the workspace it acts on.
pub struct Client<E: Env> {
    env: E,
    config: ClientConfig,
    rng: ChaCha8Rng,
    workspace: Arc<Mutex<Workspace>>,
    human_next: usize,
}

impl<E: Env> Client<E> {
    pub fn new(env: E, config: ClientConfig, workspace: Arc<Mutex<Workspace>>) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        Client {
            env,
            config,
            rng,
            workspace,
            human_next: 0,
        }
    }

    /// Runs every turn of the script in order; returns their outcomes.
    pub async fn run(&mut self) -> Vec<TurnOutcome> {
        let turns = self.config.turns.clone();
        let mut outcomes = Vec::new();
        for (i, text) in turns.iter().enumerate() {
            let turn = i as u32 + 1;
            self.env.observe(Observation::TurnStart {
                turn,
                text: text.clone(),
            });
            let outcome = self.run_turn(turn, text).await;
            self.env.observe(Observation::TurnEnd {
                turn,
                outcome: outcome.to_string(),
            });
            outcomes.push(outcome);
        }
        outcomes
    }

    fn otid(&mut self) -> String {
        let mut id = uuid4(&mut self.rng);
        if self.config.bugs.nondeterministic_otids {
            let n = PLANTED_COUNTER.fetch_add(1, Ordering::Relaxed);
            id.push_str(&format!("-{n}"));
        }
        id
    }

    /// One user turn: the approval loop of seeds/000 §6.4.
    async fn run_turn(&mut self, turn: u32, text: &str) -> TurnOutcome {
        let mut outgoing = vec![MessageItem::Message(MessageCreate {
            kind: Some("message".into()),
            role: "user".into(),
            content: Content::Text(text.to_string()),
            otid: Some(self.otid()),
        })];
        for _ in 0..self.config.max_requests_per_turn {
            let drained = match self.send_and_drain(turn, outgoing).await {
                Ok(d) => d,
                Err(e) => return TurnOutcome::Error(e),
            };
            if drained.stop_reason != StopReason::RequiresApproval {
                return match (&drained.stop_reason, &drained.fallback_error) {
                    (StopReason::EndTurn, _) => TurnOutcome::Stopped("end_turn".into()),
                    (s, Some(e)) => TurnOutcome::Error(format!("stop_reason={} ({e})", s.as_str())),
                    (s, None) => TurnOutcome::Stopped(s.as_str().to_string()),
                };
            }
            let decisions = classify(
                &drained.approvals,
                &self.config.permissions,
                &self.config.human,
                &mut self.human_next,
            );
            for (a, d) in drained.approvals.iter().zip(&decisions) {
                self.env.observe(Observation::ClientDecision {
                    tool_call_id: a.tool_call_id.clone(),
                    tool: a.tool_name.clone(),
                    decision: d.to_string(),
                });
            }
            if let Some((a, _)) = drained
                .approvals
                .iter()
                .zip(&decisions)
                .find(|(_, d)| matches!(d, Decision::AwaitHuman))
            {
                return TurnOutcome::Paused(format!(
                    "waiting for a decision on {} ({})",
                    a.tool_call_id, a.tool_name
                ));
            }
            let results = self.execute(&drained.approvals, &decisions);
            outgoing = vec![MessageItem::Approval(ApprovalCreate {
                kind: "approval".into(),
                approvals: results,
                otid: Some(self.otid()),
            })];
        }
        TurnOutcome::Error(format!(
            "turn exceeded {} requests",
            self.config.max_requests_per_turn
        ))
    }

    /// Executes approved calls and returns results and denials in decision order
    /// (letta-protocol.md §5.3: results are in the original order whatever order tools finish).
    fn execute(&mut self, approvals: &[Approval], decisions: &[Decision]) -> Vec<ApprovalItem> {
        let mut out = Vec::new();
        for (a, d) in approvals.iter().zip(decisions) {
            match d {
                Decision::Allow => {
                    let (outcome, executions) = self.workspace.lock().unwrap().execute(
                        &a.tool_call_id,
                        &a.tool_name,
                        &a.tool_args,
                    );
                    self.env.observe(Observation::ToolExecuted {
                        tool_call_id: a.tool_call_id.clone(),
                        tool: a.tool_name.clone(),
                        arguments: a.tool_args.clone(),
                        executions,
                        status: outcome.status.as_str().into(),
                    });
                    out.push(ApprovalItem::Tool {
                        tool_call_id: a.tool_call_id.clone(),
                        tool_return: Content::Text(outcome.tool_return),
                        status: outcome.status.as_str().into(),
                        stdout: None,
                        stderr: None,
                    });
                }
                Decision::Deny(reason) => out.push(ApprovalItem::Approval {
                    tool_call_id: a.tool_call_id.clone(),
                    approve: false,
                    reason: Some(reason.clone()),
                }),
                Decision::AwaitHuman => {}
            }
        }
        out
    }

    fn request_body(&self, messages: Vec<MessageItem>) -> SendMessageRequest {
        // Exactly the keys letta-code sends (letta-protocol.md §2.2).
        SendMessageRequest {
            messages,
            streaming: true,
            stream_tokens: true,
            include_pings: true,
            background: true,
            client_skills: Vec::new(),
            client_tools: self.config.client_tools.clone(),
            include_compaction_messages: true,
            override_model: None,
            agent_id: (self.config.conversation_id == "default")
                .then(|| self.config.agent_id.clone()),
        }
    }

    /// Sends one message request and drains its stream.
    async fn send_and_drain(
        &mut self,
        turn: u32,
        messages: Vec<MessageItem>,
    ) -> Result<DrainResult, String> {
        let path = format!("/v1/conversations/{}/messages", self.config.conversation_id);
        self.env.observe(Observation::ClientSend {
            turn,
            method: "POST".into(),
            path: path.clone(),
            items: summarize(&messages),
            otids: messages
                .iter()
                .filter_map(|m| m.otid().map(str::to_string))
                .collect(),
        });
        let body = serde_json::to_vec(&self.request_body(messages)).expect("request serialises");
        let req = Request::post(&path)
            .header("host", self.config.server_addr.as_str())
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("x-letta-source", "letta-code")
            .body(Full::new(Bytes::from(body)))
            .expect("valid request");
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
                    error: e.to_string(),
                });
                return Err(e.to_string());
            }
        };
        let status = resp.status().as_u16();
        self.env.observe(Observation::ClientResponse { status });
        if !resp.status().is_success() {
            let text = http::read_body(resp.into_body(), 1 << 20)
                .await
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            return Err(format!("{status} {}", extract_detail(&text)));
        }
        Ok(self.drain(resp.into_body(), None).await)
    }

    /// Drains one SSE body (letta-protocol.md §4.2). Never waits without a bound: the stall
    /// window before a stop reason, the terminal-EOF guard after it.
    async fn drain(
        &mut self,
        mut body: hyper::body::Incoming,
        threshold: Option<u64>,
    ) -> DrainResult {
        let mut sse = SseDecoder::new();
        let mut proc = StreamProcessor::new(threshold);
        let mut fallback_error: Option<String> = None;
        let mut done_seen = false;
        let mut guard_fired = false;
        let mut eof = false;
        let how: String = 'read: loop {
            let wait = if proc.stop_reason.is_some() {
                TERMINAL_EOF_GRACE
            } else if self.config.bugs.waits_forever_on_silence {
                Duration::MAX
            } else {
                STALL_WINDOW
            };
            let frames = match tokio::time::timeout(wait, body.frame()).await {
                Err(_) if proc.stop_reason.is_some() => {
                    guard_fired = true;
                    break 'read "terminal-eof-guard".into();
                }
                Err(_) => {
                    fallback_error = Some("Stream stalled with no data".into());
                    break 'read "stalled".into();
                }
                Ok(None) => {
                    // End of body: a last event without its blank line still counts.
                    eof = true;
                    std::mem::take(&mut sse).finish()
                }
                Ok(Some(Err(e))) => {
                    fallback_error = Some(http::error_chain(&e));
                    break 'read format!("error: {}", http::error_chain(&e));
                }
                Ok(Some(Ok(f))) => match f.into_data() {
                    Ok(bytes) => sse.push(&bytes),
                    Err(_) => continue,
                },
            };
            for f in frames {
                let Some(ev) = f.as_event() else { continue };
                if done_seen {
                    // The SDK ignores everything after [DONE] until EOF (§1.1).
                    continue;
                }
                if ev.is_done() {
                    done_seen = true;
                    continue;
                }
                if ev.event.as_deref() == Some("error") {
                    // `event: error` makes the SDK throw with the JSON's message (§1.1).
                    let v: Value =
                        serde_json::from_str(&ev.data).unwrap_or(Value::String(ev.data.clone()));
                    let msg = v
                        .get("message")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| ev.data.clone());
                    if proc.last_run_id.is_none() {
                        proc.last_run_id =
                            v.get("run_id").and_then(Value::as_str).map(str::to_string);
                    }
                    let detail = v.get("detail").and_then(Value::as_str).unwrap_or("");
                    fallback_error = Some(if detail.is_empty() {
                        msg
                    } else {
                        format!("{msg} ({detail})")
                    });
                    break 'read "error-event".into();
                }
                if ev.event.is_some() {
                    // Other named events are dropped by the SDK (§1.1).
                    continue;
                }
                let chunk = match LettaChunk::from_json(&ev.data) {
                    Ok(c) => c,
                    Err(e) => {
                        fallback_error = Some(format!("Could not parse stream chunk: {e}"));
                        break 'read "parse-error".into();
                    }
                };
                let processed = proc.process(&chunk);
                if !processed.skipped {
                    self.env.observe(Observation::ClientChunk {
                        run_id: chunk.run_id().map(str::to_string),
                        seq_id: chunk.seq_id(),
                        message_type: chunk.message_type().to_string(),
                    });
                }
                if let Some(e) = processed.error
                    && processed.output
                {
                    fallback_error = Some(e.message);
                }
            }
            if eof {
                break 'read "eof".into();
            }
        };
        self.env.observe(Observation::ClientStreamEnd { how });
        let approvals = proc.take_approvals();
        let saw_stop_chunk = proc.stop_reason.is_some();
        let mut stop_reason = proc.stop_reason.clone().unwrap_or(StopReason::Error);
        // end_turn with collected approvals is coerced to requires_approval (§4.2).
        if stop_reason == StopReason::EndTurn && !approvals.is_empty() {
            stop_reason = StopReason::RequiresApproval;
        }
        // A requires_approval whose stream then failed is still an approval stop (the
        // approvals are complete: the server only stops after the last delta).
        if stop_reason != StopReason::RequiresApproval
            && fallback_error.is_none()
            && !saw_stop_chunk
        {
            fallback_error = Some("Stream ended without a stop reason".into());
        }
        let result = DrainResult {
            stop_reason,
            saw_stop_chunk,
            approvals,
            last_run_id: proc.last_run_id.clone(),
            last_seq_id: proc.last_seq_id,
            fallback_error,
            terminal_eof_guard_fired: guard_fired,
        };
        self.env.observe(Observation::ClientDrained {
            stop_reason: result.stop_reason.as_str().into(),
            approvals: result
                .approvals
                .iter()
                .map(|a| a.tool_call_id.clone())
                .collect(),
            last_seq_id: result.last_seq_id,
        });
        result
    }
}

/// `user`, or `approval[tool:t1,deny:t2]`: what a request carried, for the trace.
fn summarize(messages: &[MessageItem]) -> String {
    messages
        .iter()
        .map(|m| match m {
            MessageItem::Message(m) => m.role.clone(),
            MessageItem::Approval(a) => format!(
                "approval[{}]",
                a.approvals
                    .iter()
                    .map(|i| match i {
                        ApprovalItem::Tool { tool_call_id, .. } => format!("tool:{tool_call_id}"),
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

/// The detail string of an error body (letta-protocol.md §3.1, simplified to JSON bodies).
pub fn extract_detail(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => match v.get("detail") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| other.to_string()),
            None => v
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| json!(v).to_string()),
        },
        Err(_) => body.to_string(),
    }
}
