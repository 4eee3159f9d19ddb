//! The fake LLM provider: an HTTP server that answers each model call with the next recorded
//! response (a provider-layer cassette), replaying its SSE frames at their recorded time offsets
//! and ending the body the way the recording ended (clean, reset, or a stall that never closes).
//!
//! Which call gets which response is the call's index: call 0 gets response 0, and so on. The
//! call counter lives outside the host task (an `Arc`), so a provider crash does not rewind it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use super::env::Env;
use super::http::{self, Body};
use super::observe::Observation;
use crate::cassette::{Cassette, EndKind};
use crate::wire::provider::ProviderFormat;
use crate::wire::sse::encode_frame;

pub mod validate;

/// The path each provider API is served on; the server calls the one its agent's provider
/// speaks, and the fake provider refuses a call on the wrong path.
pub fn api_path(format: ProviderFormat) -> &'static str {
    match format {
        ProviderFormat::Anthropic => "/v1/messages",
        ProviderFormat::OpenAiChat => "/v1/chat/completions",
    }
}

fn format_of_path(path: &str) -> Option<ProviderFormat> {
    [ProviderFormat::Anthropic, ProviderFormat::OpenAiChat]
        .into_iter()
        .find(|f| api_path(*f) == path)
}

/// One recorded provider response: a cassette and the name it is known by in the trace.
#[derive(Debug, Clone)]
pub struct ProviderResponse {
    pub name: String,
    pub cassette: Cassette,
}

/// The provider's configuration: its port and its responses, in call order.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub port: u16,
    pub responses: Vec<ProviderResponse>,
}

/// Runs the fake provider on `env` until the host stops.
pub async fn run<E: Env>(
    env: E,
    config: Arc<ProviderConfig>,
    calls: Arc<AtomicU32>,
) -> std::io::Result<()> {
    let port = config.port;
    let served = env.clone();
    let handler = move |req: Request<Incoming>| {
        let env = served.clone();
        let config = config.clone();
        let calls = calls.clone();
        async move { answer(env, &config, &calls, req).await }
    };
    http::serve(env, port, handler).await
}

async fn answer<E: Env>(
    env: E,
    config: &ProviderConfig,
    calls: &AtomicU32,
    req: Request<Incoming>,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    // The request body is read in full: a real provider does, and the server waits for it.
    let body = match http::read_body(req.into_body(), 64 << 20).await {
        Ok(b) => b,
        Err(e) => {
            return http::json_response(
                StatusCode::BAD_REQUEST,
                &json!({"type": "error", "error": {"type": "invalid_request_error", "message": e}}),
            );
        }
    };
    // Validate the conversation as the real API does; a refused request consumes no response.
    if let Some(format) = format_of_path(&path)
        && let Err(message) = validate::validate(format, &body)
    {
        let call = calls.load(Ordering::SeqCst);
        env.observe(Observation::ProviderRejected {
            call,
            status: 400,
            message: message.clone(),
        });
        return http::json_response(
            StatusCode::BAD_REQUEST,
            &validate::error_body(format, &message),
        );
    }
    let call = calls.fetch_add(1, Ordering::SeqCst);
    let Some(resp) = config.responses.get(call as usize) else {
        let message = format!(
            "loopsim provider: no recorded response for model call #{call} (the scenario lists {}); \
             add a cassette to [provider] responses",
            config.responses.len()
        );
        env.observe(Observation::ProviderServe {
            call,
            cassette: "<none>".into(),
            status: 500,
            frames: 0,
        });
        return http::json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"type": "error", "error": {"type": "api_error", "message": message}}),
        );
    };
    let header = resp.cassette.header();
    if path != api_path(header.format) {
        return http::json_response(
            StatusCode::NOT_FOUND,
            &json!({"type": "error", "error": {"type": "not_found_error",
                "message": format!("{} answers {}, not {path}", resp.name, api_path(header.format))}}),
        );
    }
    env.observe(Observation::ProviderServe {
        call,
        cassette: resp.name.clone(),
        status: header.status,
        frames: resp.cassette.frames().len(),
    });
    let status = StatusCode::from_u16(header.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if !status.is_success() {
        // An error response: the recorded frames' data is the JSON body.
        let body: String = resp
            .cassette
            .frames()
            .iter()
            .filter_map(|f| f.frame.as_event().map(|e| e.data.clone()))
            .collect();
        return Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(http::full(body))
            .expect("valid response");
    }
    let start = tokio::time::Instant::now();
    let frames = resp.cassette.frames().to_vec();
    let end = resp.cassette.end();
    let body = futures::stream::unfold(
        (0usize, frames, env, call),
        move |(i, frames, env, call)| async move {
            if let Some(f) = frames.get(i) {
                tokio::time::sleep_until(start + Duration::from_millis(f.t_ms)).await;
                let bytes = Bytes::from(encode_frame(&f.frame));
                return Some((Ok(Frame::data(bytes)), (i + 1, frames, env, call)));
            }
            if i > frames.len() {
                return None;
            }
            // Before ending, wait for the recorded end time (a stall or reset can come late).
            tokio::time::sleep_until(start + Duration::from_millis(end.t_ms)).await;
            match end.kind {
                EndKind::Clean => {
                    env.observe(Observation::ProviderServeEnd {
                        call,
                        how: "clean".into(),
                    });
                    None
                }
                EndKind::Reset => {
                    env.observe(Observation::ProviderServeEnd {
                        call,
                        how: "reset".into(),
                    });
                    let err = std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "cassette ends with a reset",
                    );
                    Some((Err(err), (i + 1, frames, env, call)))
                }
                EndKind::Stall => {
                    env.observe(Observation::ProviderServeEnd {
                        call,
                        how: "stall".into(),
                    });
                    std::future::pending::<()>().await;
                    None
                }
            }
        },
    );
    Response::builder()
        .status(status)
        .header("content-type", header.content_type.as_str())
        .header("cache-control", "no-cache")
        .body(StreamBody::new(body).boxed())
        .expect("valid response")
}
