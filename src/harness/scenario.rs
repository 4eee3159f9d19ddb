//! Scenario files (TOML, docs/scenario.md): what system runs, with which provider responses,
//! which user turns and permission rules, under which faults.
//!
//! Parsing is strict: unknown keys and bad values are errors that name the file, line and
//! column and say what was expected. Paths inside a scenario are relative to the file.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// An input error: a file, a position in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub file: String,
    /// 1-based line and column, when known.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{}:{l}:{c}: {}", self.file, self.message),
            (Some(l), None) => write!(f, "{}:{l}: {}", self.file, self.message),
            _ => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for InputError {}

impl InputError {
    pub fn at(file: &str, source: &str, offset: Option<usize>, message: impl Into<String>) -> Self {
        let (line, column) = match offset {
            Some(o) => {
                let before = &source[..o.min(source.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                (Some(line), Some(col))
            }
            None => (None, None),
        };
        InputError {
            file: file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// A parsed scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub scenario: Meta,
    #[serde(default)]
    pub network: Network,
    pub provider: Provider,
    pub agent: Agent,
    pub client: ClientSection,
    #[serde(default)]
    pub permissions: Permissions,
    #[serde(default)]
    pub faults: Vec<Spanned<Fault>>,
    #[serde(default)]
    pub limits: Limits,
    /// Deliberate defects, for tests that prove an invariant can fail.
    #[serde(default)]
    pub planted: Planted,
    /// The server's profile and variants (issue 3; docs/scenario.md).
    #[serde(default)]
    pub server: ServerSection,
    /// Scripted raw requests from a `probe` host (issue 3): a second client, a duplicate send,
    /// a replay, a cancel.
    #[serde(default)]
    pub requests: Vec<Spanned<ProbeRequest>>,
    /// The file it was read from (set by [`Scenario::load`]).
    #[serde(skip)]
    pub path: PathBuf,
    #[serde(skip)]
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The system under test: `letta` (the approval loop).
    pub system: Spanned<String>,
    /// Client behaviour profile: `reference`.
    #[serde(default = "default_profile")]
    pub client_profile: Spanned<String>,
}

fn default_profile() -> Spanned<String> {
    Spanned::new(0..0, "reference".to_string())
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// turmoil's tick: the resolution of simulated time.
    #[serde(default = "default_tick")]
    pub tick_ms: u64,
    /// Per-message latency range `[min, max]` in ms.
    #[serde(default = "default_latency")]
    pub latency_ms: [u64; 2],
}

fn default_tick() -> u64 {
    1
}
fn default_latency() -> [u64; 2] {
    [1, 5]
}

impl Default for Network {
    fn default() -> Self {
        Network {
            tick_ms: default_tick(),
            latency_ms: default_latency(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// `anthropic` or `openai_chat`.
    pub api: Spanned<String>,
    /// Provider-layer cassettes, one per model call, in call order.
    pub responses: Vec<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    pub id: String,
    #[serde(default = "default_model")]
    pub model: String,
}

fn default_model() -> String {
    "anthropic/claude-sonnet-4".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSection {
    #[serde(default = "default_conversation")]
    pub conversation: String,
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// One user message per turn.
    pub turns: Vec<String>,
    /// Files in the client's workspace at the start.
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, String>,
}

fn default_conversation() -> String {
    "default".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<toml::Value>,
}

#[derive(Debug, Clone, Deserialize)]
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
            human: Vec::new(),
        }
    }
}

/// An explicit fault.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Reset the connection of the server's `response`-th streaming response (1-based) after it
    /// has written `after_frame` frames.
    DropConnection { response: u64, after_frame: u64 },
    // ---- server-behaviour faults (issue 3) ---------------------------------------------
    /// Answer the `send`-th message send (1-based) with 409 busy.
    BusyOnSend { send: u64 },
    /// Answer the `send`-th message send with 503 `cloud_api_shutting_down`.
    ShuttingDownOnSend { send: u64 },
    /// When the `send`-th message send arrives, a pending approval appears on its
    /// conversation and the send gets the 409 approval-pending conflict (reference B.5.3).
    ApprovalPendingOnSend {
        send: u64,
        #[serde(default = "default_stale_id")]
        tool_call_id: String,
        #[serde(default = "default_stale_tool")]
        tool: String,
        #[serde(default = "default_stale_args")]
        arguments: String,
    },
    /// A pending approval left on a conversation before the run starts (reference B.5.4);
    /// the conversation is created for the scenario's agent if it does not exist.
    StaleApproval {
        conversation: String,
        #[serde(default = "default_stale_id")]
        tool_call_id: String,
        #[serde(default = "default_stale_tool")]
        tool: String,
        #[serde(default = "default_stale_args")]
        arguments: String,
    },
    /// Answer the first `times` `POST /v1/runs/{id}/stream` requests with 500.
    RunStreamFail { times: u64 },
    /// Leave frame `frame` (1-based) out of streaming response `response` (e.g. a lost
    /// stop_reason).
    SkipFrame { response: u64, frame: u64 },
    /// Stop writing streaming response `response` after `after_frame` frames and keep it open
    /// (after `[DONE]`: a body left open).
    StallStream { response: u64, after_frame: u64 },
    /// Crash the server at `at_ms` (simulated) and start it again `down_ms` later, on the same
    /// durable store (simulation only).
    ServerRestart { at_ms: u64, down_ms: u64 },
}

fn default_stale_id() -> String {
    "toolu_stale_1".into()
}
fn default_stale_tool() -> String {
    "Bash".into()
}
fn default_stale_args() -> String {
    r#"{"command": "echo stale", "description": "left pending"}"#.into()
}

/// `[server]`: which server the model behaves like.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// `cloud` (default) or `local` (letta-protocol.md §7).
    #[serde(default = "default_server_profile")]
    pub profile: Spanned<String>,
    /// How a cloud server answers a plain streaming message while an approval is pending:
    /// `in_band` (default; Letta 0.16.8) or `http_409` (letta-protocol.md §3.2).
    #[serde(default = "default_approval_conflict")]
    pub approval_conflict: Spanned<String>,
}

fn default_server_profile() -> Spanned<String> {
    Spanned::new(0..0, "cloud".to_string())
}
fn default_approval_conflict() -> Spanned<String> {
    Spanned::new(0..0, "in_band".to_string())
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            profile: default_server_profile(),
            approval_conflict: default_approval_conflict(),
        }
    }
}

/// `[[requests]]`: one scripted request from the probe host.
#[derive(Debug, Clone, Deserialize)]
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
}

fn default_method() -> String {
    "POST".into()
}
fn default_read_timeout() -> u64 {
    30_000
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::DropConnection {
                response,
                after_frame,
            } => write!(
                f,
                "drop_connection response={response} after_frame={after_frame}"
            ),
            Fault::BusyOnSend { send } => write!(f, "busy_on_send send={send}"),
            Fault::ShuttingDownOnSend { send } => write!(f, "shutting_down_on_send send={send}"),
            Fault::ApprovalPendingOnSend {
                send, tool_call_id, ..
            } => write!(
                f,
                "approval_pending_on_send send={send} tool_call_id={tool_call_id}"
            ),
            Fault::StaleApproval {
                conversation,
                tool_call_id,
                ..
            } => write!(
                f,
                "stale_approval conversation={conversation} tool_call_id={tool_call_id}"
            ),
            Fault::RunStreamFail { times } => write!(f, "run_stream_fail times={times}"),
            Fault::SkipFrame { response, frame } => {
                write!(f, "skip_frame response={response} frame={frame}")
            }
            Fault::StallStream {
                response,
                after_frame,
            } => write!(
                f,
                "stall_stream response={response} after_frame={after_frame}"
            ),
            Fault::ServerRestart { at_ms, down_ms } => {
                write!(f, "server_restart at_ms={at_ms} down_ms={down_ms}")
            }
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Simulated-time budget for the whole run; exceeding it is a liveness failure.
    #[serde(default = "default_sim_time")]
    pub sim_time_ms: u64,
    /// Upper bound on requests per user turn.
    #[serde(default = "default_requests")]
    pub requests_per_turn: u32,
}

fn default_sim_time() -> u64 {
    600_000
}
fn default_requests() -> u32 {
    32
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            sim_time_ms: default_sim_time(),
            requests_per_turn: default_requests(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Planted {
    /// Server accepts a plain message while an approval is pending (breaks tool-call-resolved).
    #[serde(default)]
    pub server_accepts_message_while_pending: bool,
    /// Client otids mix in a process-wide counter (breaks deterministic).
    #[serde(default)]
    pub client_nondeterministic_otids: bool,
    /// Server starts a second run for a duplicate request token (breaks one-run-per-request).
    #[serde(default)]
    pub server_ignores_request_token: bool,
    /// Server loses what interrupted runs wrote when it restarts (breaks durable-ack).
    #[serde(default)]
    pub server_volatile_writes: bool,
    /// Local server does not settle orphaned tool calls at a new turn (breaks history-valid).
    #[serde(default)]
    pub server_skips_orphan_settling: bool,
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, InputError> {
        let name = path.display().to_string();
        let source = std::fs::read_to_string(path).map_err(|e| InputError {
            file: name.clone(),
            line: None,
            column: None,
            message: format!("cannot read scenario: {e}"),
        })?;
        Self::parse(&source, path)
    }

    /// Parses scenario text; `path` names it in errors and anchors relative paths.
    pub fn parse(source: &str, path: &Path) -> Result<Scenario, InputError> {
        let name = path.display().to_string();
        let mut s: Scenario = toml::from_str(source).map_err(|e| {
            InputError::at(
                &name,
                source,
                e.span().map(|r| r.start),
                e.message().trim().to_string(),
            )
        })?;
        s.path = path.to_path_buf();
        s.source = source.to_string();
        s.validate()?;
        Ok(s)
    }

    pub fn error_at(&self, span: std::ops::Range<usize>, msg: impl Into<String>) -> InputError {
        InputError::at(
            &self.path.display().to_string(),
            &self.source,
            (span.end > 0).then_some(span.start),
            msg,
        )
    }

    fn validate(&self) -> Result<(), InputError> {
        let system = &self.scenario.system;
        if system.get_ref() != "letta" {
            return Err(self.error_at(
                system.span(),
                format!("unknown system {:?}: expected \"letta\"", system.get_ref()),
            ));
        }
        let profile = &self.scenario.client_profile;
        if profile.get_ref() != "reference" {
            return Err(self.error_at(
                profile.span(),
                format!(
                    "unknown client_profile {:?}: expected \"reference\"",
                    profile.get_ref()
                ),
            ));
        }
        self.provider_api()?;
        if self.provider.responses.is_empty() {
            return Err(InputError {
                file: self.path.display().to_string(),
                line: None,
                column: None,
                message: "[provider] responses is empty: list at least one cassette".into(),
            });
        }
        for r in &self.provider.responses {
            let p = self.resolve(r.get_ref());
            if !p.is_file() {
                return Err(self.error_at(
                    r.span(),
                    format!(
                        "cassette {:?} not found (looked at {}); paths are relative to the scenario file",
                        r.get_ref(),
                        p.display()
                    ),
                ));
            }
        }
        self.permission_default()?;
        self.human_answers()?;
        if self.network.latency_ms[0] > self.network.latency_ms[1] {
            return Err(InputError {
                file: self.path.display().to_string(),
                line: None,
                column: None,
                message: "[network] latency_ms must be [min, max] with min <= max".into(),
            });
        }
        if self.network.tick_ms == 0 {
            return Err(InputError {
                file: self.path.display().to_string(),
                line: None,
                column: None,
                message: "[network] tick_ms must be at least 1".into(),
            });
        }
        // A scenario driven only by probe requests (issue 3) may have no client turns.
        if self.client.turns.is_empty() && self.requests.is_empty() {
            return Err(InputError {
                file: self.path.display().to_string(),
                line: None,
                column: None,
                message:
                    "[client] turns is empty: give at least one user message (or [[requests]])"
                        .into(),
            });
        }
        for f in &self.faults {
            let numbered = match f.get_ref() {
                Fault::DropConnection { response, .. }
                | Fault::SkipFrame { response, .. }
                | Fault::StallStream { response, .. } => Some(*response),
                Fault::BusyOnSend { send }
                | Fault::ShuttingDownOnSend { send }
                | Fault::ApprovalPendingOnSend { send, .. } => Some(*send),
                _ => None,
            };
            if numbered == Some(0) {
                return Err(self.error_at(f.span(), "response and send numbers start at 1"));
            }
        }
        self.server_profile()?;
        self.approval_conflict()?;
        Ok(())
    }

    /// A path in the scenario, resolved against the scenario file's directory.
    pub fn resolve(&self, rel: &str) -> PathBuf {
        match self.path.parent() {
            Some(dir) => dir.join(rel),
            None => PathBuf::from(rel),
        }
    }

    pub fn server_profile(&self) -> Result<crate::model::server::Profile, InputError> {
        let p = &self.server.profile;
        crate::model::server::Profile::from_name(p.get_ref()).ok_or_else(|| {
            self.error_at(
                p.span(),
                format!(
                    "unknown server profile {:?}: expected \"cloud\" or \"local\"",
                    p.get_ref()
                ),
            )
        })
    }

    pub fn approval_conflict(&self) -> Result<crate::model::server::ApprovalConflict, InputError> {
        use crate::model::server::ApprovalConflict;
        let a = &self.server.approval_conflict;
        match a.get_ref().as_str() {
            "in_band" => Ok(ApprovalConflict::InBand),
            "http_409" => Ok(ApprovalConflict::Http409),
            other => Err(self.error_at(
                a.span(),
                format!(
                    "unknown approval_conflict {other:?}: expected \"in_band\" or \"http_409\""
                ),
            )),
        }
    }

    pub fn provider_api(&self) -> Result<crate::wire::provider::ProviderFormat, InputError> {
        let name = self.provider.api.get_ref();
        crate::wire::provider::ProviderFormat::from_name(name).ok_or_else(|| {
            self.error_at(
                self.provider.api.span(),
                format!("unknown provider api {name:?}: expected \"anthropic\" or \"openai_chat\""),
            )
        })
    }

    pub fn permission_default(
        &self,
    ) -> Result<crate::model::client::approvals::Permission, InputError> {
        parse_permission(self.permissions.default.get_ref()).ok_or_else(|| {
            self.error_at(
                self.permissions.default.span(),
                format!(
                    "unknown permission {:?}: expected \"allow\", \"ask\" or \"deny\"",
                    self.permissions.default.get_ref()
                ),
            )
        })
    }

    pub fn human_answers(
        &self,
    ) -> Result<Vec<crate::model::client::approvals::HumanAnswer>, InputError> {
        use crate::model::client::approvals::HumanAnswer;
        self.permissions
            .human
            .iter()
            .map(|h| {
                let s = h.get_ref().trim();
                if s == "approve" {
                    Ok(HumanAnswer::Approve)
                } else if s == "never" {
                    Ok(HumanAnswer::Never)
                } else if let Some(reason) = s.strip_prefix("deny:") {
                    Ok(HumanAnswer::Deny(reason.trim().to_string()))
                } else if s == "deny" {
                    Ok(HumanAnswer::Deny("User denied the tool call".into()))
                } else {
                    Err(self.error_at(
                        h.span(),
                        format!(
                            "unknown human answer {s:?}: expected \"approve\", \"deny: <reason>\" or \"never\""
                        ),
                    ))
                }
            })
            .collect()
    }
}

fn parse_permission(s: &str) -> Option<crate::model::client::approvals::Permission> {
    use crate::model::client::approvals::Permission;
    match s {
        "allow" => Some(Permission::Allow),
        "ask" => Some(Permission::Ask),
        "deny" => Some(Permission::Deny),
        _ => None,
    }
}
