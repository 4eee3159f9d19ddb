//! Golden master: the `letta-oss-0.16` server profile against the real bytes of Letta 0.16.8
//! (../shared/captures/letta_server; PROVENANCE.md there says how each was recorded).
//!
//! The captures form one chain on one agent: a pending approval left by one capture is what the
//! next one meets (a2 leaves `call_fake0004` for d1–d7 and c, a4 leaves `call_fake0022` for d8
//! and c2), replays name runs of earlier captures, and some requests overlap (e1, e2 + f1, h1,
//! e3). [`MAIN`] replays them in the order of their `started=` stamps (meta.txt) against the
//! server model with the scripted fake model (src/model/provider/scripted.rs), under turmoil's
//! simulated time: overlapping requests start at the captured offsets, the others one after
//! another with the 0.5 s settle of harness/cap.sh. k2 ran against a server restarted with
//! `LETTA_KEEPALIVE_INTERVAL=2` and a fake with `SLOW_DELAY=3.5`, so it gets its own world
//! ([`K2`]).
//!
//! Inputs taken from the captures besides the requests: the fake model's request number at the
//! start of each capture (`n` in NAME.provider_requests.summary.jsonl; it numbers tool-call ids
//! and sets `prompt_tokens`), the agent id (the server is configured with it) and the
//! conversation h1 used (created in setup; its id is mapped). Run ids in replay paths are mapped
//! to ours through the earlier capture that showed them.
//!
//! Compared per capture: the status line, `content-type`, and the body after volatile values
//! are replaced by placeholders (see [`Normalizer`]): `<kind-N>` for ids and uuids the server
//! invents, numbered in order of first appearance in that body on each side, so the same id
//! must recur in the same places; `<date>` for `date` values (whole seconds of wall-clock time:
//! which frames share a second is timing noise) and `<datetime>` for Python datetime reprs. A
//! capture the client cut (f3, killed after 30 pings) is compared over as many frames.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;

use loopsim::harness::env::SimEnv;
use loopsim::harness::trace::Trace;
use loopsim::model::letta::server::{
    self, AgentConfig, ApprovalConflict, NoHooks, Profile, ServerBugs, ServerConfig, Store,
};
use loopsim::model::provider::scripted::{self, ScriptConfig, ScriptState};
use loopsim::wire::provider::ProviderFormat;

/// The agent every capture used (PROVENANCE.md "Agent, created once").
const AGENT: &str = "agent-a6ff5f2c-7c25-49a7-86da-2f662939b9dd";
const MODEL: &str = "openai-proxy/gpt-4o-mini";
/// The conversation of the h1 captures, created with `{"summary":"probe conversation"}`.
const CAPTURED_CONV: &str = "conv-0767e5f8-4ae9-4f3e-b2ad-f2de86023661";
/// 2026-11-30T00:13:49Z, about when the captured server started (f5's actor `updated_at`).
const EPOCH_UNIX_MS: u64 = 1_795_997_629_000;

fn dir() -> PathBuf {
    crate::common::captures().join("letta_server")
}

/// When a request starts.
#[derive(Clone, Copy)]
enum Start {
    /// After every earlier response has ended, plus cap.sh's 0.5 s settle.
    After,
    /// While the named capture's request is running, at the captured offset from its start.
    With(&'static str),
}
use Start::{After, With};

/// The main chain, in captured order (meta.txt `started=`).
const MAIN: &[(&str, Start)] = &[
    ("a_agents_stream_requires_approval", After),
    ("b_agents_stream_approval_tool_return", After),
    ("a2_agents_stream_requires_approval_again", After),
    ("d1_agents_stream_user_while_pending", After),
    ("d2_agents_stream_user_while_pending_nopings", After),
    ("d3_agents_messages_nonstream_user_while_pending", After),
    ("d4_conversations_agentid_stream_user_while_pending", After),
    ("d5_agents_stream_user_while_pending_pingsfalse", After),
    (
        "d6_conversations_agentid_stream_user_while_pending_pingsfalse",
        After,
    ),
    (
        "d7_conversations_agentid_nonstream_user_while_pending",
        After,
    ),
    ("c_agents_stream_approval_deny", After),
    ("e1_conversations_agentid_first_slow_fg", After),
    (
        "e1_conversations_agentid_second_while_busy_fg",
        With("e1_conversations_agentid_first_slow_fg"),
    ),
    ("e2_conversations_agentid_first_slow_bg", After),
    (
        "e2_conversations_agentid_second_while_busy_bg",
        With("e2_conversations_agentid_first_slow_bg"),
    ),
    (
        "f1_runs_stream_replay_live_from0",
        With("e2_conversations_agentid_first_slow_bg"),
    ),
    ("f2_runs_stream_replay_completed_after5", After),
    ("f3_runs_stream_replay_after_end", After),
    ("f4_runs_stream_replay_foreground_run", After),
    ("f5_runs_stream_replay_unknown_run", After),
    ("g_fail500_agents_stream_fg", After),
    ("g_cutstream_agents_stream_fg", After),
    ("g_fail500_conversations_agentid_bg", After),
    ("g_fail500_runs_stream_replay_after0", After),
    ("g_cutstream_conversations_agentid_bg", After),
    ("g_cutstream_runs_stream_replay_after0", After),
    (
        "a3_agents_messages_streaming_steps_requires_approval",
        After,
    ),
    (
        "b2_agents_messages_streaming_steps_tool_return_create",
        After,
    ),
    ("a4_conversations_agentid_bg_requires_approval", After),
    ("d8_conversations_agentid_bg_user_while_pending", After),
    ("c2_conversations_agentid_bg_approval_deny", After),
    ("h1_conversation_stream_slow_fg", After),
    (
        "h1_conversation_second_while_busy",
        With("h1_conversation_stream_slow_fg"),
    ),
    ("e3_agents_stream_first_slow", After),
    (
        "e3_agents_stream_second_while_busy",
        With("e3_agents_stream_first_slow"),
    ),
    // Recorded after k2 on the restarted server; it depends on no state.
    (
        "x1_agents_messages_streaming_true_without_sdk_header",
        After,
    ),
];

/// The keepalive captures (`LETTA_KEEPALIVE_INTERVAL=2`, `SLOW_DELAY=3.5`).
const K2: &[(&str, Start)] = &[
    ("k2_conversations_agentid_bg_keepalive2s", After),
    ("k2_runs_stream_replay_after0", After),
];

/// One capture's files.
#[derive(Debug, Clone)]
struct Capture {
    name: String,
    method: String,
    path: String,
    extra_header: Option<(String, String)>,
    body: Option<Vec<u8>>,
    /// Milliseconds of the day the request started (meta.txt `started=`).
    started_ms: u64,
    status_line: String,
    content_type: String,
    body_text: String,
    /// The fake model's first request number in this capture.
    first_n: Option<u32>,
    /// The client stopped reading (f3): compare this many frames.
    cut_after_frames: Option<usize>,
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn field<'a>(meta: &'a str, key: &str) -> Option<&'a str> {
    meta.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

fn load(name: &str) -> Capture {
    let d = dir();
    let meta = read(&d.join(format!("{name}.meta.txt")));
    let method = field(&meta, "method").expect("method=").to_string();
    let path = field(&meta, "path").expect("path=").to_string();
    let extra_header = meta
        .split_once("extra_header=")
        .map(|(_, rest)| rest.split(" started=").next().unwrap_or("").trim())
        .filter(|h| *h != "none")
        .and_then(|h| h.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()));
    let started = field(&meta, "started").expect("started=");
    let t = &started[11..23]; // hh:mm:ss.mmm
    let num = |r: std::ops::Range<usize>| t[r].parse::<u64>().expect("time");
    let started_ms = ((num(0..2) * 60 + num(3..5)) * 60 + num(6..8)) * 1000 + num(9..12);
    let body = std::fs::read(d.join(format!("{name}.request.json"))).ok();
    let headers = read(&d.join(format!("{name}.headers.txt")));
    let status_line = headers.lines().next().unwrap_or("").trim_end().to_string();
    let content_type = headers
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    let body_text = ["sse", "json"]
        .iter()
        .find_map(|ext| std::fs::read_to_string(d.join(format!("{name}.body.{ext}"))).ok())
        .unwrap_or_else(|| panic!("{name}: no body file"));
    let first_n =
        std::fs::read_to_string(d.join(format!("{name}.provider_requests.summary.jsonl")))
            .ok()
            .and_then(|s| {
                s.lines()
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .filter_map(|v| v["n"].as_u64())
                    .min()
            })
            .map(|n| n as u32);
    let cut_after_frames = field(&meta, "curl_rc")
        .is_none()
        .then(|| body_text.matches("\n\n").count());
    Capture {
        name: name.to_string(),
        method,
        path,
        extra_header,
        body,
        started_ms,
        status_line,
        content_type,
        body_text,
        first_n,
        cut_after_frames,
    }
}

/// What our server answered.
#[derive(Debug, Clone, Default)]
struct Answer {
    status_line: String,
    content_type: String,
    body: Vec<u8>,
    /// The request or its body failed (not an answer the capture can match).
    error: Option<String>,
    done: bool,
}

type Answers = Arc<Mutex<BTreeMap<String, Answer>>>;

/// Ids of the kinds a path can name (`run-…`, `conv-…`), in order of first appearance.
fn ids_in(text: &str, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let cand = &rest[i..];
        let id_len = prefix.len() + 36;
        if cand.len() >= id_len && is_uuid(&cand[prefix.len()..id_len]) {
            let id = cand[..id_len].to_string();
            if !out.contains(&id) {
                out.push(id);
            }
            rest = &cand[id_len..];
        } else {
            rest = &cand[prefix.len()..];
        }
    }
    out
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit() && !c.is_ascii_uppercase(),
        })
}

/// The captured path with the run / conversation ids of earlier captures replaced by ours:
/// the i-th run id of the earlier capture that showed it is our i-th run id of that capture.
fn map_path(path: &str, earlier: &[(Capture, String)], answers: &Answers) -> String {
    let mut out = path.to_string();
    for prefix in ["run-", "conv-"] {
        for id in ids_in(path, prefix) {
            let found = earlier.iter().find_map(|(c, key)| {
                let i = ids_in(&c.body_text, prefix).iter().position(|x| *x == id)?;
                let ours = answers.lock().unwrap().get(key).map(|a| a.body.clone())?;
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

async fn send(env: &SimEnv, cap: &Capture, path: &str, answers: &Answers, key: &str) {
    let mut b = Request::builder()
        .method(cap.method.as_str())
        .uri(path)
        .header("host", "127.0.0.1:8283")
        // curl 7.88.1's defaults (harness/cap.sh).
        .header("user-agent", "curl/7.88.1")
        .header("accept", "*/*");
    if cap.body.is_some() {
        b = b.header("content-type", "application/json");
    }
    if let Some((k, v)) = &cap.extra_header {
        b = b.header(k.as_str(), v.as_str());
    }
    let req = b
        .body(Full::new(Bytes::from(cap.body.clone().unwrap_or_default())))
        .expect("request");
    let resp =
        match loopsim::model::port::http::send(env, "server:8283", req, Duration::from_secs(60))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                answers.lock().unwrap().insert(
                    key.to_string(),
                    Answer {
                        error: Some(e.to_string()),
                        done: true,
                        ..Answer::default()
                    },
                );
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
    answers.lock().unwrap().insert(
        key.to_string(),
        Answer {
            status_line: format!(
                "HTTP/1.1 {} {}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            ),
            content_type,
            ..Answer::default()
        },
    );
    let mut body = resp.into_body();
    loop {
        let frame = match tokio::time::timeout(Duration::from_secs(900), body.frame()).await {
            Err(_) => Some(Err("no bytes for 900 s".to_string())),
            Ok(f) => f.map(|r| r.map_err(|e| loopsim::model::port::http::error_chain(&e))),
        };
        let mut all = answers.lock().unwrap();
        let a = all.get_mut(key).expect("inserted above");
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
                // A client that gave up (f3): hang up after as many frames as it read.
                if let Some(n) = cap.cut_after_frames
                    && String::from_utf8_lossy(&a.body).matches("\n\n").count() >= n
                {
                    break;
                }
            }
        }
    }
    answers.lock().unwrap().get_mut(key).expect("inserted").done = true;
}

/// Runs one chain in its own world and returns our answer per capture name.
fn run_chain(
    steps: &[(&str, Start)],
    keepalive: Duration,
    slow_delay: Duration,
) -> (Vec<Capture>, BTreeMap<String, Answer>) {
    let caps: Vec<Capture> = steps.iter().map(|(n, _)| load(n)).collect();
    let starts: Vec<Start> = steps.iter().map(|(_, s)| *s).collect();
    let answers = run_world(caps.clone(), starts, keepalive, slow_delay);
    (caps, answers)
}

/// Sends `caps` in order to a fresh letta-oss-0.16 server with the scripted model.
fn run_world(
    caps: Vec<Capture>,
    starts: Vec<Start>,
    keepalive: Duration,
    slow_delay: Duration,
) -> BTreeMap<String, Answer> {
    let trace = Trace::new();
    let agents = vec![AgentConfig {
        id: AGENT.into(),
        model: MODEL.into(),
    }];
    let store = Arc::new(Mutex::new(Store::new(7, &agents)));
    let config = ServerConfig {
        port: 8283,
        provider_addr: "provider:9000".into(),
        provider_api: ProviderFormat::OpenAiChat,
        agents,
        provider_idle_timeout: Duration::from_secs(60),
        profile: Profile::LettaOss016,
        keepalive_interval: keepalive,
        approval_conflict: ApprovalConflict::InBand,
        bugs: ServerBugs::default(),
        hooks: Arc::new(NoHooks),
        request_log: None,
        exchange_log: None,
    };
    let script = Arc::new(ScriptConfig {
        slow_delay,
        ..ScriptConfig::captured(9000)
    });
    let script_state = Arc::new(Mutex::new(ScriptState::default()));

    let mut sim = turmoil::Builder::new()
        .rng_seed(7)
        .epoch(UNIX_EPOCH + Duration::from_millis(EPOCH_UNIX_MS))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(1))
        .simulation_duration(Duration::from_secs(3600))
        .build();
    {
        let (trace, script, state) = (trace.clone(), script.clone(), script_state.clone());
        sim.host("provider", move || {
            let env = SimEnv::new("provider", trace.clone(), EPOCH_UNIX_MS);
            let (script, state) = (script.clone(), state.clone());
            async move {
                scripted::run(env, script, state)
                    .await
                    .map_err(|e| e.to_string().into())
            }
        });
    }
    {
        let (trace, config, store) = (trace.clone(), config.clone(), store.clone());
        sim.host("server", move || {
            let env = SimEnv::new("server", trace.clone(), EPOCH_UNIX_MS);
            let (config, store) = (config.clone(), store.clone());
            async move {
                server::run(env, config, store)
                    .await
                    .map_err(|e| e.to_string().into())
            }
        });
    }
    let answers: Answers = Arc::new(Mutex::new(BTreeMap::new()));
    {
        let env = SimEnv::new("curl", trace.clone(), EPOCH_UNIX_MS);
        let answers = answers.clone();
        sim.client("curl", async move {
            // Setup: the conversation h1 used (PROVENANCE.md "Conversation (for h1)").
            let setup = Capture {
                name: "setup".into(),
                method: "POST".into(),
                path: format!("/v1/conversations/?agent_id={AGENT}"),
                extra_header: None,
                body: Some(br#"{"summary":"probe conversation"}"#.to_vec()),
                started_ms: 0,
                status_line: String::new(),
                content_type: String::new(),
                body_text: CAPTURED_CONV.into(),
                first_n: None,
                cut_after_frames: None,
            };
            send(&env, &setup, &setup.path, &answers, "setup").await;
            let mut earlier: Vec<(Capture, String)> = vec![(setup, "setup".into())];
            let mut running: Vec<tokio::task::JoinHandle<()>> = Vec::new();
            let mut started_at: BTreeMap<String, u64> = BTreeMap::new();
            for (cap, start) in caps.iter().zip(starts) {
                match start {
                    After => {
                        for h in running.drain(..) {
                            let _ = h.await;
                        }
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    With(leader) => {
                        let lead = caps.iter().find(|c| c.name == leader).expect("leader");
                        let at = started_at[leader] + (cap.started_ms - lead.started_ms);
                        let now = env_now();
                        if at > now {
                            tokio::time::sleep(Duration::from_millis(at - now)).await;
                        }
                    }
                }
                started_at.insert(cap.name.clone(), env_now());
                if let Some(n) = cap.first_n {
                    script_state.lock().unwrap().requests = n - 1;
                }
                let path = map_path(&cap.path, &earlier, &answers);
                let (env2, cap2, answers2) = (env.clone(), cap.clone(), answers.clone());
                running.push(tokio::spawn(async move {
                    send(&env2, &cap2, &path, &answers2, &cap2.name).await;
                }));
                earlier.push((cap.clone(), cap.name.clone()));
            }
            for h in running {
                let _ = h.await;
            }
            Ok(())
        });
    }
    sim.run().expect("simulation");
    answers.lock().unwrap().clone()
}

fn env_now() -> u64 {
    turmoil::sim_elapsed().map_or(0, |d| d.as_millis() as u64)
}

/// Replaces what a server invents with placeholders. Ids (`run-`, `message-`, `step-`,
/// `ping-`, `conv-`, `agent-` + uuid) and bare uuids (the otids derived from message ids)
/// become `<kind-N>`, numbered per kind in order of first appearance in the capture; an id an
/// earlier capture of the chain showed first becomes `<kind-N@that capture>`, so references
/// across captures (a replay's run, d3's `pending_request_id`, b2's step) are checked too, and
/// a mismatch in one capture does not renumber the others. The all-zero uuid of the default
/// user and organisation stays. `date` values become `<date>`, Python datetime reprs
/// `<datetime>`.
#[derive(Default)]
struct Normalizer {
    /// Ids of earlier captures → their placeholder there, with `@capture`.
    earlier: BTreeMap<String, String>,
    /// Ids of this capture → placeholder.
    seen: BTreeMap<String, String>,
    counts: BTreeMap<String, usize>,
}

impl Normalizer {
    fn placeholder(&mut self, kind: &str, value: &str) -> String {
        if let Some(p) = self.seen.get(value).or_else(|| self.earlier.get(value)) {
            return p.clone();
        }
        let n = self.counts.entry(kind.to_string()).or_insert(0);
        *n += 1;
        let p = format!("<{kind}-{n}>");
        self.seen.insert(value.to_string(), p.clone());
        p
    }

    /// Normalises capture `name`'s body; its new ids become references for later captures.
    fn capture(&mut self, name: &str, text: &str) -> String {
        let out = self.normalize(text);
        for (value, p) in std::mem::take(&mut self.seen) {
            let short = name.split('_').next().unwrap_or(name);
            let label = format!("{}@{short}>", p.trim_end_matches('>'));
            self.earlier.insert(value, label);
        }
        self.counts.clear();
        out
    }

    fn normalize(&mut self, text: &str) -> String {
        const KINDS: [&str; 8] = [
            "run-", "message-", "step-", "ping-", "conv-", "agent-", "user-", "org-",
        ];
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            let rest = &text[i..];
            if let Some(kind) = KINDS.iter().find(|k| {
                rest.starts_with(**k)
                    && rest.len() >= k.len() + 36
                    && is_uuid(&rest[k.len()..k.len() + 36])
            }) {
                let id = &rest[..kind.len() + 36];
                if id.ends_with("00000000-0000-4000-8000-000000000000") {
                    out.push_str(id);
                } else {
                    let p = self.placeholder(kind.trim_end_matches('-'), id);
                    out.push_str(&p);
                }
                i += id.len();
                continue;
            }
            if rest.len() >= 36
                && is_uuid(&rest[..36])
                && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            {
                let id = &rest[..36];
                if id == "00000000-0000-4000-8000-000000000000" {
                    out.push_str(id);
                } else {
                    let p = self.placeholder("uuid", id);
                    out.push_str(&p);
                }
                i += 36;
                continue;
            }
            if is_date(rest) {
                out.push_str("<date>");
                i += 25;
                continue;
            }
            if rest.starts_with("datetime.datetime(")
                && let Some(end) = rest.find("TzInfo(0))")
            {
                out.push_str("<datetime>");
                i += end + "TzInfo(0))".len();
                continue;
            }
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            i += c.len_utf8();
        }
        out
    }
}

/// `YYYY-MM-DDTHH:MM:SS+00:00`, the only `date` format 0.16.8 streams.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 25
        && b[..25].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 | 22 => *c == b':',
            19 => *c == b'+',
            _ => c.is_ascii_digit(),
        })
        && &s[19..25] == "+00:00"
}

/// The mismatch report of one capture, or `None` when it matches.
fn compare(
    cap: &Capture,
    ours: Option<&Answer>,
    captured_ids: &mut Normalizer,
    our_ids: &mut Normalizer,
) -> Option<String> {
    let expected = captured_ids.capture(&cap.name, &cap.body_text);
    let Some(a) = ours else {
        return Some(format!("{}: never sent", cap.name));
    };
    let actual = our_ids.capture(&cap.name, &String::from_utf8_lossy(&a.body));
    let mut problems = Vec::new();
    if let Some(e) = &a.error {
        problems.push(format!("request failed: {e}"));
    }
    if a.status_line != cap.status_line {
        problems.push(format!(
            "status line: captured {:?}, ours {:?}",
            cap.status_line, a.status_line
        ));
    }
    if a.content_type != cap.content_type {
        problems.push(format!(
            "content-type: captured {:?}, ours {:?}",
            cap.content_type, a.content_type
        ));
    }
    if expected != actual {
        // One frame per line so the diff shows frames.
        let lines = |s: &str| s.replace("\n\n", "\n\u{23CE}\n");
        let (e, o) = (lines(&expected), lines(&actual));
        let diff = similar::TextDiff::from_lines(&e, &o)
            .unified_diff()
            .context_radius(1)
            .header("captured", "ours")
            .to_string();
        problems.push(format!("body differs:\n{diff}"));
    }
    (!problems.is_empty()).then(|| format!("== {}\n{}", cap.name, problems.join("\n")))
}

#[test]
fn normalizer_numbers_ids_by_first_appearance() {
    let mut n = Normalizer::default();
    let s = n.capture(
        "b_x",
        r#"{"id":"message-2dc54175-e0d8-4433-838b-5c87a66a8b28","date":"2026-11-30T00:14:33+00:00","otid":"2dc54175-e0d8-4433-838b-5c87a66a8b00","run_id":"run-9692b116-0e54-437f-ad12-7076e30bfa01"} message-2dc54175-e0d8-4433-838b-5c87a66a8b28 user-00000000-0000-4000-8000-000000000000"#,
    );
    assert_eq!(
        s,
        r#"{"id":"<message-1>","date":"<date>","otid":"<uuid-1>","run_id":"<run-1>"} <message-1> user-00000000-0000-4000-8000-000000000000"#
    );
    // A later capture refers to it by where it came from; its own ids count from 1 again.
    assert_eq!(
        n.capture(
            "f1_y",
            "run-9692b116-0e54-437f-ad12-7076e30bfa01 run-00000000-0000-4000-8000-00000000000a"
        ),
        "<run-1@b> <run-1>"
    );
}

#[test]
fn every_capture_is_in_a_chain() {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("../shared/captures/letta_server")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".meta.txt").map(str::to_string)
        })
        .collect();
    names.sort();
    let mut chained: Vec<String> = MAIN.iter().chain(K2).map(|(n, _)| n.to_string()).collect();
    chained.sort();
    assert_eq!(names, chained);
}

/// Every capture, compared; the failure lists each mismatching capture with its diff.
#[test]
fn letta_oss_profile_reproduces_every_captured_stream() {
    let mut results: Vec<(Capture, Option<Answer>)> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for (steps, keepalive, slow) in [
        (MAIN, Duration::from_secs(20), Duration::from_millis(1500)),
        (K2, Duration::from_secs(2), Duration::from_millis(3500)),
    ] {
        let (caps, answers) = run_chain(steps, keepalive, slow);
        // One pair of normalisers per world: ids are shared along its chain.
        let (mut captured_ids, mut our_ids) = (Normalizer::default(), Normalizer::default());
        for c in caps {
            let a = answers.get(&c.name).cloned();
            failures.extend(compare(&c, a.as_ref(), &mut captured_ids, &mut our_ids));
            results.push((c, a));
        }
    }
    // GOLDEN_DUMP=dir writes our raw answers there, for a look at what the server sent.
    if let Ok(d) = std::env::var("GOLDEN_DUMP") {
        std::fs::create_dir_all(&d).expect("dump dir");
        for (c, a) in &results {
            let a = a.clone().unwrap_or_default();
            let head = format!(
                "{}\ncontent-type: {}\nerror: {:?}\n\n",
                a.status_line, a.content_type, a.error
            );
            std::fs::write(
                Path::new(&d).join(&c.name),
                [head.as_bytes(), &a.body].concat(),
            )
            .expect("dump");
        }
    }
    let total = results.len();
    assert!(
        failures.is_empty(),
        "{}/{total} captures differ from the letta-oss-0.16 profile:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// A request of a capture kept aside (PROVENANCE.md: g_miderr and k1 "are kept aside as
/// acceptance checks"): the request as cap.sh sent the others, no captured answer.
fn uncaptured(name: &str, path: &str, body: &str) -> Capture {
    Capture {
        name: name.into(),
        method: "POST".into(),
        path: path.into(),
        extra_header: None,
        body: Some(body.as_bytes().to_vec()),
        started_ms: 0,
        status_line: String::new(),
        content_type: String::new(),
        body_text: String::new(),
        first_n: None,
        cut_after_frames: None,
    }
}

fn frames(body: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(body)
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| {
            let data = f.lines().last().unwrap_or("").trim_start_matches("data: ");
            serde_json::from_str(data).unwrap_or(serde_json::Value::String(data.into()))
        })
        .collect()
}

/// g_miderr as PROVENANCE.md "Observations" describes it: the four tokens, two stop_reason
/// frames, `event: error` with the INVALID_ARGUMENT detail, no `[DONE]`; in the background the
/// error frame shows seq_id 8.
#[test]
fn miderr_ends_like_the_observations_describe() {
    let agent_stream = format!("/v1/agents/{AGENT}/messages/stream");
    let conv = format!("/v1/conversations/{AGENT}/messages");
    let caps = vec![
        uncaptured(
            "g_miderr_agents_stream_fg",
            &agent_stream,
            r#"{"messages":[{"role":"user","content":"MIDERR please","otid":"otid-probe-g-miderr-fg"}],"stream_tokens":true,"include_pings":true}"#,
        ),
        uncaptured(
            "g_miderr_conversations_agentid_bg",
            &conv,
            r#"{"messages":[{"role":"user","content":"MIDERR please (background)","otid":"otid-probe-g-miderr-bg"}],"streaming":true,"stream_tokens":true,"include_pings":true,"background":true}"#,
        ),
    ];
    let answers = run_world(
        caps,
        vec![After, After],
        Duration::from_secs(20),
        Duration::from_millis(1500),
    );
    for (name, bg) in [
        ("g_miderr_agents_stream_fg", false),
        ("g_miderr_conversations_agentid_bg", true),
    ] {
        let a = &answers[name];
        let text = String::from_utf8_lossy(&a.body);
        let f = frames(&a.body);
        let types: Vec<&str> = f
            .iter()
            .map(|v| v["message_type"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(
            types,
            [
                "ping",
                "assistant_message",
                "assistant_message",
                "assistant_message",
                "assistant_message",
                "stop_reason",
                "stop_reason",
                "error_message"
            ],
            "{name}: {text}"
        );
        assert_eq!(f[5]["stop_reason"], "error");
        assert_eq!(f[6]["stop_reason"], "llm_api_error");
        let err = &f[7];
        assert_eq!(err["error_type"], "internal_error");
        assert_eq!(err["message"], "An error occurred during agent execution.");
        assert_eq!(
            err["detail"],
            "INVALID_ARGUMENT: OpenAI API error: fake upstream error mid-stream (MIDERR)"
        );
        assert!(text.contains("\n\nevent: error\ndata: "), "{name}: {text}");
        assert!(!text.contains("[DONE]"), "{name}: {text}");
        let seq = if bg {
            serde_json::json!(8)
        } else {
            serde_json::Value::Null
        };
        assert_eq!(err["seq_id"], seq, "{name}");
    }
}

/// k1 as PROVENANCE.md describes it: a foreground slow stream with
/// `LETTA_KEEPALIVE_INTERVAL=2` gets keepalive pings between the tokens, each with a fresh id
/// and `seq_id: null`.
#[test]
fn foreground_keepalive_pings_show_no_seq_id() {
    let caps = vec![uncaptured(
        "k1_agents_stream_fg_keepalive2s",
        &format!("/v1/agents/{AGENT}/messages/stream"),
        r#"{"messages":[{"role":"user","content":"SLOW keepalive probe","otid":"otid-probe-k-0001"}],"stream_tokens":true,"include_pings":true}"#,
    )];
    let answers = run_world(
        caps,
        vec![After],
        Duration::from_secs(2),
        Duration::from_millis(3500),
    );
    let f = frames(&answers["k1_agents_stream_fg_keepalive2s"].body);
    let pings: Vec<&serde_json::Value> = f.iter().filter(|v| v["message_type"] == "ping").collect();
    let tokens = f
        .iter()
        .filter(|v| v["message_type"] == "assistant_message")
        .count();
    assert_eq!(tokens, 12);
    // The run ping, one before the first token, one after each token (3.5 s gaps, 2 s interval).
    assert_eq!(pings.len(), 1 + 1 + 12, "{f:?}");
    assert!(pings.iter().all(|p| p["seq_id"].is_null()));
    let mut ids: Vec<&str> = pings.iter().filter_map(|p| p["id"].as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), pings.len(), "every keepalive has a fresh id");
    assert_eq!(f.last(), Some(&serde_json::Value::String("[DONE]".into())));
}
