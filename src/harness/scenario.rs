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
    /// client-model: invariants a profile is known to violate (docs/findings.md).
    #[serde(default)]
    pub expect: Vec<Spanned<ExpectedFailure>>,
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
    /// Client behaviour profile: `reference` or `letta-code`.
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
    // ---- client-model -------------------------------------------------------------------
    /// `interactive` (the TUI loop) or `headless` (one-shot `-p`).
    #[serde(default = "default_mode")]
    pub mode: Spanned<String>,
    /// Simulated duration of each tool by name, in ms.
    #[serde(default)]
    pub tool_ms: std::collections::BTreeMap<String, u64>,
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

fn default_mode() -> Spanned<String> {
    Spanned::new(0..0, "interactive".to_string())
}
fn default_tool_ms() -> u64 {
    10
}
fn yes() -> bool {
    true
}

/// client-model: an invariant a client profile is known to violate in this scenario: a
/// finding about that client (docs/findings.md#<finding>).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedFailure {
    pub profile: String,
    /// The client mode it applies to (`interactive` or `headless`); any mode when absent.
    #[serde(default)]
    pub mode: Option<String>,
    pub invariant: String,
    /// The anchor of the finding in docs/findings.md.
    pub finding: String,
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
    /// client-model: `alwaysAsk` rules (need the user even when a broader rule allows).
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

/// An explicit fault.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Reset the connection of the server's `response`-th streaming response (1-based) after it
    /// has written `after_frame` frames.
    DropConnection { response: u64, after_frame: u64 },
    // ---- client-model: server behaviour (interim hooks, src/model/server/client_support.rs)
    /// The `response`-th streaming response stops after `after_frame` frames and never ends.
    Stall { response: u64, after_frame: u64 },
    /// The `response`-th streaming response leaves out its frame number `frame` (1-based).
    SkipFrame { response: u64, frame: u64 },
    /// The `send`-th message send is answered 409 busy (another run holds the lock).
    Busy { send: u64 },
    /// The `send`-th message send starts its run, then is answered 409 busy naming it.
    BusyOwnRun { send: u64 },
    /// The `send`-th message send is answered 503 `cloud_api_shutting_down`.
    ShuttingDown { send: u64 },
    /// At the `send`-th message send a pending approval appears on the conversation (another
    /// client left it); `http_409` answers the send with the 409 conflict, else in-band.
    ApprovalAppears {
        send: u64,
        #[serde(default)]
        http_409: bool,
    },
    /// The first `count` `POST /v1/runs/{id}/stream` requests are answered 500.
    RunStreamFails { count: u64 },
    /// Before the client starts, a Bash tool call `call_stale_start` is left pending on the
    /// client's conversation (a previous session died mid-approval; reference B.5.4).
    PendingAtStart,
    // ---- client-model: client and user ------------------------------------------------------
    /// The user interrupts turn `turn`: `during = "stream"` after `after_chunk` processed chunks,
    /// `during = "tools"` `after_ms` into its first tool batch, or `during = "approval"` while
    /// the approval dialog waits for the human.
    Interrupt {
        turn: u32,
        during: String,
        #[serde(default)]
        after_chunk: Option<u32>,
        #[serde(default)]
        after_ms: Option<u64>,
    },
    /// The client process crashes in turn `turn`, `at = "after_tools"` (tools ran, results not
    /// sent) or `at = "after_chunk"` (after `after_chunk` processed chunks), and restarts.
    ClientCrash {
        turn: u32,
        at: String,
        #[serde(default)]
        after_chunk: Option<u32>,
    },
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
            Fault::Stall {
                response,
                after_frame,
            } => write!(f, "stall response={response} after_frame={after_frame}"),
            Fault::SkipFrame { response, frame } => {
                write!(f, "skip_frame response={response} frame={frame}")
            }
            Fault::Busy { send } => write!(f, "busy send={send}"),
            Fault::BusyOwnRun { send } => write!(f, "busy_own_run send={send}"),
            Fault::ShuttingDown { send } => write!(f, "shutting_down send={send}"),
            Fault::ApprovalAppears { send, http_409 } => {
                write!(f, "approval_appears send={send} http_409={http_409}")
            }
            Fault::RunStreamFails { count } => write!(f, "run_stream_fails count={count}"),
            Fault::PendingAtStart => write!(f, "pending_at_start"),
            Fault::Interrupt {
                turn,
                during,
                after_chunk,
                after_ms,
            } => {
                write!(f, "interrupt turn={turn} during={during}")?;
                if let Some(n) = after_chunk {
                    write!(f, " after_chunk={n}")?;
                }
                if let Some(n) = after_ms {
                    write!(f, " after_ms={n}")?;
                }
                Ok(())
            }
            Fault::ClientCrash {
                turn,
                at,
                after_chunk,
            } => {
                write!(f, "client_crash turn={turn} at={at}")?;
                if let Some(n) = after_chunk {
                    write!(f, " after_chunk={n}")?;
                }
                Ok(())
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
    // ---- client-model: one planted client defect per client invariant ----------------------
    /// Breaks no-double-execution: a restarted client executes pending approvals again.
    #[serde(default)]
    pub client_reexecute_pending_on_restart: bool,
    /// Breaks stream-gapless: a resume starts from seq 0 with no threshold.
    #[serde(default)]
    pub client_resume_from_zero: bool,
    /// Breaks stop-reason-consistent: approvals collected before a resume are dropped.
    #[serde(default)]
    pub client_drop_approvals_on_resume: bool,
    /// Breaks args-intact: an approval with no arguments yet merges as `"{}"` + suffix.
    #[serde(default)]
    pub client_braces_args_fallback: bool,
    /// Breaks budget-respected: busy retries ignore their budget and backoff.
    #[serde(default)]
    pub client_unbounded_busy_retries: bool,
    /// Breaks approval-attribution: stale approvals are closed with a user-style denial.
    #[serde(default)]
    pub client_stale_denial_as_user: bool,
    /// Breaks results-ordered: results are sent in completion order.
    #[serde(default)]
    pub client_results_in_completion_order: bool,
    /// Breaks lock-safety: approved tools all run at once.
    #[serde(default)]
    pub client_no_resource_locks: bool,
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
        if crate::model::client::Profile::from_name(profile.get_ref()).is_none() {
            return Err(self.error_at(
                profile.span(),
                format!(
                    "unknown client_profile {:?}: expected \"reference\" or \"letta-code\"",
                    profile.get_ref()
                ),
            ));
        }
        let mode = &self.client.mode;
        if crate::model::client::Mode::from_name(mode.get_ref()).is_none() {
            return Err(self.error_at(
                mode.span(),
                format!(
                    "unknown client mode {:?}: expected \"interactive\" or \"headless\"",
                    mode.get_ref()
                ),
            ));
        }
        for e in &self.expect {
            let x = e.get_ref();
            if crate::model::client::Profile::from_name(&x.profile).is_none() {
                return Err(self.error_at(
                    e.span(),
                    format!("unknown profile {:?} in [[expect]]: expected \"reference\" or \"letta-code\"", x.profile),
                ));
            }
            if !crate::harness::invariants::ALL.contains(&x.invariant.as_str()) {
                return Err(self.error_at(
                    e.span(),
                    format!("unknown invariant {:?} in [[expect]]", x.invariant),
                ));
            }
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
        if self.client.turns.is_empty() {
            return Err(InputError {
                file: self.path.display().to_string(),
                line: None,
                column: None,
                message: "[client] turns is empty: give at least one user message".into(),
            });
        }
        for f in &self.faults {
            let bad = match f.get_ref() {
                Fault::DropConnection { response, .. }
                | Fault::Stall { response, .. }
                | Fault::SkipFrame { response, .. } => {
                    (*response == 0).then_some("response numbers start at 1")
                }
                Fault::Busy { send }
                | Fault::BusyOwnRun { send }
                | Fault::ShuttingDown { send }
                | Fault::ApprovalAppears { send, .. } => {
                    (*send == 0).then_some("send numbers start at 1")
                }
                Fault::RunStreamFails { .. } | Fault::PendingAtStart => None,
                Fault::Interrupt {
                    turn,
                    during,
                    after_chunk,
                    after_ms,
                } => match (during.as_str(), after_chunk, after_ms) {
                    _ if *turn == 0 => Some("turn numbers start at 1"),
                    ("stream", Some(n), None) if *n > 0 => None,
                    ("tools", None, Some(_)) => None,
                    ("approval", None, None) => None,
                    _ => Some(
                        "an interrupt is during = \"stream\" with after_chunk >= 1, during = \"tools\" with after_ms, or during = \"approval\"",
                    ),
                },
                Fault::ClientCrash {
                    turn,
                    at,
                    after_chunk,
                } => match (at.as_str(), after_chunk) {
                    _ if *turn == 0 => Some("turn numbers start at 1"),
                    ("after_tools", None) => None,
                    ("after_chunk", Some(n)) if *n > 0 => None,
                    _ => Some(
                        "a client crash is at = \"after_tools\", or at = \"after_chunk\" with after_chunk >= 1",
                    ),
                },
            };
            if let Some(msg) = bad {
                return Err(self.error_at(f.span(), msg));
            }
        }
        Ok(())
    }

    /// A path in the scenario, resolved against the scenario file's directory.
    pub fn resolve(&self, rel: &str) -> PathBuf {
        match self.path.parent() {
            Some(dir) => dir.join(rel),
            None => PathBuf::from(rel),
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
                } else if let Some(comment) = s.strip_prefix("approve:") {
                    Ok(HumanAnswer::ApproveWithComment(comment.trim().to_string()))
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
                            "unknown human answer {s:?}: expected \"approve\", \"approve: <comment>\", \"deny: <reason>\" or \"never\""
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
