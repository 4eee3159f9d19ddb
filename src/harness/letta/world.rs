//! The Letta world: (scenario, seed) → one turmoil simulation with a provider, a server, a
//! client and (when the scenario scripts requests) a probe, run to completion or to its time
//! budget, with every observation in the trace. The simulation, the provider host and the
//! step/heal loop are the harness's ([`crate::harness::world`]); the server, client and probe
//! hosts are this system's.
//!
//! Seeds: `derive_seed(seed, "turmoil" | "server" | "client")`.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::env::SimEnv;
use crate::harness::faults::{Fault, FaultRuntime, NowFn, PlanHooks};
use crate::harness::letta::probe;
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::trace::Trace;
use crate::harness::world::{self, PROVIDER_PORT, derive_seed, sim_now};
use crate::harness::world_start::WorldStart;
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
use crate::model::provider::{ProviderConfig, ProviderResponse, ProviderState};
use crate::model::tools::Workspace;
use crate::wire::letta::ClientTool;

/// The server's port on its host.
pub const SERVER_PORT: u16 = 8283;

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
    /// Every request the client sent, in order (the conformance log).
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
    /// The user's place in the script (survives client crashes).
    pub progress: Arc<Mutex<Progress>>,
    /// The client's request log (survives client crashes).
    pub requests: RequestLog,
    /// Simulated time zero on the wall clock (`[network] start`).
    pub start: WorldStart,
}

/// Builds the parts of a world from a scenario and seed.
pub fn world_parts(
    scenario: &Scenario,
    seed: u64,
    trace: &Trace,
    now: NowFn,
) -> Result<WorldParts, InputError> {
    let responses: Vec<ProviderResponse> = crate::harness::cassettes::provider_responses(scenario)?;
    let hooks = PlanHooks::new(&world::plan(scenario), trace, now);
    let (server, store) = server_parts(
        scenario,
        seed,
        hooks.clone(),
        format!("provider:{PROVIDER_PORT}"),
    )?;
    // The history a `stale_approval` planted, in the trace, and the ones refused.
    for stale in stale_approvals(scenario) {
        match stale {
            Ok((conversation, call)) => {
                for o in server::planted_history(conversation, &call) {
                    trace.push(0, "server", o);
                }
            }
            Err(refused) => trace.push(0, "server", Observation::Fault { fault: refused }),
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
        start: scenario.network.start,
    })
}

/// The server config and its durable store for a scenario: profile, variants,
/// planted defects, the fault hooks, and any stale approval planted before the run.
/// The plan's `stale_approval` faults, each the conversation and the call it leaves pending, or
/// why it is not planted: a conversation waits for one approval at a time, so a second one on a
/// conversation (a plan that drew the fault twice, or beside the scenario's own) is refused, as
/// the send-time stale-approval faults refuse a conversation that already waits for one.
fn stale_approvals(scenario: &Scenario) -> Vec<Result<(&str, StoredToolCall), String>> {
    let mut waiting: Vec<(&str, &str)> = Vec::new();
    let mut out = Vec::new();
    for f in &scenario.faults {
        let Fault::StaleApproval {
            conversation,
            tool_call_id,
            tool,
            arguments,
        } = f.get_ref()
        else {
            continue;
        };
        if let Some((_, other)) = waiting.iter().find(|(c, _)| c == conversation) {
            out.push(Err(format!(
                "stale_approval conversation={conversation} tool_call_id={tool_call_id} \
                 not planted: the conversation already waits for {other}"
            )));
            continue;
        }
        waiting.push((conversation, tool_call_id));
        out.push(Ok((
            conversation.as_str(),
            StoredToolCall {
                id: tool_call_id.clone(),
                name: tool.clone(),
                arguments: arguments.clone(),
            },
        )));
    }
    out
}

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
    if let Some(agent) = store.agents.get_mut(&scenario.agent.id) {
        if let Some(w) = scenario.agent.context_window_limit {
            agent
                .extra
                .insert("context_window_limit".into(), serde_json::json!(w));
        }
        if let Some(c) = &scenario.agent.compaction_settings {
            let v = serde_json::to_value(c).unwrap_or_default();
            agent.extra.insert("compaction_settings".into(), v);
        }
    }
    for (conversation, call) in stale_approvals(scenario).into_iter().flatten() {
        server::plant_pending_approval(
            &mut store,
            profile,
            conversation,
            &scenario.agent.id,
            call,
            0,
        );
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
        response_state: scenario.server.response_state,
        bugs: ServerBugs {
            accept_message_while_pending: p.server_accepts_message_while_pending,
            ignore_request_token: p.server_ignores_request_token,
            volatile_writes: p.server_volatile_writes,
            skip_orphan_settling: p.server_skips_orphan_settling,
            compaction_splits_tool_call: p.server_compaction_splits_tool_call,
            compaction_cuts_at_user: p.server_compaction_cuts_at_user,
            compaction_loses_message: p.server_compaction_loses_message,
            compaction_ignores_threshold: p.server_compaction_ignores_threshold,
            refuse_run_resume: p.server_refuses_run_resume,
            close_caught_up_stream: p.server_closes_caught_up_stream,
            untyped_answers: p.server_untyped_answers,
            unserved_conversation_cancel: p.server_unserved_conversation_cancel,
            unnamed_chunks: p.server_unnamed_chunks,
            weekday_from_monday: p.server_weekday_from_monday,
            uncounted_sends: p.server_uncounted_sends,
        },
        hooks,
        request_log: None,
        exchange_log: None,
    };
    Ok((config, Arc::new(Mutex::new(store))))
}

/// The probe host's steps from the scenario's `[[requests]]`.
pub fn probe_steps(scenario: &Scenario) -> Vec<probe::ProbeStep> {
    scenario
        .requests
        .iter()
        .map(|r| {
            let r = r.get_ref();
            probe::ProbeStep {
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
    let mut parts = world_parts(scenario, seed, &trace, sim_now(&trace))?;
    parts.server.exchange_log = exchanges;
    let plan = world::plan(scenario);

    let mut sim = world::simulation(scenario, seed);
    world::provider_host(
        &mut sim,
        &trace,
        parts.start,
        parts.provider.clone(),
        parts.provider_state.clone(),
    );
    server_host(&mut sim, &trace, &parts);
    // The run ends when the client and the probe are both done.
    let probe_done = probe_client(&mut sim, &trace, scenario);
    let outcomes: Arc<Mutex<Option<Vec<TurnOutcome>>>> = Arc::new(Mutex::new(None));
    let crash_requested = Arc::new(AtomicBool::new(false));
    client_host(&mut sim, &trace, &parts, &outcomes, &crash_requested);

    let stopped = world::run_to_end(
        &mut sim,
        scenario,
        &plan,
        &trace,
        |_| outcomes.lock().unwrap().is_some() && probe_done.load(Ordering::SeqCst),
        |sim, faults| {
            if crash_requested.swap(false, Ordering::SeqCst) {
                restart_crashed_client(sim, faults, &trace, &parts.progress);
            }
        },
    );
    let end_ms = trace.clock().elapsed_ms(&sim);
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

/// Adds the server as host `server`. turmoil re-runs the closure on a restart: the config is
/// rebuilt, the store survives.
fn server_host(sim: &mut turmoil::Sim<'_>, trace: &Trace, parts: &WorldParts) {
    let trace = trace.clone();
    let config = parts.server.clone();
    let store = parts.store.clone();
    let epoch_ms = parts.start.unix_ms();
    sim.host("server", move || {
        let env = SimEnv::new("server", trace.clone(), epoch_ms);
        let config = config.clone();
        let store = store.clone();
        async move {
            server::run(env, config, store)
                .await
                .map_err(|e| e.to_string().into())
        }
    });
}

/// Adds the scenario's scripted probe requests as client `probe`, when it has any. The flag it
/// returns is set when the probe is done (at once for a scenario without one).
fn probe_client(sim: &mut turmoil::Sim<'_>, trace: &Trace, scenario: &Scenario) -> Arc<AtomicBool> {
    let probe_done = Arc::new(AtomicBool::new(scenario.requests.is_empty()));
    if !scenario.requests.is_empty() {
        let env = SimEnv::new("probe", trace.clone(), scenario.network.start.unix_ms());
        let steps = probe_steps(scenario);
        let done = probe_done.clone();
        sim.client("probe", async move {
            probe::run(env, format!("server:{SERVER_PORT}"), steps).await;
            done.store(true, Ordering::SeqCst);
            Ok(())
        });
    }
    probe_done
}

/// Adds the client as host `client`, so it can crash and restart (turmoil re-runs the closure
/// on a bounce); it writes its turn outcomes to `outcomes` when it finishes. Each (re)start
/// counts in the progress, so a restarted process draws fresh otids. A crash the client asks
/// for (`client_crash`) sets `crash_requested`.
fn client_host(
    sim: &mut turmoil::Sim<'_>,
    trace: &Trace,
    parts: &WorldParts,
    outcomes: &Arc<Mutex<Option<Vec<TurnOutcome>>>>,
    crash_requested: &Arc<AtomicBool>,
) {
    let trace = trace.clone();
    let workspace = parts.workspace.clone();
    let progress = parts.progress.clone();
    let requests = parts.requests.clone();
    let outcomes = outcomes.clone();
    let config = parts.client.clone();
    let crash_requested = crash_requested.clone();
    let starts = Arc::new(AtomicU32::new(0));
    let epoch_ms = parts.start.unix_ms();
    sim.host("client", move || {
        let env = SimEnv::new("client", trace.clone(), epoch_ms);
        let workspace = workspace.clone();
        let progress = progress.clone();
        let requests = requests.clone();
        let outcomes = outcomes.clone();
        let config = config.clone();
        let flag = crash_requested.clone();
        let n = starts.fetch_add(1, Ordering::SeqCst);
        progress.lock().unwrap().restarts = n;
        async move {
            let crash: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                flag.store(true, Ordering::SeqCst);
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

/// The harness's `fault` event when the client asks to be crashed (read by
/// `client-faults-fire`).
pub(crate) const CLIENT_CRASHED: &str = "client crashed; restarting it";

/// A crash the client asked for: its turn is marked crashed (a crash from the fault plan
/// re-runs the turn instead), and the process restarts.
fn restart_crashed_client(
    sim: &mut turmoil::Sim<'_>,
    faults: &mut FaultRuntime,
    trace: &Trace,
    progress: &Mutex<Progress>,
) {
    let t = trace.clock().elapsed_ms(sim);
    trace.push(
        t,
        "harness",
        Observation::Fault {
            fault: CLIENT_CRASHED.into(),
        },
    );
    {
        let mut p = progress.lock().unwrap();
        p.outcomes.push(TurnOutcome::Crashed);
        p.next_turn += 1;
    }
    faults.crash_and_restart(sim, "client");
}

fn client_config(scenario: &Scenario, seed: u64) -> Result<ClientConfig, InputError> {
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
    let (interrupts, crashes) = interrupts_and_crashes(scenario);
    let defaults = Timers::default();
    Ok(ClientConfig {
        server_addr: format!("server:{SERVER_PORT}"),
        agent_id: scenario.agent.id.clone(),
        conversation_id: c.conversation.clone(),
        client_tools: tools,
        permissions: PermissionRules {
            rules: permission_rules(scenario),
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
        local_backend: scenario.server_profile()? == server::Profile::Local,
        timers: Timers {
            eof_grace_ms: c.eof_grace_ms.unwrap_or(defaults.eof_grace_ms),
            stall_ms: c.stall_ms.unwrap_or(defaults.stall_ms),
            max_silence_ms: defaults.max_silence_ms,
        },
        interrupts,
        crashes,
        bugs: client_bugs(scenario),
    })
}

/// The scenario's permission rules in precedence order: deny, then alwaysAsk, then ask, then
/// allow (a deny rule is never overridden; an explicit deny beats alwaysAsk,
/// letta-tests-and-real-client.md A.5.3).
fn permission_rules(scenario: &Scenario) -> Vec<(String, Permission)> {
    let p = &scenario.permissions;
    let mut rules = Vec::new();
    rules.extend(p.deny.iter().map(|t| (t.clone(), Permission::Deny)));
    rules.extend(
        p.always_ask
            .iter()
            .map(|t| (t.clone(), Permission::AlwaysAsk)),
    );
    rules.extend(p.ask.iter().map(|t| (t.clone(), Permission::Ask)));
    rules.extend(p.allow.iter().map(|t| (t.clone(), Permission::Allow)));
    rules
}

/// The plan's user interrupts and client-requested crashes, as the client's own plans.
pub(crate) fn interrupts_and_crashes(scenario: &Scenario) -> (Vec<InterruptPlan>, Vec<CrashPlan>) {
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
    (interrupts, crashes)
}

/// The client defects the scenario plants.
fn client_bugs(scenario: &Scenario) -> ClientBugs {
    let pl = &scenario.planted;
    ClientBugs {
        nondeterministic_otids: pl.client_nondeterministic_otids,
        waits_forever_on_silence: pl.client_waits_forever_on_silence,
        reexecute_pending_on_restart: pl.client_reexecute_pending_on_restart,
        resume_from_zero: pl.client_resume_from_zero,
        drop_approvals_on_resume: pl.client_drop_approvals_on_resume,
        braces_args_fallback: pl.client_braces_args_fallback,
        unbounded_busy_retries: pl.client_unbounded_busy_retries,
        stale_denial_as_user: pl.client_stale_denial_as_user,
        skip_startup_check: pl.client_skips_startup_check,
        ignores_chunk_faults: pl.client_ignores_chunk_faults,
        keeps_otids_on_rebuild: pl.client_keeps_otids_on_rebuild,
        response_state_padded: pl.client_response_state_padded,
        backfill_unranked: pl.client_backfill_unranked,
        leaves_abandoned_run: pl.client_leaves_abandoned_run,
        flips_result_status: pl.client_flips_result_status,
        results_in_completion_order: pl.client_results_in_completion_order,
        no_resource_locks: pl.client_no_resource_locks,
        otids_repeat_per_process: pl.client_otids_repeat_per_process,
        gives_up_on_in_band_conflict: pl.client_gives_up_on_in_band_conflict,
    }
}
