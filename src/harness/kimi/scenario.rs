//! The `[agent_loop]` section of a scenario (`system = "agent-loop"`, docs/scenario.md) and
//! the checks only agent-loop scenarios need. Strict like the rest: unknown keys and bad
//! values are errors naming the file, line and column.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::harness::faults::Fault;
use crate::harness::faults::plan::Reach;
use crate::harness::input::{InputError, Origin};
use crate::model::kimi::agent::tools::TOOL_NAMES;
use crate::wire::provider::ProviderFormat;

/// The hosts of the agent-loop world (the agent runs on `client`).
pub const HOSTS: [&str; 2] = ["client", "provider"];

/// `[agent_loop]`: the agent host's turns, tools, workspace and limits, and the scripted
/// model calls.
#[derive(Debug, Clone, Deserialize, Serialize)]
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
    #[serde(
        default = "default_tool_latency",
        deserialize_with = "crate::harness::input::min_max_pair"
    )]
    pub tool_latency_ms: [u64; 2],
    /// Files in the workspace at the start: path → content (a path without `/` is under `/`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
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
/// kimi-loop.md §6: `DEFAULT_MAX_RETRY_ATTEMPTS`, a step's attempts when the host names none
/// (`max_retry_attempts` absent). The harness's own statement of the reference's budget, so an
/// oracle holds the model to it rather than to the model's constant.
pub const REFERENCE_MAX_ATTEMPTS: u32 = 10;

fn default_idle() -> u64 {
    60_000
}
fn default_tool_latency() -> [u64; 2] {
    [1, 20]
}

/// One scripted model call: what the fake provider streams for it.
#[derive(Debug, Clone, Deserialize, Serialize)]
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
#[derive(Debug, Clone, Deserialize, Serialize)]
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
#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
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

/// The parts of a scenario an agent-loop world reads.
pub struct Sections<'a> {
    pub client_profile: &'a Spanned<String>,
    pub agent_loop: Option<&'a AgentLoopSection>,
    /// `[provider] api`, already checked.
    pub api: ProviderFormat,
    /// `[provider] responses`.
    pub responses: &'a [Spanned<String>],
    pub faults: &'a [Spanned<Fault>],
}

/// The checks of an agent-loop scenario beyond those every scenario gets.
pub fn validate(s: &Sections<'_>, at: &Origin<'_>) -> Result<(), InputError> {
    for name in [
        "agent",
        "client",
        "permissions",
        "server",
        "requests",
        "expect",
    ] {
        if let Some(span) = at.section(name) {
            return Err(at.at(
                span,
                format!(
                    "[{name}] is for system \"letta\"; an agent-loop scenario puts its turns, tools and files in [agent_loop]"
                ),
            ));
        }
    }
    let profile = s.client_profile;
    if profile.span().end > 0 {
        return Err(at.at(profile.span(), "client_profile is for system \"letta\""));
    }
    let Some(section) = s.agent_loop else {
        return Err(at.at_key(
            &["scenario", "system"],
            "missing section [agent_loop]: system \"agent-loop\" needs it",
        ));
    };
    if s.responses.is_empty() && section.script.is_empty() {
        return Err(at.at_key(
            &["provider", "responses"],
            "no model answers: list cassettes in [provider] responses or steps in [[agent_loop.script]]",
        ));
    }
    if section.turns.is_empty() {
        return Err(at.at_key(
            &["agent_loop", "turns"],
            "[agent_loop] turns is empty: give at least one user message",
        ));
    }
    for t in &section.tools {
        if !TOOL_NAMES.contains(&t.get_ref().as_str()) {
            return Err(at.at(
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
        return Err(at.at_key(
            &["agent_loop", "tool_latency_ms"],
            "[agent_loop] tool_latency_ms must be [min, max] with min <= max",
        ));
    }
    if section.stream_idle_timeout_ms == 0 {
        return Err(at.at_key(
            &["agent_loop", "stream_idle_timeout_ms"],
            "[agent_loop] stream_idle_timeout_ms must be at least 1",
        ));
    }
    for step in &section.script {
        check_step(at, s.api, step)?;
    }
    let reach = reach(s, section);
    for f in s.faults {
        if let Some(problem) = loop_fault_problem(f.get_ref()) {
            return Err(at.at(f.span(), problem));
        }
        if let Some(problem) = f.get_ref().unreachable(&reach) {
            return Err(at.at(f.span(), problem));
        }
    }
    Ok(())
}

/// How far a run of this scenario can reach (docs/faults.md, "Targets"): its model calls are
/// answered by the cassettes, then the script steps, plus one per `provider_error` fault; it
/// has no server.
fn reach(s: &Sections<'_>, section: &AgentLoopSection) -> Reach {
    let provider_errors = s
        .faults
        .iter()
        .filter(|f| matches!(f.get_ref(), Fault::ProviderError { .. }))
        .count() as u64;
    Reach {
        turns: section.turns.len() as u64,
        calls: (s.responses.len() + section.script.len()) as u64 + provider_errors,
        calls_from: format!(
            "{} cassette(s), {} [[agent_loop.script]] step(s) and {provider_errors} provider_error fault(s)",
            s.responses.len(),
            section.script.len()
        ),
        responses: None,
        responses_from: String::new(),
    }
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
    origin: &Origin<'_>,
    api: ProviderFormat,
    step: &Spanned<ScriptStep>,
) -> Result<(), InputError> {
    let st = step.get_ref();
    let at = |m: String| origin.at(step.span(), m);
    if !matches!(api, ProviderFormat::Anthropic | ProviderFormat::OpenAiChat) {
        return Err(at(format!(
            "script steps are served as Anthropic or OpenAI Chat streams, not {}: list recorded {} cassettes in [provider] responses instead",
            api.as_str(),
            api.as_str()
        )));
    }
    if st.text.is_none() && st.thinking.is_none() && st.tool_calls.is_empty() {
        return Err(at(
            "a script step needs text, thinking or tool_calls (an empty answer is a provider error; use a provider_error fault)".into(),
        ));
    }
    let stop = st.stop_word();
    if api == ProviderFormat::OpenAiChat && stop == "pause_turn" {
        let span = st.stop.as_ref().map_or(step.span(), Spanned::span);
        return Err(origin.at(span, "stop \"pause_turn\" is Anthropic-only"));
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
