//! The fake LLM provider: an HTTP server that answers each model call with the next recorded
//! response (a provider-layer cassette), replaying its SSE frames at their recorded time offsets
//! and ending the body the way the recording ended (clean, reset, or a stall that never closes).
//! Scenarios give it version 1 stream cassettes ([`run`]); [`run_streams`] serves recorded
//! responses of any stream format, OpenAI Responses and Gemini included. Every request is
//! validated by the rules of the API its path names ([`validate::validate_stream`]).
//!
//! Which call gets which response is the call's index: call 0 gets response 0, and so on. The
//! call counter lives outside the host task (an `Arc`), so a provider crash does not rewind it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use crate::cassette::{
    Cassette, CassetteError, CassetteErrorKind, EndKind, Recording, ResponseBody,
};
use crate::model::port::clock::Clock;
use crate::model::port::env::Env;
use crate::model::port::http::{self, Body};
use crate::model::port::inject::{ProviderHooks, StreamFault};
use crate::model::port::observe::Observation;
use crate::wire::provider::{ProviderFormat, StreamFormat};
use crate::wire::sse::encode_frame;

/// The cassette name a model call answered after the scenario's cassettes ran out is traced
/// with (its answer is a 500).
pub const NO_CASSETTE: &str = "<none>";
pub mod scripted;
pub mod validate;

/// The path each provider API is served on; the server calls the one its agent's provider
/// speaks, and the fake provider refuses a call on the wrong path. Gemini's names a model:
/// [`request_path`] puts the caller's in.
pub fn api_path(format: ProviderFormat) -> &'static str {
    StreamFormat::from(format).api_path()
}

/// The path and query of a streaming model call for `model`: [`api_path`], except that a
/// Gemini call names the model in the path, `/v1beta/models/{model}:streamGenerateContent`
/// with `alt=sse` (captures/gemini: every request's uri). A model handle's provider prefix
/// (`google_ai/gemini-2.5-pro`) is not part of the API's model name.
pub fn request_path(format: ProviderFormat, model: &str) -> String {
    match format {
        ProviderFormat::Gemini => {
            let name = model.rsplit('/').next().unwrap_or("");
            let name = if name.is_empty() { "gemini" } else { name };
            format!("/v1beta/models/{name}:streamGenerateContent?alt=sse")
        }
        other => api_path(other).to_string(),
    }
}

/// One recorded provider response: a cassette and the name it is known by in the trace.
#[derive(Debug, Clone)]
pub struct ProviderResponse {
    pub name: String,
    pub cassette: Cassette,
}

/// The provider's configuration: its port, its responses in call order, its fault hooks.
#[derive(Clone)]
pub struct ProviderConfig {
    pub port: u16,
    pub responses: Vec<ProviderResponse>,
    pub hooks: Arc<dyn ProviderHooks>,
}

/// The provider's durable state (it survives a provider crash): calls answered so far and the
/// next cassette to replay. An overridden call (an injected error) uses no cassette.
#[derive(Debug, Default)]
pub struct ProviderState {
    pub calls: u32,
    pub next_cassette: usize,
}

/// One recorded response in any provider stream format (the formats only recorded, OpenAI
/// Responses and Gemini, included): what the fake provider replays.
#[derive(Debug, Clone)]
pub struct StreamResponse {
    pub name: String,
    pub format: StreamFormat,
    pub status: u16,
    pub content_type: String,
    pub frames: Vec<crate::cassette::TimedFrame>,
    pub end: crate::cassette::StreamEnd,
}

impl StreamResponse {
    /// Exchange `n` (1-based) of a recording, with its stream format
    /// ([`Recording::stream_format`]); a whole body is replayed as one data frame, as a version
    /// 1 error cassette is.
    pub fn from_recording(
        name: &str,
        recording: &Recording,
        n: usize,
    ) -> Result<StreamResponse, CassetteError> {
        let line = n + 1;
        let err = |m: String| CassetteError {
            origin: recording.origin().to_string(),
            line: Some(line),
            kind: CassetteErrorKind::Provider,
            message: m,
        };
        let x = n
            .checked_sub(1)
            .and_then(|i| recording.exchanges().get(i))
            .ok_or_else(|| err(format!("no exchange {n}")))?;
        let a = x
            .answer()
            .ok_or_else(|| err(format!("exchange {n} has no response")))?;
        let format = recording
            .stream_format(n)
            .ok_or_else(|| err(format!("exchange {n}: cannot tell its provider format")))?;
        let frames = match &a.body {
            ResponseBody::Sse(f) => f.clone(),
            ResponseBody::Whole(b) if b.is_empty() => Vec::new(),
            ResponseBody::Whole(b) => vec![crate::cassette::TimedFrame {
                t_ms: 0,
                frame: crate::wire::sse::SseFrame::Event(crate::wire::sse::SseEvent::data(
                    String::from_utf8_lossy(&b.to_bytes()).into_owned(),
                )),
            }],
        };
        Ok(StreamResponse {
            name: name.to_string(),
            format,
            status: a.status,
            content_type: x
                .response_header("content-type")
                .unwrap_or("text/event-stream")
                .to_string(),
            frames,
            end: crate::cassette::StreamEnd {
                t_ms: a.end.t_ms,
                kind: a.end.kind,
            },
        })
    }

    fn of_cassette(r: &ProviderResponse) -> StreamResponse {
        let h = r.cassette.header();
        StreamResponse {
            name: r.name.clone(),
            format: h.format.into(),
            status: h.status,
            content_type: h.content_type.clone(),
            frames: r.cassette.frames().to_vec(),
            end: r.cassette.end(),
        }
    }

    /// Whether a request path is this response's API: the exact path for the formats a model
    /// speaks and for OpenAI Responses, any `…:streamGenerateContent` model for Gemini.
    fn answers(&self, path: &str) -> bool {
        match self.format {
            StreamFormat::Gemini => StreamFormat::of_path(path) == Some(StreamFormat::Gemini),
            f => path == f.api_path(),
        }
    }
}

/// The fake provider's configuration when it serves [`StreamResponse`]s directly.
#[derive(Clone)]
pub struct StreamConfig {
    pub port: u16,
    pub responses: Vec<StreamResponse>,
    pub hooks: Arc<dyn ProviderHooks>,
}

impl StreamConfig {
    /// The same responses, port and hooks as a version 1 cassette configuration.
    pub fn of_cassettes(config: &ProviderConfig) -> StreamConfig {
        StreamConfig {
            port: config.port,
            responses: config
                .responses
                .iter()
                .map(StreamResponse::of_cassette)
                .collect(),
            hooks: config.hooks.clone(),
        }
    }
}

/// Runs the fake provider on `env` until the host stops.
pub async fn run<E: Env>(
    env: E,
    config: Arc<ProviderConfig>,
    state: Arc<Mutex<ProviderState>>,
) -> std::io::Result<()> {
    run_streams(env, Arc::new(StreamConfig::of_cassettes(&config)), state).await
}

/// Runs the fake provider over recorded responses of any stream format, until the host stops.
pub async fn run_streams<E: Env>(
    env: E,
    config: Arc<StreamConfig>,
    state: Arc<Mutex<ProviderState>>,
) -> std::io::Result<()> {
    let port = config.port;
    let served = env.clone();
    let handler = move |req: Request<Incoming>| {
        let env = served.clone();
        let config = config.clone();
        let state = state.clone();
        async move { answer(env, &config, &state, req).await }
    };
    http::serve(env, port, handler).await
}

async fn answer<E: Env>(
    env: E,
    config: &StreamConfig,
    state: &Mutex<ProviderState>,
    req: Request<Incoming>,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    // The request body is read in full: a real provider does, and the server waits for it.
    match http::read_body(req.into_body(), 64 << 20).await {
        Ok(body) => answer_body(env, config, state, &path, &body).await.0,
        Err(e) => http::json_response(
            StatusCode::BAD_REQUEST,
            &json!({"type": "error", "error": {"type": "invalid_request_error", "message": e}}),
        ),
    }
}

/// What [`answer_body`] did with a model call: its 0-based call number (none for a request
/// refused before it counted: invalid, or on another API's path) and the cassette that
/// answered it (`<fault>` for an injected error, `<none>` when none was left).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    pub call: Option<u32>,
    pub cassette: Option<String>,
}

/// Answers one model call whose body has been read: validates it, applies the fault hooks,
/// and replays the next recorded response. `path` is the request path without its query.
pub async fn answer_body<E: Env>(
    env: E,
    config: &StreamConfig,
    state: &Mutex<ProviderState>,
    path: &str,
    body: &[u8],
) -> (Response<Body>, Served) {
    let mut served = Served::default();
    // Validate the conversation as the real API does; a refused request consumes no response.
    if let Some(format) = StreamFormat::of_path(path)
        && let Err(message) = validate::validate_stream(format, body)
    {
        let call = state.lock().unwrap().calls;
        env.observe(Observation::ProviderRejected {
            call,
            status: 400,
            message: message.clone(),
        });
        let resp = http::json_response(
            StatusCode::BAD_REQUEST,
            &validate::stream_error_body(format, &message),
        );
        return (resp, served);
    }
    // A call on another API's path is refused before it counts, so it consumes nothing.
    let next = state.lock().unwrap().next_cassette;
    if let Some(resp) = config.responses.get(next)
        && !resp.answers(path)
    {
        let resp = http::json_response(
            StatusCode::NOT_FOUND,
            &json!({"type": "error", "error": {"type": "not_found_error",
                "message": format!("{} answers {}, not {path}", resp.name, resp.format.api_path())}}),
        );
        return (resp, served);
    }
    let call = {
        let mut st = state.lock().unwrap();
        st.calls += 1;
        st.calls - 1
    };
    served.call = Some(call);
    if let Some(ov) = config.hooks.override_call(call) {
        env.observe(Observation::ProviderServe {
            call,
            cassette: "<fault>".into(),
            status: ov.status,
            frames: 0,
        });
        served.cassette = Some("<fault>".into());
        let mut b = Response::builder()
            .status(StatusCode::from_u16(ov.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .header("content-type", "application/json");
        for (k, v) in &ov.headers {
            b = b.header(k.as_str(), v.as_str());
        }
        return (b.body(http::full(ov.body)).expect("valid response"), served);
    }
    let index = {
        let mut st = state.lock().unwrap();
        st.next_cassette += 1;
        st.next_cassette - 1
    };
    let Some(resp) = config.responses.get(index) else {
        let message = format!(
            "loopsim provider: no recorded response left for model call #{call} (cassette {index}; the scenario lists {}); \
             add a cassette to [provider] responses",
            config.responses.len()
        );
        env.observe(Observation::ProviderServe {
            call,
            cassette: NO_CASSETTE.into(),
            status: 500,
            frames: 0,
        });
        served.cassette = Some(NO_CASSETTE.into());
        let resp = http::json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"type": "error", "error": {"type": "api_error", "message": message}}),
        );
        return (resp, served);
    };
    served.cassette = Some(resp.name.clone());
    (replay(env, config, call, resp), served)
}

/// The response that replays `resp` for model call `call`: an error status with its recorded
/// body, or the recorded stream frame by frame.
fn replay<E: Env>(
    env: E,
    config: &StreamConfig,
    call: u32,
    resp: &StreamResponse,
) -> Response<Body> {
    env.observe(Observation::ProviderServe {
        call,
        cassette: resp.name.clone(),
        status: resp.status,
        frames: resp.frames.len(),
    });
    let status = StatusCode::from_u16(resp.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if !status.is_success() {
        // An error response: the recorded frames' data is the JSON body.
        let body: String = resp
            .frames
            .iter()
            .filter_map(|f| f.frame.as_event().map(|e| e.data.clone()))
            .collect();
        return Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(http::full(body))
            .expect("valid response");
    }
    let clock = env.clock();
    let state = Replay {
        start: clock.now(),
        clock,
        frames: resp.frames.clone(),
        end: resp.end,
        next: 0,
        env,
        call,
        hooks: config.hooks.clone(),
        pending: None,
        done: false,
    };
    let body = futures::stream::unfold(state, |mut r| async move {
        let item = r.next_item().await?;
        Some((item, r))
    });
    Response::builder()
        .status(status)
        .header("content-type", resp.content_type.as_str())
        .header("cache-control", "no-cache")
        .body(StreamBody::new(body).boxed())
        .expect("valid response")
}

/// The replay of one cassette as a response body: frames at their offsets, fault hooks
/// consulted before each frame, then the recorded ending.
struct Replay<E: Env> {
    start: Duration,
    clock: Clock,
    frames: Vec<crate::cassette::TimedFrame>,
    end: crate::cassette::StreamEnd,
    next: usize,
    env: E,
    call: u32,
    hooks: Arc<dyn ProviderHooks>,
    /// Bytes (or an error) to yield before anything else: a duplicate, or the reset after a cut.
    pending: Option<Result<Bytes, std::io::Error>>,
    done: bool,
}

impl<E: Env> Replay<E> {
    fn ended(&self, how: &str) {
        self.env.observe(Observation::ProviderServeEnd {
            call: self.call,
            how: how.to_string(),
        });
    }

    async fn next_item(&mut self) -> Option<Result<Frame<Bytes>, std::io::Error>> {
        if let Some(p) = self.pending.take() {
            return Some(p.map(Frame::data));
        }
        if self.done {
            return None;
        }
        if let Some(f) = self.frames.get(self.next) {
            self.clock
                .sleep_until(self.start + Duration::from_millis(f.t_ms))
                .await;
            let bytes = Bytes::from(encode_frame(&f.frame));
            self.next += 1;
            let fault = self.hooks.before_frame(self.call, self.next as u64);
            return match fault {
                StreamFault::Pass => Some(Ok(Frame::data(bytes))),
                StreamFault::Duplicate => {
                    self.pending = Some(Ok(bytes.clone()));
                    Some(Ok(Frame::data(bytes)))
                }
                StreamFault::Drop => Box::pin(self.next_item()).await,
                StreamFault::Reset => {
                    self.done = true;
                    self.ended("fault: reset");
                    Some(Err(reset("fault: provider connection reset")))
                }
                StreamFault::CutInside => {
                    self.done = true;
                    self.ended("fault: cut inside a frame");
                    self.pending = Some(Err(reset("fault: provider connection reset")));
                    Some(Ok(Frame::data(bytes.slice(..bytes.len() / 2))))
                }
                StreamFault::Close => {
                    self.done = true;
                    self.ended("fault: close");
                    None
                }
                StreamFault::Stall => {
                    self.ended("fault: stall");
                    std::future::pending::<()>().await;
                    None
                }
            };
        }
        // Before ending, wait for the recorded end time (a stall or reset can come late).
        self.done = true;
        self.clock
            .sleep_until(self.start + Duration::from_millis(self.end.t_ms))
            .await;
        match self.end.kind {
            EndKind::Clean => {
                self.ended("clean");
                None
            }
            EndKind::Reset => {
                self.ended("reset");
                Some(Err(reset("cassette ends with a reset")))
            }
            EndKind::Stall => {
                self.ended("stall");
                std::future::pending::<()>().await;
                None
            }
        }
    }
}

fn reset(why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionReset, why.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemini_call_names_its_model_in_the_path_and_every_path_is_its_format() {
        assert_eq!(
            request_path(ProviderFormat::Gemini, "google_ai/gemini-2.5-pro"),
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            request_path(ProviderFormat::Gemini, ""),
            "/v1beta/models/gemini:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            request_path(ProviderFormat::OpenAiResponses, "openai/gpt-4o"),
            "/v1/responses"
        );
        for f in ProviderFormat::ALL {
            let path = request_path(f, "m");
            assert_eq!(StreamFormat::of_path(&path), Some(f.into()), "{path}");
        }
    }
}
