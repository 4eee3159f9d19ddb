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
use std::time::Duration;

use loopsim::harness::replay::server::{ModelSource, ReplayRequest, ServerAnswer, ServerSetup};
use loopsim::harness::replay::{self, Expected, Normalizer};
use loopsim::model::letta::server::{AgentConfig, ApprovalConflict, Profile, ServerBugs};
use loopsim::model::provider::scripted::ScriptConfig;
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

/// The capture as a request for the replay world: curl 7.88.1's defaults (harness/cap.sh),
/// started as [`Start`] says (`index` is its place in the world's request list, after setup).
fn request(cap: &Capture, index: usize, caps: &[Capture], start: Start) -> ReplayRequest {
    let mut headers = vec![
        ("user-agent".to_string(), "curl/7.88.1".to_string()),
        ("accept".to_string(), "*/*".to_string()),
    ];
    if cap.body.is_some() {
        headers.push(("content-type".into(), "application/json".into()));
    }
    headers.extend(cap.extra_header.clone());
    let start = match start {
        // After every earlier response (setup included) has ended, plus cap.sh's 0.5 s settle.
        After => replay::server::Start {
            after_end: (0..index).map(|i| (i, 500)).collect(),
            ..Default::default()
        },
        With(leader) => {
            let i = caps.iter().position(|c| c.name == leader).expect("leader");
            replay::server::Start {
                after_start: Some((i + 1, cap.started_ms - caps[i].started_ms)),
                ..Default::default()
            }
        }
    };
    ReplayRequest {
        name: cap.name.clone(),
        method: cap.method.clone(),
        path: cap.path.clone(),
        headers,
        body: cap.body.clone().unwrap_or_default(),
        start,
        cut_after_frames: cap.cut_after_frames,
        script_requests: cap.first_n.map(|n| n - 1),
        recorded_text: cap.body_text.clone(),
    }
}

/// Runs one chain in its own world and returns our answer per capture name.
fn run_chain(
    steps: &[(&str, Start)],
    keepalive: Duration,
    slow_delay: Duration,
) -> (Vec<Capture>, BTreeMap<String, ServerAnswer>) {
    let caps: Vec<Capture> = steps.iter().map(|(n, _)| load(n)).collect();
    let starts: Vec<Start> = steps.iter().map(|(_, s)| *s).collect();
    let answers = run_world(caps.clone(), starts, keepalive, slow_delay);
    (caps, answers)
}

/// Sends `caps` in order to a fresh letta-oss-0.16 server with the scripted model, after the
/// setup request that created the conversation h1 used (PROVENANCE.md "Conversation (for
/// h1)"); the replay world is `loopsim::harness::replay::server`'s.
fn run_world(
    caps: Vec<Capture>,
    starts: Vec<Start>,
    keepalive: Duration,
    slow_delay: Duration,
) -> BTreeMap<String, ServerAnswer> {
    let setup = ReplayRequest {
        name: "setup".into(),
        method: "POST".into(),
        path: format!("/v1/conversations/?agent_id={AGENT}"),
        headers: vec![
            ("user-agent".into(), "curl/7.88.1".into()),
            ("accept".into(), "*/*".into()),
            ("content-type".into(), "application/json".into()),
        ],
        body: br#"{"summary":"probe conversation"}"#.to_vec(),
        start: replay::server::Start::default(),
        cut_after_frames: None,
        script_requests: None,
        recorded_text: CAPTURED_CONV.into(),
    };
    let mut requests = vec![setup];
    for (i, (cap, start)) in caps.iter().zip(starts).enumerate() {
        requests.push(request(cap, i + 1, &caps, start));
    }
    let world = captured_server(
        keepalive,
        ScriptConfig {
            slow_delay,
            ..ScriptConfig::captured(9000)
        },
    );
    let out = replay::server::run_world(&requests, &world);
    assert_eq!(out.stopped, None, "simulation");
    requests
        .iter()
        .zip(out.answers)
        .filter_map(|(r, a)| Some((r.name.clone(), a?)))
        .collect()
}

/// The server the captures were recorded against: Letta 0.16.8 on the captures' agent, with the
/// scripted fake model behind it and the captures' epoch.
fn captured_server(keepalive: Duration, script: ScriptConfig) -> ServerSetup {
    ServerSetup {
        seed: 7,
        agents: vec![AgentConfig {
            id: AGENT.into(),
            model: MODEL.into(),
        }],
        profile: Profile::LettaOss016,
        approval_conflict: ApprovalConflict::InBand,
        keepalive,
        bugs: ServerBugs::default(),
        provider_api: ProviderFormat::OpenAiChat,
        model: ModelSource::Scripted(script),
        epoch_unix_ms: EPOCH_UNIX_MS,
        mapped_kinds: vec!["run-", "conv-"],
        budget: Duration::from_secs(3600),
    }
}

/// The mismatch report of one capture, or `None` when it matches.
fn compare(
    cap: &Capture,
    ours: Option<&ServerAnswer>,
    captured_ids: &mut Normalizer,
    our_ids: &mut Normalizer,
) -> Option<String> {
    let expected = Expected {
        name: cap.name.clone(),
        status_line: cap.status_line.clone(),
        content_type: cap.content_type.clone(),
        body_text: cap.body_text.clone(),
    };
    let text = ours.map_or(String::new(), |a| {
        String::from_utf8_lossy(&a.body).into_owned()
    });
    let d = replay::compare_answer(&expected, ours, &text, captured_ids, our_ids)?;
    Some(format!(
        "== {}\n{}\n{}",
        cap.name,
        d.problems.join("\n"),
        d.diff
    ))
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
    let mut results: Vec<(Capture, Option<ServerAnswer>)> = Vec::new();
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

/// The status wrapper of a stored tool result carries the `time` of its write: the epoch plus
/// the simulated time (captures b, b2: `"time": "2026-11-30 12:14:32 AM UTC+0000"`). The
/// captured responses never show it (the fake model echoes the first 80 characters of the tool
/// message, newlines as spaces, and the captured results are longer), so this sends a result of
/// `ok`, whose wrapper reaches the time within those 80, and reads it back from the model's echo.
#[test]
fn a_tool_results_wrapper_is_dated_at_the_epoch_plus_the_simulated_time() {
    let post = |name: &str, body: &str, start: replay::server::Start| ReplayRequest {
        name: name.into(),
        method: "POST".into(),
        path: format!("/v1/agents/{AGENT}/messages/stream"),
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
        start,
        cut_after_frames: None,
        script_requests: None,
        recorded_text: String::new(),
    };
    let tools = r#""client_tools":[{"name":"get_secret_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]"#;
    let ask = format!(
        r#"{{"messages":[{{"role":"user","content":"What is the weather in Paris?","otid":"otid-w-1"}}],"stream_tokens":true,{tools}}}"#
    );
    let answer = format!(
        r#"{{"messages":[{{"type":"approval","approvals":[{{"type":"tool","tool_call_id":"call_fake0001","tool_return":"ok","status":"success"}}],"otid":"otid-w-2"}}],"stream_tokens":true,{tools}}}"#
    );
    let after_ask = replay::server::Start {
        at_ms: 2_500,
        after_end: vec![(0, 0)],
        after_start: None,
    };
    let requests = [
        post("ask", &ask, replay::server::Start::default()),
        post("answer", &answer, after_ask),
    ];
    let world = captured_server(Duration::from_secs(60), ScriptConfig::captured(9000));
    let out = replay::server::run_world(&requests, &world);
    assert_eq!(out.stopped, None, "simulation");
    let asked = out.answers[0].as_ref().expect("the ask was answered");
    let asked = String::from_utf8_lossy(&asked.body);
    assert!(asked.contains("call_fake0001"), "{asked}");
    let answered = out.answers[1].as_ref().expect("the answer was answered");
    // The model's echo, streamed a word at a time.
    let echo: String = String::from_utf8_lossy(&answered.body)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter(|v| v["message_type"] == "assistant_message")
        .filter_map(|v| v["content"].as_str().map(str::to_owned))
        .collect();
    // The write happens while the request is served, 2.5 s or more after the epoch.
    let dated = |ms: u64| {
        let time = loopsim::model::letta::server::ids::letta_time(EPOCH_UNIX_MS + ms);
        let wrapper = format!(
            "{{\n  \"status\": \"OK\",\n  \"message\": \"ok\",\n  \"time\": \"{time}\"\n}}"
        );
        let seen: String = wrapper.replace('\n', " ").chars().take(80).collect();
        format!("Tool result received: {seen}")
    };
    assert!(
        echo == dated(answered.started_ms) || echo == dated(answered.ended_ms),
        "wanted {}, got {echo}",
        dated(answered.started_ms)
    );
    assert_ne!(dated(answered.started_ms), dated(0));
}
