//! One seed's server for a real client: the scenario's Letta server model and fake provider on
//! loopback TCP in this process (the code `sim serve` runs, docs/serve.md), with the seed's plan,
//! until the run is over. Unlike `sim serve` it keeps what the judge needs in memory: the
//! server's trace (the [`Trace`] its hosts observe into) and every request with the real time
//! its response head was ready.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::harness::env::{AddressBook, TcpEnv};
use crate::harness::faults::NowFn;
use crate::harness::letta::world::{SERVER_PORT, world_parts};
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::trace::{Trace, TraceEvent};
use crate::model::letta::server::{self, RequestRecord};
use crate::model::provider;

/// One request the server answered, as `sim serve --log` writes it plus `t_ms`: real
/// milliseconds from the server's start to its response head.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Request {
    pub n: u64,
    pub t_ms: u64,
    pub method: String,
    pub path: String,
    /// Parsed JSON, `{"_raw": text}` when not JSON, null when empty.
    pub body: Value,
    pub status: u16,
}

impl Request {
    /// A message send: `POST …/messages` (a conversation's or an agent's).
    pub fn is_send(&self) -> bool {
        self.method == "POST"
            && self
                .path
                .split('?')
                .next()
                .unwrap_or("")
                .ends_with("/messages")
    }

    /// The log line, without the body's long fields (client tools, skills).
    pub fn line(&self) -> String {
        let mut body = self.body.clone();
        if let Some(m) = body.as_object_mut() {
            for long in ["client_tools", "client_skills"] {
                if let Some(v) = m.get_mut(long) {
                    let n = v.as_array().map_or(0, Vec::len);
                    *v = json!(format!("[{n} items]"));
                }
            }
        }
        format!(
            "#{} {:>7} ms {} {} -> {} {}",
            self.n, self.t_ms, self.method, self.path, self.status, body
        )
    }
}

/// A running server. [`Served::stop`] ends it and hands back what it saw.
pub struct Served {
    pub base_url: String,
    /// Real time since the server started (the zero of `t_ms` in its requests).
    pub start: tokio::time::Instant,
    trace: Trace,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Serves `scenario` (its faults are the plan) with `seed` on a free loopback port.
    pub fn start(scenario: &Scenario, seed: u64) -> Result<Served, InputError> {
        let file = scenario.path.display().to_string();
        let scenario = scenario.clone();
        let error = |message: String| InputError {
            file: file.clone(),
            line: None,
            column: None,
            message,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| error(format!("cannot start a tokio runtime: {e}")))?;
        let trace = Trace::new();
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        // Real time on purpose: this serves a real client on real TCP, never a simulation.
        let start = tokio::time::Instant::now();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (t, log) = (trace.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let now: NowFn = Arc::new(move || start.elapsed().as_millis() as u64);
                let mut parts = match world_parts(&scenario, seed, &t, now) {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                parts.server.request_log = Some(Arc::new(move |r: RequestRecord| {
                    let mut log = log.lock().unwrap();
                    let body: Value = if r.body.is_empty() {
                        Value::Null
                    } else {
                        serde_json::from_slice(&r.body)
                            .unwrap_or_else(|_| json!({"_raw": String::from_utf8_lossy(&r.body)}))
                    };
                    let n = log.len() as u64 + 1;
                    log.push(Request {
                        n,
                        t_ms: start.elapsed().as_millis() as u64,
                        method: r.method,
                        path: r.path,
                        body,
                        status: r.status,
                    });
                }));
                let book = AddressBook::new();
                let env =
                    |host: &str| TcpEnv::new(host, t.clone(), parts.start.unix_ms(), book.clone());
                let provider_task = tokio::spawn(provider::run(
                    env("provider"),
                    parts.provider.clone(),
                    parts.provider_state.clone(),
                ));
                let server_task =
                    tokio::spawn(server::run(env("server"), parts.server, parts.store));
                let name = format!("server:{SERVER_PORT}");
                let addr = loop {
                    if let Some(a) = book.get(&name) {
                        break Some(a);
                    }
                    if server_task.is_finished() {
                        break None;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                };
                match addr {
                    Some(a) => {
                        let _ = ready_tx.send(Ok(format!("http://{a}")));
                        let _ = stop_rx.await;
                    }
                    None => {
                        let _ = ready_tx.send(Err(InputError {
                            file: scenario.path.display().to_string(),
                            line: None,
                            column: None,
                            message: "the server did not start listening".into(),
                        }));
                    }
                }
                provider_task.abort();
                server_task.abort();
            });
        });
        let base_url = ready_rx
            .recv()
            .map_err(|_| error("the server thread ended before it listened".into()))??;
        Ok(Served {
            base_url,
            start,
            trace,
            requests,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Real milliseconds since the server started.
    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Stops the server; returns its trace and its requests, in order.
    pub fn stop(mut self) -> (Vec<TraceEvent>, Vec<Request>) {
        self.shutdown();
        let requests = self.requests.lock().unwrap().clone();
        (self.trace.events(), requests)
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shutdown();
    }
}
