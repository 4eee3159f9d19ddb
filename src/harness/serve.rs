//! `sim serve`: the server model and its fake provider on real TCP, for real clients (the Letta
//! Code CLI, the SDKs), with the scenario's server-side faults applied and every request logged
//! as a JSON line. docs/serve.md describes what it can be told to do.
//!
//! The same code as the simulation runs here (DESIGN.md §3 "serve"): `world::server_parts` builds
//! the server config and store from the scenario and seed, the provider replays the scenario's
//! cassettes, and the fault plan is the scenario's `[[faults]]`, numbered by sends and responses
//! exactly as in `sim run`. Only the network and the clock are real.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

mod provider_only;
pub use provider_only::{
    Exchange, ExchangeSink, ProviderOnlyOptions, ROUTE_MODEL_CALL, serve_provider, serve_scenario,
};

use super::env::AddressBook;
use super::faults::NowFn;
use super::letta::world::{SERVER_PORT, server_parts};
use super::scenario::{InputError, Scenario};
use super::serve_guard::{Gate, Guarded, LIMITS, Limits};
use super::trace::{Trace, TraceEvent};
use super::world::PROVIDER_PORT;
use crate::model::letta::server::{self, RequestLog, RequestRecord};
use crate::model::port::clock::Clock;
use crate::model::port::env::{Env, Listener};
use crate::model::port::observe::Observation;
use crate::model::provider::{self, ProviderConfig, ProviderState};

/// What `sim serve` is asked to do.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub scenario: PathBuf,
    pub seed: u64,
    /// Address the server listens on (default 127.0.0.1:8283; port 0 picks a free one).
    pub listen: SocketAddr,
    /// JSON Lines request log (one object per request).
    pub request_log: Option<PathBuf>,
    /// Also write the trace here, one event per line, as it happens.
    pub trace: Option<PathBuf>,
    /// The server profile, overriding the scenario's `[server] profile`.
    pub profile: Option<server::Profile>,
    /// Answer model calls with the scripted fake model of the real-server captures
    /// (src/model/provider/scripted.rs) instead of the scenario's cassettes.
    pub scripted_model: bool,
}

/// A host on real TCP whose server port binds the requested address; everything else binds an
/// ephemeral loopback port published in the address book.
#[derive(Clone)]
struct ServeEnv {
    host: Arc<str>,
    clock: Clock,
    book: AddressBook,
    listen: SocketAddr,
    bound: Arc<Mutex<Option<SocketAddr>>>,
    sink: Arc<Mutex<Option<std::fs::File>>>,
    limits: Limits,
    /// The scenario's `[network] start`: real time zero on the dates the server writes.
    start_unix_ms: u64,
}

/// A listener; the one clients reach (the server's) admits connections through the gate of
/// [`super::serve_guard`].
struct Wrap(tokio::net::TcpListener, Option<Gate>);

impl Listener for Wrap {
    type Stream = Guarded;
    async fn accept(&mut self) -> std::io::Result<Self::Stream> {
        loop {
            let (stream, _) = self.0.accept().await?;
            match &self.1 {
                None => return Ok(Guarded::plain(stream)),
                Some(gate) => {
                    if let Some(admitted) = gate.admit(stream) {
                        return Ok(admitted);
                    }
                }
            }
        }
    }
}

impl Env for ServeEnv {
    type Stream = Guarded;
    type Listener = Wrap;

    async fn bind(&self, port: u16) -> std::io::Result<Wrap> {
        let served = &*self.host == "server" && port == SERVER_PORT;
        let addr = if served {
            self.listen
        } else {
            SocketAddr::from(([127, 0, 0, 1], 0))
        };
        let l = tokio::net::TcpListener::bind(addr).await?;
        let local = l.local_addr()?;
        self.book.insert(&format!("{}:{port}", self.host), local);
        if &*self.host == "server" {
            *self.bound.lock().unwrap() = Some(local);
        }
        Ok(Wrap(l, served.then(|| Gate::new(self.limits))))
    }

    async fn connect(&self, addr: &str) -> std::io::Result<Self::Stream> {
        if let Ok(sock) = addr.parse::<SocketAddr>() {
            return tokio::net::TcpStream::connect(sock)
                .await
                .map(Guarded::plain);
        }
        for _ in 0..1000 {
            if let Some(sock) = self.book.get(addr) {
                return tokio::net::TcpStream::connect(sock)
                    .await
                    .map(Guarded::plain);
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no host bound as {addr}"),
        ))
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    /// Dates in bodies: real time zero is the scenario's start, as in its simulation, so two
    /// sessions with the same seed and the same request timing show the same dates.
    fn epoch_ms(&self) -> u64 {
        self.start_unix_ms
    }

    fn observe(&self, event: Observation) {
        let mut sink = self.sink.lock().unwrap();
        if let Some(f) = sink.as_mut() {
            let line = TraceEvent {
                t_ms: self.now_ms(),
                host: self.host.to_string(),
                obs: event,
            }
            .render();
            let _ = writeln!(f, "{line}");
        }
    }
}

/// The request log: one JSON object per line, `{"n", "method", "path", "body", "status"}`.
/// `body` is the parsed JSON, `{"_raw": text}` when it is not JSON, or null when empty.
fn request_logger(path: &PathBuf) -> std::io::Result<RequestLog> {
    let file = Arc::new(Mutex::new(std::fs::File::create(path)?));
    let n = Arc::new(AtomicU64::new(0));
    Ok(Arc::new(move |r: RequestRecord| {
        let body: Value = if r.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&r.body)
                .unwrap_or_else(|_| json!({"_raw": String::from_utf8_lossy(&r.body)}))
        };
        let line = json!({
            "n": n.fetch_add(1, Ordering::SeqCst) + 1,
            "method": r.method,
            "path": r.path,
            "body": body,
            "status": r.status,
        });
        let mut f = file.lock().unwrap();
        let _ = writeln!(f, "{line}");
        let _ = f.flush();
    }))
}

fn input_error(opts: &ServeOptions, message: String) -> InputError {
    InputError {
        file: opts.scenario.display().to_string(),
        line: None,
        column: None,
        message,
    }
}

/// Runs the server until the process is stopped. `ready` gets one JSON object once the server
/// listens: its address, the agent, the conversations that exist, the profile and the faults.
/// Clients meet the connection limits of [`super::serve_guard::LIMITS`].
pub fn serve(opts: ServeOptions, ready: impl FnOnce(Value)) -> Result<(), InputError> {
    serve_with_limits(opts, LIMITS, ready)
}

/// [`serve`] with other connection limits (`sim serve --max-connections` and the like).
pub fn serve_with_limits(
    opts: ServeOptions,
    limits: Limits,
    ready: impl FnOnce(Value),
) -> Result<(), InputError> {
    let scenario = Scenario::load(&opts.scenario)?;
    // Only the Letta world has a server; an agent loop talks to its provider alone.
    if scenario.is_agent_loop() {
        return Err(scenario.error_at(
            scenario.scenario.system.span(),
            "sim serve serves a Letta server; this is an agent-loop scenario (system = \"agent-loop\"), which has none",
        ));
    }
    // Network and process faults act on turmoil; on real TCP there is nothing to apply them to.
    if let Some(f) = scenario
        .faults
        .iter()
        .find(|f| f.get_ref().trigger().is_some())
    {
        return Err(scenario.error_at(
            f.span(),
            format!(
                "{} is a simulation fault (network or process); sim serve cannot apply it",
                f.get_ref()
            ),
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| input_error(&opts, format!("cannot start a tokio runtime: {e}")))?;
    runtime.block_on(async move {
        let trace = Trace::new();
        // Real time on purpose: `sim serve` is real TCP for real clients, never a simulation.
        let clock = Clock::tokio();
        let start = clock.clone();
        let now: NowFn = Arc::new(move || start.now_ms());
        let sink =
            Arc::new(Mutex::new(match &opts.trace {
                Some(p) => Some(std::fs::File::create(p).map_err(|e| {
                    input_error(&opts, format!("cannot write {}: {e}", p.display()))
                })?),
                None => None,
            }));
        let book = AddressBook::new();
        let bound = Arc::new(Mutex::new(None));
        let env = |host: &str| ServeEnv {
            host: host.into(),
            clock: clock.clone(),
            book: book.clone(),
            listen: opts.listen,
            bound: bound.clone(),
            sink: sink.clone(),
            limits,
            start_unix_ms: scenario.network.start.unix_ms(),
        };
        let parts = super::letta::world::world_parts(&scenario, opts.seed, &trace, now.clone())?;
        // The harness's fault hooks push `fault` events into `trace`; forward them to the sink.
        let (mut config, store) = server_parts(
            &scenario,
            opts.seed,
            parts.server.hooks.clone(),
            format!("provider:{PROVIDER_PORT}"),
        )?;
        if let Some(p) = opts.profile {
            config.profile = p;
        }
        if opts.scripted_model {
            // The scripted model speaks Chat Completions, as the captures' fake did.
            config.provider_api = crate::wire::provider::ProviderFormat::OpenAiChat;
        }
        if let Some(p) = &opts.request_log {
            config.request_log =
                Some(request_logger(p).map_err(|e| {
                    input_error(&opts, format!("cannot write {}: {e}", p.display()))
                })?);
        }
        let provider_config = Arc::new(ProviderConfig {
            port: PROVIDER_PORT,
            responses: parts.provider.responses.clone(),
            hooks: parts.provider.hooks.clone(),
        });
        let provider_task = if opts.scripted_model {
            tokio::spawn(provider::scripted::run(
                env("provider"),
                Arc::new(provider::scripted::ScriptConfig::captured(PROVIDER_PORT)),
                Arc::new(Mutex::new(provider::scripted::ScriptState::default())),
            ))
        } else {
            tokio::spawn(provider::run(
                env("provider"),
                provider_config,
                Arc::new(Mutex::new(ProviderState::default())),
            ))
        };
        let agent_id = scenario.agent.id.clone();
        let profile = config.profile;
        let conversations: Vec<String> = store
            .lock()
            .unwrap()
            .conversations
            .keys()
            .cloned()
            .collect();
        let server_task = tokio::spawn(server::run(env("server"), config, store));
        let addr = loop {
            if let Some(a) = *bound.lock().unwrap() {
                break Some(a);
            }
            if server_task.is_finished() {
                break None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        };
        let Some(addr) = addr else {
            let err = match server_task.await {
                Ok(Err(e)) => e.to_string(),
                _ => "the server stopped".into(),
            };
            return Err(input_error(
                &opts,
                format!("cannot listen on {}: {err}", opts.listen),
            ));
        };
        ready(json!({
            "listening": addr.to_string(),
            "base_url": format!("http://{addr}"),
            "agent_id": agent_id,
            "model": scenario.agent.model,
            "conversations": conversations,
            "profile": profile.as_str(),
            "model_calls": if opts.scripted_model { "scripted" } else { "cassettes" },
            "seed": opts.seed,
            "faults": scenario.faults.iter().map(|f| f.get_ref().to_string()).collect::<Vec<_>>(),
        }));
        // Ctrl-C or SIGTERM stop it normally (exit 0): the request log and the trace are
        // written line by line, and are flushed before returning.
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|e| input_error(&opts, format!("cannot watch for SIGTERM: {e}")))?;
        let result = tokio::select! {
            biased;
            _ = tokio::signal::ctrl_c() => None,
            _ = terminate.recv() => None,
            r = server_task => Some(r),
        };
        provider_task.abort();
        if let Some(f) = sink.lock().unwrap().as_mut() {
            let _ = f.flush();
        }
        match result {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(input_error(&opts, format!("server stopped: {e}"))),
            Some(Err(e)) => Err(input_error(&opts, format!("server task failed: {e}"))),
        }
    })
}
