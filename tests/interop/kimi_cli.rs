//! For the Kimi Code interop tests: install the published Kimi Code CLI
//! (tests/interop/setup-kimi.sh), run it headless against `sim serve --provider-only`, run the
//! agent-loop model against the same server on real TCP, and reduce each side's provider
//! requests to the loop's observable sequence.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use loopsim::harness::env::{AddressBook, TcpEnv};
use loopsim::harness::kimi::script::loop_responses;
use loopsim::harness::kimi::world::{agent_config, initial_workspace};
use loopsim::harness::scenario::Scenario;
use loopsim::harness::trace::{Trace, TraceEvent};
use loopsim::harness::world_start::EPOCH_UNIX_MS;
use loopsim::model::kimi::agent::LoopTurnOutcome;
use loopsim::model::kimi::agent::inject::NoAgentFaults;
use loopsim::model::port::observe::Observation;
use loopsim::model::tools::Workspace;
use serde_json::Value;

use crate::common::repo;
use crate::local_backend::{lines, start_provider_with};

/// The installed CLI: the Node 22 that runs it and its `dist/main.mjs`.
#[derive(Debug, Clone)]
pub struct Kimi {
    pub node: PathBuf,
    pub main: PathBuf,
}

/// Where the Kimi interop tests install (ignored by git: under target/).
pub fn kimi_dir() -> PathBuf {
    std::env::var_os("LOOPSIM_INTEROP_KIMI_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/interop-kimi"))
}

/// Runs tests/interop/setup-kimi.sh once per test binary. `None` (after printing why) only
/// when the npm registry is unreachable; any other failure panics.
pub fn setup_kimi() -> Option<Kimi> {
    static SETUP: OnceLock<Result<Kimi, String>> = OnceLock::new();
    let r = SETUP.get_or_init(|| {
        let dir = kimi_dir();
        let out = Command::new("bash")
            .arg(repo().join("tests/interop/setup-kimi.sh"))
            .arg(&dir)
            .output()
            .expect("bash runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        match out.status.code() {
            Some(0) => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                let main = stdout.trim().lines().last().unwrap_or("").to_string();
                Ok(Kimi {
                    node: dir.join("node"),
                    main: PathBuf::from(main),
                })
            }
            Some(75) => Err(stderr),
            _ => panic!("tests/interop/setup-kimi.sh failed:\n{stderr}"),
        }
    });
    match r {
        Ok(k) => Some(k.clone()),
        Err(why) => {
            println!("SKIPPED: {}", why.trim());
            None
        }
    }
}

/// Which of the CLI's two loops runs the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The CLI's default engine (`agent-core-v2`).
    Default,
    /// `KIMI_CODE_LEGACY_FLAG=1`: the `agent-core` loop kimi-loop.md describes.
    Legacy,
}

/// One headless CLI run.
#[derive(Debug)]
pub struct KimiRun {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
    /// stdout's JSON lines (`--output-format stream-json`).
    pub events: Vec<Value>,
}

impl KimiRun {
    /// The `turn.step.retrying` meta events, in order.
    pub fn retries(&self) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == "turn.step.retrying")
            .collect()
    }
}

/// The CLI's provider type for a scenario's `[provider] api`, and the base URL it is given
/// (the OpenAI SDKs append `/chat/completions` or `/responses` to a `/v1` base; Anthropic's
/// appends `/v1/messages`).
pub fn provider_type(api: &str, listening: &str) -> (&'static str, String) {
    match api {
        "anthropic" => ("anthropic", format!("http://{listening}")),
        "openai_responses" => ("openai_responses", format!("http://{listening}/v1")),
        _ => ("openai", format!("http://{listening}/v1")),
    }
}

/// Runs the CLI headless (`-p PROMPT --output-format stream-json`) in `work` with a fresh HOME
/// and `KIMI_CODE_HOME` under `dir`, telemetry, the updater and the catalog refresh off, the
/// provider from the `KIMI_MODEL_*` variables. Print mode approves tools by itself. `env` is
/// set last. Bounded: a run that has not ended after two minutes is killed (`code` `None`).
#[allow(clippy::too_many_arguments)]
pub fn run_kimi(
    kimi: &Kimi,
    engine: Engine,
    dir: &Path,
    work: &Path,
    api: &str,
    listening: &str,
    model: &str,
    prompt: &str,
    env: &[(&str, &str)],
) -> KimiRun {
    let home = dir.join("home");
    let kimi_home = home.join(".kimi-code");
    std::fs::create_dir_all(&kimi_home).unwrap();
    let (ptype, base_url) = provider_type(api, listening);
    let mut cmd = Command::new(&kimi.node);
    cmd.arg(&kimi.main)
        .args(["-p", prompt, "--output-format", "stream-json"])
        .env_clear()
        .env("HOME", &home)
        .env("KIMI_CODE_HOME", &kimi_home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TERM", "dumb")
        .env("KIMI_DISABLE_TELEMETRY", "1")
        .env("KIMI_CODE_NO_AUTO_UPDATE", "1")
        .env("KIMI_CODE_MODEL_CATALOG_REFRESH_ON_START", "0")
        .env("KIMI_MODEL_PROVIDER_TYPE", ptype)
        .env("KIMI_MODEL_BASE_URL", base_url)
        .env("KIMI_MODEL_NAME", model)
        .env("KIMI_MODEL_API_KEY", "sk-loopsim-kimi-interop");
    if engine == Engine::Legacy {
        cmd.env("KIMI_CODE_LEGACY_FLAG", "1");
    }
    let mut child = cmd
        .envs(env.iter().copied())
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let events = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    KimiRun {
        stdout,
        stderr,
        code,
        events,
    }
}

/// The agent-loop model (`model::kimi::agent::run`, the same code `sim run` simulates) on real
/// TCP against a provider at `listening`, with the scenario's seed-0 configuration.
pub struct ModelRun {
    pub trace: Vec<TraceEvent>,
    pub outcomes: Vec<LoopTurnOutcome>,
    pub workspace: Workspace,
}

pub fn run_model(scenario: &Scenario, listening: &str) -> ModelRun {
    let (_, latencies) = loop_responses(scenario).unwrap();
    let mut config = agent_config(scenario, 0, Arc::new(NoAgentFaults), latencies).unwrap();
    config.provider_addr = listening.to_string();
    let workspace = Arc::new(Mutex::new(initial_workspace(scenario)));
    let trace = Trace::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let env = TcpEnv::new("client", trace.clone(), EPOCH_UNIX_MS, AddressBook::new());
    let outcomes = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(120),
            loopsim::model::kimi::agent::run(env, config, workspace.clone()),
        )
        .await
        .expect("the model's turns end within two minutes")
    });
    let workspace = workspace.lock().unwrap().clone();
    ModelRun {
        trace: trace.events(),
        outcomes,
        workspace,
    }
}

impl ModelRun {
    /// The loop's `step.retrying` events: (failed attempt, delay ms).
    pub fn retries(&self) -> Vec<(u32, u64)> {
        self.trace
            .iter()
            .filter_map(|e| match &e.obs {
                Observation::LoopRetrying {
                    failed_attempt,
                    delay_ms,
                    ..
                } => Some((*failed_attempt, *delay_ms)),
                _ => None,
            })
            .collect()
    }
}

/// A provider-only server for `scenario_text` (written into `dir`), on a thread of this
/// process: its ready line and request log.
pub fn serve(dir: &Path, name: &str, scenario_text: &str) -> (Value, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, scenario_text).unwrap();
    start_provider_with(dir, path).unwrap_or_else(|e| panic!("sim serve --provider-only: {e}"))
}

/// A scenario's text with its cassette paths (`"../../…"`, from scenarios/kimi/ or
/// tests/interop/ to the crate root) made absolute, so it can be written anywhere.
pub fn scenario_text(rel: &str) -> String {
    let path = repo().join(rel);
    let dir = path.parent().unwrap().display().to_string();
    std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"../../", &format!("\"{dir}/../../"))
}

/// The scenario's `[agent_loop.files]`, written under `work` (leading `/` dropped).
pub fn write_files(scenario: &Scenario, work: &Path) {
    for (k, v) in scenario.agent_loop.as_ref().unwrap().files.iter() {
        let p = work.join(k.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, v).unwrap();
    }
}

/// The texts the loop and its host write into a tool result (kimi-loop.md §4.2–§4.6, §8.3):
/// kept when a result is normalised, while a tool's own output (real tools against simulated
/// ones) is not.
fn loop_text(text: &str) -> Option<String> {
    let body = text
        .strip_prefix("<system>ERROR: Tool execution failed.</system>\n")
        .unwrap_or(text);
    let loop_owned = (body.starts_with("Tool \"") && body.contains("\" not found"))
        || body.starts_with("Invalid args for tool ")
        || body.starts_with("This tool call was not executed")
        || body.starts_with("Tool skipped because a previous tool call stopped the turn.")
        || body.starts_with("Tool execution was interrupted before its result was recorded.")
        || body.starts_with("Tool result is not available in the current context.");
    loop_owned.then(|| body.lines().next().unwrap_or("").to_string())
}

/// What a Read returned, as file lines, when it returned the file: the CLI numbers each line
/// (`N<tab>`) and appends a `<system>…</system>` status; the model's Read returns the text.
/// Which version of a file a Read saw is how a batch's read/write ordering shows in requests.
fn read_text(text: &str) -> Option<String> {
    if text.starts_with("<system>ERROR") {
        return None;
    }
    let body = match text.rfind("<system>") {
        Some(i) if text.trim_end().ends_with("</system>") => &text[..i],
        _ => text,
    };
    let lines: Vec<&str> = body
        .trim_end_matches('\n')
        .lines()
        .map(|l| match l.split_once('\t') {
            Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => rest,
            _ => l,
        })
        .collect();
    Some(format!("{:?}", lines.join("\n")))
}

/// A tool result as compared: the loop's own text, what a Read saw, or `(tool output)`.
fn result_line(names: &BTreeMap<String, String>, raw_id: &str, text: &str) -> String {
    if let Some(t) = loop_text(text) {
        return t;
    }
    match names.get(raw_id).map(String::as_str) {
        Some("Read") => read_text(text)
            .map(|t| format!("read {t}"))
            .unwrap_or_else(|| "(tool output)".into()),
        _ => "(tool output)".into(),
    }
}

/// A tool call's arguments in one vocabulary: a `path` without its leading `/` (the model's
/// workspace is rooted at `/`, the CLI's at its working directory) and the CLI's Edit keys
/// (`old_string`, `new_string`) as the model's (`old`, `new`).
fn normal_args(args: &Value) -> String {
    let mut args = args.clone();
    if let Some(m) = args.as_object_mut() {
        if let Some(Value::String(p)) = m.get_mut("path") {
            *p = p.trim_start_matches('/').to_string();
        }
        for (from, to) in [("old_string", "old"), ("new_string", "new")] {
            if let Some(v) = m.remove(from) {
                m.insert(to.to_string(), v);
            }
        }
        m.sort_keys();
    }
    args.to_string()
}

/// Parses a tool call's `arguments` string (or takes an already-parsed value).
fn parse_args(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        Value::Null => Value::Object(Default::default()),
        other => other.clone(),
    }
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// What a provider request says the loop did, one line per item, ids numbered by first
/// appearance (`#1`, `#2`, …): the user's prompt, each assistant step's text and tool calls
/// (name and arguments), each tool result (its tool call, and the loop's own text when the
/// loop wrote it, or the file lines a Read returned). Left out: the system prompt, the CLI's `<system-reminder>` user texts, tool
/// schemas and sampling fields.
pub fn normalise(api: &str, body: &Value, ids: &mut BTreeMap<String, usize>) -> Vec<String> {
    let mut id = |raw: &str| {
        let n = ids.len() + 1;
        format!("#{}", ids.entry(raw.to_string()).or_insert(n))
    };
    let mut out = Vec::new();
    let user = |out: &mut Vec<String>, text: &str| {
        if !text.trim_start().starts_with("<system-reminder>") && !text.trim().is_empty() {
            out.push(format!("user {text:?}"));
        }
    };
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    match api {
        "anthropic" => {
            for m in body["messages"].as_array().into_iter().flatten() {
                let role = m["role"].as_str().unwrap_or("");
                let blocks = match &m["content"] {
                    Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
                    Value::Array(a) => a.clone(),
                    _ => Vec::new(),
                };
                for b in &blocks {
                    match (role, b["type"].as_str().unwrap_or("")) {
                        ("user", "text") => user(&mut out, b["text"].as_str().unwrap_or("")),
                        ("assistant", "text") => {
                            out.push(format!("assistant {:?}", b["text"].as_str().unwrap_or("")))
                        }
                        ("assistant", "tool_use") => {
                            let raw = b["id"].as_str().unwrap_or("");
                            let name = b["name"].as_str().unwrap_or("");
                            names.insert(raw.to_string(), name.to_string());
                            out.push(format!(
                                "call {} {name} {}",
                                id(raw),
                                normal_args(&b["input"])
                            ))
                        }
                        ("user", "tool_result") => {
                            let raw = b["tool_use_id"].as_str().unwrap_or("");
                            let text = content_text(&b["content"]);
                            out.push(format!(
                                "result {} {}",
                                id(raw),
                                result_line(&names, raw, &text)
                            ))
                        }
                        (r, t) => out.push(format!("{r} {t}")),
                    }
                }
            }
        }
        "openai_responses" => {
            for item in body["input"].as_array().into_iter().flatten() {
                match (item["type"].as_str(), item["role"].as_str()) {
                    (Some("function_call"), _) => {
                        let raw = item["call_id"].as_str().unwrap_or("");
                        let name = item["name"].as_str().unwrap_or("");
                        names.insert(raw.to_string(), name.to_string());
                        out.push(format!(
                            "call {} {name} {}",
                            id(raw),
                            normal_args(&parse_args(&item["arguments"]))
                        ))
                    }
                    (Some("function_call_output"), _) => {
                        let raw = item["call_id"].as_str().unwrap_or("");
                        let text = content_text(&item["output"]);
                        out.push(format!(
                            "result {} {}",
                            id(raw),
                            result_line(&names, raw, &text)
                        ))
                    }
                    (_, Some("user")) => user(&mut out, &content_text(&item["content"])),
                    (_, Some("system" | "developer")) => {}
                    (_, Some(r)) => out.push(format!("{r} {:?}", content_text(&item["content"]))),
                    (t, r) => out.push(format!("{t:?} {r:?}")),
                }
            }
        }
        _ => {
            for m in body["messages"].as_array().into_iter().flatten() {
                match m["role"].as_str().unwrap_or("") {
                    "system" | "developer" => {}
                    "user" => user(&mut out, &content_text(&m["content"])),
                    "assistant" => {
                        let text = content_text(&m["content"]);
                        if !text.is_empty() {
                            out.push(format!("assistant {text:?}"));
                        }
                        for c in m["tool_calls"].as_array().into_iter().flatten() {
                            let raw = c["id"].as_str().unwrap_or("");
                            let name = c["function"]["name"].as_str().unwrap_or("");
                            names.insert(raw.to_string(), name.to_string());
                            out.push(format!(
                                "call {} {name} {}",
                                id(raw),
                                normal_args(&parse_args(&c["function"]["arguments"]))
                            ));
                        }
                    }
                    "tool" => {
                        let raw = m["tool_call_id"].as_str().unwrap_or("");
                        let text = content_text(&m["content"]);
                        out.push(format!(
                            "result {} {}",
                            id(raw),
                            result_line(&names, raw, &text)
                        ))
                    }
                    r => out.push(format!("{r} {:?}", content_text(&m["content"]))),
                }
            }
        }
    }
    out
}

/// A request log's model calls, each as `call N → STATUS` followed by its normalised lines.
pub fn model_calls(api: &str, log: &Path) -> Vec<String> {
    let mut ids = BTreeMap::new();
    let mut out = Vec::new();
    for l in lines(log).iter().filter(|l| l["route"] == "model_call") {
        out.push(format!("request {} → {}", l["call"], l["status"]));
        for line in normalise(api, &l["body"], &mut ids) {
            out.push(format!("  {line}"));
        }
    }
    out
}

/// The nominal class of a retry delay (kimi-loop.md §6): the server's `Retry-After` when the
/// failed answer carried one, else the backoff step `i` whose base `min(500·2^i, 32000)` the
/// jittered delay (`base + U·0.25·base`) falls in.
pub fn delay_class(delay_ms: f64, retry_after_ms: Option<u64>) -> String {
    if let Some(ra) = retry_after_ms
        && (delay_ms - ra as f64).abs() < 1.0
    {
        return format!("retry-after {ra} ms");
    }
    for i in 0..10u32 {
        let base = (500u64 << i).min(32_000) as f64;
        if delay_ms + 1.0 >= base && delay_ms <= base * 1.25 + 1.0 {
            return format!("backoff base {base} ms");
        }
    }
    format!("off the ramp: {delay_ms} ms")
}
