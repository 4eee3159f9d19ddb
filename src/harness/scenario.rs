//! Scenario files (TOML, docs/scenario.md): what system runs, with which provider responses,
//! which user turns and permission rules, under which faults.
//!
//! Parsing is strict: unknown keys and bad values are errors that name the file, line and
//! column and say what was expected. Paths inside a scenario are relative to the file.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::system::System;

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
    /// Required for `letta` (checked in `validate`; absent in an agent-loop scenario).
    #[serde(default)]
    pub agent: Agent,
    /// Required for `letta` (checked in `validate`; absent in an agent-loop scenario).
    #[serde(default)]
    pub client: ClientSection,
    #[serde(default)]
    pub permissions: Permissions,
    /// The agent host of `system = "agent-loop"` (docs/scenario.md).
    #[serde(default)]
    pub agent_loop: Option<super::kimi::scenario::AgentLoopSection>,
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
    /// client-model: invariants a profile is known to violate (docs/findings.md).
    #[serde(default)]
    pub expect: Vec<Spanned<ExpectedFailure>>,
    /// The file it was read from (set by [`Scenario::load`]).
    #[serde(skip)]
    pub path: PathBuf,
    #[serde(skip)]
    pub source: String,
    /// Cassettes to use instead of the files `[provider] responses` names, by position (the
    /// shrinker edits cassettes in memory).
    #[serde(skip)]
    pub cassette_overrides: std::collections::BTreeMap<usize, crate::cassette::Cassette>,
    /// Extra flags the reproduce command needs (e.g. ` --swarm`).
    #[serde(skip)]
    pub repro_flags: String,
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
    #[serde(default)]
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

/// An absent `[agent]` (an agent-loop scenario has none; `letta` requires it in `validate`).
impl Default for Agent {
    fn default() -> Self {
        Agent {
            id: String::new(),
            model: default_model(),
        }
    }
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

/// An invariant a client or server profile is known to violate in this scenario: a finding
/// about that profile (docs/findings.md#<finding>).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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
}

fn default_conversation() -> String {
    "default".into()
}

/// An absent `[client]` (an agent-loop scenario has none; `letta` requires it in `validate`).
impl Default for ClientSection {
    fn default() -> Self {
        ClientSection {
            conversation: default_conversation(),
            tools: Vec::new(),
            turns: Vec::new(),
            files: Default::default(),
            mode: default_mode(),
            tool_ms: Default::default(),
            default_tool_ms: default_tool_ms(),
            backfill: true,
            eof_grace_ms: None,
            stall_ms: None,
        }
    }
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

pub use super::faults::Fault;

// ---- server model sections (issue 3) -----------------------------------------------------

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
    /// How long the server waits for the model's next stream frame before it fails the run
    /// with "Provider stream timed out" (simulated ms).
    #[serde(default = "default_provider_idle_timeout_ms")]
    pub provider_idle_timeout_ms: u64,
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Simulated-time budget for the whole run; exceeding it is a liveness failure.
    #[serde(default = "default_sim_time")]
    pub sim_time_ms: u64,
    /// Upper bound on requests per user turn.
    #[serde(default = "default_requests")]
    pub requests_per_turn: u32,
    /// When every fault stops and the world is repaired (partitions healed, crashed hosts
    /// restarted). Safety is checked throughout; liveness is judged after this.
    #[serde(default = "default_heal")]
    pub heal_at_ms: u64,
    /// After healing, every turn must end within this much simulated time (`turn-terminates`).
    #[serde(default = "default_liveness")]
    pub liveness_ms: u64,
}

fn default_heal() -> u64 {
    120_000
}
fn default_liveness() -> u64 {
    300_000
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
            heal_at_ms: default_heal(),
            liveness_ms: default_liveness(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
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
    /// Client has no stall window: a silent stream is waited on forever (breaks turn-terminates).
    #[serde(default)]
    pub client_waits_forever_on_silence: bool,
    // ---- agent loop (issue 5) ----
    /// The loop records tool results in completion order, not provider order (breaks
    /// loop-envelope).
    #[serde(default)]
    pub loop_results_in_completion_order: bool,
    /// The loop's scheduler drains its queue without checking the running tasks (breaks
    /// lock-safety).
    #[serde(default)]
    pub loop_scheduler_drain_ignores_active: bool,
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

impl Planted {
    /// The invariants these switches are there to break (a canary must be caught by them).
    pub fn expected_failures(&self) -> Vec<&'static str> {
        use super::invariants::{DETERMINISTIC, TOOL_CALL_RESOLVED, TURN_TERMINATES};
        let mut v = Vec::new();
        if self.server_accepts_message_while_pending {
            v.push(TOOL_CALL_RESOLVED);
        }
        if self.client_nondeterministic_otids {
            v.push(DETERMINISTIC);
        }
        if self.client_waits_forever_on_silence {
            v.push(TURN_TERMINATES);
        }
        if self.loop_results_in_completion_order {
            v.push(super::invariants::LOOP_ENVELOPE);
        }
        if self.loop_scheduler_drain_ignores_active {
            v.push(super::invariants::LOCK_SAFETY);
        }
        // Server defects (issue 3).
        if self.server_ignores_request_token {
            v.push(super::invariants::ONE_RUN_PER_REQUEST);
        }
        if self.server_volatile_writes {
            v.push(super::invariants::DURABLE_ACK);
        }
        if self.server_skips_orphan_settling {
            v.push(super::invariants::HISTORY_VALID);
        }
        // client-model: one planted client defect per client invariant.
        use super::invariants as inv;
        for (on, id) in [
            (
                self.client_reexecute_pending_on_restart,
                inv::NO_DOUBLE_EXECUTION,
            ),
            (self.client_resume_from_zero, inv::STREAM_GAPLESS),
            (
                self.client_drop_approvals_on_resume,
                inv::STOP_REASON_CONSISTENT,
            ),
            (self.client_braces_args_fallback, inv::ARGS_INTACT),
            (self.client_unbounded_busy_retries, inv::BUDGET_RESPECTED),
            (self.client_stale_denial_as_user, inv::APPROVAL_ATTRIBUTION),
            (
                self.client_results_in_completion_order,
                inv::RESULTS_ORDERED,
            ),
            (self.client_no_resource_locks, inv::LOCK_SAFETY),
        ] {
            if on && !v.contains(&id) {
                v.push(id);
            }
        }
        v
    }
}

impl Scenario {
    /// The scenario at another turmoil tick (`--tick-ms`): timers keep their exact values,
    /// hops between hosts take at least one tick (docs/performance.md). The reproduce command
    /// carries the flag.
    pub fn with_tick(mut self, tick_ms: Option<u64>) -> Scenario {
        if let Some(t) = tick_ms {
            self.network.tick_ms = t.max(1);
            self.repro_flags
                .push_str(&format!(" --tick-ms {}", self.network.tick_ms));
        }
        self
    }

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

    /// The system this scenario runs (its `[scenario] system`, checked when it was loaded).
    pub fn system(&self) -> System {
        System::from_name(self.scenario.system.get_ref()).unwrap_or(System::Letta)
    }

    /// True for `system = "agent-loop"` (the Kimi Code turn loop against the fake provider).
    pub fn is_agent_loop(&self) -> bool {
        self.system() == System::Kimi
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
        match System::from_name(system.get_ref()) {
            Some(System::Kimi) => return super::kimi::scenario::validate(self),
            Some(System::Letta) => {}
            None => {
                return Err(self.error_at(
                    system.span(),
                    format!(
                        "unknown system {:?}: expected \"letta\" or \"agent-loop\"",
                        system.get_ref()
                    ),
                ));
            }
        }
        super::kimi::scenario::check_letta_sections(self)?;
        let profile = &self.scenario.client_profile;
        if crate::model::letta::client::Profile::from_name(profile.get_ref()).is_none() {
            return Err(self.error_at(
                profile.span(),
                format!(
                    "unknown client_profile {:?}: expected \"reference\" or \"letta-code\"",
                    profile.get_ref()
                ),
            ));
        }
        let mode = &self.client.mode;
        if crate::model::letta::client::Mode::from_name(mode.get_ref()).is_none() {
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
            if let Some(p) = &x.profile
                && crate::model::letta::client::Profile::from_name(p).is_none()
            {
                return Err(self.error_at(
                    e.span(),
                    format!("unknown profile {p:?} in [[expect]]: expected \"reference\" or \"letta-code\""),
                ));
            }
            if let Some(p) = &x.server
                && crate::model::letta::server::Profile::from_name(p).is_none()
            {
                return Err(self.error_at(
                    e.span(),
                    format!(
                        "unknown server profile {p:?} in [[expect]]: expected one of {}",
                        crate::model::letta::server::Profile::NAMES
                            .map(|n| format!("{n:?}"))
                            .join(", ")
                    ),
                ));
            }
            if x.profile.is_none() && x.server.is_none() {
                return Err(self.error_at(
                    e.span(),
                    "[[expect]] names no profile: add `profile = \"letta-code\"` (a client finding) or `server = \"local\"` (a server finding)".to_string(),
                ));
            }
            if x.sometimes
                && !crate::harness::letta::findings::WITH_SIGNATURE.contains(&x.finding.as_str())
            {
                return Err(self.error_at(
                    e.span(),
                    format!(
                        "`sometimes = true` needs a finding the harness recognises in a trace; {:?} has no signature (known: {})",
                        x.finding,
                        crate::harness::letta::findings::WITH_SIGNATURE.join(", ")
                    ),
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
            if let Some(problem) = f.get_ref().problem() {
                return Err(self.error_at(f.span(), problem));
            }
        }
        self.server_profile()?;
        self.approval_conflict()?;
        Ok(())
    }

    pub fn server_profile(&self) -> Result<crate::model::letta::server::Profile, InputError> {
        let p = &self.server.profile;
        crate::model::letta::server::Profile::from_name(p.get_ref()).ok_or_else(|| {
            self.error_at(
                p.span(),
                format!(
                    "unknown server profile {:?}: expected one of {}",
                    p.get_ref(),
                    crate::model::letta::server::Profile::NAMES
                        .map(|n| format!("{n:?}"))
                        .join(", ")
                ),
            )
        })
    }

    pub fn approval_conflict(
        &self,
    ) -> Result<crate::model::letta::server::ApprovalConflict, InputError> {
        use crate::model::letta::server::ApprovalConflict;
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
    ) -> Result<crate::model::letta::client::approvals::Permission, InputError> {
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
    ) -> Result<Vec<crate::model::letta::client::approvals::HumanAnswer>, InputError> {
        use crate::model::letta::client::approvals::HumanAnswer;
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

fn parse_permission(s: &str) -> Option<crate::model::letta::client::approvals::Permission> {
    use crate::model::letta::client::approvals::Permission;
    match s {
        "allow" => Some(Permission::Allow),
        "ask" => Some(Permission::Ask),
        "deny" => Some(Permission::Deny),
        _ => None,
    }
}

/// Writes TOML text for scenarios the harness generates (shrunk reproductions).
impl Scenario {
    /// The scenario as a standalone TOML file whose cassettes are `cassette_paths` (one per
    /// provider response, relative to where the file will be written).
    pub fn to_toml(&self, cassette_paths: &[String], header: &str) -> String {
        use std::fmt::Write as _;
        if self.is_agent_loop() {
            return super::kimi::scenario::to_toml(self, cassette_paths, header);
        }
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let list = |v: &[String]| v.iter().map(|x| q(x)).collect::<Vec<_>>().join(", ");
        let mut s = String::new();
        for line in header.lines() {
            let _ = writeln!(s, "# {line}");
        }
        // Top-level keys must come before the first table.
        if !self.faults.is_empty() {
            let _ = writeln!(s, "\nfaults = [");
            for f in &self.faults {
                let _ = writeln!(s, "  {},", f.get_ref().to_toml());
            }
            let _ = writeln!(s, "]");
        }
        let _ = writeln!(s, "\n[scenario]");
        let _ = writeln!(s, "name = {}", q(&self.scenario.name));
        let _ = writeln!(s, "description = {}", q(&self.scenario.description));
        let _ = writeln!(s, "system = {}", q(self.scenario.system.get_ref()));
        let _ = writeln!(
            s,
            "client_profile = {}",
            q(self.scenario.client_profile.get_ref())
        );
        let _ = writeln!(s, "\n[network]");
        let _ = writeln!(s, "tick_ms = {}", self.network.tick_ms);
        let _ = writeln!(
            s,
            "latency_ms = [{}, {}]",
            self.network.latency_ms[0], self.network.latency_ms[1]
        );
        let _ = writeln!(s, "\n[provider]");
        let _ = writeln!(s, "api = {}", q(self.provider.api.get_ref()));
        let _ = writeln!(s, "responses = [{}]", list(cassette_paths));
        let _ = writeln!(s, "\n[agent]");
        let _ = writeln!(s, "id = {}", q(&self.agent.id));
        let _ = writeln!(s, "model = {}", q(&self.agent.model));
        let _ = writeln!(s, "\n[client]");
        let _ = writeln!(s, "conversation = {}", q(&self.client.conversation));
        let _ = writeln!(s, "turns = [{}]", list(&self.client.turns));
        for t in &self.client.tools {
            let _ = writeln!(s, "\n[[client.tools]]");
            let _ = writeln!(s, "name = {}", q(&t.name));
            if let Some(d) = &t.description {
                let _ = writeln!(s, "description = {}", q(d));
            }
            if let Some(p) = &t.parameters {
                let _ = writeln!(s, "parameters = {p}");
            }
        }
        if !self.client.files.is_empty() {
            let _ = writeln!(s, "\n[client.files]");
            for (k, v) in &self.client.files {
                let _ = writeln!(s, "{} = {}", q(k), q(v));
            }
        }
        let p = &self.permissions;
        let _ = writeln!(s, "\n[permissions]");
        let _ = writeln!(s, "default = {}", q(p.default.get_ref()));
        let _ = writeln!(s, "allow = [{}]", list(&p.allow));
        let _ = writeln!(s, "ask = [{}]", list(&p.ask));
        let _ = writeln!(s, "deny = [{}]", list(&p.deny));
        let human: Vec<String> = p.human.iter().map(|h| h.get_ref().clone()).collect();
        let _ = writeln!(s, "human = [{}]", list(&human));
        let l = &self.limits;
        let _ = writeln!(s, "\n[limits]");
        let _ = writeln!(s, "sim_time_ms = {}", l.sim_time_ms);
        let _ = writeln!(s, "requests_per_turn = {}", l.requests_per_turn);
        let _ = writeln!(s, "heal_at_ms = {}", l.heal_at_ms);
        let _ = writeln!(s, "liveness_ms = {}", l.liveness_ms);
        // Server model sections (issue 3).
        let _ = writeln!(s, "\n[server]");
        let _ = writeln!(s, "profile = {}", q(self.server.profile.get_ref()));
        let _ = writeln!(
            s,
            "approval_conflict = {}",
            q(self.server.approval_conflict.get_ref())
        );
        let _ = writeln!(
            s,
            "provider_idle_timeout_ms = {}",
            self.server.provider_idle_timeout_ms
        );
        for r in &self.requests {
            let r = r.get_ref();
            let _ = writeln!(s, "\n[[requests]]");
            let _ = writeln!(s, "at_ms = {}", r.at_ms);
            let _ = writeln!(s, "method = {}", q(&r.method));
            let _ = writeln!(s, "path = {}", q(&r.path));
            if let Some(b) = &r.body {
                let _ = writeln!(s, "body = {}", q(b));
            }
            let _ = writeln!(s, "read_timeout_ms = {}", r.read_timeout_ms);
            if let Some(m) = r.max_frames {
                let _ = writeln!(s, "max_frames = {m}");
            }
        }
        // Every switch that is on, whatever its name: a shrunk canary must keep its defect.
        let on: Vec<String> = toml::Table::try_from(&self.planted)
            .expect("planted switches serialise")
            .into_iter()
            .filter(|(_, v)| v.as_bool() == Some(true))
            .map(|(k, _)| k)
            .collect();
        if !on.is_empty() {
            let _ = writeln!(s, "\n[planted]");
            for k in on {
                let _ = writeln!(s, "{k} = true");
            }
        }
        s
    }
}
