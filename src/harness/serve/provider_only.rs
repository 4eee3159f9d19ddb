//! `sim serve --provider-only`: the fake provider alone on real TCP, for a client that talks to
//! an LLM provider itself — the Letta Code CLI's local backend (letta-protocol.md §7,
//! letta-tests-and-real-client.md B.7), or `sim record --layer provider` in front of it.
//!
//! Model calls (a `POST` to a provider API path: `/v1/chat/completions`, `/v1/messages`,
//! `/v1/responses`, `…:streamGenerateContent`) are answered by the same code as in `sim run`
//! ([`provider::answer_body`]): the scenario's cassettes, then its `[[agent_loop.script]]` steps,
//! in call order, with its `provider_stream` / `provider_error` faults. The other requests the
//! CLI's local backend makes are answered without consuming a response: the model catalogs
//! (`GET /api/v0/models`, LM Studio's native list, which the backend asks for twice before a
//! turn; `GET /v1/models`, which an `openai-compatible` provider asks for, reference B.7.3), and
//! a JSON 404 for anything else. Every request is logged as one JSON line (docs/serve.md).
//!
//! The accept loop is the models' own ([`http::serve`]) on a [`ServeEnv`]-backed host.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::{ServeEnv, Wrap};
use crate::cassette::scrub::Scrubber;
use crate::harness::env::AddressBook;
use crate::harness::faults::{Fault, PlanHooks};
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::serve_guard::{Gate, Guarded, LIMITS};
use crate::harness::trace::Trace;
use crate::harness::world::{self, PROVIDER_PORT};
use crate::model::port::clock::Clock;
use crate::model::port::env::Env;
use crate::model::port::http::{self, Body};
use crate::model::port::observe::Observation;
use crate::model::provider::{self, ProviderConfig, ProviderState, StreamConfig};
use crate::wire::provider::{ProviderFormat, StreamFormat};

/// The context window the LM Studio catalog reports for the scenario's model when its
/// `[agent]` sets no `context_window_limit`. Large, so the CLI's local backend never compacts
/// a short scenario's turn: a compaction's summary call would consume one of the scenario's
/// responses (its threshold: letta-protocol.md §8.1). The backend copies the catalog's
/// window into the agent's `model_settings.context_window_limit`, so a scenario's own limit
/// is the window the CLI compacts against.
pub const CATALOG_CONTEXT_LENGTH: u64 = 200_000;

/// The largest request body the provider reads, as in the simulation (64 MiB).
const MAX_BODY: usize = 64 << 20;

/// What `sim serve --provider-only` is asked to do.
#[derive(Debug, Clone)]
pub struct ProviderOnlyOptions {
    pub scenario: PathBuf,
    /// Address the provider listens on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// JSON Lines request log (one object per request, model calls and the rest).
    pub request_log: Option<PathBuf>,
    /// Also write the trace here, one event per line, as it happens.
    pub trace: Option<PathBuf>,
}

/// A host on real TCP named `provider` whose provider port binds the requested address.
#[derive(Clone)]
struct ProviderEnv {
    inner: ServeEnv,
}

impl Env for ProviderEnv {
    type Stream = Guarded;
    type Listener = Wrap;

    async fn bind(&self, port: u16) -> std::io::Result<Wrap> {
        let addr = if port == PROVIDER_PORT {
            self.inner.listen
        } else {
            SocketAddr::from(([127, 0, 0, 1], 0))
        };
        let l = tokio::net::TcpListener::bind(addr).await?;
        if port == PROVIDER_PORT {
            *self.inner.bound.lock().unwrap() = Some(l.local_addr()?);
        }
        // The port clients reach admits connections through the same gate as `sim serve`'s.
        let served = port == PROVIDER_PORT;
        Ok(Wrap(l, served.then(|| Gate::new(self.inner.limits))))
    }

    async fn connect(&self, addr: &str) -> std::io::Result<Self::Stream> {
        self.inner.connect(addr).await
    }

    fn clock(&self) -> Clock {
        self.inner.clock()
    }

    fn epoch_ms(&self) -> u64 {
        self.inner.epoch_ms()
    }

    fn observe(&self, event: Observation) {
        self.inner.observe(event)
    }
}

/// One request as an in-process caller of [`serve_scenario`] sees it, handed over when its
/// response head is ready. `served` grows as the response body is written to the socket, so
/// once the client is done it holds exactly the bytes the client was sent (a cut or reset
/// stream's prefix, a stalled stream's bytes so far).
#[derive(Debug, Clone)]
pub struct Exchange {
    pub method: String,
    /// The path and query.
    pub path: String,
    /// The request body as received (not scrubbed).
    pub body: Vec<u8>,
    pub status: u16,
    /// [`ROUTE_MODEL_CALL`], [`ROUTE_CATALOG`] or [`ROUTE_NOT_FOUND`].
    pub route: &'static str,
    /// The model call's number (0-based, as `provider_error` and `provider_stream` count).
    pub call: Option<u32>,
    pub cassette: Option<String>,
    pub served: Arc<Mutex<Vec<u8>>>,
}

/// Where [`serve_scenario`] hands each [`Exchange`].
pub type ExchangeSink = Arc<dyn Fn(Exchange) + Send + Sync>;

/// What the handler shares across requests.
struct Ctx {
    config: StreamConfig,
    state: Mutex<ProviderState>,
    api: ProviderFormat,
    /// The model id the catalogs list: the scenario's model handle after its `provider/`.
    model: String,
    /// The LM Studio catalog's `max_context_length`.
    context_length: u64,
    log: Option<Mutex<std::fs::File>>,
    logged: Mutex<u64>,
    scrubber: Scrubber,
    sink: Option<ExchangeSink>,
}

/// Which kind of request a path is, for the log.
pub const ROUTE_MODEL_CALL: &str = "model_call";
pub const ROUTE_CATALOG: &str = "catalog";
pub const ROUTE_NOT_FOUND: &str = "not_found";

/// The paths answered with a catalog: LM Studio's native list, then the API's own list.
pub const CATALOG_PATHS: [&str; 2] = ["/api/v0/models", "/v1/models"];

fn input_error_at(file: &str, message: String) -> InputError {
    InputError {
        file: file.to_string(),
        line: None,
        column: None,
        message,
    }
}

fn model_id(handle: &str) -> String {
    handle
        .split_once('/')
        .map_or(handle, |(_, id)| id)
        .to_string()
}

/// LM Studio's native model list (`GET /api/v0/models`): the CLI's local backend reads the
/// model's `max_context_length` from it (reference B.7.3; a 404 is tolerated).
fn lmstudio_catalog(model: &str, context_length: u64) -> Value {
    json!({"object": "list", "data": [{
        "id": model, "object": "model", "type": "llm", "publisher": "loopsim",
        "arch": "loopsim", "compatibility_type": "gguf", "quantization": "none",
        "state": "loaded", "max_context_length": context_length,
    }]})
}

/// `GET /v1/models` in the scenario's API's own shape (OpenAI's list, Anthropic's page, or
/// Gemini's `models` list).
fn models_list(api: ProviderFormat, model: &str) -> Value {
    match api {
        ProviderFormat::OpenAiChat | ProviderFormat::OpenAiResponses => {
            json!({"object": "list", "data": [
                {"id": model, "object": "model", "created": 0, "owned_by": "loopsim"},
            ]})
        }
        ProviderFormat::Anthropic => json!({
            "data": [{"type": "model", "id": model, "display_name": model,
                      "created_at": "2026-01-01T00:00:00Z"}],
            "has_more": false, "first_id": model, "last_id": model,
        }),
        ProviderFormat::Gemini => json!({"models": [{
            "name": format!("models/{model}"), "displayName": model,
            "supportedGenerationMethods": ["generateContent", "streamGenerateContent"],
        }]}),
    }
}

impl Ctx {
    fn write_log(&self, mut line: Value) {
        let Some(file) = &self.log else { return };
        let n = {
            let mut n = self.logged.lock().unwrap();
            *n += 1;
            *n
        };
        line["n"] = json!(n);
        let mut f = file.lock().unwrap();
        let _ = writeln!(f, "{line}");
        let _ = f.flush();
    }
}

async fn handle(env: ProviderEnv, ctx: Arc<Ctx>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let path_and_query = req
        .uri()
        .path_and_query()
        .map_or(path.clone(), |p| p.as_str().to_string());
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter(|(k, _)| *k != "host" && *k != "content-length" && *k != "connection")
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let model_call = method == Method::POST && StreamFormat::of_path(&path).is_some();
    let catalog = method == Method::GET && CATALOG_PATHS.contains(&path.as_str());
    let route = if model_call {
        ROUTE_MODEL_CALL
    } else if catalog {
        ROUTE_CATALOG
    } else {
        ROUTE_NOT_FOUND
    };
    let body = match http::read_body(req.into_body(), MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            let resp = http::json_response(
                StatusCode::BAD_REQUEST,
                &json!({"error": {"type": "invalid_request_error",
                    "message": format!("sim serve --provider-only: cannot read the request body: {e}")}}),
            );
            ctx.write_log(json!({
                "method": method.as_str(), "path": ctx.scrubber.path(&path_and_query),
                "headers": ctx.scrubber.headers(&headers), "body": null,
                "status": 400, "route": route, "call": null, "cassette": null,
            }));
            return resp;
        }
    };
    let mut served = provider::Served::default();
    let resp = if model_call {
        let (resp, s) = provider::answer_body(env, &ctx.config, &ctx.state, &path, &body).await;
        served = s;
        resp
    } else if catalog && path == CATALOG_PATHS[0] {
        http::json_response(
            StatusCode::OK,
            &lmstudio_catalog(&ctx.model, ctx.context_length),
        )
    } else if catalog {
        http::json_response(StatusCode::OK, &models_list(ctx.api, &ctx.model))
    } else {
        let message = format!(
            "sim serve --provider-only: no route for {method} {path} (it answers model calls on the provider API paths and GET {})",
            CATALOG_PATHS.join(", GET ")
        );
        http::json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": {"type": "not_found_error", "message": message}}),
        )
    };
    let logged_body: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice::<Value>(&body) {
            Ok(mut v) => {
                ctx.scrubber.json(&mut v);
                v
            }
            Err(_) => json!({"_raw": String::from_utf8_lossy(&body)}),
        }
    };
    ctx.write_log(json!({
        "method": method.as_str(),
        "path": ctx.scrubber.path(&path_and_query),
        "headers": ctx.scrubber.headers(&headers),
        "body": logged_body,
        "status": resp.status().as_u16(),
        "route": route,
        "call": served.call,
        "cassette": served.cassette,
    }));
    match &ctx.sink {
        Some(sink) => {
            let (resp, bytes) = tee(resp);
            sink(Exchange {
                method: method.as_str().to_string(),
                path: path_and_query,
                body: body.to_vec(),
                status: resp.status().as_u16(),
                route,
                call: served.call,
                cassette: served.cassette,
                served: bytes,
            });
            resp
        }
        None => resp,
    }
}

/// `resp` with a body that copies every data frame into the returned buffer as it is sent.
fn tee(resp: Response<Body>) -> (Response<Body>, Arc<Mutex<Vec<u8>>>) {
    use http_body_util::BodyExt as _;
    let bytes: Arc<Mutex<Vec<u8>>> = Arc::default();
    let copy = bytes.clone();
    let (parts, body) = resp.into_parts();
    let body = body
        .map_frame(move |frame| {
            if let Some(data) = frame.data_ref() {
                copy.lock().unwrap().extend_from_slice(data);
            }
            frame
        })
        .boxed();
    (Response::from_parts(parts, body), bytes)
}

/// Runs the fake provider alone until the process is stopped. `ready` gets one JSON object once
/// it listens: its address, the API, the model the catalogs list, the responses and faults.
pub fn serve_provider(
    opts: ProviderOnlyOptions,
    ready: impl FnOnce(Value),
) -> Result<(), InputError> {
    let scenario = Scenario::load(&opts.scenario)?;
    serve_scenario(&scenario, &opts, None, std::future::pending(), ready)
}

/// [`serve_provider`] for a scenario already loaded (its `faults` are what is applied; its path
/// names it in errors), handing every request to `exchanges` too, until `stop` completes (then
/// `Ok`) or the provider fails. `opts.scenario` is not read.
pub fn serve_scenario(
    scenario: &Scenario,
    opts: &ProviderOnlyOptions,
    exchanges: Option<ExchangeSink>,
    stop: impl std::future::Future<Output = ()>,
    ready: impl FnOnce(Value),
) -> Result<(), InputError> {
    let file = scenario.path.display().to_string();
    // Only the provider's own faults have something to act on here.
    if let Some(f) = scenario.faults.iter().find(|f| {
        !matches!(
            f.get_ref(),
            Fault::ProviderStream { .. } | Fault::ProviderError { .. }
        )
    }) {
        return Err(scenario.error_at(
            f.span(),
            format!(
                "{} is not a provider fault; sim serve --provider-only serves the fake provider alone and applies only provider_stream and provider_error",
                f.get_ref()
            ),
        ));
    }
    let api = scenario.provider_api()?;
    let (responses, _latencies) = crate::harness::kimi::script::loop_responses(scenario)?;
    let scripted = scenario
        .agent_loop
        .as_ref()
        .is_some_and(|s| !s.script.is_empty());
    let handle_name = match &scenario.agent_loop {
        Some(section) => section.model.clone(),
        None => scenario.agent.model.clone(),
    };
    let context_length = match &scenario.agent_loop {
        Some(_) => CATALOG_CONTEXT_LENGTH,
        None => scenario
            .agent
            .context_window_limit
            .unwrap_or(CATALOG_CONTEXT_LENGTH),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| input_error_at(&file, format!("cannot start a tokio runtime: {e}")))?;
    runtime.block_on(async move {
        let trace = Trace::new();
        // Real time on purpose: this is real TCP for real clients, never a simulation.
        let clock = Clock::tokio();
        let start = clock.clone();
        let now: crate::harness::faults::NowFn = Arc::new(move || start.now_ms());
        let create = |p: &PathBuf| {
            std::fs::File::create(p)
                .map_err(|e| input_error_at(&file, format!("cannot write {}: {e}", p.display())))
        };
        let sink = Arc::new(Mutex::new(match &opts.trace {
            Some(p) => Some(create(p)?),
            None => None,
        }));
        let log = match &opts.request_log {
            Some(p) => Some(Mutex::new(create(p)?)),
            None => None,
        };
        let bound = Arc::new(Mutex::new(None));
        let env = ProviderEnv {
            inner: ServeEnv {
                host: "provider".into(),
                clock,
                book: AddressBook::new(),
                listen: opts.listen,
                bound: bound.clone(),
                sink,
                limits: LIMITS,
                // No scenario: dates count from the default start.
                start_unix_ms: crate::harness::world_start::EPOCH_UNIX_MS,
            },
        };
        let n_responses = responses.len();
        let config = ProviderConfig {
            port: PROVIDER_PORT,
            responses,
            hooks: PlanHooks::new(&world::plan(scenario), &trace, now),
        };
        let ctx = Arc::new(Ctx {
            config: StreamConfig::of_cassettes(&config),
            state: Mutex::new(ProviderState::default()),
            api,
            model: model_id(&handle_name),
            context_length,
            log,
            logged: Mutex::new(0),
            scrubber: Scrubber::default(),
            sink: exchanges,
        });
        let served = env.clone();
        let handler = move |req: Request<Incoming>| {
            let env = served.clone();
            let ctx = ctx.clone();
            async move { handle(env, ctx, req).await }
        };
        let mut task = tokio::spawn(http::serve(env, PROVIDER_PORT, handler));
        let addr = loop {
            if let Some(a) = *bound.lock().unwrap() {
                break Some(a);
            }
            if task.is_finished() {
                break None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        };
        let Some(addr) = addr else {
            let err = match task.await {
                Ok(Err(e)) => e.to_string(),
                _ => "the provider stopped".into(),
            };
            return Err(input_error_at(
                &file,
                format!("cannot listen on {}: {err}", opts.listen),
            ));
        };
        ready(json!({
            "listening": addr.to_string(),
            "base_url": format!("http://{addr}"),
            "provider_only": true,
            "api": api.as_str(),
            "model": model_id(&handle_name),
            "model_calls": if scripted { "cassettes+script" } else { "cassettes" },
            "responses": n_responses,
            "catalogs": CATALOG_PATHS,
            "faults": scenario.faults.iter().map(|f| f.get_ref().to_string()).collect::<Vec<_>>(),
        }));
        let outcome = tokio::select! {
            biased;
            r = &mut task => Some(r),
            () = stop => None,
        };
        match outcome {
            None => {
                task.abort();
                Ok(())
            }
            Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(input_error_at(&file, format!("provider stopped: {e}"))),
            Some(Err(e)) => Err(input_error_at(&file, format!("provider task failed: {e}"))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_lists_the_handle_without_its_provider() {
        assert_eq!(model_id("lmstudio/gpt-4o-mini"), "gpt-4o-mini");
        assert_eq!(model_id("gpt-4o-mini"), "gpt-4o-mini");
        let v = lmstudio_catalog("m", CATALOG_CONTEXT_LENGTH);
        assert_eq!(v["data"][0]["max_context_length"], CATALOG_CONTEXT_LENGTH);
        assert_eq!(
            models_list(ProviderFormat::OpenAiChat, "m")["data"][0]["id"],
            "m"
        );
    }
}
