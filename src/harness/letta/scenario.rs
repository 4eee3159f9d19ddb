//! The sections of a `system = "letta"` scenario (docs/scenario.md): `[agent]`, `[client]`,
//! `[permissions]`, `[server]`, `[[requests]]` and `[[expect]]`, their defaults, and the checks
//! only this system needs. Strict like the rest: unknown keys and bad values are errors naming
//! the file, line and column.

use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::harness::faults::Fault;
use crate::harness::faults::plan::Reach;
use crate::harness::input::{InputError, Origin};
use crate::model::letta::client::approvals::{HumanAnswer, Permission};
use crate::model::letta::client::{Mode, Profile as ClientProfile};
use crate::model::letta::server::{ApprovalConflict, Profile as ServerProfile};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    pub id: String,
    #[serde(default = "default_model")]
    pub model: String,
    /// The agent's `context_window_limit`: with one, the server compacts the conversation when
    /// its context passes the threshold (letta-protocol.md §8.1). None: it never does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window_limit: Option<u64>,
    /// The agent's `compaction_settings` (`mode`, `sliding_window_percentage`, `prompt`,
    /// `clip_chars`; §8.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_settings: Option<toml::Table>,
}

fn default_model() -> String {
    "anthropic/claude-sonnet-4".into()
}

/// An absent `[agent]` (an agent-loop scenario has none; `letta` requires it).
impl Default for Agent {
    fn default() -> Self {
        Agent {
            id: String::new(),
            model: default_model(),
            context_window_limit: None,
            compaction_settings: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSection {
    #[serde(default = "default_conversation")]
    pub conversation: String,
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// One user message per turn.
    pub turns: Vec<String>,
    /// Files in the client's workspace at the start.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// `interactive` (the TUI loop) or `headless` (one-shot `-p`).
    #[serde(default = "default_mode")]
    pub mode: Spanned<String>,
    /// Simulated duration of each tool by name, in ms.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_ms: BTreeMap<String, u64>,
    /// Duration of tools `tool_ms` does not name.
    #[serde(default = "default_tool_ms")]
    pub default_tool_ms: u64,
    /// `LETTA_BACKFILL`: fetch the resume tail at start-up.
    #[serde(default = "yes")]
    pub backfill: bool,
    /// Stream timers (`LETTA_STREAM_TERMINAL_EOF_GRACE_MS`, `LETTA_STREAM_STALL_RECONCILE_MS`).
    #[serde(default)]
    pub eof_grace_ms: Option<u64>,
    #[serde(default)]
    pub stall_ms: Option<u64>,
}

fn default_conversation() -> String {
    "default".into()
}
fn default_mode() -> Spanned<String> {
    Spanned::new(0..0, "interactive".to_string())
}
fn default_tool_ms() -> u64 {
    10
}
fn yes() -> bool {
    true
}

/// An absent `[client]` (an agent-loop scenario has none; `letta` requires it).
impl Default for ClientSection {
    fn default() -> Self {
        ClientSection {
            conversation: default_conversation(),
            tools: Vec::new(),
            turns: Vec::new(),
            files: BTreeMap::new(),
            mode: default_mode(),
            tool_ms: BTreeMap::new(),
            default_tool_ms: default_tool_ms(),
            backfill: true,
            eof_grace_ms: None,
            stall_ms: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<toml::Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// `allow`, `ask` or `deny`: what a tool no rule names gets.
    #[serde(default = "default_permission")]
    pub default: Spanned<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub ask: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    /// `alwaysAsk` rules (need the user even when a broader rule allows).
    #[serde(default)]
    pub always_ask: Vec<String>,
    /// The simulated human's answers to `ask`, in order: `approve`, `deny: <reason>`, `never`.
    #[serde(default)]
    pub human: Vec<Spanned<String>>,
}

fn default_permission() -> Spanned<String> {
    Spanned::new(0..0, "ask".to_string())
}

impl Default for Permissions {
    fn default() -> Self {
        Permissions {
            default: default_permission(),
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            always_ask: Vec::new(),
            human: Vec::new(),
        }
    }
}

impl Permissions {
    /// What a tool no rule names gets.
    pub fn default_permission(&self, at: &Origin<'_>) -> Result<Permission, InputError> {
        let d = &self.default;
        match d.get_ref().as_str() {
            "allow" => Ok(Permission::Allow),
            "ask" => Ok(Permission::Ask),
            "deny" => Ok(Permission::Deny),
            other => Err(at.at(
                d.span(),
                format!("unknown permission {other:?}: expected \"allow\", \"ask\" or \"deny\""),
            )),
        }
    }

    /// The simulated human's answers, in order.
    pub fn human_answers(&self, at: &Origin<'_>) -> Result<Vec<HumanAnswer>, InputError> {
        self.human
            .iter()
            .map(|h| {
                let s = h.get_ref().trim();
                if s == "approve" {
                    Ok(HumanAnswer::Approve)
                } else if let Some(comment) = s.strip_prefix("approve:") {
                    Ok(HumanAnswer::ApproveWithComment(comment.trim().to_string()))
                } else if s == "never" {
                    Ok(HumanAnswer::Never)
                } else if let Some(reason) = s.strip_prefix("deny:") {
                    Ok(HumanAnswer::Deny(reason.trim().to_string()))
                } else if s == "deny" {
                    Ok(HumanAnswer::Deny("User denied the tool call".into()))
                } else {
                    Err(at.at(
                        h.span(),
                        format!(
                            "unknown human answer {s:?}: expected \"approve\", \"approve: <comment>\", \"deny: <reason>\" or \"never\""
                        ),
                    ))
                }
            })
            .collect()
    }
}

/// `[server]`: which server the model behaves like.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// `cloud` (default) or `local` (letta-protocol.md §7).
    #[serde(default = "default_server_profile")]
    pub profile: Spanned<String>,
    /// How a cloud server answers a plain streaming message while an approval is pending:
    /// `in_band` (default; Letta 0.16.8) or `http_409` (letta-protocol.md §3.2).
    #[serde(default = "default_approval_conflict")]
    pub approval_conflict: Spanned<String>,
    /// How long the server waits for the model's next stream frame before it fails the run
    /// with "Provider stream timed out" (simulated ms).
    #[serde(default = "default_provider_idle_timeout_ms")]
    pub provider_idle_timeout_ms: u64,
    /// Send a `response_state` chunk before each `requires_approval` stop, so the client's
    /// response-state reuse runs (letta-protocol.md §10.1; Letta 0.16.8 sends none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub response_state: bool,
}

fn default_server_profile() -> Spanned<String> {
    Spanned::new(0..0, "cloud".to_string())
}
fn default_approval_conflict() -> Spanned<String> {
    Spanned::new(0..0, "in_band".to_string())
}
fn default_provider_idle_timeout_ms() -> u64 {
    60_000
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            profile: default_server_profile(),
            approval_conflict: default_approval_conflict(),
            provider_idle_timeout_ms: default_provider_idle_timeout_ms(),
            response_state: false,
        }
    }
}

impl ServerSection {
    pub fn server_profile(&self, at: &Origin<'_>) -> Result<ServerProfile, InputError> {
        let p = &self.profile;
        ServerProfile::from_name(p.get_ref()).ok_or_else(|| {
            at.at(
                p.span(),
                format!(
                    "unknown server profile {:?}: expected one of {}",
                    p.get_ref(),
                    server_profile_names()
                ),
            )
        })
    }

    pub fn approval_conflict(&self, at: &Origin<'_>) -> Result<ApprovalConflict, InputError> {
        let a = &self.approval_conflict;
        match a.get_ref().as_str() {
            "in_band" => Ok(ApprovalConflict::InBand),
            "http_409" => Ok(ApprovalConflict::Http409),
            other => Err(at.at(
                a.span(),
                format!(
                    "unknown approval_conflict {other:?}: expected \"in_band\" or \"http_409\""
                ),
            )),
        }
    }
}

fn server_profile_names() -> String {
    ServerProfile::NAMES.map(|n| format!("{n:?}")).join(", ")
}

/// `[[requests]]`: one scripted request from the probe host (a second client, a duplicate
/// send, a replay, a cancel).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeRequest {
    /// Simulated ms at which to send it (requests run in order).
    pub at_ms: u64,
    #[serde(default = "default_method")]
    pub method: String,
    pub path: String,
    /// The body, JSON text.
    #[serde(default)]
    pub body: Option<String>,
    /// Stop reading the answer after this long without bytes.
    #[serde(default = "default_read_timeout")]
    pub read_timeout_ms: u64,
    /// Hang up after this many SSE frames.
    #[serde(default)]
    pub max_frames: Option<usize>,
    /// The HTTP status the server answers it with when the scenario runs as written:
    /// `ends-as-declared` holds such a run to it (docs/scenario.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The shape of the SSE answer when the scenario runs as written, as the trace's
    /// `probe_response` summary prints it (`ping,stop_reason:end_turn,usage_statistics,[DONE]
    /// (eof)`): `ends-as-declared` holds such a run to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// A JSON answer when the scenario runs as written, as the trace's `probe_response` summary
    /// prints it (its `detail`, or the JSON text): `ends-as-declared` holds such a run to it, so
    /// an endpoint that answers the right status with the wrong body fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl ProbeRequest {
    /// Why this request cannot be put on the wire, if it cannot: the method must be an HTTP
    /// token and the path an absolute path with no whitespace or control characters.
    pub fn problem(&self) -> Option<String> {
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if self.method.is_empty() || !self.method.chars().all(token) {
            return Some(format!(
                "[[requests]] method {:?} is not an HTTP method (letters only, no spaces or line breaks)",
                self.method
            ));
        }
        if !self.path.starts_with('/') {
            return Some(format!(
                "[[requests]] path {:?} must start with \"/\"",
                self.path
            ));
        }
        if self
            .path
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || !c.is_ascii())
        {
            return Some(format!(
                "[[requests]] path {:?} contains a space, a line break or a non-ASCII character; percent-encode it",
                self.path
            ));
        }
        None
    }
}

fn default_method() -> String {
    "POST".into()
}
fn default_read_timeout() -> u64 {
    30_000
}

/// An invariant a client or server profile is known to violate in this scenario: a finding
/// about that profile (docs/findings.md#<finding>).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedFailure {
    /// The client profile it applies to; any when absent (then `server` is required).
    #[serde(default)]
    pub profile: Option<String>,
    /// The server profile it applies to; any when absent.
    #[serde(default)]
    pub server: Option<String>,
    /// The client mode it applies to (`interactive` or `headless`); any mode when absent.
    #[serde(default)]
    pub mode: Option<String>,
    pub invariant: String,
    /// The anchor of the finding in docs/findings.md.
    pub finding: String,
    /// Only some seeds show it (a swarm sweep): the violation is expected only where the trace
    /// shows the finding's signature (`harness::letta::findings`), and a run where it holds passes.
    #[serde(default)]
    pub sometimes: bool,
}

impl ExpectedFailure {
    /// Whether it applies to a run of this client profile, mode and server profile.
    pub fn applies(&self, profile: &str, mode: &str, server: &str) -> bool {
        self.profile.as_ref().is_none_or(|p| p == profile)
            && self.mode.as_ref().is_none_or(|m| m == mode)
            && self.server.as_ref().is_none_or(|s| s == server)
    }

    fn check(&self, span: std::ops::Range<usize>, at: &Origin<'_>) -> Result<(), InputError> {
        let err = |m: String| Err(at.at(span.clone(), m));
        if let Some(p) = &self.profile
            && ClientProfile::from_name(p).is_none()
        {
            return err(format!(
                "unknown profile {p:?} in [[expect]]: expected \"reference\" or \"letta-code\""
            ));
        }
        if let Some(p) = &self.server
            && ServerProfile::from_name(p).is_none()
        {
            return err(format!(
                "unknown server profile {p:?} in [[expect]]: expected one of {}",
                server_profile_names()
            ));
        }
        if self.profile.is_none() && self.server.is_none() {
            return err("[[expect]] names no profile: add `profile = \"letta-code\"` (a client finding) or `server = \"local\"` (a server finding)".to_string());
        }
        let signatures = crate::harness::letta::findings::WITH_SIGNATURE;
        if self.sometimes && !signatures.contains(&self.finding.as_str()) {
            return err(format!(
                "`sometimes = true` needs a finding the harness recognises in a trace; {:?} has no signature (known: {})",
                self.finding,
                signatures.join(", ")
            ));
        }
        if !crate::harness::invariants::ALL.contains(&self.invariant.as_str()) {
            return err(format!(
                "unknown invariant {:?} in [[expect]]",
                self.invariant
            ));
        }
        let known = crate::harness::letta::findings::documented();
        if !known.contains(&self.finding.as_str()) {
            return err(format!(
                "unknown finding {:?} in [[expect]]: expected a heading of docs/findings.md ({})",
                self.finding,
                known.join(", ")
            ));
        }
        Ok(())
    }
}

/// The parts of a scenario a `letta` world reads.
pub struct Sections<'a> {
    pub client_profile: &'a Spanned<String>,
    pub agent: &'a Agent,
    pub client: &'a ClientSection,
    pub permissions: &'a Permissions,
    pub server: &'a ServerSection,
    pub requests: &'a [Spanned<ProbeRequest>],
    pub expect: &'a [Spanned<ExpectedFailure>],
    /// `[provider] responses`.
    pub responses: &'a [Spanned<String>],
    pub faults: &'a [Spanned<Fault>],
    /// `[limits] requests_per_turn`.
    pub requests_per_turn: u32,
}

/// Requests one iteration of the client's turn loop can put on the wire at most: the send and
/// its retries or the resumes of its stream (a generous bound: it exists to refuse a fault
/// target no run can reach, such as response 999 of a two-turn scenario).
pub const REQUESTS_PER_ITERATION: u64 = 4;

/// How far a run of this scenario can reach (docs/faults.md, "Targets").
pub fn reach(s: &Sections<'_>) -> Reach {
    let provider_errors = s
        .faults
        .iter()
        .filter(|f| matches!(f.get_ref(), Fault::ProviderError { .. }))
        .count() as u64;
    let restarts = s
        .faults
        .iter()
        .filter(|f| {
            matches!(f.get_ref(), Fault::ClientCrash { .. })
                || matches!(f.get_ref(), Fault::Crash { host, .. } if host == "client")
        })
        .count() as u64;
    let turns = s.client.turns.len() as u64;
    let responses = u64::from(s.requests_per_turn)
        .saturating_mul(turns + 1)
        .saturating_mul(1 + restarts)
        .saturating_mul(REQUESTS_PER_ITERATION)
        .saturating_add(s.requests.len() as u64);
    Reach {
        turns,
        calls: s.responses.len() as u64 + provider_errors,
        calls_from: format!(
            "{} cassette(s) in [provider] responses and {provider_errors} provider_error fault(s)",
            s.responses.len()
        ),
        responses: Some(responses),
        responses_from: format!(
            "[limits] requests_per_turn = {} for each of {turns} turn(s) and start-up, {REQUESTS_PER_ITERATION} requests each, times {} client start(s), plus {} [[requests]]",
            s.requests_per_turn,
            1 + restarts,
            s.requests.len()
        ),
    }
}

/// The checks of a `letta` scenario beyond those every scenario gets.
pub fn validate(s: &Sections<'_>, at: &Origin<'_>) -> Result<(), InputError> {
    if let Some(span) = at.section("agent_loop") {
        return Err(at.at(span, "[agent_loop] is for system \"agent-loop\""));
    }
    for name in ["agent", "client"] {
        if at.section(name).is_none() {
            return Err(at.at_key(
                &["scenario", "system"],
                format!("missing section [{name}]: system \"letta\" needs it"),
            ));
        }
    }
    let reach = reach(s);
    for f in s.faults {
        if let Some(problem) = f.get_ref().unreachable(&reach) {
            return Err(at.at(f.span(), problem));
        }
        if f.get_ref().is_agent_loop_only() {
            return Err(at.at(
                f.span(),
                format!(
                    "fault `{}` is for system \"agent-loop\"",
                    f.get_ref().kind()
                ),
            ));
        }
    }
    let profile = s.client_profile;
    if ClientProfile::from_name(profile.get_ref()).is_none() {
        return Err(at.at(
            profile.span(),
            format!(
                "unknown client_profile {:?}: expected \"reference\" or \"letta-code\"",
                profile.get_ref()
            ),
        ));
    }
    let mode = &s.client.mode;
    if Mode::from_name(mode.get_ref()).is_none() {
        return Err(at.at(
            mode.span(),
            format!(
                "unknown client mode {:?}: expected \"interactive\" or \"headless\"",
                mode.get_ref()
            ),
        ));
    }
    for e in s.expect {
        e.get_ref().check(e.span(), at)?;
    }
    for r in s.requests {
        if let Some(problem) = r.get_ref().problem() {
            return Err(at.at(r.span(), problem));
        }
    }
    if s.responses.is_empty() {
        return Err(at.at_key(
            &["provider", "responses"],
            "[provider] responses is empty: list at least one cassette",
        ));
    }
    s.permissions.default_permission(at)?;
    s.permissions.human_answers(at)?;
    // A scenario driven only by probe requests may have no client turns.
    if s.client.turns.is_empty() && s.requests.is_empty() {
        return Err(at.at_key(
            &["client", "turns"],
            "[client] turns is empty: give at least one user message (or [[requests]])",
        ));
    }
    s.server.server_profile(at)?;
    s.server.approval_conflict(at)?;
    Ok(())
}

/// Writes the sections a `letta` world reads, for a scenario file the harness writes.
pub fn write_sections<M: SerializeMap>(s: &Sections<'_>, out: &mut M) -> Result<(), M::Error> {
    out.serialize_entry("agent", s.agent)?;
    out.serialize_entry("client", s.client)?;
    out.serialize_entry("permissions", s.permissions)?;
    out.serialize_entry("server", s.server)?;
    if !s.requests.is_empty() {
        out.serialize_entry("requests", s.requests)?;
    }
    if !s.expect.is_empty() {
        out.serialize_entry("expect", s.expect)?;
    }
    Ok(())
}
