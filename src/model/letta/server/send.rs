//! `POST /v1/conversations/{id}/messages`: dedupe, the conversation lock, approval validation,
//! writing the request into history, and starting the run.
//!
//! Order of checks (cloud; letta-protocol.md §2.4, §3.2, §11; captures win):
//! 1. malformed body → 422; unknown conversation or agent → 404;
//! 2. injected send faults (busy, 503 shutting down, an approval appearing);
//! 3. request-token dedupe, before the lock and across conversations (captures/letta_e2e d3x):
//!    a known token re-attaches to its run's stream, read-only, from the start;
//! 4. the conversation lock: another unfinished run → 409 busy naming it (captures e1/e2/h1);
//! 5. approvals: the approval container must come first and answer exactly the pending set
//!    (400 "Invalid tool call IDs…"); an approval with nothing pending is refused in-band;
//! 6. a plain message while an approval is pending: in-band error (captures d1-d8), or 409
//!    with [`ApprovalConflict::Http409`] and for non-streaming sends (capture d7);
//! 7. history written (approval response, tool results and denials, user messages), run
//!    started, response follows the run's log.
//!
//! Local profile (§7.1): no dedupe, no lock; a non-approval turn first settles orphaned tool
//! calls with "Turn did not complete"; approval items for unknown ids are ignored; only
//! `role:"user"` items are kept.

use std::sync::Arc;

use crate::model::port::signal;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::errors::{
    add_retry_after, conflict, detail, not_found_agent, not_found_conversation, unprocessable,
};
use super::history::{echo_tool_results, write_history};
use super::provider_call::{self, request::RunJob};
use super::store::{Conversation, IdKind, Message, MessageBody, Run};
use super::{
    APPROVAL_PENDING_DETAIL, ApprovalConflict, BUSY_DETAIL, NOTHING_PENDING_DETAIL, Profile,
    STREAM_INCOMPLETE_MESSAGE, SendFault, ServerConfig, SharedStore, Store, StoredToolCall,
    TURN_DID_NOT_COMPLETE, busy_detail, fail_run, ids, plant_pending_approval, planted_history,
    record, settle_unresolved, shutting_down_body, stream,
};
use crate::model::port::env::Env;
use crate::model::port::http::{self, Body};
use crate::model::port::observe::Observation;
use crate::wire::letta::{
    ApprovalItem, GenericMessage, LettaChunk, MessageItem, RunStatus, SendMessageRequest,
    StopReason,
};

/// Python's `str()` of a list of strings, as the "Invalid tool call IDs" text shows them.
fn py_list(items: &[&str]) -> String {
    let inner: Vec<String> = items.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", inner.join(", "))
}

/// Which route a send came in on. Only the conversations endpoint exists in the cloud and
/// local profiles; `letta-oss-0.16` also serves the two agents endpoints of 0.16.8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `POST /v1/conversations/{id}/messages`: streams unless `streaming:false` (captures d4,
    /// d7), takes the conversation lock (captures e1, e2, h1).
    Conversations,
    /// `POST /v1/agents/{id}/messages`: JSON unless `streaming:true`, which needs an SDK client
    /// (capture x1; `sdk_client` is the header check of PROVENANCE.md x1). No lock.
    Agents { sdk_client: bool },
    /// `POST /v1/agents/{id}/messages/stream`, deprecated: always streams and takes no lock
    /// (capture e3: two runs interleave).
    AgentsStream,
}

/// The 422 of `streaming:true` on `/v1/agents/{id}/messages` from a client that is not an SDK
/// v1 (capture x1).
pub const STREAMING_NEEDS_SDK_DETAIL: &str =
    "streaming=true is only supported for SDK v1.0+ clients.";

/// Whether request headers pass 0.16.8's SDK check (PROVENANCE.md x1): any
/// `X-Stainless-Package-Version`, no `User-Agent` at all, or a `User-Agent` of
/// `letta-client/1.x` or `@letta-ai/letta-client/1.x`.
pub fn is_sdk_client(headers: &hyper::HeaderMap) -> bool {
    if headers.contains_key("x-stainless-package-version") {
        return true;
    }
    let Some(ua) = headers.get(hyper::header::USER_AGENT) else {
        return true;
    };
    let ua = ua.to_str().unwrap_or("");
    ["letta-client/", "@letta-ai/letta-client/"]
        .iter()
        .any(|p| {
            ua.strip_prefix(p)
                .is_some_and(|v| v.split('.').next() == Some("1"))
        })
}

/// 0.16.8's `{"type":"tool_return","tool_returns":[…]}` item (capture b2) as the approval
/// container it stands for; other items are left alone.
fn tool_return_as_approval(item: MessageItem) -> MessageItem {
    let MessageItem::Unknown(v) = &item else {
        return item;
    };
    if v.get("type").and_then(Value::as_str) != Some("tool_return") {
        return item;
    }
    let approvals: Option<Vec<ApprovalItem>> = v
        .get("tool_returns")
        .and_then(|r| serde_json::from_value(r.clone()).ok());
    match approvals {
        Some(approvals) => MessageItem::Approval(crate::wire::letta::ApprovalCreate {
            kind: "approval".into(),
            approvals,
            otid: v.get("otid").and_then(Value::as_str).map(str::to_string),
        }),
        None => item,
    }
}

/// An answer that ends a send before its run starts (a 4xx, an injected fault's answer).
type Refused = Box<Response<Body>>;

/// `POST …/messages`, in the order of checks of the module doc.
pub(crate) fn send_message<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    conv_path_id: &str,
    body: &[u8],
    endpoint: Endpoint,
) -> Response<Body> {
    let req = match parse_request(&config, body, endpoint) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let oss = config.profile.oss();
    // Only the conversations endpoint takes the conversation lock (capture e3).
    let locking = endpoint == Endpoint::Conversations;
    let local = config.profile == Profile::Local;
    let mut st = store.lock().unwrap();
    let (conv_id, agent_id) = match resolve_conversation(&st, conv_path_id, &req, endpoint) {
        Ok(ids) => ids,
        Err(resp) => return *resp,
    };
    let now = env.now_ms();
    st.ensure_system_message(config.profile, &conv_id, now);

    let target = SendTarget {
        conv_id: &conv_id,
        agent_id: &agent_id,
        busy_when_held: !local && locking,
    };
    let busy_own_run = match inject_send_fault(&env, &config, &mut st, &target, now) {
        Ok(busy_own_run) => busy_own_run,
        Err(resp) => return *resp,
    };

    let otids: Vec<&str> = req.messages.iter().filter_map(MessageItem::otid).collect();
    // Dedupe applies to background runs only (captures/letta_e2e d3x).
    let token = if local || !req.background {
        None
    } else {
        ids::request_token(&otids)
    };
    if let Some(existing) = token.as_ref().and_then(|t| st.tokens.get(t)).cloned()
        && !config.bugs.ignore_request_token
    {
        env.observe(Observation::RunAttached {
            run_id: existing.clone(),
            how: "request_token".into(),
        });
        drop(st);
        return stream::follow(&env, &config, &store, &existing, 0, true);
    }

    let conv = st.conversations.get(&conv_id).expect("checked above");
    if !local
        && locking
        && let Some(active) = conv.active_run.clone()
        && st.runs.get(&active).is_some_and(|r| !r.finished)
    {
        return conflict(
            &config,
            json!({"detail": busy_detail(&active), "run_id": active}),
        );
    }

    let ApprovalCheck {
        approvals,
        plain_while_pending,
        nothing_pending,
    } = match check_approvals(&config, conv, &req, endpoint) {
        Ok(check) => check,
        Err(resp) => return *resp,
    };

    let run_id = start_run(
        &env,
        &config,
        &mut st,
        &req,
        NewRun {
            conv_id: &conv_id,
            agent_id: &agent_id,
            token: token.as_deref(),
            otids: &otids,
            holds_lock: locking || local,
            now,
        },
    );

    if plain_while_pending || nothing_pending {
        let text = if plain_while_pending {
            APPROVAL_PENDING_DETAIL
        } else {
            NOTHING_PENDING_DETAIL
        };
        // The pending-approval refusal (captures d8): error_type internal_error, message =
        // detail = the conflict text.
        fail_run(
            &env,
            &config,
            &mut st,
            &run_id,
            StopReason::Error,
            "internal_error",
            text,
            text,
        );
        drop(st);
        return respond(&env, &config, &store, &run_id, req.streaming);
    }

    if local && approvals.is_none() && !config.bugs.skip_orphan_settling {
        settle_unresolved(
            &env,
            &config,
            &mut st,
            &conv_id,
            Some(&run_id),
            TURN_DID_NOT_COMPLETE,
        );
    }

    let tool_messages = write_history(
        &env,
        &config,
        &mut st,
        &conv_id,
        &run_id,
        &req,
        approvals.as_deref(),
    );
    // Step streaming echoes the client's tool results before the model's answer; token
    // streaming does not (PROVENANCE.md "Step streaming": b2 echoes, b and c do not).
    if oss && !req.stream_tokens {
        echo_tool_results(&env, &config, &mut st, &run_id, &tool_messages);
    }

    let job = run_job(&st, &conv_id, &agent_id, &run_id, &req);
    drop(st);
    spawn_run(&env, &config, &store, job);
    if busy_own_run {
        // The run goes on; the answer names it as the lock holder.
        return conflict(
            &config,
            json!({"detail": busy_detail(&run_id), "run_id": run_id}),
        );
    }
    respond(&env, &config, &store, &run_id, req.streaming)
}

/// The body as a send request: `streaming` as the endpoint defaults it (the agents endpoint
/// streams only for an SDK client), and 0.16.8's `tool_return` items as approvals.
fn parse_request(
    config: &ServerConfig,
    body: &[u8],
    endpoint: Endpoint,
) -> Result<SendMessageRequest, Refused> {
    let mut req: SendMessageRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return Err(Box::new(unprocessable(&e.to_string()))),
    };
    let streaming_field = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("streaming").and_then(Value::as_bool));
    req.streaming = match endpoint {
        // The conversations endpoint streams unless told otherwise (captures d4, d7; the SDK's
        // docstring: "By default (streaming=true)").
        Endpoint::Conversations => streaming_field.unwrap_or(true),
        // The agents endpoint answers JSON unless told to stream (captures d3, a3).
        Endpoint::Agents { sdk_client } => {
            let streaming = streaming_field.unwrap_or(false);
            if streaming && !sdk_client {
                return Err(Box::new(detail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    STREAMING_NEEDS_SDK_DETAIL,
                )));
            }
            streaming
        }
        Endpoint::AgentsStream => true,
    };
    if config.profile.oss() {
        req.messages = req
            .messages
            .into_iter()
            .map(tool_return_as_approval)
            .collect();
    }
    Ok(req)
}

/// The conversation and agent a send addresses: `(conversation id, agent id)`, or the 404/422.
fn resolve_conversation(
    st: &Store,
    conv_path_id: &str,
    req: &SendMessageRequest,
    endpoint: Endpoint,
) -> Result<(String, String), Refused> {
    if endpoint != Endpoint::Conversations && !st.agents.contains_key(conv_path_id) {
        return Err(Box::new(not_found_agent(conv_path_id)));
    }
    let conv_id = if conv_path_id == "default" {
        match &req.agent_id {
            Some(a) => a.clone(),
            None => {
                return Err(Box::new(detail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "agent_id is required when conversation_id is 'default'",
                )));
            }
        }
    } else {
        conv_path_id.to_string()
    };
    let Some(conv) = st.conversations.get(&conv_id) else {
        return Err(Box::new(not_found_conversation(&conv_id)));
    };
    let agent_id = conv.agent_id.clone();
    if !st.agents.contains_key(&agent_id) {
        return Err(Box::new(not_found_agent(&agent_id)));
    }
    Ok((conv_id, agent_id))
}

/// Plants another client's call pending on the send's conversation, its history in the trace.
fn plant_stale_call<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    target: &SendTarget<'_>,
    call: StoredToolCall,
    now: u64,
) {
    for o in planted_history(target.conv_id, &call) {
        env.observe(o);
    }
    let (conv_id, agent_id) = (target.conv_id, target.agent_id);
    plant_pending_approval(st, config.profile, conv_id, agent_id, call, now);
}

/// The conversation a send addresses, and whether a run holding it makes the server answer the
/// send 409 busy (the conversations endpoint on a locking profile).
struct SendTarget<'a> {
    conv_id: &'a str,
    agent_id: &'a str,
    busy_when_held: bool,
}

/// The injected send fault of this send (sim serve and scenarios), before the server looks at
/// the request. `Ok(true)`: the send goes on and is answered 409 busy naming its own run once
/// that run has started; `Err`: the fault's answer.
fn inject_send_fault<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    target: &SendTarget<'_>,
    now: u64,
) -> Result<bool, Refused> {
    if !config.bugs.uncounted_sends {
        st.sends += 1;
    }
    let fault = config.hooks.on_send(st.sends);
    // Another client's call can be left pending only on a conversation that waits for none
    // and that no run holds: while one is pending, the server refuses that client's message as
    // it refuses ours (step 6), and while a run holds the lock it answers that client 409
    // busy (§11), so its run never starts to leave a call behind. The fault plants neither.
    if let SendFault::ApprovalAppears(call) | SendFault::ApprovalAppearsInBand(call) = &fault
        && let Some(conv) = st.conversations.get(target.conv_id)
    {
        let running = conv
            .active_run
            .as_ref()
            .filter(|id| target.busy_when_held && st.runs.get(*id).is_some_and(|r| !r.finished));
        // Nor is a call planted twice: a call id stands once in a conversation, so one already
        // in its history (an earlier plant, since answered) is not left pending again.
        let again = st
            .conversation_messages(target.conv_id)
            .iter()
            .any(|m| match &m.body {
                MessageBody::Assistant { tool_calls, .. } => {
                    tool_calls.iter().any(|c| c.id == call.id)
                }
                _ => false,
            });
        let why = match (conv.pending.first(), running) {
            (Some(waiting), _) => {
                Some(format!("the conversation already waits for {}", waiting.id))
            }
            (None, Some(run)) => Some(format!("run {run} holds the conversation")),
            (None, None) if again => Some(format!(
                "{} already stands in the conversation's history",
                call.id
            )),
            (None, None) => None,
        };
        if let Some(why) = why {
            env.observe(Observation::Fault {
                fault: format!(
                    "approval_pending send={} tool_call_id={} not planted: {why}",
                    st.sends, call.id
                ),
            });
            return Ok(false);
        }
    }
    match fault {
        SendFault::Pass => Ok(false),
        SendFault::BusyOwnRun => {
            env.observe(Observation::Fault {
                fault: format!("busy_own_run send={}", st.sends),
            });
            Ok(true)
        }
        SendFault::ApprovalAppearsInBand(call) => {
            env.observe(Observation::Fault {
                fault: format!(
                    "approval_pending_in_band send={} tool_call_id={}",
                    st.sends, call.id
                ),
            });
            plant_stale_call(env, config, st, target, call, now);
            Ok(false)
        }
        SendFault::Busy => {
            env.observe(Observation::Fault {
                fault: format!("busy_409 send={}", st.sends),
            });
            Err(Box::new(conflict(config, json!({ "detail": BUSY_DETAIL }))))
        }
        SendFault::ShuttingDown(retry_after) => {
            env.observe(Observation::Fault {
                fault: format!("shutting_down_503 send={}", st.sends),
            });
            let mut answer =
                http::json_response(StatusCode::SERVICE_UNAVAILABLE, &shutting_down_body());
            if let Some(retry_after) = retry_after {
                add_retry_after(env, config, &mut answer, retry_after, now);
            }
            Err(Box::new(answer))
        }
        SendFault::ApprovalAppears(call) => {
            env.observe(Observation::Fault {
                fault: format!(
                    "approval_pending_on_send send={} tool_call_id={}",
                    st.sends, call.id
                ),
            });
            plant_stale_call(env, config, st, target, call, now);
            Err(Box::new(conflict(
                config,
                json!({ "detail": APPROVAL_PENDING_DETAIL }),
            )))
        }
    }
}

/// Approvals must come first and, when calls are pending, answer exactly the pending set
/// (400 "Invalid tool call IDs…", the ids as Python lists).
fn validate_approvals(
    items: &[ApprovalItem],
    approval_pos: Option<usize>,
    pending: &[StoredToolCall],
) -> Result<(), Refused> {
    if approval_pos != Some(0) {
        return Err(Box::new(detail(
            StatusCode::BAD_REQUEST,
            "Invalid request: the approval response must be the first message.",
        )));
    }
    if !pending.is_empty() {
        let mut expected: Vec<&str> = pending.iter().map(|c| c.id.as_str()).collect();
        let mut got: Vec<&str> = items.iter().map(ApprovalItem::tool_call_id).collect();
        expected.sort_unstable();
        got.sort_unstable();
        if expected != got {
            return Err(Box::new(detail(
                StatusCode::BAD_REQUEST,
                &format!(
                    "Invalid tool call IDs. Expected '{}', but received '{}'.",
                    py_list(&expected),
                    py_list(&got)
                ),
            )));
        }
    }
    Ok(())
}

/// What the approval checks let through.
struct ApprovalCheck {
    /// The approval container's items, if the request has one.
    approvals: Option<Vec<ApprovalItem>>,
    /// A plain message while an approval is pending, refused in-band once the run started.
    plain_while_pending: bool,
    /// An approval with nothing pending, refused in-band once the run started.
    nothing_pending: bool,
}

/// Steps 5 and 6: the approval container validated against the pending set; a plain message
/// while an approval is pending, or an approval with nothing pending, refused before any run
/// (409 or 400) where the profile and the send say so, else flagged for the in-band refusal.
fn check_approvals(
    config: &ServerConfig,
    conv: &Conversation,
    req: &SendMessageRequest,
    endpoint: Endpoint,
) -> Result<ApprovalCheck, Refused> {
    let local = config.profile == Profile::Local;
    let oss = config.profile.oss();
    let approval_pos = req
        .messages
        .iter()
        .position(|m| matches!(m, MessageItem::Approval(_)));
    let approvals: Option<Vec<ApprovalItem>> = approval_pos.map(|i| match &req.messages[i] {
        MessageItem::Approval(a) => a.approvals.clone(),
        _ => unreachable!("position found an approval"),
    });
    let has_pending = !conv.pending.is_empty();
    if !local && let Some(items) = &approvals {
        validate_approvals(items, approval_pos, &conv.pending)?;
    }
    let plain_while_pending =
        !local && approvals.is_none() && has_pending && !config.bugs.accept_message_while_pending;
    if plain_while_pending
        && (config.approval_conflict == ApprovalConflict::Http409 || !req.streaming)
    {
        // The agents endpoint's 409 has an object `detail` naming the pending request
        // (capture d3); the conversations endpoint's a string (capture d7).
        if oss && matches!(endpoint, Endpoint::Agents { .. }) {
            return Err(Box::new(conflict(
                config,
                json!({"detail": {
                    "code": "PENDING_APPROVAL",
                    "message": APPROVAL_PENDING_DETAIL,
                    "pending_request_id": conv.pending_message_id,
                }}),
            )));
        }
        return Err(Box::new(conflict(
            config,
            json!({ "detail": APPROVAL_PENDING_DETAIL }),
        )));
    }
    let nothing_pending = !local && approvals.is_some() && !has_pending;
    if nothing_pending && !req.streaming {
        return Err(Box::new(detail(
            StatusCode::BAD_REQUEST,
            NOTHING_PENDING_DETAIL,
        )));
    }
    Ok(ApprovalCheck {
        approvals,
        plain_while_pending,
        nothing_pending,
    })
}

/// What [`start_run`] needs besides the request.
struct NewRun<'a> {
    conv_id: &'a str,
    agent_id: &'a str,
    /// The request token the run is deduplicated by.
    token: Option<&'a str>,
    otids: &'a [&'a str],
    /// The run becomes the conversation's active run (its lock).
    holds_lock: bool,
    now: u64,
}

/// Starts the run: registered under its request token and otids, the conversation's active
/// run when it takes the lock, the first ping recorded when the request asked for pings.
fn start_run<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    req: &SendMessageRequest,
    new: NewRun<'_>,
) -> String {
    let local = config.profile == Profile::Local;
    let run_id = st.new_id(config.profile, IdKind::Run);
    let (changed, _) = signal::channel(0);
    st.runs.insert(
        run_id.clone(),
        Run {
            id: run_id.clone(),
            agent_id: new.agent_id.to_string(),
            conversation_id: new.conv_id.to_string(),
            status: RunStatus::Running,
            stop_reason: None,
            background: req.background || local,
            log: Vec::new(),
            done_marker: false,
            finished: false,
            error: None,
            request_token: new.token.map(str::to_string),
            created_ms: new.now,
            completed_ms: None,
            cancel_requested: false,
            changed,
        },
    );
    if let Some(t) = new.token {
        st.tokens.insert(t.to_string(), run_id.clone());
    }
    if !local && req.background {
        for o in new.otids {
            st.otids.insert((*o).to_string(), run_id.clone());
        }
    }
    env.observe(Observation::RunStarted {
        run_id: run_id.clone(),
        conversation_id: new.conv_id.to_string(),
        request_token: new.token.unwrap_or_default().to_string(),
    });
    if new.holds_lock {
        st.conversations
            .get_mut(new.conv_id)
            .expect("checked above")
            .active_run = Some(run_id.clone());
    }
    if !local && req.include_pings {
        let ping_id = st.new_id(config.profile, IdKind::Ping);
        let date = ids::iso_date(env.epoch_ms() + new.now);
        record(env, config, st, &run_id, ping_chunk(&ping_id, &date), None);
    }
    run_id
}

/// What the run task needs: the conversation's history as it now stands, the agent's model,
/// the request's client tools.
fn run_job(
    st: &Store,
    conv_id: &str,
    agent_id: &str,
    run_id: &str,
    req: &SendMessageRequest,
) -> RunJob {
    let history: Vec<Message> = st
        .conversation_messages(conv_id)
        .into_iter()
        .cloned()
        .collect();
    let agent = st.agents.get(agent_id).expect("checked above");
    RunJob {
        run_id: run_id.to_string(),
        conversation_id: conv_id.to_string(),
        model: agent.model.clone(),
        history,
        client_tools: req.client_tools.clone(),
        stream_tokens: req.stream_tokens,
        include_compaction_messages: req.include_compaction_messages,
    }
}

/// Starts the run task; if it ends without a terminal chunk, the run gets the
/// `stream_incomplete` synthesis (letta-protocol.md §1.1).
pub(crate) fn spawn_run<E: Env>(
    env: &E,
    config: &Arc<ServerConfig>,
    store: &SharedStore,
    job: RunJob,
) {
    let task_env = env.clone();
    let task_store = store.clone();
    let task_config = config.clone();
    env.spawner().spawn(async move {
        let run_id = job.run_id.clone();
        provider_call::execute(
            task_env.clone(),
            task_config.clone(),
            task_store.clone(),
            job,
        )
        .await;
        let mut st = task_store.lock().unwrap();
        if st.runs.get(&run_id).is_some_and(|r| !r.finished) {
            fail_run(
                &task_env,
                &task_config,
                &mut st,
                &run_id,
                StopReason::Error,
                "stream_incomplete",
                STREAM_INCOMPLETE_MESSAGE,
                STREAM_INCOMPLETE_MESSAGE,
            );
        }
    });
}

/// A streaming response following the run, or (non-streaming sends) the finished run as JSON.
fn respond<E: Env>(
    env: &E,
    config: &Arc<ServerConfig>,
    store: &SharedStore,
    run_id: &str,
    streaming: bool,
) -> Response<Body> {
    if streaming {
        stream::follow(env, config, store, run_id, 0, false)
    } else {
        stream::collect_json(store, run_id)
    }
}

pub(crate) fn ping_chunk(id: &str, date: &str) -> LettaChunk {
    LettaChunk::Ping(GenericMessage {
        env: crate::wire::letta::Envelope {
            id: id.to_string(),
            date: date.to_string(),
            message_type: "ping".into(),
            ..Default::default()
        },
        fields: Default::default(),
    })
}
