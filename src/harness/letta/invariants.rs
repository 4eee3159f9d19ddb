//! The Letta server's oracles over the trace (DESIGN.md §5, docs/invariants.md):
//! `tool-call-resolved`, `one-run-per-request`, `durable-ack`, `stream-stays-in-conversation`,
//! `answers-typed`, `chunks-named`, `requests-routed`, and the tool calls a run leaves
//! awaiting approval (`history-valid`, which both systems share, is in `harness::invariants`).
//! Pure: they read a finished trace and nothing else.

use std::collections::BTreeMap;

use crate::harness::invariants::{
    ANSWERS_TYPED, CHUNKS_NAMED, DURABLE_ACK, ONE_RUN_PER_REQUEST, REQUESTS_ROUTED,
    STREAM_STAYS_IN_CONVERSATION, TOOL_CALL_RESOLVED, Violation,
};
use crate::harness::letta::compaction_safe::removed_history_units;
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::{HistoryEntry, Observation};

/// `tool-call-resolved`: every tool call the server asked the client about gets exactly one
/// resolution (a tool return or a denial) in the server's history, and none is left dangling
/// when a new turn starts. Calls still pending when the run ends are not violations here (a
/// paused turn is legitimate); they are listed by [`pending_tool_calls`].
pub fn tool_call_resolved(events: &[TraceEvent]) -> Vec<Violation> {
    #[derive(PartialEq)]
    enum State {
        Open,
        Resolved(usize),
    }
    let mut out = Vec::new();
    // conversation → (tool_call_id → state), in the order calls were made.
    let mut calls: BTreeMap<String, Vec<(String, State)>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let Observation::History {
            conversation_id,
            entry,
        } = &e.obs
        else {
            continue;
        };
        let conv = calls.entry(conversation_id.clone()).or_default();
        match entry {
            HistoryEntry::ToolCall { tool_call_id, .. } => {
                conv.push((tool_call_id.clone(), State::Open));
            }
            HistoryEntry::ToolReturn { tool_call_id, .. }
            | HistoryEntry::Denial { tool_call_id, .. }
            | HistoryEntry::Settled { tool_call_id, .. } => {
                match conv.iter_mut().rev().find(|(id, _)| id == tool_call_id) {
                    None => out.push(Violation {
                        invariant: TOOL_CALL_RESOLVED,
                        event: Some(i),
                        message: format!(
                            "conversation {conversation_id}: resolution for tool call {tool_call_id}, which the server never asked about"
                        ),
                    }),
                    Some((_, State::Resolved(first))) => out.push(Violation {
                        invariant: TOOL_CALL_RESOLVED,
                        event: Some(i),
                        message: format!(
                            "conversation {conversation_id}: tool call {tool_call_id} resolved twice (first at event {})",
                            *first + 1
                        ),
                    }),
                    Some((_, state)) => *state = State::Resolved(i),
                }
            }
            HistoryEntry::User { .. } => {
                for (id, state) in conv.iter() {
                    if *state == State::Open {
                        out.push(Violation {
                            invariant: TOOL_CALL_RESOLVED,
                            event: Some(i),
                            message: format!(
                                "conversation {conversation_id}: a new user turn started while tool call {id} was unresolved"
                            ),
                        });
                    }
                }
                // Report each dangling call once.
                for (_, state) in conv.iter_mut() {
                    if *state == State::Open {
                        *state = State::Resolved(i);
                    }
                }
            }
            HistoryEntry::Assistant { .. } => {}
        }
    }
    out
}

/// The tool calls each conversation holds pending, as its `history` entries say, in the order
/// they were made: a call opens it, a return, a denial or a settle closes it.
pub(crate) fn track_pending<'a>(
    pending: &mut BTreeMap<&'a str, Vec<&'a str>>,
    conversation_id: &'a str,
    entry: &'a HistoryEntry,
) {
    let calls = pending.entry(conversation_id).or_default();
    match entry {
        HistoryEntry::ToolCall { tool_call_id, .. } => calls.push(tool_call_id),
        HistoryEntry::ToolReturn { tool_call_id, .. }
        | HistoryEntry::Denial { tool_call_id, .. }
        | HistoryEntry::Settled { tool_call_id, .. } => calls.retain(|c| c != tool_call_id),
        HistoryEntry::User { .. } | HistoryEntry::Assistant { .. } => {}
    }
}

/// Tool calls without a resolution at the end of the trace: (conversation, tool_call_id).
pub fn pending_tool_calls(events: &[TraceEvent]) -> Vec<(String, String)> {
    let mut open: Vec<(String, String)> = Vec::new();
    for e in events {
        if let Observation::History {
            conversation_id,
            entry,
        } = &e.obs
        {
            match entry {
                HistoryEntry::ToolCall { tool_call_id, .. } => {
                    open.push((conversation_id.clone(), tool_call_id.clone()))
                }
                HistoryEntry::ToolReturn { tool_call_id, .. }
                | HistoryEntry::Denial { tool_call_id, .. }
                | HistoryEntry::Settled { tool_call_id, .. } => {
                    open.retain(|(c, id)| !(c == conversation_id && id == tool_call_id))
                }
                HistoryEntry::User { .. } => open.retain(|(c, _)| c != conversation_id),
                HistoryEntry::Assistant { .. } => {}
            }
        }
    }
    open
}

/// `one-run-per-request`: the server never starts two runs for one request token (the same
/// otids, letta-protocol.md §2.4). Runs without a token (foreground, local) are not compared.
pub fn one_run_per_request(events: &[TraceEvent]) -> Vec<Violation> {
    let mut seen: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let Observation::RunStarted {
            run_id,
            request_token,
            ..
        } = &e.obs
        else {
            continue;
        };
        if request_token.is_empty() {
            continue;
        }
        match seen.get(request_token.as_str()) {
            Some((first, at)) => out.push(Violation {
                invariant: ONE_RUN_PER_REQUEST,
                event: Some(i),
                message: format!(
                    "request token {request_token} started a second run {run_id}; run {first} (event {}) already serves it",
                    at + 1
                ),
            }),
            None => {
                seen.insert(request_token, (run_id, i));
            }
        }
    }
    out
}

/// `durable-ack`: what the server acknowledged before a crash is still in its store after the
/// restart. Acknowledged = a history entry written (a message echoed), a run started, a chunk
/// recorded; the restarted server reports what its store holds (`server_recovered`), and every
/// conversation must hold at least as many history entries, and every run at least as many
/// chunks, as were acknowledged before.
pub fn durable_ack(events: &[TraceEvent]) -> Vec<Violation> {
    let mut histories: BTreeMap<String, u64> = BTreeMap::new();
    let mut chunks: BTreeMap<String, u64> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::History {
                conversation_id, ..
            } => *histories.entry(conversation_id.clone()).or_default() += 1,
            // Entries a compaction took out of the context were not lost: the summary stands
            // for them (docs/server.md "Compaction").
            Observation::Compaction {
                conversation_id,
                removed,
                ..
            } => {
                let h = histories.entry(conversation_id.clone()).or_default();
                *h = h.saturating_sub(removed_history_units(removed));
            }
            Observation::RunStarted { run_id, .. } => {
                chunks.entry(run_id.clone()).or_default();
            }
            Observation::ChunkRecorded { run_id, seq_id, .. } => {
                let c = chunks.entry(run_id.clone()).or_default();
                *c = (*c).max(*seq_id);
            }
            Observation::ServerRecovered {
                histories: held,
                runs,
                ..
            } => {
                let parse = |list: &[String]| -> BTreeMap<String, u64> {
                    list.iter()
                        .filter_map(|s| s.rsplit_once('='))
                        .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)))
                        .collect()
                };
                let held = parse(held);
                let runs = parse(runs);
                for (conv, acked) in &histories {
                    let have = held.get(conv).copied().unwrap_or(0);
                    if have < *acked {
                        out.push(Violation {
                            invariant: DURABLE_ACK,
                            event: Some(i),
                            message: format!(
                                "conversation {conv}: {acked} history entries acknowledged before the crash, {have} after the restart"
                            ),
                        });
                    }
                }
                for (run, acked) in &chunks {
                    match runs.get(run) {
                        None => out.push(Violation {
                            invariant: DURABLE_ACK,
                            event: Some(i),
                            message: format!("run {run} was started before the crash and is gone after the restart"),
                        }),
                        Some(have) if have < acked => out.push(Violation {
                            invariant: DURABLE_ACK,
                            event: Some(i),
                            message: format!(
                                "run {run}: {acked} chunks recorded before the crash, {have} after the restart"
                            ),
                        }),
                        Some(_) => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The conversation a send or conversation-stream request names: `/v1/conversations/{id}/
/// messages` or `…/stream`, and the agents endpoints of 0.16.8 (`/v1/agents/{id}/messages`,
/// `…/messages/stream`), whose conversation is the agent's default one, keyed by the agent id
/// (letta-protocol.md §2.1).
pub(crate) fn conversation_of_send(path: &str) -> Option<&str> {
    if let Some(rest) = path.strip_prefix("/v1/conversations/") {
        let (conv, tail) = rest.split_once('/')?;
        return matches!(tail, "messages" | "stream").then_some(conv);
    }
    let rest = path.strip_prefix("/v1/agents/")?;
    let (agent, tail) = rest.split_once('/')?;
    matches!(tail, "messages" | "messages/stream").then_some(agent)
}

/// Whether a run of conversation `run_conv` may answer a request that names `named`. The
/// `default` alias names the agent's default conversation, keyed by the agent id, which the
/// path does not carry: any agent's default conversation is accepted for it.
pub(crate) fn same_conversation(named: &str, run_conv: &str) -> bool {
    named == run_conv || (named == "default" && run_conv.starts_with("agent-"))
}

/// `answers-typed`: every answer the server gives, to the client or to a probe, names its
/// content type. A real Letta server (FastAPI under uvicorn) types each one: `application/json`,
/// `text/event-stream; charset=utf-8` for a stream, `text/plain` for its bare 500 (all 38
/// answers of captures/letta_server). An untyped answer is a handler that built its answer
/// wrong, and the published SDK reads its body as text: the client's view of a conversation or
/// a run is then silently empty, which no turn outcome shows.
pub fn answers_typed(events: &[TraceEvent]) -> Vec<Violation> {
    events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.obs {
            Observation::UntypedAnswer {
                method,
                path,
                status,
            } => Some(Violation::at(
                ANSWERS_TYPED,
                i,
                format!(
                    "the {}'s {method} {path} was answered {status} with no content type; a Letta server types every answer (application/json, or text/event-stream for a stream)",
                    e.host
                ),
            )),
            _ => None,
        })
        .collect()
}

/// `chunks-named`: every chunk reaches the client with the names every Letta server gives it:
/// a message id on each chunk with an envelope but the error frame (letta-protocol.md §1.3;
/// store ids, §1.7, §8.6), an otid on assistant and reasoning text. The accumulator keys an
/// assistant or reasoning line by its otid, so a `[text, thinking, text]` message split by
/// otid is three lines (§4.6); the resume backfill dedupes by otid, else by id and type
/// (A.6.2). A nameless chunk changes no turn's outcome: only the transcript shows it.
pub fn chunks_named(events: &[TraceEvent]) -> Vec<Violation> {
    events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.obs {
            Observation::ClientChunkUnnamed {
                run_id,
                seq_id,
                message_type,
                lacks,
            } => Some(Violation::at(
                CHUNKS_NAMED,
                i,
                format!(
                    "the client got {message_type} seq_id {} of run {} without its {lacks}: a Letta server names every message chunk but its error frame by id, and assistant and reasoning text by otid as well (letta-protocol.md §1.3, §4.6)",
                    seq_id.map_or("none".into(), |s| s.to_string()),
                    run_id.as_deref().unwrap_or("?"),
                ),
            )),
            _ => None,
        })
        .collect()
}

/// `requests-routed`: every request that reaches the server matches a route it serves, except
/// the probe's, which a scenario may aim at an unknown path or method on purpose. The client
/// calls only routes of the server it was written against (letta-protocol.md §2.1,
/// letta-tests-and-real-client.md B.3); one that falls to the router's catch-all gets FastAPI's
/// bare 404 or 405, which the client answers like any other failure or, for a fire-and-forget
/// call (a cancel), ignores. Either way no turn's outcome shows that the server has lost a route
/// or that the client calls one it never had. A probe request is matched by method and path:
/// the server's `server_unrouted` events of each pair may number at most the probe's
/// `probe_request` events of it.
pub fn requests_routed(events: &[TraceEvent]) -> Vec<Violation> {
    let mut probed: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::ProbeRequest { method, path, .. } => {
                let path = path.split('?').next().unwrap_or_default();
                *probed.entry((method.as_str(), path)).or_default() += 1;
            }
            Observation::ServerUnrouted {
                method,
                path,
                status,
            } => match probed.get_mut(&(method.as_str(), path.as_str())) {
                Some(n) if *n > 0 => *n -= 1,
                _ => out.push(Violation::at(
                    REQUESTS_ROUTED,
                    i,
                    format!(
                        "{method} {path} matched no route of the server, which answered {status} ({}); the client calls only routes the Letta server serves",
                        if *status == 405 { "Method Not Allowed" } else { "Not Found" }
                    ),
                )),
            },
            _ => {}
        }
    }
    out
}

/// `stream-stays-in-conversation`: a stream that answers a send on conversation A never
/// carries a run of conversation B. Two views of the trace, each against the conversation
/// every run started on (`run_started`):
/// - the server's: a send re-attached to an existing run by its request token (`run_attached`,
///   then that send's `server_request`, with no await between them in the server model)
///   streams that run, which must be of the send's conversation. Letta 0.16.8's dedupe is
///   global (captures/letta_e2e PROVENANCE d3x), so an otid reused on another conversation
///   breaks this;
/// - the client's: the chunks it reads after a `client_send` on conversation A, up to its next
///   request, carry runs of A only.
///
/// Each (conversation, run) pair is reported once.
pub fn stream_stays_in_conversation(events: &[TraceEvent]) -> Vec<Violation> {
    let mut run_conv: BTreeMap<&str, &str> = BTreeMap::new();
    // Per server host: the run a request token re-attached to (and the event), waiting for
    // its request.
    let mut attached: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
    // Per client host: the conversation of the send whose stream it is reading.
    let mut reading: BTreeMap<&str, &str> = BTreeMap::new();
    let mut reported: Vec<(&str, &str)> = Vec::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let host = e.host.as_str();
        // (the conversation the request named, the run its stream carried, what the stream was)
        let seen: (&str, &str, String) = match &e.obs {
            Observation::RunStarted {
                run_id,
                conversation_id,
                ..
            } => {
                run_conv.insert(run_id, conversation_id);
                continue;
            }
            Observation::RunAttached { run_id, how } if how == "request_token" => {
                attached.insert(host, (run_id, i));
                continue;
            }
            Observation::ServerRequest { path, .. } => {
                let Some((run, at)) = attached.remove(host) else {
                    continue;
                };
                let Some(named) = conversation_of_send(path) else {
                    continue;
                };
                let what = format!(
                    "the stream the server re-attached by request token (event {})",
                    at + 1
                );
                (named, run, what)
            }
            Observation::ClientSend { path, .. } => {
                match conversation_of_send(path) {
                    Some(conv) => reading.insert(host, conv),
                    None => reading.remove(host),
                };
                continue;
            }
            Observation::ClientRequest { .. } => {
                reading.remove(host);
                continue;
            }
            Observation::ClientChunk {
                run_id: Some(run), ..
            } => {
                let Some(named) = reading.get(host).copied() else {
                    continue;
                };
                let what = "the stream the client read after its send".to_string();
                (named, run.as_str(), what)
            }
            _ => continue,
        };
        let (named, run, what) = seen;
        let Some(other) = run_conv.get(run).copied() else {
            continue;
        };
        if same_conversation(named, other) || reported.contains(&(named, run)) {
            continue;
        }
        reported.push((named, run));
        out.push(Violation {
            invariant: STREAM_STAYS_IN_CONVERSATION,
            event: Some(i),
            message: format!(
                "{what} on conversation {named} carries run {run} of conversation {other}"
            ),
        });
    }
    out
}
