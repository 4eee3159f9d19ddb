//! What a `letta` recording implies for a server-side replay: the requests with their start
//! rules, the agents the server must already have, the model's answers (recovered from the
//! server's frames as provider cassettes) and the runs that existed before the recording.
//!
//! Recovering the model's answers: every message send whose stream carries model output
//! (`assistant_message` text, `approval_request_message` tool calls) was one model call, in
//! recorded order, together with the streams that resumed its run after a cut. Its answer is an OpenAI chat stream with one content delta per
//! `assistant_message` frame and one argument delta per `approval_request_message` fragment
//! (the server relays the provider's deltas one for one, letta-protocol.md §1.2), the finish
//! reason the stop reason implies, and the usage of the stream's `usage_statistics`.
//!
//! A run older than the recording: a stream whose run no earlier exchange showed and whose
//! first frame's `date` is more than 2 s before its response's `date` header was not made by
//! this request but replayed from an earlier one (the server's otid dedupe across
//! conversations, captures/letta_e2e PROVENANCE d3x: "the ping `date` is 16 s older than the
//! request"). The replay plants that run first: the same request sent on a fresh conversation
//! of the same agent (the prelude), and the recording's exchanges start that much later.

use serde_json::{Value, json};

use super::server::{ReplayRequest, Start};
use crate::cassette::{
    Body, Cassette, EndKind, Exchange, RecordedResponse, Recording, ResponseBody,
};
use crate::model::letta::server::AgentConfig;
use crate::model::provider::ProviderResponse;
use crate::wire::sse::{SseFrame, encode_frame};

/// A conversation id no recording holds: the prelude's conversation, mapped to ours.
pub const PRELUDE_CONV: &str = "conv-00000000-0000-4000-8000-0000000000b0";

/// The model a preconfigured agent gets when the recording never shows its object.
pub const DEFAULT_MODEL: &str = "zai/gpt-4o-mini";

/// The recorded response as text, the form both sides are compared in: a JSON body compact
/// (keys in recorded order), other bodies as text, an SSE body frame by frame as the encoder
/// writes it.
pub fn recorded_text(x: &Exchange) -> String {
    match x.answer().map(|a| &a.body) {
        None => String::new(),
        Some(ResponseBody::Whole(b)) => body_text(b),
        Some(ResponseBody::Sse(frames)) => frames.iter().map(|f| encode_frame(&f.frame)).collect(),
    }
}

fn body_text(b: &Body) -> String {
    match b {
        Body::Empty => String::new(),
        Body::Json(v) => v.to_string(),
        Body::Text(t) => t.clone(),
        Body::Binary(bytes) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// Our response bytes in the same form as [`recorded_text`].
pub fn our_text(content_type: &str, body: &[u8]) -> String {
    if content_type.starts_with("text/event-stream") {
        return crate::wire::sse::decode_all(body)
            .iter()
            .map(encode_frame)
            .collect();
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if !body.is_empty() => v.to_string(),
        _ => String::from_utf8_lossy(body).into_owned(),
    }
}

/// ms from the session start to the end of the exchange's response.
fn recorded_end(x: &Exchange) -> u64 {
    match &x.response {
        RecordedResponse::Answered(a) => x.t_ms + a.t_ms + a.end.t_ms,
        RecordedResponse::Failed { t_ms, .. } => x.t_ms + t_ms,
    }
}

/// An SSE frame's data as JSON.
pub fn data_of(f: &SseFrame) -> Option<Value> {
    serde_json::from_str(&f.as_event()?.data).ok()
}

fn sse_of(x: &Exchange) -> Option<&[crate::cassette::TimedFrame]> {
    match &x.answer()?.body {
        ResponseBody::Sse(f) => Some(f),
        ResponseBody::Whole(_) => None,
    }
}

/// Seconds since the start of the month of `dd … hh:mm:ss` (enough to compare two dates of one
/// recording).
fn secs(day: &str, hms: &str) -> Option<i64> {
    let d: i64 = day.parse().ok()?;
    let mut it = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (h, m, s) = (it.next()??, it.next()??, it.next()??);
    Some(((d * 24 + h) * 60 + m) * 60 + s)
}

/// How many seconds the stream's first dated frame is older than its response's `date`
/// header (`Mon, 30 Nov 2026 00:42:59 GMT` against `2026-11-30T00:42:43+00:00`).
fn age_secs(x: &Exchange) -> Option<i64> {
    let header = x.response_header("date")?;
    let w: Vec<&str> = header.split_whitespace().collect();
    let head = secs(w.get(1)?, w.get(4)?)?;
    let frame_date = sse_of(x)?
        .iter()
        .find_map(|f| data_of(&f.frame)?.get("date")?.as_str().map(str::to_string))?;
    let frame = secs(frame_date.get(8..10)?, frame_date.get(11..19)?)?;
    Some(head - frame)
}

fn run_of(x: &Exchange) -> Option<String> {
    sse_of(x)?.iter().find_map(|f| {
        data_of(&f.frame)?
            .get("run_id")?
            .as_str()
            .map(str::to_string)
    })
}

fn is_send(x: &Exchange) -> bool {
    x.method == "POST"
        && (x.path.ends_with("/messages") || x.path.ends_with("/messages/stream"))
        && sse_of(x).is_some()
}

/// Whether an earlier exchange showed the run the exchange's stream carries.
fn run_shown_before(rec: &Recording, i: usize) -> bool {
    run_of(&rec.exchanges()[i]).is_some_and(|run| {
        rec.exchanges()[..i]
            .iter()
            .any(|e| recorded_text(e).contains(&run))
    })
}

/// Whether the exchange's stream replays a run from before the recording (module doc).
fn replays_older_run(rec: &Recording, i: usize) -> bool {
    let x = &rec.exchanges()[i];
    is_send(x) && !run_shown_before(rec, i) && age_secs(x).is_some_and(|a| a > 2)
}

/// Whether the exchange's stream was a model call of its own.
pub fn makes_model_call(rec: &Recording, i: usize) -> bool {
    is_send(&rec.exchanges()[i]) && !run_shown_before(rec, i) && !replays_older_run(rec, i)
}

/// The first agent id a request names (`?agent_id=`, `/v1/agents/{id}`).
fn agent_named(x: &Exchange) -> Option<String> {
    super::normalize::ids_in(&x.path, "agent-")
        .into_iter()
        .next()
}

/// Agents the server must have before the recording starts: those a request names before any
/// response showed them, with the model their recorded object shows.
pub fn agents(rec: &Recording) -> Vec<AgentConfig> {
    let mut out: Vec<AgentConfig> = Vec::new();
    for (i, x) in rec.exchanges().iter().enumerate() {
        let text = format!("{} {}", x.path, body_text(&x.request.body));
        for id in super::normalize::ids_in(&text, "agent-") {
            let shown = rec.exchanges()[..i]
                .iter()
                .any(|e| recorded_text(e).contains(&id));
            if shown || out.iter().any(|a| a.id == id) {
                continue;
            }
            let model = rec
                .exchanges()
                .iter()
                .filter_map(|e| match e.answer().map(|a| &a.body) {
                    Some(ResponseBody::Whole(Body::Json(v))) => Some(v),
                    _ => None,
                })
                .find(|v| v["id"] == id.as_str())
                .and_then(|v| v["model"].as_str().map(str::to_string))
                .unwrap_or_else(|| DEFAULT_MODEL.to_string());
            out.push(AgentConfig { id, model });
        }
    }
    out
}

/// The model call a send's stream shows, as an OpenAI chat stream cassette; `None` when the
/// stream carries no model output.
fn answer_of(x: &Exchange, n: usize, origin: &str) -> Option<Cassette> {
    answer_from_frames(sse_of(x)?, n, origin)
}

/// ms from the session start to the exchange's response head.
fn head_ms(x: &Exchange) -> u64 {
    x.t_ms + x.answer().map_or(0, |a| a.t_ms)
}

/// The frames of the run exchange `i`'s stream carries, across the streams that carried it: a
/// stream cut before the run ended is resumed by later requests (`POST /v1/runs/{id}/stream`,
/// `POST /v1/conversations/{id}/stream`, letta-protocol.md §4.3), whose frames continue the
/// same model call. Each seq id once, in the order first seen, and each frame without one
/// (`stop_reason`, `usage_statistics`) once per message type; times from the session start.
fn run_frames(rec: &Recording, i: usize) -> Vec<crate::cassette::TimedFrame> {
    let xs = rec.exchanges();
    let run = run_of(&xs[i]);
    let mut seen: Vec<u64> = Vec::new();
    let mut unsequenced: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (k, x) in xs.iter().enumerate().skip(i) {
        if k > i && (is_send(x) || run.is_none() || run_of(x) != run) {
            continue;
        }
        let Some(frames) = sse_of(x) else { continue };
        for f in frames {
            let data = data_of(&f.frame);
            match data.as_ref().and_then(|v| v["seq_id"].as_u64()) {
                Some(seq) if seen.contains(&seq) => continue,
                Some(seq) => seen.push(seq),
                None => {
                    let kind = data
                        .as_ref()
                        .and_then(|v| v["message_type"].as_str())
                        .unwrap_or("")
                        .to_string();
                    if unsequenced.contains(&kind) {
                        continue;
                    }
                    unsequenced.push(kind);
                }
            }
            out.push(crate::cassette::TimedFrame {
                t_ms: head_ms(x) + f.t_ms,
                frame: f.frame.clone(),
            });
        }
    }
    out
}

fn answer_from_frames(
    frames: &[crate::cassette::TimedFrame],
    n: usize,
    origin: &str,
) -> Option<Cassette> {
    let mut chunks: Vec<(u64, Value)> = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    let mut usage = json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0});
    let mut stop: Option<String> = None;
    for f in frames {
        let Some(v) = data_of(&f.frame) else { continue };
        match v["message_type"].as_str() {
            Some("assistant_message") => {
                let text = v["content"].as_str().unwrap_or("");
                chunks.push((f.t_ms, json!({"content": text})));
            }
            Some("approval_request_message") => {
                let call = &v["tool_call"];
                let id = call["tool_call_id"].as_str().unwrap_or("").to_string();
                let index = match calls.iter().position(|c| *c == id) {
                    Some(i) => i,
                    None => {
                        calls.push(id.clone());
                        calls.len() - 1
                    }
                };
                let args = call["arguments"].as_str().unwrap_or("");
                let delta = match call["name"].as_str() {
                    Some(name) => {
                        json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": args}}]})
                    }
                    None => {
                        json!({"tool_calls": [{"index": index, "function": {"arguments": args}}]})
                    }
                };
                chunks.push((f.t_ms, delta));
            }
            Some("stop_reason") => stop = v["stop_reason"].as_str().map(str::to_string),
            Some("usage_statistics") => {
                for k in ["prompt_tokens", "completion_tokens", "total_tokens"] {
                    usage[k] = v[k].clone();
                }
            }
            _ => {}
        }
    }
    let first_t = chunks.first()?.0;
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let _ = stop;
    let id = format!("chatcmpl-replay{n:04}");
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": "replay",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let last_t = chunks.last().map_or(first_t, |c| c.0);
    let mut lines = vec![
        json!({"loopsim_cassette": 1, "layer": "provider", "format": "openai_chat",
        "source": origin, "status": 200, "content_type": "text/event-stream",
        "note": "recovered from the server's frames of a recorded send (harness/replay/derive.rs)"})
        .to_string(),
    ];
    let mut push =
        |t: u64, data: String| lines.push(json!({"t": t - first_t, "data": data}).to_string());
    push(
        first_t,
        chunk(json!({"role": "assistant", "content": null}), Value::Null).to_string(),
    );
    for (t, delta) in chunks {
        push(t, chunk(delta, Value::Null).to_string());
    }
    push(last_t, chunk(json!({}), json!(finish)).to_string());
    let mut u = chunk(json!({}), Value::Null);
    u["choices"] = json!([]);
    u["usage"] = usage;
    push(last_t, u.to_string());
    push(last_t, "[DONE]".into());
    lines.push(json!({"t": last_t - first_t, "end": EndKind::Clean.as_str()}).to_string());
    Cassette::parse(&lines.join("\n"), &format!("{origin} exchange {n}")).ok()
}

/// A plain text answer (for a scenario whose recording made no model call: it lists one).
pub fn text_answer(text: &str, origin: &str) -> Option<Cassette> {
    let frames = vec![crate::cassette::TimedFrame {
        t_ms: 0,
        frame: SseFrame::Event(crate::wire::sse::SseEvent::data(
            json!({"message_type": "assistant_message", "content": text}).to_string(),
        )),
    }];
    answer_from_frames(&frames, 0, origin)
}

/// The model call exchange `i` (0-based) shows, as a provider cassette.
pub fn answer_for_call(rec: &Recording, i: usize) -> Option<Cassette> {
    answer_from_frames(&run_frames(rec, i), i + 1, rec.origin())
}

/// The recording as requests, the model's answers in call order, and the agents to configure.
pub struct Derived {
    pub requests: Vec<ReplayRequest>,
    /// Per request, the exchange it replays (1-based `n`); `None` for a prelude request.
    pub exchange_of: Vec<Option<usize>>,
    pub answers: Vec<ProviderResponse>,
    pub agents: Vec<AgentConfig>,
}

/// Derives the server-side replay of a `letta` recording (module doc).
pub fn derive(rec: &Recording) -> Derived {
    let xs = rec.exchanges();
    let origin = rec.origin().to_string();
    let mut requests = Vec::new();
    let mut exchange_of = Vec::new();
    let mut answers = Vec::new();
    let mut prelude_answers = Vec::new();
    // The prelude: each run older than the recording, sent again on a fresh conversation.
    let mut shift: u64 = 0;
    for (i, x) in xs.iter().enumerate() {
        if !replays_older_run(rec, i) {
            continue;
        }
        let Some(agent) = xs[..=i].iter().find_map(agent_named) else {
            continue;
        };
        let age = age_secs(x).unwrap_or(0).max(0) as u64 * 1000;
        shift = shift.max(age);
        let base = requests.len();
        requests.push(ReplayRequest {
            name: format!("prelude{}", base / 2 + 1),
            method: "POST".into(),
            path: format!("/v1/conversations/?agent_id={agent}"),
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"{}".to_vec(),
            start: Start {
                after_end: (0..base).map(|k| (k, 0)).collect(),
                ..Start::default()
            },
            cut_after_frames: None,
            script_requests: None,
            recorded_text: PRELUDE_CONV.into(),
        });
        exchange_of.push(None);
        requests.push(ReplayRequest {
            name: format!("prelude{}", base / 2 + 1),
            method: x.method.clone(),
            path: format!("/v1/conversations/{PRELUDE_CONV}/messages"),
            headers: x.request.headers.clone(),
            body: x.request.body.to_bytes(),
            start: Start {
                after_end: vec![(base, 0)],
                ..Start::default()
            },
            cut_after_frames: None,
            script_requests: None,
            recorded_text: recorded_text(x),
        });
        exchange_of.push(None);
        prelude_answers.extend(answer_of(x, i + 1, &origin));
    }
    let first = requests.len();
    for (i, x) in xs.iter().enumerate() {
        let t = x.t_ms;
        let mut after_end: Vec<(usize, u64)> = (0..first).map(|k| (k, 0)).collect();
        for (j, e) in xs[..i].iter().enumerate() {
            let end = recorded_end(e);
            if end <= t {
                after_end.push((first + j, t - end));
            }
        }
        // A stream that ended in a reset (the client hung up, or the connection was cut) is
        // hung up after as many frames here.
        let cut_after_frames = x
            .answer()
            .filter(|a| a.end.by_client || a.end.kind == EndKind::Reset)
            .and_then(|_| sse_of(x).map(<[_]>::len));
        requests.push(ReplayRequest {
            name: format!("x{}", i + 1),
            method: x.method.clone(),
            path: x.path.clone(),
            headers: x.request.headers.clone(),
            body: x.request.body.to_bytes(),
            start: Start {
                at_ms: t + shift,
                after_end,
                after_start: None,
            },
            cut_after_frames,
            script_requests: None,
            recorded_text: recorded_text(x),
        });
        exchange_of.push(Some(i + 1));
        if makes_model_call(rec, i) {
            answers.extend(answer_from_frames(&run_frames(rec, i), i + 1, &origin));
        }
    }
    let answers = prelude_answers
        .into_iter()
        .chain(answers)
        .enumerate()
        .map(|(k, cassette)| ProviderResponse {
            name: format!("recovered answer {}", k + 1),
            cassette,
        })
        .collect();
    Derived {
        requests,
        exchange_of,
        answers,
        agents: agents(rec),
    }
}
