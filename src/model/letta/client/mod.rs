//! The Letta Code client model (letta-protocol.md §2-6, §9-10).
//!
//! One user turn is many round trips: send the user message, drain the stream (resuming it if it
//! breaks), and while the run stops at `requires_approval`, classify the requested tool calls,
//! execute the allowed ones on the local workspace and send the results back as the next message.
//! Around that loop sit the recovery policy (pre-stream 409/503/transient errors, post-stream
//! retries with their budgets and delays), stale-approval recovery at start-up and on conflict,
//! interrupts, and response-state reuse.
//!
//! Module map: [`policy`] (pure: every table, classifier, delay and budget of §3),
//! [`sdk_stream`] (the SDK's view of a stream, §1.1), [`stream_processor`] and [`stream`] (the
//! drain of §4.1-4.3), [`resume`] (§4.4-4.5), [`approvals`] (§5, §2.3) and [`approval_batch`]
//! (§5.3), [`resume_data`] (§6), [`response_state`] (§10.1), [`backend`] (the HTTP calls,
//! logged for the harness's conformance check), and this file plus `turn` (the turn loop, one
//! child per step).
//!
//! Two profiles (docs/client.md lists every difference): `reference` is the correct behaviour;
//! `letta-code` reproduces the published client (0.32.18), quirks included. Two modes:
//! `interactive` (the TUI loop) and `headless` (one-shot `-p`, one process per turn).

pub mod approval_batch;
pub mod approvals;
pub mod backend;
pub mod compaction;
pub mod policy;
pub mod response_state;
pub mod resume;
pub mod resume_data;
pub mod sdk_stream;
pub mod stream;
pub mod stream_processor;
mod turn;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indexmap::IndexMap;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use self::approvals::{Human, HumanAnswer, PermissionRules};
use self::backend::{Backend, HttpBackend, HttpBackendConfig, RequestLog, SdkRetries};
use self::policy::ServerApproval;
use self::response_state::ResponseStateCache;
use self::stream::{Interrupt, REQUEST_TIMEOUT_MS, STALL_RECONCILE_MS, TERMINAL_EOF_GRACE_MS};
use crate::model::letta::server::ids::uuid4;
use crate::model::port::clock::Clock;
use crate::model::port::env::Env;
use crate::model::port::observe::Observation;
use crate::model::port::spawn::Spawner;
use crate::model::tools::Workspace;
use crate::wire::letta::ClientTool;

/// Which client the model behaves like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// The correct behaviour.
    #[default]
    Reference,
    /// The published Letta Code CLI, quirks included (letta-protocol.md §10.3).
    LettaCode,
}

impl Profile {
    pub fn from_name(s: &str) -> Option<Profile> {
        match s {
            "reference" => Some(Profile::Reference),
            "letta-code" => Some(Profile::LettaCode),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Reference => "reference",
            Profile::LettaCode => "letta-code",
        }
    }
}

/// Which loop drives the turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The TUI loop (`use-conversation-loop.ts`): a human answers `ask`, one resume attempt,
    /// busy waits, shared budgets, eager-cancel interrupts with queued results.
    #[default]
    Interactive,
    /// One-shot headless (`letta -p`, `headless.ts`): each turn is a new process; `ask` is
    /// denied ("Tool requires approval (headless mode)"); 20 resume attempts; approval-pending
    /// conflicts resolved by denial-only requests; SIGINT ends the turn with no HTTP call.
    Headless,
}

impl Mode {
    pub fn from_name(s: &str) -> Option<Mode> {
        match s {
            "interactive" => Some(Mode::Interactive),
            "headless" => Some(Mode::Headless),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Interactive => "interactive",
            Mode::Headless => "headless",
        }
    }
}

/// Deliberate defects a test can switch on to prove an invariant can fail. Never on in a
/// faithful run; each names the invariant it is there to break.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientBugs {
    /// Breaks `deterministic`: otids mix in a process-wide counter.
    pub nondeterministic_otids: bool,
    /// Breaks `no-double-execution`: after a restart, pending approvals are executed instead of
    /// closed with a stale denial.
    pub reexecute_pending_on_restart: bool,
    /// Breaks `stream-gapless`: a resume starts from seq 0 with no threshold.
    pub resume_from_zero: bool,
    /// Breaks `stop-reason-consistent`: approvals collected before a resume are dropped (and
    /// not looked up on the server afterwards).
    pub drop_approvals_on_resume: bool,
    /// Breaks `args-intact`: an approval with no arguments yet merges as `"{}"` + suffix.
    pub braces_args_fallback: bool,
    /// Breaks `budget-respected`: conversation-busy retries ignore their budget and delays.
    pub unbounded_busy_retries: bool,
    /// Breaks `approval-attribution`: stale approvals are closed with a user-style denial.
    pub stale_denial_as_user: bool,
    /// Breaks `pending-denied-at-start`: the start-up check is skipped, so a call pending when
    /// the process starts is met only when the first send is refused for it.
    pub skip_startup_check: bool,
    /// Breaks `results-ordered`: results are sent in completion order.
    pub results_in_completion_order: bool,
    /// Breaks `lock-safety`: every approved tool runs concurrently, whatever its resource key.
    pub no_resource_locks: bool,
    /// Breaks `turn-terminates`: no stall reconciler and no silence bound, so a stream that goes
    /// silent without closing is waited on forever.
    pub waits_forever_on_silence: bool,
    /// Breaks `stream-stays-in-conversation` against a server whose request-token dedupe is
    /// global, as Letta 0.16.8's is: every process draws the same otids, in the same order
    /// (the fixed setup otid of the letta_e2e d3 driver, captures/letta_e2e PROVENANCE d3x), so
    /// a new process's first send on a new conversation repeats the previous process's token.
    pub otids_repeat_per_process: bool,
    /// Breaks `approval-conflict-recovered`: headless treats the in-band approval-pending
    /// conflict (HTTP 200, `event: error`) as a plain stream error and ends the turn, as the
    /// published CLI does (captures/letta_e2e PROVENANCE d3), leaving the call pending.
    pub gives_up_on_in_band_conflict: bool,
    /// Breaks `client-faults-fire`: the client never arms the interrupts and crashes its plan
    /// scripts after a chunk, so each such plan runs as if it had none.
    pub ignores_chunk_faults: bool,
    /// Breaks `otids-fresh`: the approval-pending rebuild keeps the otids of the items it
    /// resends instead of drawing fresh ones (letta-protocol.md §3.11).
    pub keeps_otids_on_rebuild: bool,
    /// Breaks `response-state-reused`: the `X-Letta-Response-State` header is standard base64
    /// with padding (Node's `"base64"`), not the unpadded base64url of letta-protocol.md §10.1.
    pub response_state_padded: bool,
    /// Breaks `backfill-faithful`: the start-up tail is sorted by date alone, so messages of
    /// one date keep the listing's newest-first order (letta-protocol.md §6.2 breaks such ties
    /// by type rank).
    pub backfill_unranked: bool,
    /// Breaks `abandoned-run-cancelled`: a headless turn given up on a stream error leaves the
    /// run it read still active running (letta-tests-and-real-client.md B.5.6 cancels it).
    pub leaves_abandoned_run: bool,
    /// Breaks `result-status-intact`: a tool's result goes back with the other status (a
    /// success as `error`, an error as `success`).
    pub flips_result_status: bool,
}

/// When a scripted interrupt fires (letta-protocol.md §9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterruptWhen {
    /// After the turn's `n`-th processed chunk (1-based, across the turn's drains).
    AfterChunk(u32),
    /// While the turn's first tool batch runs, `after_ms` after it started.
    ToolsRunning { after_ms: u64 },
    /// While the approval dialog waits for the human (who has not answered).
    AwaitingApproval,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptPlan {
    pub turn: u32,
    pub when: InterruptWhen,
}

/// When a scripted client crash happens (the harness restarts the host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrashWhen {
    /// After the turn's first tool batch ran, before its results are sent.
    AfterTools,
    /// After the turn's `n`-th processed chunk.
    AfterChunk(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashPlan {
    pub turn: u32,
    pub when: CrashWhen,
}

/// Stream timers (letta-protocol.md §4.3, §2.8; env `LETTA_STREAM_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    pub eof_grace_ms: u64,
    pub stall_ms: u64,
    pub max_silence_ms: u64,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            eof_grace_ms: TERMINAL_EOF_GRACE_MS,
            stall_ms: STALL_RECONCILE_MS,
            max_silence_ms: REQUEST_TIMEOUT_MS,
        }
    }
}

/// Client configuration.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// "host:port" of the server.
    pub server_addr: String,
    pub agent_id: String,
    /// `default` (the agent's default conversation), a conversation id, or
    /// [`NEW_CONVERSATION`]: a fresh conversation per process, as the CLI's `-p` without
    /// `--conversation` does.
    pub conversation_id: String,
    pub client_tools: Vec<ClientTool>,
    pub permissions: PermissionRules,
    /// How the simulated human answers `ask` decisions, in order; the last one repeats.
    pub human: Vec<HumanAnswer>,
    /// The user's messages, one per turn.
    pub turns: Vec<String>,
    /// Seed of the client's PRNG (otids, SDK jitter).
    pub seed: u64,
    /// Upper bound on requests in one turn (everything is bounded, DESIGN.md §4 rule 5).
    pub max_requests_per_turn: u32,
    /// Upper bound on waiting for a response head.
    pub request_timeout: Duration,
    pub profile: Profile,
    pub mode: Mode,
    /// The working directory file paths resolve against (§5.2).
    pub cwd: String,
    /// Simulated duration of each tool, by name; others take `default_tool_ms`.
    pub tool_ms: IndexMap<String, u64>,
    pub default_tool_ms: u64,
    /// `LETTA_BACKFILL` (on by default): the resume tail is fetched at start-up.
    pub backfill: bool,
    /// The server is the CLI's local backend (`localModelCatalog`, state persisted locally,
    /// letta-protocol.md §1): the TUI's post-stream transient retry resends `messages: []`
    /// and the quota auto-swap, for hosted backends only, is off (§3.10 steps 5 and 7).
    pub local_backend: bool,
    pub timers: Timers,
    pub interrupts: Vec<InterruptPlan>,
    pub crashes: Vec<CrashPlan>,
    pub bugs: ClientBugs,
}

impl ClientConfig {
    /// A config with the defaults of the published client for everything but the addresses
    /// and the script.
    pub fn new(server_addr: &str, agent_id: &str, turns: Vec<String>) -> Self {
        ClientConfig {
            server_addr: server_addr.into(),
            agent_id: agent_id.into(),
            conversation_id: "default".into(),
            client_tools: Vec::new(),
            permissions: PermissionRules::default(),
            human: Vec::new(),
            turns,
            seed: 0,
            max_requests_per_turn: 32,
            request_timeout: Duration::from_secs(30),
            profile: Profile::Reference,
            mode: Mode::Interactive,
            cwd: "/workspace".into(),
            tool_ms: IndexMap::new(),
            default_tool_ms: 10,
            backfill: true,
            local_backend: false,
            timers: Timers::default(),
            interrupts: Vec::new(),
            crashes: Vec::new(),
            bugs: ClientBugs::default(),
        }
    }
}

/// How one turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnOutcome {
    /// A terminal stop reason from the server (`end_turn`, `max_steps`, …).
    Stopped(String),
    /// The turn waits for a human who never answers.
    Paused(String),
    /// The turn failed: pre-stream HTTP error, broken stream, exhausted retries, a bound hit.
    Error(String),
    /// The user interrupted it.
    Interrupted(String),
    /// The client crashed during it (recorded by the harness).
    Crashed,
}

impl std::fmt::Display for TurnOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnOutcome::Stopped(s) => write!(f, "stopped: {s}"),
            TurnOutcome::Paused(s) => write!(f, "paused: {s}"),
            TurnOutcome::Error(s) => write!(f, "error: {s}"),
            TurnOutcome::Interrupted(s) => write!(f, "interrupted: {s}"),
            TurnOutcome::Crashed => write!(f, "crashed"),
        }
    }
}

/// What survives a client crash: the user's place in the script and the outcomes so far (the
/// harness keeps it, as it keeps the workspace).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Index of the next turn to run.
    pub next_turn: usize,
    pub outcomes: Vec<TurnOutcome>,
    /// Crash plans already fired (indexes into `ClientConfig::crashes`).
    pub fired_crashes: Vec<usize>,
    pub restarts: u32,
}

/// What the client is wired to.
#[derive(Clone)]
pub struct ClientIo<B: Backend> {
    pub backend: B,
    pub observe: Arc<dyn Fn(Observation) + Send + Sync>,
    /// Unix epoch ms now (the request start of run discovery, Retry-After dates).
    pub epoch_now_ms: Arc<dyn Fn() -> u64 + Send + Sync>,
    pub workspace: Arc<Mutex<Workspace>>,
    pub progress: Arc<Mutex<Progress>>,
    /// Called when a crash plan fires; the client then waits forever for the harness to crash
    /// its host. `None`: crash plans are ignored.
    pub crash: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The turn number the backend stamps on `client_send` events.
    pub turn: Arc<AtomicU32>,
    /// The host's clock: every wait, timeout and stall bound.
    pub clock: Clock,
    /// Where the client's side tasks run (its fire-and-forget cancel).
    pub spawner: Spawner,
}

static PLANTED_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The planted otid generator's seed, mixed into the client's (any constant: the defect is
/// that it does not depend on the process).
const PLANTED_OTID_SEED: u64 = 0x0d3d_0d3d;

/// `[client] conversation = "new"`: each client process creates its conversation
/// (`POST /v1/conversations/?agent_id=…` with `{}`, letta-tests-and-real-client.md B.3 row 9);
/// in headless mode every turn is a new process.
pub const NEW_CONVERSATION: &str = "new";

/// Results queued by an interrupt for the next submission (letta-protocol.md §9.1).
#[derive(Debug, Clone)]
struct QueuedResults {
    conversation_id: String,
    generation: u64,
    results: Vec<approvals::ApprovalResult>,
}

/// The client: config, PRNG, backend, and the state one process keeps across turns.
pub struct Client<B: Backend> {
    config: ClientConfig,
    io: ClientIo<B>,
    rng: ChaCha8Rng,
    /// Planted `otids_repeat_per_process`: the otids' own generator, restarted with every
    /// process.
    planted_otids: ChaCha8Rng,
    human: Human,
    interrupt: Interrupt,
    /// The conversation generation (bumped by interrupts; stales queued results).
    generation: u64,
    response_state: ResponseStateCache,
    /// Stale approvals found at start-up, denied with the next submission (§6.4).
    stale_at_startup: Vec<ServerApproval>,
    /// Approvals shown to the human who never answered (the dialog is still open).
    open_dialog: Vec<stream_processor::Approval>,
    queued: Option<QueuedResults>,
    /// Interrupt recovery memory: the conversation interrupted and the user messages last sent.
    interrupted_conversation: Option<String>,
    /// The conversation is created at each process start ([`NEW_CONVERSATION`]).
    new_conversation: bool,
    last_user_only_input: Option<Vec<crate::wire::letta::MessageItem>>,
    /// Per-turn counters for scripted faults.
    turn_chunks: u32,
    tools_batches: u32,
    /// A crash plan fired inside a drain; the turn loop crashes when the drain returns.
    crash_pending: Option<usize>,
    /// The temporary model override of the quota auto-swap (§3.10 step 5).
    override_model: Option<String>,
    /// The UI buffer.
    transcript: stream::Transcript,
    /// Planted `reexecute_pending_on_restart`: approvals to execute with the first submission.
    planted_reexecute: Vec<stream_processor::Approval>,
    /// The reference waits for an interrupt's cancel before the next submission.
    pending_cancel: Option<tokio::task::JoinHandle<()>>,
    /// (reference) Results of the tools this process ran, by tool call id: a call asked about
    /// again (an "Invalid tool call IDs" resync shows every server approval) is answered with
    /// its result instead of running twice.
    tool_results: Arc<Mutex<std::collections::BTreeMap<String, approval_batch::ToolRun>>>,
}

/// The client over HTTP on an [`Env`].
pub type HttpClient<E> = Client<HttpBackend<E>>;

/// Builds a client that talks HTTP over `env`; requests go to `log`.
pub fn over_http<E: Env>(
    env: E,
    config: ClientConfig,
    workspace: Arc<Mutex<Workspace>>,
    progress: Arc<Mutex<Progress>>,
    log: RequestLog,
    crash: Option<Arc<dyn Fn() + Send + Sync>>,
) -> HttpClient<E> {
    let turn = Arc::new(AtomicU32::new(0));
    let restarts = progress.lock().unwrap().restarts;
    let backend = HttpBackend::new(
        env.clone(),
        HttpBackendConfig {
            server_addr: config.server_addr.clone(),
            request_timeout: config.request_timeout,
            sdk_retries: match config.profile {
                Profile::LettaCode => SdkRetries::Default,
                Profile::Reference => SdkRetries::ReadsOnly,
            },
            cache_messages: config.profile == Profile::LettaCode,
            seed: config.seed ^ 0x5d4b_7e11 ^ u64::from(restarts),
        },
        log,
        turn.clone(),
    );
    let obs_env = env.clone();
    let clock = env.clock();
    let spawner = env.spawner();
    let clock_env = env;
    Client::new(
        config,
        ClientIo {
            backend,
            observe: Arc::new(move |o| obs_env.observe(o)),
            epoch_now_ms: Arc::new(move || clock_env.epoch_ms() + clock_env.now_ms()),
            workspace,
            progress,
            crash,
            turn,
            clock,
            spawner,
        },
    )
}

impl<B: Backend> Client<B> {
    pub fn new(config: ClientConfig, io: ClientIo<B>) -> Self {
        let padded = config.bugs.response_state_padded;
        let restarts = io.progress.lock().unwrap().restarts;
        // A restarted process draws fresh otids: its PRNG seed mixes in the restart count.
        let rng = ChaCha8Rng::seed_from_u64(
            config
                .seed
                .wrapping_add(u64::from(restarts).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        );
        let human = Human {
            answers: config.human.clone(),
            next: 0,
        };
        let new_conversation = config.conversation_id == NEW_CONVERSATION;
        let planted_otids = ChaCha8Rng::seed_from_u64(config.seed ^ PLANTED_OTID_SEED);
        Client {
            config,
            io,
            rng,
            planted_otids,
            human,
            interrupt: Interrupt::default(),
            generation: 0,
            response_state: ResponseStateCache::new(padded),
            stale_at_startup: Vec::new(),
            open_dialog: Vec::new(),
            queued: None,
            interrupted_conversation: None,
            last_user_only_input: None,
            turn_chunks: 0,
            tools_batches: 0,
            crash_pending: None,
            override_model: None,
            transcript: stream::Transcript::default(),
            planted_reexecute: Vec::new(),
            pending_cancel: None,
            tool_results: Arc::default(),
            new_conversation,
        }
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    fn observe(&self, o: Observation) {
        (self.io.observe)(o)
    }

    fn otid(&mut self) -> String {
        if self.config.bugs.otids_repeat_per_process {
            return uuid4(&mut self.planted_otids);
        }
        let mut id = uuid4(&mut self.rng);
        if self.config.bugs.nondeterministic_otids {
            let n = PLANTED_COUNTER.fetch_add(1, Ordering::Relaxed);
            id.push_str(&format!("-{n}"));
        }
        id
    }

    /// Runs the script from where the progress says, to the end; returns every outcome.
    pub async fn run(&mut self) -> Vec<TurnOutcome> {
        let restart = self.io.progress.lock().unwrap().restarts;
        self.observe(Observation::ClientStarted {
            restart,
            profile: self.config.profile.as_str().into(),
            mode: self.config.mode.as_str().into(),
        });
        let mut open_failed: Option<String> = None;
        if self.config.mode == Mode::Interactive {
            open_failed = self.open_conversation().await.err();
            // The eager check before the first send of a resumed session (§6.4).
            if open_failed.is_none() {
                self.startup_check(restart > 0).await;
            }
        }
        let turns = self.config.turns.clone();
        loop {
            let idx = self.io.progress.lock().unwrap().next_turn;
            let Some(text) = turns.get(idx) else { break };
            let turn = idx as u32 + 1;
            self.io.turn.store(turn, Ordering::SeqCst);
            self.observe(Observation::TurnStart {
                turn,
                text: text.clone(),
            });
            if self.config.mode == Mode::Headless {
                // One-shot: every turn is a new process with its start-up check (B.5.4).
                if self.config.bugs.otids_repeat_per_process {
                    self.planted_otids =
                        ChaCha8Rng::seed_from_u64(self.config.seed ^ PLANTED_OTID_SEED);
                }
                open_failed = self.open_conversation().await.err();
                if open_failed.is_none() {
                    self.startup_check(restart > 0 || idx > 0).await;
                }
            }
            let outcome = match &open_failed {
                Some(e) => TurnOutcome::Error(e.clone()),
                None => self.run_turn(turn, text).await,
            };
            self.observe(Observation::TurnEnd {
                turn,
                outcome: outcome.to_string(),
            });
            let mut p = self.io.progress.lock().unwrap();
            p.outcomes.push(outcome);
            p.next_turn = idx + 1;
        }
        self.io.progress.lock().unwrap().outcomes.clone()
    }

    /// A process start with [`NEW_CONVERSATION`]: create the conversation and use its id.
    async fn open_conversation(&mut self) -> Result<(), String> {
        if !self.new_conversation {
            return Ok(());
        }
        match self
            .io
            .backend
            .create_conversation(&self.config.agent_id)
            .await
        {
            Ok(v) => match v.get("id").and_then(serde_json::Value::as_str) {
                Some(id) => {
                    self.config.conversation_id = id.to_string();
                    Ok(())
                }
                None => Err(format!("conversation create returned no id: {v}")),
            },
            Err(e) => Err(format!(
                "conversation create failed: {}",
                e.get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("error")
            )),
        }
    }

    /// The server's resume data for this client's agent and conversation (letta-protocol.md
    /// §6.3); with `include_history` also the message history (the `backfill` setting), without
    /// it the pending approvals only.
    async fn server_resume_data(
        &self,
        include_history: bool,
    ) -> Result<resume_data::ResumeData, resume_data::ResumeDataError> {
        let rank: resume_data::TypeRank = if self.config.bugs.backfill_unranked {
            |_| 0
        } else {
            resume_data::type_rank
        };
        resume_data::get_resume_data(
            &self.io.backend,
            &self.config.agent_id,
            &self.config.conversation_id,
            include_history,
            rank,
        )
        .await
    }

    /// Reports the transcript backfilled from the start-up tail: each listed message in
    /// arrival order, and where in that listing each shown message stands.
    fn observe_backfill(&self, data: &resume_data::ResumeData) {
        let Some(listed) = &data.listed else { return };
        let field = |m: &serde_json::Value, k: &str| {
            m.get(k)
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("-")
                .to_string()
        };
        self.observe(Observation::ClientBackfill {
            conversation_id: self.config.conversation_id.clone(),
            listed: listed
                .iter()
                .map(|m| {
                    ["id", "message_type", "date", "otid"]
                        .map(|k| field(m, k))
                        .join(" ")
                })
                .collect(),
            shown: data
                .message_history
                .iter()
                .filter_map(|m| listed.iter().position(|l| l == m))
                .map(|i| i as u32)
                .collect(),
        });
    }

    /// Start-up: resume data from the server; pending approvals become stale denials for the
    /// next submission (letta-protocol.md §6.3-6.4). With the planted
    /// `reexecute_pending_on_restart`, a restarted client executes them instead.
    async fn startup_check(&mut self, restarted: bool) {
        if self.config.bugs.skip_startup_check {
            return;
        }
        let data = self.server_resume_data(self.config.backfill).await;
        let pending = match data {
            Ok(d) => {
                if self.config.backfill {
                    self.observe_backfill(&d);
                }
                d.pending_approvals
            }
            Err(_) => Vec::new(),
        };
        if pending.is_empty() {
            return;
        }
        if restarted && self.config.bugs.reexecute_pending_on_restart {
            self.observe(Observation::ClientRecovery {
                kind: "reexecute_pending".into(),
                detail: pending
                    .iter()
                    .map(|p| p.tool_call_id.clone())
                    .collect::<Vec<_>>()
                    .join(","),
            });
            self.planted_reexecute = pending;
            return;
        }
        self.observe(Observation::ClientRecovery {
            kind: "stale_approvals".into(),
            detail: pending
                .iter()
                .map(|p| p.tool_call_id.clone())
                .collect::<Vec<_>>()
                .join(","),
        });
        self.stale_at_startup = pending
            .into_iter()
            .map(|p| ServerApproval {
                tool_call_id: p.tool_call_id,
                tool_name: p.tool_name,
            })
            .collect();
    }
}

#[cfg(test)]
mod tests;
