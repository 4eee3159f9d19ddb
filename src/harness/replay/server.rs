//! The server side of a replay: recorded requests sent to the Letta server model in one
//! simulated world, each at its recorded time, with a fake model behind the server (the
//! scripted model the captures were made with, or answers recovered from the recording), and
//! every response kept whole for the comparison.
//!
//! A request starts at the latest of: its recorded offset, the end of each earlier response it
//! waited for plus the recorded gap, and the start of the request it overlapped plus the
//! recorded offset. Ids a path or body names that an earlier response showed first (a run to
//! replay, the conversation a setup created, a message to read back) are replaced by the ids
//! our server gave in the same place of its response.

use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use tokio::sync::watch;

use super::normalize::ids_in;
use crate::harness::env::SimEnv;
use crate::harness::trace::{Trace, TraceEvent};
use crate::model::letta::server::{
    self, AgentConfig, ApprovalConflict, NoHooks, Profile, ServerBugs, ServerConfig, Store,
};
use crate::model::port::env::Env as _;
use crate::model::port::inject::NoFaults;
use crate::model::provider::scripted::{self, ScriptConfig, ScriptState};
use crate::model::provider::{self, ProviderConfig, ProviderResponse, ProviderState};
use crate::wire::provider::ProviderFormat;

/// The server's host address inside the world.
pub const SERVER_ADDR: &str = "server:8283";

/// When a request starts (see the module doc); every index names an earlier request.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// Not before this simulated ms.
    pub at_ms: u64,
    /// Not before each of these requests' responses ended, plus the gap (ms).
    pub after_end: Vec<(usize, u64)>,
    /// Not before this request started, plus the offset (ms).
    pub after_start: Option<(usize, u64)>,
}

/// One request to replay.
#[derive(Debug, Clone)]
pub struct ReplayRequest {
    /// How the report names it (`x12`, a capture's name).
    pub name: String,
    pub method: String,
    pub path: String,
    /// Sent as given, after `host`.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub start: Start,
    /// The recorded stream ended after this many SSE frames with a reset (the client hung up,
    /// or the connection was cut): the replay hangs up there too.
    pub cut_after_frames: Option<usize>,
    /// The scripted model's request counter just before this request (its tool-call ids and
    /// token counts follow it), when the recording says.
    pub script_requests: Option<u32>,
    /// The recorded response body: the ids it shows are mapped to ours in later requests.
    pub recorded_text: String,
}

/// The model behind the server.
#[derive(Clone)]
pub enum ModelSource {
    /// The scripted fake model (src/model/provider/scripted.rs).
    Scripted(ScriptConfig),
    /// Recorded answers, one per model call in call order.
    Recorded(Vec<ProviderResponse>),
}

/// The server and the world it runs in.
#[derive(Clone)]
pub struct ServerSetup {
    pub seed: u64,
    pub agents: Vec<AgentConfig>,
    pub profile: Profile,
    pub approval_conflict: ApprovalConflict,
    pub keepalive: Duration,
    pub bugs: ServerBugs,
    pub provider_api: ProviderFormat,
    pub model: ModelSource,
    /// Unix ms of simulated time zero.
    pub epoch_unix_ms: u64,
    /// Id kinds mapped from recorded responses to ours in later paths and bodies.
    pub mapped_kinds: Vec<&'static str>,
    /// How long the whole replay may run in simulated time.
    pub budget: Duration,
}

/// What our server answered to one request.
#[derive(Debug, Clone, Default)]
pub struct ServerAnswer {
    pub status: u16,
    pub status_line: String,
    pub content_type: String,
    pub body: Vec<u8>,
    /// The request or its body failed (not an answer a recording can match).
    pub error: Option<String>,
    /// The path as sent, ids mapped.
    pub path: String,
    pub started_ms: u64,
    pub ended_ms: u64,
}

/// Everything one replay world produced.
#[derive(Debug)]
pub struct WorldOutput {
    /// Per request, in order; `None` for a request never sent.
    pub answers: Vec<Option<ServerAnswer>>,
    pub trace: Vec<TraceEvent>,
    /// Why the simulation stopped early.
    pub stopped: Option<String>,
}

type Answers = Arc<Mutex<Vec<Option<ServerAnswer>>>>;

fn now_ms() -> u64 {
    turmoil::sim_elapsed().map_or(0, |d| d.as_millis() as u64)
}

/// `text` with the ids earlier responses showed replaced by ours: the i-th id of a kind in the
/// first earlier recorded response that showed it is our i-th id of that kind there.
fn map_ids(text: &str, earlier: &[ReplayRequest], answers: &Answers, kinds: &[&str]) -> String {
    let mut out = text.to_string();
    for prefix in kinds {
        for id in ids_in(text, prefix) {
            let found = earlier.iter().enumerate().find_map(|(k, r)| {
                let i = ids_in(&r.recorded_text, prefix)
                    .iter()
                    .position(|x| *x == id)?;
                let ours = answers.lock().unwrap()[k]
                    .as_ref()
                    .map(|a| a.body.clone())?;
                ids_in(&String::from_utf8_lossy(&ours), prefix)
                    .get(i)
                    .cloned()
            });
            if let Some(ours) = found {
                out = out.replace(&id, &ours);
            }
        }
    }
    out
}

async fn send(
    env: &SimEnv,
    req: &ReplayRequest,
    path: String,
    body: Vec<u8>,
    slot: usize,
    answers: &Answers,
) {
    let mut b = Request::builder()
        .method(req.method.as_str())
        .uri(path.as_str())
        .header("host", "127.0.0.1:8283");
    for (k, v) in &req.headers {
        b = b.header(k.as_str(), v.as_str());
    }
    let started_ms = now_ms();
    let set = |a: ServerAnswer| answers.lock().unwrap()[slot] = Some(a);
    let request = match b.body(Full::new(Bytes::from(body))) {
        Ok(r) => r,
        Err(e) => {
            set(ServerAnswer {
                error: Some(format!("cannot build the request: {e}")),
                path,
                started_ms,
                ended_ms: started_ms,
                ..ServerAnswer::default()
            });
            return;
        }
    };
    let resp =
        match crate::model::port::http::send(env, SERVER_ADDR, request, Duration::from_secs(60))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                set(ServerAnswer {
                    error: Some(e.to_string()),
                    path,
                    started_ms,
                    ended_ms: now_ms(),
                    ..ServerAnswer::default()
                });
                return;
            }
        };
    let status = resp.status();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    set(ServerAnswer {
        status: status.as_u16(),
        status_line: format!(
            "HTTP/1.1 {} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        ),
        content_type,
        path,
        started_ms,
        ..ServerAnswer::default()
    });
    let mut body = resp.into_body();
    loop {
        let frame = match tokio::time::timeout(Duration::from_secs(900), body.frame()).await {
            Err(_) => Some(Err("no bytes for 900 s".to_string())),
            Ok(f) => f.map(|r| r.map_err(|e| crate::model::port::http::error_chain(&e))),
        };
        let mut all = answers.lock().unwrap();
        let a = all[slot].as_mut().expect("set above");
        match frame {
            None => break,
            Some(Err(e)) => {
                a.error = Some(e);
                break;
            }
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    a.body.extend_from_slice(&d);
                }
                // A stream the recording saw reset: hang up after as many frames as it got.
                if let Some(n) = req.cut_after_frames
                    && String::from_utf8_lossy(&a.body).matches("\n\n").count() >= n
                {
                    break;
                }
            }
        }
    }
    answers.lock().unwrap()[slot]
        .as_mut()
        .expect("set above")
        .ended_ms = now_ms();
}

/// Sends `requests` in order to a fresh server of `setup` and returns what it answered.
pub fn run_world(requests: &[ReplayRequest], setup: &ServerSetup) -> WorldOutput {
    let trace = Trace::new();
    let store = Arc::new(Mutex::new(Store::new(setup.seed, &setup.agents)));
    let config = ServerConfig {
        port: 8283,
        provider_addr: "provider:9000".into(),
        provider_api: setup.provider_api,
        agents: setup.agents.clone(),
        provider_idle_timeout: Duration::from_secs(60),
        profile: setup.profile,
        keepalive_interval: setup.keepalive,
        approval_conflict: setup.approval_conflict,
        // No recorded server sends a `response_state` chunk (letta-protocol.md §10.1).
        response_state: false,
        bugs: setup.bugs.clone(),
        hooks: Arc::new(NoHooks),
        request_log: None,
        exchange_log: None,
    };
    let script_state = Arc::new(Mutex::new(ScriptState::default()));
    let epoch = setup.epoch_unix_ms;
    let mut sim = turmoil::Builder::new()
        .rng_seed(setup.seed)
        .epoch(UNIX_EPOCH + Duration::from_millis(epoch))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(1))
        .simulation_duration(setup.budget)
        .build();
    match &setup.model {
        ModelSource::Scripted(script) => {
            let (trace, script, state) = (
                trace.clone(),
                Arc::new(script.clone()),
                script_state.clone(),
            );
            sim.host("provider", move || {
                let env = SimEnv::new("provider", trace.clone(), epoch);
                let (script, state) = (script.clone(), state.clone());
                async move {
                    scripted::run(env, script, state)
                        .await
                        .map_err(|e| e.to_string().into())
                }
            });
        }
        ModelSource::Recorded(responses) => {
            let trace = trace.clone();
            let config = Arc::new(ProviderConfig {
                port: 9000,
                responses: responses.clone(),
                hooks: Arc::new(NoFaults),
            });
            let state = Arc::new(Mutex::new(ProviderState::default()));
            sim.host("provider", move || {
                let env = SimEnv::new("provider", trace.clone(), epoch);
                let (config, state) = (config.clone(), state.clone());
                async move {
                    provider::run(env, config, state)
                        .await
                        .map_err(|e| e.to_string().into())
                }
            });
        }
    }
    {
        let (trace, config, store) = (trace.clone(), config.clone(), store.clone());
        sim.host("server", move || {
            let env = SimEnv::new("server", trace.clone(), epoch);
            let (config, store) = (config.clone(), store.clone());
            async move {
                server::run(env, config, store)
                    .await
                    .map_err(|e| e.to_string().into())
            }
        });
    }
    let answers: Answers = Arc::new(Mutex::new(vec![None; requests.len()]));
    {
        let env = SimEnv::new("replay", trace.clone(), epoch);
        let (answers, requests) = (answers.clone(), requests.to_vec());
        let kinds = setup.mapped_kinds.clone();
        let script_state = script_state.clone();
        sim.client("replay", async move {
            let mut ends: Vec<watch::Receiver<Option<u64>>> = Vec::new();
            let mut starts: Vec<u64> = Vec::new();
            let mut running = Vec::new();
            for (k, req) in requests.iter().enumerate() {
                let mut at = req.start.at_ms;
                for (i, gap) in &req.start.after_end {
                    let mut rx = ends[*i].clone();
                    let end = rx
                        .wait_for(Option::is_some)
                        .await
                        .map_or(0, |v| v.unwrap_or(0));
                    at = at.max(end + gap);
                }
                if let Some((i, offset)) = req.start.after_start {
                    at = at.max(starts[i] + offset);
                }
                let now = now_ms();
                if at > now {
                    tokio::time::sleep(Duration::from_millis(at - now)).await;
                }
                starts.push(now_ms());
                if let Some(n) = req.script_requests {
                    script_state.lock().unwrap().requests = n;
                }
                let path = map_ids(&req.path, &requests[..k], &answers, &kinds);
                let body = if req.body.is_empty() {
                    Vec::new()
                } else {
                    map_ids(
                        &String::from_utf8_lossy(&req.body),
                        &requests[..k],
                        &answers,
                        &kinds,
                    )
                    .into_bytes()
                };
                let (tx, rx) = watch::channel(None);
                ends.push(rx);
                let (env2, req2, answers2) = (env.clone(), req.clone(), answers.clone());
                running.push(env.spawner().spawn(async move {
                    send(&env2, &req2, path, body, k, &answers2).await;
                    let _ = tx.send(Some(now_ms()));
                }));
            }
            for h in running {
                let _ = h.await;
            }
            Ok(())
        });
    }
    let stopped = sim.run().err().map(|e| e.to_string());
    let answers = answers.lock().unwrap().clone();
    WorldOutput {
        answers,
        trace: trace.events(),
        stopped,
    }
}
