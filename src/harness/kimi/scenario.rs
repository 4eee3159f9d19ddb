//! The `[agent_loop]` section of a scenario (`system = "agent-loop"`, docs/scenario.md) and
//! the validation of agent-loop scenarios. Strict like the rest: unknown keys and bad values
//! are errors naming the file, line and column.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::harness::faults::Fault;
use crate::harness::scenario::{InputError, Scenario};
use crate::model::kimi::agent::tools::TOOL_NAMES;
use crate::wire::provider::ProviderFormat;

/// The `system` name of the agent-loop world.
pub const SYSTEM: &str = "agent-loop";

/// The hosts of the agent-loop world (the agent runs on `client`).
pub const HOSTS: [&str; 2] = ["client", "provider"];

/// `[agent_loop]`: the agent host's turns, tools, workspace and limits, and the scripted
/// model calls.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentLoopSection {
    /// The user's messages, one per turn.
    pub turns: Vec<String>,
    /// The model name the agent puts in its requests.
    #[serde(default = "default_model")]
    pub model: String,
    /// The system prompt (carried by the LLM, never in the messages).
    #[serde(default = "default_system_prompt")]
    pub system_prompt: String,
    /// The tools offered to the model; default: all of them.
    #[serde(default = "default_tools")]
    pub tools: Vec<Spanned<String>>,
    /// `maxSteps` per turn; absent or 0 means no limit.
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// `maxRetryAttempts` per step; absent means the loop's default (10).
    #[serde(default)]
    pub max_retry_attempts: Option<u32>,
    /// The agent's read timeout: no response head, or a body silent this long, is an
    /// `APITimeoutError`.
    #[serde(default = "default_idle")]
    pub stream_idle_timeout_ms: u64,
    /// Each tool execution takes a latency drawn from `[min, max]` ms (seeded).
    #[serde(default = "default_tool_latency")]
    pub tool_latency_ms: [u64; 2],
    /// Files in the workspace at the start: path → content (a path without `/` is under `/`).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Scripted model calls, answered after the `[provider] responses` cassettes, in order.
    #[serde(default)]
    pub script: Vec<Spanned<ScriptStep>>,
}

fn default_model() -> String {
    "claude-sonnet-4-20250514".into()
}
fn default_system_prompt() -> String {
    "You are a coding agent working in a simulated workspace.".into()
}
fn default_tools() -> Vec<Spanned<String>> {
    TOOL_NAMES
        .iter()
        .map(|n| Spanned::new(0..0, (*n).to_string()))
        .collect()
}
fn default_idle() -> u64 {
    60_000
}
fn default_tool_latency() -> [u64; 2] {
    [1, 20]
}

/// One scripted model call: what the fake provider streams for it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptStep {
    /// Reasoning text, streamed first.
    #[serde(default)]
    pub thinking: Option<String>,
    /// Answer text.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls, in provider order.
    #[serde(default)]
    pub tool_calls: Vec<ScriptCall>,
    /// The stop reason: `end_turn`, `tool_use`, `max_tokens`, `pause_turn`, `refusal`, or any
    /// other word (the loop reads it as `unknown`). Default: `tool_use` with tool calls, else
    /// `end_turn`.
    #[serde(default)]
    pub stop: Option<Spanned<String>>,
    /// Token usage the provider reports.
    #[serde(default)]
    pub usage: ScriptUsage,
}

/// One scripted tool call.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptCall {
    pub name: String,
    /// The tool-call id; default `toolu_s<call>_<n>` (Anthropic) or `call_s<call>_<n>`.
    #[serde(default)]
    pub id: Option<String>,
    /// The arguments, as a table (sent as JSON).
    #[serde(default)]
    pub args: Option<toml::Table>,
    /// The raw argument text instead (may be broken JSON).
    #[serde(default)]
    pub raw_args: Option<String>,
    /// How long this call's tool runs, in ms (overrides `tool_latency_ms`).
    #[serde(default)]
    pub latency_ms: Option<u64>,
}

/// Scripted usage; fields default to a small plausible step.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptUsage {
    #[serde(default = "default_input")]
    pub input: u64,
    #[serde(default = "default_output")]
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_creation: u64,
}

fn default_input() -> u64 {
    100
}
fn default_output() -> u64 {
    20
}

impl Default for ScriptUsage {
    fn default() -> Self {
        ScriptUsage {
            input: default_input(),
            output: default_output(),
            cache_read: 0,
            cache_creation: 0,
        }
    }
}

impl ScriptStep {
    /// The effective stop word.
    pub fn stop_word(&self) -> String {
        match &self.stop {
            Some(s) => s.get_ref().clone(),
            None if self.tool_calls.is_empty() => "end_turn".into(),
            None => "tool_use".into(),
        }
    }
}

/// Which top-level sections the file has, with their positions (serde fills absent sections
/// with defaults, so presence is read separately).
#[derive(Deserialize)]
struct Present {
    #[serde(default)]
    agent: Option<Spanned<toml::Value>>,
    #[serde(default)]
    client: Option<Spanned<toml::Value>>,
    #[serde(default)]
    permissions: Option<Spanned<toml::Value>>,
    #[serde(default)]
    agent_loop: Option<Spanned<toml::Value>>,
}

impl Present {
    fn of(source: &str) -> Present {
        toml::from_str(source).unwrap_or(Present {
            agent: None,
            client: None,
            permissions: None,
            agent_loop: None,
        })
    }
}

fn whole(s: &Scenario, message: impl Into<String>) -> InputError {
    InputError {
        file: s.path.display().to_string(),
        line: None,
        column: None,
        message: message.into(),
    }
}

/// The section checks of a `letta` scenario: `[agent]` and `[client]` are required, the
/// agent-loop section and faults are not for it.
pub fn check_letta_sections(s: &Scenario) -> Result<(), InputError> {
    let present = Present::of(&s.source);
    if let Some(section) = &present.agent_loop {
        return Err(s.error_at(section.span(), "[agent_loop] is for system \"agent-loop\""));
    }
    for (name, p) in [("agent", &present.agent), ("client", &present.client)] {
        if p.is_none() {
            return Err(whole(
                s,
                format!("missing section [{name}]: system \"letta\" needs it"),
            ));
        }
    }
    for f in &s.faults {
        if f.get_ref().is_agent_loop_only() {
            return Err(s.error_at(
                f.span(),
                format!(
                    "fault `{}` is for system \"agent-loop\"",
                    f.get_ref().to_string().split(' ').next().unwrap_or("")
                ),
            ));
        }
    }
    Ok(())
}

/// Validates an agent-loop scenario.
pub fn validate(s: &Scenario) -> Result<(), InputError> {
    let present = Present::of(&s.source);
    for (name, p) in [
        ("agent", &present.agent),
        ("client", &present.client),
        ("permissions", &present.permissions),
    ] {
        if let Some(section) = p {
            return Err(s.error_at(
                section.span(),
                format!(
                    "[{name}] is for system \"letta\"; an agent-loop scenario puts its turns, tools and files in [agent_loop]"
                ),
            ));
        }
    }
    let profile = &s.scenario.client_profile;
    if profile.span().end > 0 {
        return Err(s.error_at(profile.span(), "client_profile is for system \"letta\""));
    }
    let Some(section) = &s.agent_loop else {
        return Err(whole(
            s,
            "missing section [agent_loop]: system \"agent-loop\" needs it",
        ));
    };
    let api = s.provider_api()?;
    for r in &s.provider.responses {
        let p = s.resolve(r.get_ref());
        if !p.is_file() {
            return Err(s.error_at(
                r.span(),
                format!(
                    "cassette {:?} not found (looked at {}); paths are relative to the scenario file",
                    r.get_ref(),
                    p.display()
                ),
            ));
        }
    }
    if s.provider.responses.is_empty() && section.script.is_empty() {
        return Err(whole(
            s,
            "no model answers: list cassettes in [provider] responses or steps in [[agent_loop.script]]",
        ));
    }
    if section.turns.is_empty() {
        return Err(whole(
            s,
            "[agent_loop] turns is empty: give at least one user message",
        ));
    }
    for t in &section.tools {
        if !TOOL_NAMES.contains(&t.get_ref().as_str()) {
            return Err(s.error_at(
                t.span(),
                format!(
                    "unknown tool {:?}: expected one of {}",
                    t.get_ref(),
                    TOOL_NAMES.join(", ")
                ),
            ));
        }
    }
    if section.tool_latency_ms[0] > section.tool_latency_ms[1] {
        return Err(whole(
            s,
            "[agent_loop] tool_latency_ms must be [min, max] with min <= max",
        ));
    }
    if section.stream_idle_timeout_ms == 0 {
        return Err(whole(
            s,
            "[agent_loop] stream_idle_timeout_ms must be at least 1",
        ));
    }
    for step in &section.script {
        check_step(s, api, step)?;
    }
    if s.network.latency_ms[0] > s.network.latency_ms[1] {
        return Err(whole(
            s,
            "[network] latency_ms must be [min, max] with min <= max",
        ));
    }
    if s.network.tick_ms == 0 {
        return Err(whole(s, "[network] tick_ms must be at least 1"));
    }
    for f in &s.faults {
        let fault = f.get_ref();
        if let Some(problem) = fault.problem().or_else(|| loop_fault_problem(fault)) {
            return Err(s.error_at(f.span(), problem));
        }
    }
    Ok(())
}

/// What is wrong with a fault in the agent-loop world (which has no server).
fn loop_fault_problem(f: &Fault) -> Option<String> {
    let no_server = || {
        Some("system \"agent-loop\" has no server: its hosts are \"client\" (the agent) and \"provider\"".to_string())
    };
    match f {
        _ if f.needs_server() => no_server(),
        Fault::Partition { between, .. } | Fault::Hold { between, .. }
            if between.iter().any(|h| !HOSTS.contains(&h.as_str())) =>
        {
            no_server()
        }
        Fault::Crash { host, .. } if host != "provider" => no_server(),
        _ => None,
    }
}

fn check_step(
    s: &Scenario,
    api: ProviderFormat,
    step: &Spanned<ScriptStep>,
) -> Result<(), InputError> {
    let st = step.get_ref();
    let at = |m: String| s.error_at(step.span(), m);
    if st.text.is_none() && st.thinking.is_none() && st.tool_calls.is_empty() {
        return Err(at(
            "a script step needs text, thinking or tool_calls (an empty answer is a provider error; use a provider_error fault)".into(),
        ));
    }
    let stop = st.stop_word();
    if api == ProviderFormat::OpenAiChat && stop == "pause_turn" {
        let span = st.stop.as_ref().map_or(step.span(), Spanned::span);
        return Err(s.error_at(span, "stop \"pause_turn\" is Anthropic-only"));
    }
    if api == ProviderFormat::OpenAiChat && (st.usage.cache_creation > 0) {
        return Err(at(
            "usage.cache_creation is Anthropic-only (OpenAI reports cached reads only)".into(),
        ));
    }
    for c in &st.tool_calls {
        if c.args.is_some() && c.raw_args.is_some() {
            return Err(at(format!(
                "tool call {:?}: give args or raw_args, not both",
                c.name
            )));
        }
        if c.name.is_empty() {
            return Err(at("a tool call needs a name".into()));
        }
    }
    Ok(())
}

/// An agent-loop scenario as a standalone TOML file whose cassettes are `cassette_paths`
/// (one per `[provider] responses` entry), for shrunk reproductions (`Scenario::to_toml`).
pub fn to_toml(s: &Scenario, cassette_paths: &[String], header: &str) -> String {
    use std::fmt::Write as _;
    let q = |v: &str| toml::Value::String(v.to_string()).to_string();
    let list = |v: &[String]| v.iter().map(|x| q(x)).collect::<Vec<_>>().join(", ");
    let mut out = String::new();
    for line in header.lines() {
        let _ = writeln!(out, "# {line}");
    }
    // Top-level keys must come before the first table.
    if !s.faults.is_empty() {
        let _ = writeln!(out, "\nfaults = [");
        for f in &s.faults {
            let _ = writeln!(out, "  {},", f.get_ref().to_toml());
        }
        let _ = writeln!(out, "]");
    }
    let _ = writeln!(out, "\n[scenario]");
    let _ = writeln!(out, "name = {}", q(&s.scenario.name));
    let _ = writeln!(out, "description = {}", q(&s.scenario.description));
    let _ = writeln!(out, "system = {}", q(SYSTEM));
    let _ = writeln!(out, "\n[network]");
    let _ = writeln!(out, "tick_ms = {}", s.network.tick_ms);
    let l = s.network.latency_ms;
    let _ = writeln!(out, "latency_ms = [{}, {}]", l[0], l[1]);
    let _ = writeln!(out, "\n[provider]");
    let _ = writeln!(out, "api = {}", q(s.provider.api.get_ref()));
    let _ = writeln!(out, "responses = [{}]", list(cassette_paths));
    if let Some(a) = &s.agent_loop {
        let _ = writeln!(out, "\n[agent_loop]");
        let _ = writeln!(out, "turns = [{}]", list(&a.turns));
        let _ = writeln!(out, "model = {}", q(&a.model));
        let _ = writeln!(out, "system_prompt = {}", q(&a.system_prompt));
        let tools: Vec<String> = a.tools.iter().map(|t| t.get_ref().clone()).collect();
        let _ = writeln!(out, "tools = [{}]", list(&tools));
        if let Some(m) = a.max_steps {
            let _ = writeln!(out, "max_steps = {m}");
        }
        if let Some(m) = a.max_retry_attempts {
            let _ = writeln!(out, "max_retry_attempts = {m}");
        }
        let _ = writeln!(out, "stream_idle_timeout_ms = {}", a.stream_idle_timeout_ms);
        let t = a.tool_latency_ms;
        let _ = writeln!(out, "tool_latency_ms = [{}, {}]", t[0], t[1]);
        if !a.files.is_empty() {
            let _ = writeln!(out, "\n[agent_loop.files]");
            for (k, v) in &a.files {
                let _ = writeln!(out, "{} = {}", q(k), q(v));
            }
        }
        for step in &a.script {
            let st = step.get_ref();
            let _ = writeln!(out, "\n[[agent_loop.script]]");
            if let Some(t) = &st.thinking {
                let _ = writeln!(out, "thinking = {}", q(t));
            }
            if let Some(t) = &st.text {
                let _ = writeln!(out, "text = {}", q(t));
            }
            if !st.tool_calls.is_empty() {
                let _ = writeln!(out, "tool_calls = [");
                for c in &st.tool_calls {
                    let mut call = format!("{{ name = {}", q(&c.name));
                    if let Some(id) = &c.id {
                        let _ = write!(call, ", id = {}", q(id));
                    }
                    if let Some(args) = &c.args {
                        let _ = write!(call, ", args = {}", toml::Value::Table(args.clone()));
                    }
                    if let Some(raw) = &c.raw_args {
                        let _ = write!(call, ", raw_args = {}", q(raw));
                    }
                    if let Some(ms) = c.latency_ms {
                        let _ = write!(call, ", latency_ms = {ms}");
                    }
                    let _ = writeln!(out, "    {call} }},");
                }
                let _ = writeln!(out, "]");
            }
            if let Some(stop) = &st.stop {
                let _ = writeln!(out, "stop = {}", q(stop.get_ref()));
            }
            let u = st.usage;
            let _ = writeln!(
                out,
                "usage = {{ input = {}, output = {}, cache_read = {}, cache_creation = {} }}",
                u.input, u.output, u.cache_read, u.cache_creation
            );
        }
    }
    let lim = &s.limits;
    let _ = writeln!(out, "\n[limits]");
    let _ = writeln!(out, "sim_time_ms = {}", lim.sim_time_ms);
    let _ = writeln!(out, "heal_at_ms = {}", lim.heal_at_ms);
    let _ = writeln!(out, "liveness_ms = {}", lim.liveness_ms);
    let p = &s.planted;
    if p.loop_results_in_completion_order || p.loop_scheduler_drain_ignores_active {
        let _ = writeln!(out, "\n[planted]");
        let _ = writeln!(
            out,
            "loop_results_in_completion_order = {}",
            p.loop_results_in_completion_order
        );
        let _ = writeln!(
            out,
            "loop_scheduler_drain_ignores_active = {}",
            p.loop_scheduler_drain_ignores_active
        );
    }
    out
}
