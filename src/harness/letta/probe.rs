//! A scripted raw-HTTP client for exercising the server in simulation: each step is one
//! request (method, path, body) sent at a simulated time; the answer is summarised into the
//! trace. Scenarios use it (`[[requests]]`) for what the simple client model does not do:
//! a second client on the same conversation, a duplicate send, a replay, a cancel.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use serde_json::Value;

use crate::model::port::env::Env;
use crate::model::port::http;
use crate::model::port::observe::Observation;
use crate::wire::sse::SseDecoder;

/// One scripted request.
#[derive(Debug, Clone)]
pub struct ProbeStep {
    /// Simulated ms (from the start of the run) at which to send it; steps run in order, so a
    /// step never starts before the previous one's response has ended.
    pub at_ms: u64,
    pub method: String,
    pub path: String,
    pub body: Option<String>,
    /// Stop reading the response after this long without bytes (a replay that never ends).
    pub read_timeout_ms: u64,
    /// Hang up after this many SSE frames (a client that drops the stream).
    pub max_frames: Option<usize>,
}

/// `{run_id}` in a path or body is the last run id the probe saw in a stream.
fn substitute(text: &str, run_id: &Option<String>) -> String {
    match run_id {
        Some(r) => text.replace("{run_id}", r),
        None => text.to_string(),
    }
}

/// The tool call ids a request body answers: `messages[].approvals[].tool_call_id` of its
/// approval messages (letta-protocol.md §2.1); none for a body that is not such JSON.
fn answered_calls(body: Option<&str>) -> Vec<String> {
    let Some(v) = body.and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok()) else {
        return Vec::new();
    };
    v.get("messages")
        .and_then(|m| m.as_array())
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("approvals").and_then(|a| a.as_array()))
        .flatten()
        .filter_map(|a| a.get("tool_call_id").and_then(|id| id.as_str()))
        .map(str::to_string)
        .collect()
}

/// Runs the steps against `server_addr`, observing each request and its answer.
pub async fn run<E: Env>(env: E, server_addr: String, steps: Vec<ProbeStep>) {
    let mut last_run: Option<String> = None;
    for (i, mut step) in steps.into_iter().enumerate() {
        step.path = substitute(&step.path, &last_run);
        step.body = step.body.map(|b| substitute(&b, &last_run));
        let n = i as u32 + 1;
        let now = env.now_ms();
        if step.at_ms > now {
            env.clock()
                .sleep(Duration::from_millis(step.at_ms - now))
                .await;
        }
        env.observe(Observation::ProbeRequest {
            n,
            method: step.method.clone(),
            path: step.path.clone(),
            approvals: answered_calls(step.body.as_deref()),
        });
        let body = step.body.clone().unwrap_or_default();
        let req = Request::builder()
            .method(step.method.as_str())
            .uri(step.path.as_str())
            .header("host", server_addr.as_str())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("valid probe request");
        let read_timeout = Duration::from_millis(step.read_timeout_ms);
        let resp = match http::send(&env, &server_addr, req, read_timeout).await {
            Ok(r) => r,
            Err(e) => {
                env.observe(Observation::ProbeResponse {
                    n,
                    status: 0,
                    summary: format!("no response: {e}"),
                });
                continue;
            }
        };
        let status = resp.status().as_u16();
        if let Some(untyped) = http::untyped_answer(&resp, &step.method, &step.path) {
            env.observe(untyped);
        }
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut body = resp.into_body();
        let mut raw = Vec::new();
        let mut how = "eof";
        loop {
            match env.clock().timeout(read_timeout, body.frame()).await {
                Err(_) => {
                    how = "timeout";
                    break;
                }
                Ok(None) => break,
                Ok(Some(Err(_))) => {
                    how = "error";
                    break;
                }
                Ok(Some(Ok(f))) => {
                    if let Ok(d) = f.into_data() {
                        raw.extend_from_slice(&d);
                    }
                    if let Some(max) = step.max_frames
                        && is_sse
                        && raw.windows(2).filter(|w| w == b"\n\n").count() >= max
                    {
                        how = "hung up";
                        break;
                    }
                }
            }
        }
        drop(body);
        let summary = if is_sse {
            let mut dec = SseDecoder::new();
            let mut frames = dec.push(&raw);
            frames.extend(dec.finish());
            let mut parts: Vec<String> = Vec::new();
            for f in frames {
                let Some(ev) = f.as_event() else { continue };
                if ev.is_done() {
                    parts.push("[DONE]".into());
                    continue;
                }
                let v: Value = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
                if let Some(r) = v["run_id"].as_str() {
                    last_run = Some(r.to_string());
                }
                let mt = v["message_type"].as_str().unwrap_or("?");
                let mut p = match v["seq_id"].as_u64() {
                    Some(s) => format!("{mt}#{s}"),
                    None => mt.to_string(),
                };
                if let Some(sr) = v["stop_reason"].as_str() {
                    p = format!("{p}:{sr}");
                }
                if ev.event.as_deref() == Some("error") {
                    p = format!("event:error:{p}");
                }
                parts.push(p);
            }
            format!("{} ({how})", parts.join(","))
        } else {
            let text = String::from_utf8_lossy(&raw).into_owned();
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => match v.get("detail") {
                    Some(Value::String(d)) => d.clone(),
                    Some(other) => other.to_string(),
                    None => v.to_string(),
                },
                Err(_) => text,
            }
        };
        env.observe(Observation::ProbeResponse { n, status, summary });
    }
}
