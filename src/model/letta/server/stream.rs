//! Streaming responses: a run's log as SSE, followed live, with keepalive pings and the fault
//! hooks consulted before every frame.
//!
//! Framing (captures/letta_server PROVENANCE "Framing"; letta-protocol.md §1.1): every frame is
//! `data: <compact JSON>\n\n`; the only named event is `event: error` directly before the
//! error frame's data line; a success ends `stop_reason`, `usage_statistics`, `data: [DONE]`,
//! then the body closes. Keepalive pings (a fresh `ping-<uuid>`, the current date) go out after
//! each keepalive interval of silence ([`super::KEEPALIVE_INTERVAL`] unless configured); on a live background stream they repeat the last
//! seq_id sent (capture k2), on a foreground stream and on a replay that has nothing to send
//! their seq_id is null (captures k1, f3). Keepalive pings are not recorded, so a replay has
//! none (capture k2 replay).

use std::sync::Arc;
use std::time::Duration;

use crate::model::port::signal;
use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::store::IdKind;
use super::{Profile, REPLAY_SILENCE_CAP, ServerConfig, SharedStore, ids};
use super::{StreamFault, StreamHooks};
use crate::model::port::env::Env;
use crate::model::port::http::{self, Body};

struct Follow<E: Env> {
    env: E,
    store: SharedStore,
    run_id: String,
    /// Index into the log of the next frame to send.
    next: usize,
    rx: signal::Receiver<u64>,
    frame: u64,
    response_no: u64,
    hooks: Arc<dyn StreamHooks>,
    profile: Profile,
    keepalive: Duration,
    /// A replay request (`POST …/stream`), not the send's own response.
    replay: bool,
    /// The seq id of the last log frame this response sent, for a background run's keepalive
    /// pings; none until it sends one (a replay with nothing to send pings with null, captures
    /// k2, f3).
    last_sent_seq: Option<u64>,
    /// A log frame has been written by this response.
    sent_log: bool,
    done_sent: bool,
    /// Consecutive keepalive pings with nothing else sent.
    idle_pings: u64,
    ended: bool,
    /// A cut-inside fault wrote half a frame; the next poll resets.
    cut_pending: bool,
    /// A duplicate fault: this frame is written again next.
    repeat: Option<String>,
    /// The planted `close_caught_up_stream`.
    close_caught_up: bool,
}

fn reset(why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionReset, why.to_string())
}

enum Step {
    Text(String),
    Close,
    Wait,
}

/// A streaming response that follows run `run_id`'s log from `seq_id > after`.
/// `replay`: this is `POST /v1/runs/{id}/stream`, the conversation stream (attach by otid) or
/// a dedupe re-attach, not the response of the send that started the run.
pub(crate) fn follow<E: Env>(
    env: &E,
    config: &Arc<ServerConfig>,
    store: &SharedStore,
    run_id: &str,
    after: u64,
    replay: bool,
) -> Response<Body> {
    let (rx, response_no) = {
        let mut st = store.lock().unwrap();
        st.responses += 1;
        let rx = st.runs[run_id].changed.subscribe();
        (rx, st.responses)
    };
    let state = Follow {
        env: env.clone(),
        store: store.clone(),
        run_id: run_id.to_string(),
        next: after as usize,
        rx,
        frame: 0,
        response_no,
        hooks: config.hooks.clone(),
        profile: config.profile,
        keepalive: config.keepalive_interval,
        replay,
        last_sent_seq: None,
        sent_log: false,
        done_sent: false,
        idle_pings: 0,
        ended: false,
        cut_pending: false,
        repeat: None,
        close_caught_up: config.bugs.close_caught_up_stream,
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
            let step = s.next_step();
            let text = match step {
                Step::Text(t) => t,
                Step::Close => return None,
                Step::Wait => match s.env.clock().timeout(s.keepalive, s.rx.changed()).await {
                    Ok(Ok(())) => continue,
                    Ok(Err(_)) => return None,
                    Err(_) => {
                        if s.profile == Profile::Local {
                            continue;
                        }
                        s.idle_pings += 1;
                        if s.keepalive * s.idle_pings as u32 > REPLAY_SILENCE_CAP {
                            return None;
                        }
                        s.keepalive()
                    }
                },
            };
            s.frame += 1;
            match s.hooks.before_frame(s.response_no, s.frame) {
                StreamFault::Pass => {}
                StreamFault::Drop => continue,
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
                    return None;
                }
                StreamFault::Close => return None,
                StreamFault::Duplicate => s.repeat = Some(text.clone()),
            }
            return Some((Ok(Frame::data(Bytes::from(text))), s));
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream; charset=utf-8")
        .body(StreamBody::new(body).boxed())
        .expect("valid response")
}

impl<E: Env> Follow<E> {
    fn next_step(&mut self) -> Step {
        let st = self.store.lock().unwrap();
        let Some(run) = st.runs.get(&self.run_id) else {
            return Step::Close;
        };
        if let Some(e) = run.log.get(self.next) {
            let json = if run.background { &e.json } else { &e.fg_json };
            let mut text = String::new();
            if let Some(ev) = e.event {
                text.push_str(&format!("event: {ev}\n"));
            }
            text.push_str(&format!("data: {json}\n\n"));
            self.next += 1;
            self.idle_pings = 0;
            self.sent_log = true;
            if run.background {
                self.last_sent_seq = Some(e.seq_id);
            }
            return Step::Text(text);
        }
        // The local backend's replay ends at what is recorded (letta-protocol.md §7.4).
        if self.profile == Profile::Local && self.replay && !run.finished {
            return Step::Close;
        }
        if self.close_caught_up && !run.finished {
            return Step::Close;
        }
        if run.finished {
            if self.sent_log || !self.replay || self.profile == Profile::Local {
                if run.done_marker && !self.done_sent {
                    self.done_sent = true;
                    return Step::Text("data: [DONE]\n\n".into());
                }
                return Step::Close;
            }
            // A replay starting at or past the end of a finished run finds no terminal chunk to
            // end on and keeps the body open with keepalive pings (capture f3).
            return Step::Wait;
        }
        Step::Wait
    }

    fn keepalive(&mut self) -> String {
        let mut st = self.store.lock().unwrap();
        let id = st.new_id(self.profile, IdKind::Ping);
        let background = st.runs.get(&self.run_id).is_some_and(|r| r.background);
        drop(st);
        let date = ids::iso_date(self.env.epoch_ms() + self.env.now_ms());
        // Live background streams repeat the last seq_id sent; foreground streams and replays
        // with nothing to send show null (captures k2, f3).
        let seq = if background && self.sent_log {
            self.last_sent_seq
        } else {
            None
        };
        let ping = json!({
            "id": id, "date": date, "name": null, "message_type": "ping", "otid": null,
            "sender_id": null, "step_id": null, "is_err": null, "seq_id": seq,
            "run_id": self.run_id,
        });
        format!("data: {ping}\n\n")
    }
}

/// The response of a non-streaming send: waits for the run to finish and returns its
/// messages, stop reason and usage as one JSON object (`LettaResponse`).
pub(crate) fn collect_json(store: &SharedStore, run_id: &str) -> Response<Body> {
    let rx = store.lock().unwrap().runs[run_id].changed.subscribe();
    let store = store.clone();
    let run_id = run_id.to_string();
    let body = futures::stream::unfold(Some((rx, store, run_id)), |state| async move {
        let (mut rx, store, run_id) = state?;
        loop {
            let done = store.lock().unwrap().runs[&run_id].finished;
            if done {
                break;
            }
            if rx.changed().await.is_err() {
                break;
            }
        }
        let st = store.lock().unwrap();
        let run = &st.runs[&run_id];
        let mut messages = Vec::new();
        let mut stop = Value::Null;
        let mut usage = Value::Null;
        for e in &run.log {
            let v: Value = serde_json::from_str(&e.fg_json).unwrap_or(Value::Null);
            match e.message_type.as_str() {
                "ping" => {}
                "stop_reason" => stop = v,
                "usage_statistics" => usage = v,
                _ => messages.push(v),
            }
        }
        let text = json!({"messages": messages, "stop_reason": stop, "usage": usage}).to_string();
        Some((
            Ok::<_, std::io::Error>(Frame::data(Bytes::from(text))),
            None,
        ))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(StreamBody::new(body).boxed())
        .unwrap_or_else(|_| http::json_response(StatusCode::INTERNAL_SERVER_ERROR, &json!({})))
}
