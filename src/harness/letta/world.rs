//! The world: (scenario, seed) → one turmoil simulation with a provider, a server and a client,
//! run to completion or to its time budget, with every observation in the trace.
//!
//! Seeds: one run seed; every consumer gets a seed derived from it by name
//! ([`derive_seed`]), so adding a consumer never shifts another's stream.

use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::harness::env::SimEnv;
use crate::harness::faults::{FaultRuntime, NowFn, PlanHooks};
use crate::harness::scenario::{Fault, InputError, Scenario};
use crate::harness::trace::Trace;
use crate::model::letta::client::approvals::{Permission, PermissionRules};
use crate::model::letta::client::backend::{RequestLog, RequestRecord};
use crate::model::letta::client::{
    ClientBugs, ClientConfig, CrashPlan, CrashWhen, InterruptPlan, InterruptWhen, Mode, Profile,
    Progress, Timers, TurnOutcome,
};
use crate::model::letta::server::{
    self, AgentConfig, ServerBugs, ServerConfig, SharedStore, Store, StoredToolCall, StreamHooks,
};
use crate::model::port::observe::Observation;
use crate::model::provider::{self, ProviderConfig, ProviderResponse, ProviderState};
use crate::model::tools::Workspace;
use crate::wire::letta::ClientTool;

/// Unix time of simulated time zero: 2026-01-01T00:00:00Z. Fixed so dates in bodies replay
/// (turmoil's default epoch is the wall clock, turmoil-hyper-probe.md §4).
pub const EPOCH_UNIX_MS: u64 = 1_767_225_600_000;

pub const PROVIDER_PORT: u16 = 9000;
pub const SERVER_PORT: u16 = 8283;

/// A seed for `label` derived from the run seed: the first 8 bytes of SHA-256(seed ‖ label).
pub fn derive_seed(seed: u64, label: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update(label.as_bytes());
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
}

/// Everything one simulation produced.
pub struct RunOutput {
    pub trace: Vec<crate::harness::trace::TraceEvent>,
    /// Outcomes per turn; `None` if the client never finished.
    pub outcomes: Option<Vec<TurnOutcome>>,
    /// Why the simulation stopped early (time budget, host error).
    pub stopped: Option<String>,
    /// Simulated time at the end.
    pub end_ms: u64,
    /// The client workspace at the end (side-effect counters).
    pub workspace: Workspace,
    /// The server's durable store at the end (runs and their logs, conversations).
    pub store: SharedStore,
    /// client-model: every request the client sent, in order (the conformance log).
    pub requests: Vec<RequestRecord>,
}

impl std::fmt::Debug for RunOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOutput")
            .field("events", &self.trace.len())
            .field("outcomes", &self.outcomes)
            .field("stopped", &self.stopped)
            .field("end_ms", &self.end_ms)
            .finish_non_exhaustive()
    }
}

/// Configs and durable state of one world, the same whichever network it runs on.
pub struct WorldParts {
    pub provider: Arc<ProviderConfig>,
    /// The provider's durable state: calls answered, next cassette.
    pub provider_state: Arc<Mutex<ProviderState>>,
    pub server: ServerConfig,
    /// The server's durable store.
    pub store: SharedStore,
    pub client: ClientConfig,
    /// The client's workspace (its disk).
    pub workspace: Arc<Mutex<Workspace>>,
    /// client-model: the user's place in the script (survives client crashes).
    pub progress: Arc<Mutex<Progress>>,
    /// client-model: the client's request log (survives client crashes).
    pub requests: RequestLog,
}

/// Builds the parts of a world from a scenario and seed.
pub fn world_parts(
    scenario: &Scenario,
    seed: u64,
    trace: &Trace,
    now: NowFn,
) -> Result<WorldParts, InputError> {
    let responses: Vec<ProviderResponse> = crate::harness::cassettes::provider_responses(scenario)?;
    let plan: Vec<Fault> = scenario
        .faults
        .iter()
        .map(|f| f.get_ref().clone())
        .collect();
    let hooks = PlanHooks::new(&plan, trace, now);
    let (server, store) = server_parts(
        scenario,
        seed,
        hooks.clone(),
        format!("provider:{PROVIDER_PORT}"),
    )?;
    // client-model (issue 4): the history a `stale_approval` planted, in the trace.
    for f in &scenario.faults {
        if let Fault::StaleApproval {
            conversation,
            tool_call_id,
            tool,
            arguments,
        } = f.get_ref()
        {
            let call = StoredToolCall {
                id: tool_call_id.clone(),
                name: tool.clone(),
                arguments: arguments.clone(),
            };
            for o in server::planted_history(conversation, &call) {
                trace.push(0, "server", o);
            }
        }
    }
    let workspace = Arc::new(Mutex::new(Workspace::with_files(
        scenario
            .client
            .files
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    )));
    Ok(WorldParts {
        provider: Arc::new(ProviderConfig {
            port: PROVIDER_PORT,
            responses,
            hooks,
        }),
        provider_state: Arc::new(Mutex::new(ProviderState::default())),
        server,
        store,
        client: client_config(scenario, seed)?,
        workspace,
        progress: Arc::new(Mutex::new(Progress::default())),
        requests: Arc::new(Mutex::new(Vec::new())),
    })
}

/// The server config and its durable store for a scenario (issue 3): profile, variants,
/// planted defects, the fault hooks, and any stale approval planted before the run.
pub fn server_parts(
    scenario: &Scenario,
    seed: u64,
    hooks: Arc<dyn StreamHooks>,
    provider_addr: String,
) -> Result<(ServerConfig, SharedStore), InputError> {
    let agents = vec![AgentConfig {
        id: scenario.agent.id.clone(),
        model: scenario.agent.model.clone(),
    }];
    let profile = scenario.server_profile()?;
    let mut store = Store::new(derive_seed(seed, "server"), &agents);
    for f in &scenario.faults {
        if let Fault::StaleApproval {
            conversation,
            tool_call_id,
            tool,
            arguments,
        } = f.get_ref()
        {
            server::plant_pending_approval(
                &mut store,
                profile,
                conversation,
                &scenario.agent.id,
                StoredToolCall {
                    id: tool_call_id.clone(),
                    name: tool.clone(),
                    arguments: arguments.clone(),
                },
                0,
            );
        }
    }
    let p = &scenario.planted;
    let config = ServerConfig {
        port: SERVER_PORT,
        provider_addr,
        provider_api: scenario.provider_api()?,
        agents,
        provider_idle_timeout: Duration::from_millis(scenario.server.provider_idle_timeout_ms),
        profile,
        keepalive_interval: server::KEEPALIVE_INTERVAL,
        approval_conflict: scenario.approval_conflict()?,
        bugs: ServerBugs {
            accept_message_while_pending: p.server_accepts_message_while_pending,
            ignore_request_token: p.server_ignores_request_token,
            volatile_writes: p.server_volatile_writes,
            skip_orphan_settling: p.server_skips_orphan_settling,
        },
        hooks,
        request_log: None,
        exchange_log: None,
    };
    Ok((config, Arc::new(Mutex::new(store))))
}

/// The probe host's steps from the scenario's `[[requests]]` (issue 3).
pub fn probe_steps(scenario: &Scenario) -> Vec<crate::harness::letta::probe::ProbeStep> {
    scenario
        .requests
        .iter()
        .map(|r| {
            let r = r.get_ref();
            crate::harness::letta::probe::ProbeStep {
                at_ms: r.at_ms,
                method: r.method.clone(),
                path: r.path.clone(),
                body: r.body.clone(),
                read_timeout_ms: r.read_timeout_ms,
                max_frames: r.max_frames,
            }
        })
        .collect()
}

/// Runs `scenario` once with `seed` on turmoil.
pub fn run_once(scenario: &Scenario, seed: u64) -> Result<RunOutput, InputError> {
    run_once_logging(scenario, seed, None)
}

/// [`run_once`], logging every exchange with the server's response bytes when `exchanges` is
/// given (`sim bench --compare-bare` replays them in the bare world).
pub fn run_once_logging(
    scenario: &Scenario,
    seed: u64,
    exchanges: Option<server::ExchangeLog>,
) -> Result<RunOutput, InputError> {
    let trace = Trace::new();
    let now: NowFn = Arc::new(|| turmoil::sim_elapsed().map_or(0, |d| d.as_millis() as u64));
    let mut parts = world_parts(scenario, seed, &trace, now)?;
    parts.server.exchange_log = exchanges;
    let plan: Vec<Fault> = scenario
        .faults
        .iter()
        .map(|f| f.get_ref().clone())
        .collect();

    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(derive_seed(seed, "turmoil"))
        .epoch(UNIX_EPOCH + Duration::from_millis(EPOCH_UNIX_MS))
        .tick_duration(Duration::from_millis(scenario.network.tick_ms))
        .min_message_latency(Duration::from_millis(scenario.network.latency_ms[0]))
        .max_message_latency(Duration::from_millis(scenario.network.latency_ms[1]))
        .simulation_duration(Duration::from_millis(scenario.limits.sim_time_ms));
    let mut sim = builder.build();

    {
        let trace = trace.clone();
        let config = parts.provider.clone();
        let state = parts.provider_state.clone();
        sim.host("provider", move || {
            let env = SimEnv::new("provider", trace.clone(), EPOCH_UNIX_MS);
            let config = config.clone();
            let state = state.clone();
            async move {
                provider::run(env, config, state)
                    .await
                    .map_err(|e| e.to_string().into())
            }
        });
    }
    {
        // turmoil re-runs this closure on a restart: config is rebuilt, the store survives.
        let trace = trace.clone();
        let config = parts.server.clone();
        let store = parts.store.clone();
        sim.host("server", move || {
            let env = SimEnv::new("server", trace.clone(), EPOCH_UNIX_MS);
            let config = config.clone();
            let store = store.clone();
            async move {
                server::run(env, config, store)
                    .await
                    .map_err(|e| e.to_string().into())
            }
        });
    }
    // Scripted probe requests (issue 3). client-model: the run ends when the client and the
    // probe are both done.
    let probe_done = Arc::new(std::sync::atomic::AtomicBool::new(
        scenario.requests.is_empty(),
    ));
    if !scenario.requests.is_empty() {
        let env = SimEnv::new("probe", trace.clone(), EPOCH_UNIX_MS);
        let steps = probe_steps(scenario);
        let done = probe_done.clone();
        sim.client("probe", async move {
            crate::harness::letta::probe::run(env, format!("server:{SERVER_PORT}"), steps).await;
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        });
    }
    // client-model: the client is a host, so it can crash and restart (turmoil re-runs the
    // closure on bounce); a completion flag ends the run. Each (re)start counts in the
    // progress, so a restarted process draws fresh otids; a crash the client asked for
    // (`client_crash`) also marks its turn crashed, a crash from the fault plan re-runs it.
    let outcomes: Arc<Mutex<Option<Vec<TurnOutcome>>>> = Arc::new(Mutex::new(None));
    let crash_requested = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let trace = trace.clone();
        let workspace = parts.workspace.clone();
        let progress = parts.progress.clone();
        let requests = parts.requests.clone();
        let outcomes = outcomes.clone();
        let config = parts.client.clone();
        let crash_requested = crash_requested.clone();
        let starts = Arc::new(std::sync::atomic::AtomicU32::new(0));
        sim.host("client", move || {
            let env = SimEnv::new("client", trace.clone(), EPOCH_UNIX_MS);
            let workspace = workspace.clone();
            let progress = progress.clone();
            let requests = requests.clone();
            let outcomes = outcomes.clone();
            let config = config.clone();
            let flag = crash_requested.clone();
            let n = starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            progress.lock().unwrap().restarts = n;
            async move {
                let crash: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                });
                let mut client = crate::model::letta::client::over_http(
                    env,
                    config,
                    workspace,
                    progress,
                    requests,
                    Some(crash),
                );
                let result = client.run().await;
                *outcomes.lock().unwrap() = Some(result);
                Ok(())
            }
        });
    }

    let mut faults = FaultRuntime::new(&plan, scenario.network.latency_ms);
    let heal_at = scenario.limits.heal_at_ms;
    let deadline = heal_at.saturating_add(scenario.limits.liveness_ms);
    let mut stopped = None;
    loop {
        if let Err(e) = sim.step() {
            stopped = Some(e.to_string());
            break;
        }
        if outcomes.lock().unwrap().is_some()
            && probe_done.load(std::sync::atomic::Ordering::SeqCst)
        {
            break;
        }
        // The client is a host, so turmoil's own duration check (clients only) does not apply.
        if sim.elapsed() > Duration::from_millis(scenario.limits.sim_time_ms) {
            stopped = Some(format!(
                "Ran for duration: {:?} without completing",
                Duration::from_millis(scenario.limits.sim_time_ms)
            ));
            break;
        }
        if crash_requested.swap(false, std::sync::atomic::Ordering::SeqCst) {
            let t = sim.elapsed().as_millis() as u64;
            trace.push(
                t,
                "harness",
                Observation::Fault {
                    fault: "client crashed; restarting it".into(),
                },
            );
            {
                let mut p = parts.progress.lock().unwrap();
                p.outcomes.push(TurnOutcome::Crashed);
                p.next_turn += 1;
            }
            faults.crash_and_restart(&mut sim, "client");
        }
        let now = sim.elapsed().as_millis() as u64;
        if now >= heal_at {
            faults.heal(&mut sim, now, &trace);
        } else {
            faults.on_step(&mut sim, now, &trace);
        }
        if now >= deadline {
            stopped = Some(format!(
                "not finished {} ms after the world healed at {heal_at} ms",
                scenario.limits.liveness_ms
            ));
            break;
        }
    }
    let end_ms = sim.elapsed().as_millis() as u64;
    drop(sim);
    let outcomes = outcomes.lock().unwrap().take();
    let workspace = parts.workspace.lock().unwrap().clone();
    let requests = parts.requests.lock().unwrap().clone();
    Ok(RunOutput {
        trace: trace.events(),
        outcomes,
        stopped,
        end_ms,
        workspace,
        store: parts.store.clone(),
        requests,
    })
}

fn client_config(scenario: &Scenario, seed: u64) -> Result<ClientConfig, InputError> {
    let p = &scenario.permissions;
    // Precedence: deny, then alwaysAsk, then ask, then allow (a deny rule is never overridden;
    // an explicit deny beats alwaysAsk, letta-tests-and-real-client.md A.5.3).
    let mut rules = Vec::new();
    rules.extend(p.deny.iter().map(|t| (t.clone(), Permission::Deny)));
    rules.extend(
        p.always_ask
            .iter()
            .map(|t| (t.clone(), Permission::AlwaysAsk)),
    );
    rules.extend(p.ask.iter().map(|t| (t.clone(), Permission::Ask)));
    rules.extend(p.allow.iter().map(|t| (t.clone(), Permission::Allow)));
    let tools = scenario
        .client
        .tools
        .iter()
        .map(|t| ClientTool {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t
                .parameters
                .as_ref()
                .and_then(|v| serde_json::to_value(v).ok()),
        })
        .collect();
    let c = &scenario.client;
    let pl = &scenario.planted;
    let mut interrupts = Vec::new();
    let mut crashes = Vec::new();
    for f in &scenario.faults {
        match f.get_ref() {
            Fault::Interrupt {
                turn,
                during,
                after_chunk,
                after_ms,
            } => interrupts.push(InterruptPlan {
                turn: *turn,
                when: match (during.as_str(), after_chunk, after_ms) {
                    ("tools", _, Some(ms)) => InterruptWhen::ToolsRunning { after_ms: *ms },
                    ("approval", _, _) => InterruptWhen::AwaitingApproval,
                    (_, Some(n), _) => InterruptWhen::AfterChunk(*n),
                    _ => continue,
                },
            }),
            Fault::ClientCrash {
                turn,
                at,
                after_chunk,
            } => crashes.push(CrashPlan {
                turn: *turn,
                when: match (at.as_str(), after_chunk) {
                    ("after_chunk", Some(n)) => CrashWhen::AfterChunk(*n),
                    _ => CrashWhen::AfterTools,
                },
            }),
            _ => {}
        }
    }
    let defaults = Timers::default();
    Ok(ClientConfig {
        server_addr: format!("server:{SERVER_PORT}"),
        agent_id: scenario.agent.id.clone(),
        conversation_id: c.conversation.clone(),
        client_tools: tools,
        permissions: PermissionRules {
            rules,
            default: scenario.permission_default()?,
        },
        human: scenario.human_answers()?,
        turns: c.turns.clone(),
        seed: derive_seed(seed, "client"),
        max_requests_per_turn: scenario.limits.requests_per_turn,
        request_timeout: Duration::from_secs(30),
        profile: Profile::from_name(scenario.scenario.client_profile.get_ref()).unwrap_or_default(),
        mode: Mode::from_name(c.mode.get_ref()).unwrap_or_default(),
        cwd: "/workspace".into(),
        tool_ms: c.tool_ms.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        default_tool_ms: c.default_tool_ms,
        backfill: c.backfill,
        timers: Timers {
            eof_grace_ms: c.eof_grace_ms.unwrap_or(defaults.eof_grace_ms),
            stall_ms: c.stall_ms.unwrap_or(defaults.stall_ms),
            max_silence_ms: defaults.max_silence_ms,
        },
        interrupts,
        crashes,
        bugs: ClientBugs {
            nondeterministic_otids: pl.client_nondeterministic_otids,
            waits_forever_on_silence: pl.client_waits_forever_on_silence,
            reexecute_pending_on_restart: pl.client_reexecute_pending_on_restart,
            resume_from_zero: pl.client_resume_from_zero,
            drop_approvals_on_resume: pl.client_drop_approvals_on_resume,
            braces_args_fallback: pl.client_braces_args_fallback,
            unbounded_busy_retries: pl.client_unbounded_busy_retries,
            stale_denial_as_user: pl.client_stale_denial_as_user,
            results_in_completion_order: pl.client_results_in_completion_order,
            no_resource_locks: pl.client_no_resource_locks,
        },
    })
}
