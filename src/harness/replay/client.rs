//! The client side of a replay: the scenario a `letta` recording implies, run with loopsim's
//! client model against the server model, and the client's protocol requests compared with the
//! recorded client's, step by step after id normalisation (`harness::letta::conformance`).
//!
//! The scenario (its TOML text is what `--emit-scenario` writes):
//! - the agent the recorded client talked to, on its default conversation (the recorded
//!   conversation becomes `{conv}` in the comparison either way);
//! - one user turn per distinct otid of the recorded client's user messages, the prompt being
//!   the message's last text part (the ones before it are the CLI's reminders);
//! - the tools the model called, with the parameters the client declared for them;
//! - permissions from the recorded answers: a tool the client ran is allowed, one it denied with
//!   the headless text is `always_ask` (headless denies an ask), one it denied otherwise is
//!   denied (closing a stale call says nothing about permissions);
//! - whether it read the conversation's tail at start-up (`backfill`);
//! - what the setup requests of other clients left behind, as faults: a send that ended in
//!   `requires_approval` before the client started is a `stale_approval` of that tool call; each
//!   client send the server answered 409 is a `busy_on_send` of that send, the first one answered
//!   with the in-band approval conflict an `approval_pending_in_band` of that send (once: the
//!   approval stays pending, so later sends meet it in the server model itself); a stream of the
//!   client's that ended in a reset the client did not make is a `drop_connection` of that
//!   streaming response after as many frames;
//! - the model's answers to the client's own sends, recovered from the recorded frames
//!   (`derive`); the server in `letta-oss-0.16` (or `--server-profile`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::derive::{DEFAULT_MODEL, answer_for_call, data_of, makes_model_call};
use crate::cassette::{Body, Cassette, EndKind, Exchange, Recording, ResponseBody};
use crate::harness::letta::conformance::{Mismatch, RawRequest, Step, compare, normalise, render};
use crate::harness::report::RunReport;
use crate::harness::scenario::{InputError, Scenario};

/// The start of the denial text a client sends when it closes a stale pending call
/// (letta-protocol.md §3.12).
const STALE_RECOVERY: &str = "automatically closed this stale pending tool call";

/// Whether the exchange was sent by the recorded Letta Code client.
fn by_client(x: &Exchange) -> bool {
    x.request
        .headers
        .iter()
        .any(|(k, v)| k == "user-agent" && v.starts_with("letta-code/"))
}

fn json_body(x: &Exchange) -> Option<&Value> {
    match &x.request.body {
        Body::Json(v) => Some(v),
        _ => None,
    }
}

/// The recorded client's requests as conformance reads them.
pub fn recorded_requests(rec: &Recording) -> Vec<RawRequest> {
    rec.exchanges()
        .iter()
        .filter(|x| by_client(x))
        .map(|x| RawRequest {
            method: x.method.clone(),
            path: x.path.clone(),
            body: json_body(x).cloned(),
            status: x.answer().map(|a| a.status),
        })
        .collect()
}

/// The recorded client's protocol steps.
pub fn recorded_steps(rec: &Recording) -> Vec<Step> {
    normalise(&recorded_requests(rec))
}

/// A scenario's client run against the expected steps: the one comparison CLI conformance
/// makes (tests/letta/client_conformance.rs, `sim replay --side client`).
pub struct ClientComparison {
    pub expected: Vec<Step>,
    pub actual: Vec<Step>,
    pub mismatch: Option<Box<Mismatch>>,
    pub report: RunReport,
}

impl ClientComparison {
    /// Both sequences and the report, for a failure message.
    pub fn explain(&self) -> String {
        format!(
            "recorded client:\n{}\nloopsim client:\n{}\n{}",
            render(&self.expected),
            render(&self.actual),
            self.report.render()
        )
    }
}

/// Runs `scenario` (seed 1, once) and compares its client's protocol steps with `expected`.
pub fn compare_client(
    scenario: &Scenario,
    expected: Vec<Step>,
) -> Result<ClientComparison, InputError> {
    let report = crate::harness::run::run_scenario(scenario, 1, 1)?;
    let log: Vec<RawRequest> = report.requests.iter().map(RawRequest::from).collect();
    let actual = normalise(&log);
    let mismatch = compare(&expected, &actual).err();
    Ok(ClientComparison {
        expected,
        actual,
        mismatch,
        report,
    })
}

/// The prompt of a user message: its last text part, or its string content.
fn prompt_of(m: &Value) -> Option<String> {
    match &m["content"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => parts
            .iter()
            .rev()
            .find_map(|p| p["text"].as_str().map(str::to_string)),
        _ => None,
    }
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The scenario a recording implies (module doc), as TOML, and the model's answers in the order
/// its `[provider] responses` names them (answer k, 1-based, as `answer_names(k)`).
pub fn derive_scenario(
    rec: &Recording,
    client_profile: &str,
    server_profile: &str,
    answer_names: &dyn Fn(usize) -> String,
) -> (String, Vec<Cassette>) {
    let xs = rec.exchanges();
    let agents = super::derive::agents(rec);
    let agent = agents.first().map_or(
        "agent-00000000-0000-4000-8000-000000000001".to_string(),
        |a| a.id.clone(),
    );
    let model = agents
        .first()
        .map_or(DEFAULT_MODEL.to_string(), |a| a.model.clone());
    let first_client = xs.iter().position(by_client).unwrap_or(xs.len());
    // The recorded client read the conversation's tail at start-up (the resume data).
    let backfill = xs.iter().any(|x| {
        by_client(x)
            && x.method == "GET"
            && x.path.contains("/messages?")
            && x.path.starts_with("/v1/conversations/")
    });
    let mut turns: Vec<(String, String)> = Vec::new();
    let mut tools: BTreeMap<String, Value> = BTreeMap::new();
    let mut declared: BTreeMap<String, Value> = BTreeMap::new();
    let mut allow: Vec<String> = Vec::new();
    let mut deny: Vec<String> = Vec::new();
    let mut ask: Vec<String> = Vec::new();
    let mut faults: Vec<String> = Vec::new();
    let mut answers: Vec<Cassette> = Vec::new();
    let mut calls: BTreeMap<String, String> = BTreeMap::new();
    let mut client_sends = 0;
    let mut client_streams = 0;
    let mut planted_in_band = false;
    let mut answered: BTreeSet<String> = BTreeSet::new();
    for (i, x) in xs.iter().enumerate() {
        // Tool calls the model made, by id (for permissions and stale approvals).
        if let Some(ResponseBody::Sse(frames)) = x.answer().map(|a| &a.body) {
            for f in frames {
                let Some(v) = data_of(&f.frame) else { continue };
                if v["message_type"] == "approval_request_message"
                    && let (Some(id), Some(name)) = (
                        v["tool_call"]["tool_call_id"].as_str(),
                        v["tool_call"]["name"].as_str(),
                    )
                {
                    calls.insert(id.to_string(), name.to_string());
                    tools.entry(name.to_string()).or_insert(Value::Null);
                }
            }
        }
        // A stream of the client's that the recording saw reset (not by the client) was cut
        // in transit: the same cut, after as many frames, of that streaming response.
        if by_client(x)
            && let Some(a) = x.answer()
            && let ResponseBody::Sse(frames) = &a.body
        {
            client_streams += 1;
            if a.end.kind == EndKind::Reset && !a.end.by_client {
                faults.push(format!(
                    "[[faults]]\nkind = \"drop_connection\"\nresponse = {client_streams}\nafter_frame = {}\n",
                    frames.len()
                ));
            }
        }
        let is_send = x.method == "POST" && x.path.ends_with("/messages");
        if !is_send {
            continue;
        }
        if !by_client(x) {
            // A setup send before the client started that left an approval pending (one sent
            // later shows in the client's sends, as in-band conflicts).
            if i < first_client && recorded_stop(x) == Some("requires_approval".into()) {
                for (id, name, args) in approval_calls(x) {
                    faults.push(format!(
                        "[[faults]]\nkind = \"stale_approval\"\nconversation = {}\ntool_call_id = {}\ntool = {}\narguments = {}\n",
                        toml_str(&agent),
                        toml_str(&id),
                        toml_str(&name),
                        toml_str(&args)
                    ));
                }
            }
            continue;
        }
        client_sends += 1;
        let Some(body) = json_body(x) else { continue };
        for t in body["client_tools"].as_array().into_iter().flatten() {
            if let Some(n) = t["name"].as_str() {
                declared.insert(n.to_string(), t.clone());
            }
        }
        if x.answer().is_some_and(|a| a.status == 409) {
            faults.push(format!(
                "[[faults]]\nkind = \"busy_on_send\"\nsend = {client_sends}\n"
            ));
        }
        // The first send that met the conflict is where the approval became pending; it stays
        // pending until a client resolves it, so the server model answers any later send in-band
        // by itself. Planting it once keeps the plan valid for a client that recovers.
        if in_band_approval_conflict(x) && !planted_in_band {
            planted_in_band = true;
            faults.push(format!(
                "[[faults]]\nkind = \"approval_pending_in_band\"\nsend = {client_sends}\n"
            ));
        }
        for m in body["messages"].as_array().into_iter().flatten() {
            if m["role"] == "user"
                && let (Some(otid), Some(p)) = (m["otid"].as_str(), prompt_of(m))
                && !turns.iter().any(|(o, _)| o == otid)
            {
                turns.push((otid.to_string(), p));
            }
            for a in m["approvals"].as_array().into_iter().flatten() {
                let name = a["tool_call_id"]
                    .as_str()
                    .and_then(|id| calls.get(id))
                    .cloned();
                let Some(name) = name else { continue };
                let reason = a["reason"].as_str().unwrap_or("");
                let list = if a["type"] == "tool" && a["status"] == "success" {
                    &mut allow
                } else if reason.contains(STALE_RECOVERY) {
                    // The client closing a stale call says nothing about the tool's permission.
                    continue;
                } else if reason.contains("(headless mode)") {
                    &mut ask
                } else {
                    &mut deny
                };
                if !list.contains(&name) {
                    list.push(name);
                }
            }
        }
        if makes_model_call(rec, i)
            && let Some(answer) = answer_for_call(rec, i)
        {
            answers.push(answer);
            for m in body["messages"].as_array().into_iter().flatten() {
                if let Some(otid) = m["otid"].as_str() {
                    answered.insert(otid.to_string());
                }
            }
        }
    }
    // Spare answers, after the recorded ones, for the model calls a client that recovers makes
    // where the recorded one did not: a turn whose sends reached no model (each met a conflict)
    // and the continuation that closes the planted approval. A scenario lists at least one.
    let unanswered = turns.iter().filter(|(o, _)| !answered.contains(o)).count();
    let spares = unanswered + usize::from(planted_in_band);
    for _ in 0..spares.max(usize::from(answers.is_empty())) {
        answers.extend(super::derive::text_answer("OK", rec.origin()));
    }
    let mut t = String::new();
    t.push_str(&format!(
        "# Derived by `sim replay --emit-scenario` from {} (harness/replay/client.rs says how).\n\n",
        rec.origin()
    ));
    t.push_str(&format!(
        "[scenario]\nname = \"replay-{}\"\ndescription = \"the session recorded in {}\"\nsystem = \"letta\"\nclient_profile = {}\n\n",
        Path::new(rec.origin()).file_stem().and_then(|s| s.to_str()).unwrap_or("cassette").replace('_', "-"),
        rec.origin(),
        toml_str(client_profile)
    ));
    t.push_str(&format!(
        "[server]\nprofile = {}\napproval_conflict = \"in_band\"\n\n",
        toml_str(server_profile)
    ));
    let names: Vec<String> = (1..=answers.len())
        .map(|k| toml_str(&answer_names(k)))
        .collect();
    t.push_str(&format!(
        "[provider]\napi = \"openai_chat\"\nresponses = [{}]\n\n",
        names.join(", ")
    ));
    t.push_str(&format!(
        "[agent]\nid = {}\nmodel = {}\n\n",
        toml_str(&agent),
        toml_str(&model)
    ));
    let turn_list: Vec<String> = turns.iter().map(|(_, p)| toml_str(p)).collect();
    t.push_str(&format!(
        "[client]\nturns = [{}]\nmode = \"headless\"\nconversation = {}\nbackfill = {backfill}\n\n",
        turn_list.join(", "),
        toml_str(&agent)
    ));
    for name in tools.keys() {
        t.push_str(&format!("[[client.tools]]\nname = {}\n", toml_str(name)));
        if let Some(d) = declared.get(name) {
            if let Some(desc) = d["description"].as_str() {
                let short: String = desc.chars().take(200).collect();
                t.push_str(&format!("description = {}\n", toml_str(&short)));
            }
            if let Some(p) = d.get("parameters").filter(|p| p.is_object())
                && let Ok(v) = toml::Value::try_from(p)
            {
                t.push_str(&format!("parameters = {}\n", inline(&v)));
            }
        }
        t.push('\n');
    }
    let list = |v: &[String]| v.iter().map(|s| toml_str(s)).collect::<Vec<_>>().join(", ");
    // A tool that ran is allowed, whatever else was answered for it.
    deny.retain(|n| !allow.contains(n));
    ask.retain(|n| !allow.contains(n) && !deny.contains(n));
    t.push_str(&format!(
        "[permissions]\nallow = [{}]\ndeny = [{}]\nalways_ask = [{}]\n\n",
        list(&allow),
        list(&deny),
        list(&ask)
    ));
    for f in faults {
        t.push_str(&f);
        t.push('\n');
    }
    (t, answers)
}

/// A TOML value written inline (`{ a = 1, b = [..] }`).
fn inline(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{} = {}", toml_key(k), inline(v)))
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
        toml::Value::Array(a) => {
            format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", "))
        }
        other => other.to_string(),
    }
}

fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        toml_str(k)
    }
}

/// Whether the send was answered with the in-band approval conflict (HTTP 200, `event: error`
/// with the CONFLICT text; letta-protocol.md §3.2, captures/letta_e2e d3).
fn in_band_approval_conflict(x: &Exchange) -> bool {
    let Some(ResponseBody::Sse(frames)) = x.answer().map(|a| &a.body) else {
        return false;
    };
    frames.iter().any(|f| {
        f.frame.as_event().is_some_and(|e| {
            e.event.as_deref() == Some("error")
                && e.data.contains("CONFLICT")
                && e.data.contains("waiting for approval")
        })
    })
}

fn recorded_stop(x: &Exchange) -> Option<String> {
    let ResponseBody::Sse(frames) = &x.answer()?.body else {
        return None;
    };
    frames.iter().find_map(|f| {
        let v = data_of(&f.frame)?;
        (v["message_type"] == "stop_reason")
            .then(|| v["stop_reason"].as_str().map(str::to_string))?
    })
}

/// The tool calls a stream asked approval for: (id, name, arguments joined).
fn approval_calls(x: &Exchange) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    let Some(ResponseBody::Sse(frames)) = x.answer().map(|a| &a.body) else {
        return out;
    };
    for f in frames {
        let Some(v) = data_of(&f.frame) else { continue };
        if v["message_type"] != "approval_request_message" {
            continue;
        }
        let c = &v["tool_call"];
        let id = c["tool_call_id"].as_str().unwrap_or("").to_string();
        let frag = c["arguments"].as_str().unwrap_or("");
        match out.iter_mut().find(|(i, _, _)| *i == id) {
            Some(e) => e.2.push_str(frag),
            None => out.push((
                id,
                c["name"].as_str().unwrap_or("").to_string(),
                frag.to_string(),
            )),
        }
    }
    out
}

/// The file names `--emit-scenario` gives the answers.
pub fn emitted_answer_name(k: usize) -> String {
    format!("answers/{k:02}.jsonl")
}

/// The derived scenario, parsed, its answers in memory.
pub fn scenario_of(
    rec: &Recording,
    client_profile: &str,
    server_profile: &str,
) -> Result<Scenario, InputError> {
    // Every answer is given in memory; the names only have to pass the check that a listed
    // cassette exists, so they name the recording itself.
    let here = Path::new(rec.origin());
    let own_name = here
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let (text, answers) =
        derive_scenario(rec, client_profile, server_profile, &|_| own_name.clone());
    let path = here.with_extension("derived.toml");
    let mut s = Scenario::parse(&text, &path)?;
    s.cassette_overrides = answers.into_iter().enumerate().collect();
    Ok(s)
}

/// Writes the derived scenario as a standalone directory: `DIR/scenario.toml` and its answers
/// under `DIR/answers/`, for `sim run`, `sim explore --swarm` and `sim shrink`. Returns the
/// scenario's path.
pub fn emit_scenario(
    rec: &Recording,
    dir: &Path,
    client_profile: &str,
    server_profile: &str,
) -> Result<std::path::PathBuf, InputError> {
    let (text, answers) =
        derive_scenario(rec, client_profile, server_profile, &emitted_answer_name);
    let err = |p: &Path, e: std::io::Error| InputError {
        file: p.display().to_string(),
        line: None,
        column: None,
        message: format!("cannot write: {e}"),
    };
    let answers_dir = dir.join("answers");
    std::fs::create_dir_all(&answers_dir).map_err(|e| err(&answers_dir, e))?;
    for (k, c) in answers.iter().enumerate() {
        let p = dir.join(emitted_answer_name(k + 1));
        std::fs::write(&p, c.to_jsonl()).map_err(|e| err(&p, e))?;
    }
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).map_err(|e| err(&path, e))?;
    // What was written must load like any scenario.
    Scenario::load(&path)?;
    Ok(path)
}
