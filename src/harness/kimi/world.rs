//! The agent-loop world: (scenario, seed) → one turmoil simulation with two hosts, the fake
//! provider (`provider`, cassette-fed and scripted) and the agent (`client`: the Kimi Code
//! turn loop inside its host, `model::kimi::agent`), talking HTTP/SSE over the simulated
//! network. Network and process faults run through the harness's step/heal loop
//! ([`world::run_to_end`]); provider faults through [`PlanHooks`]; user and tool faults through
//! [`LoopPlanHooks`], the agent's [`AgentFaults`].
//!
//! Seeds: `derive_seed(seed, "turmoil" | "loop" | "loop-tools")`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::env::SimEnv;
use crate::harness::faults::{Fault, NowFn, PlanHooks, When};
use crate::harness::kimi::script::loop_responses;
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::trace::{Trace, TraceEvent};
use crate::harness::world::{self, PROVIDER_PORT, derive_seed, sim_now};
use crate::model::kimi::agent::inject::{AbortReason, AgentFaults, ListenerFault, ToolAct};
use crate::model::kimi::agent::tools::resolve_path;
use crate::model::kimi::agent::{LoopAgentConfig, LoopTurnOutcome};
use crate::model::kimi::turn_loop::LoopBugs;
use crate::model::port::observe::Observation;
use crate::model::provider::{ProviderConfig, ProviderState};
use crate::model::tools::Workspace;

/// Everything one agent-loop simulation produced.
#[derive(Debug)]
pub struct LoopRunOutput {
    pub trace: Vec<TraceEvent>,
    /// Outcomes per turn; `None` if the agent never finished.
    pub outcomes: Option<Vec<LoopTurnOutcome>>,
    /// Why the simulation stopped early (time budget, host error).
    pub stopped: Option<String>,
    /// Simulated time at the end.
    pub end_ms: u64,
    /// The workspace at the end.
    pub workspace: Workspace,
}

/// The agent host's configuration for a scenario and seed.
pub fn agent_config(
    scenario: &Scenario,
    seed: u64,
    faults: Arc<dyn AgentFaults>,
    latencies: std::collections::BTreeMap<String, u64>,
) -> Result<LoopAgentConfig, InputError> {
    let section = scenario.agent_loop.as_ref().ok_or_else(|| InputError {
        file: scenario.path.display().to_string(),
        line: None,
        column: None,
        message: "missing section [agent_loop]".into(),
    })?;
    Ok(LoopAgentConfig {
        provider_addr: format!("provider:{PROVIDER_PORT}"),
        api: scenario.provider_api()?,
        model: section.model.clone(),
        system_prompt: section.system_prompt.clone(),
        turns: section.turns.clone(),
        tools: section.tools.iter().map(|t| t.get_ref().clone()).collect(),
        max_steps: section.max_steps,
        max_retry_attempts: section.max_retry_attempts,
        stream_idle_timeout: Duration::from_millis(section.stream_idle_timeout_ms),
        tool_latency_ms: section.tool_latency_ms,
        tool_latency_overrides: latencies,
        seed: derive_seed(seed, "loop"),
        tools_seed: derive_seed(seed, "loop-tools"),
        bugs: LoopBugs {
            results_in_completion_order: scenario.planted.loop_results_in_completion_order,
            scheduler_drain_ignores_active: scenario.planted.loop_scheduler_drain_ignores_active,
            retry_default_of_three: scenario.planted.loop_retry_default_of_three,
            prompt_appended_after_turn: scenario.planted.loop_prompt_appended_after_turn,
            errors_shown_as_success: scenario.planted.loop_errors_shown_as_success,
            ..LoopBugs::default()
        },
        faults,
    })
}

/// The workspace a scenario starts with (paths under `/`).
pub fn initial_workspace(scenario: &Scenario) -> Workspace {
    let files = scenario
        .agent_loop
        .as_ref()
        .map(|s| s.files.clone())
        .unwrap_or_default();
    Workspace::with_files(files.into_iter().map(|(k, v)| (resolve_path(&k), v)))
}

/// kimi-loop.md §6: the backoff table's bases for `attempts` attempts, `min(500·2^i, 32000)`.
fn backoff_bases_ms(attempts: u32) -> u64 {
    (0..attempts.saturating_sub(1))
        .map(|i| (500u64 << i.min(16)).min(32_000))
        .sum()
}

/// `scenario` with the post-heal window `turn-terminates` allows (`liveness_ms`), and the run's
/// time budget with it, raised to what the reference may take: per turn, one read that waits
/// out the idle timeout, then a step that fails every attempt (kimi-loop.md §6: the backoff
/// table, each delay up to 25 % over its base, about 160 s at the default 10 attempts). A
/// provider whose script has run out answers every call with a retryable 500, so after the
/// heal each remaining turn can take that long, and a loop doing what the reference does is
/// not a hang.
fn with_retry_window(scenario: &Scenario) -> Scenario {
    let mut out = scenario.clone();
    if let Some(section) = &scenario.agent_loop {
        let attempts = section
            .max_retry_attempts
            .unwrap_or(super::scenario::REFERENCE_MAX_ATTEMPTS);
        let per_turn = section.stream_idle_timeout_ms + backoff_bases_ms(attempts) * 5 / 4;
        let turns = section.turns.len() as u64;
        let limits = &mut out.limits;
        limits.liveness_ms = limits.liveness_ms.max(turns * per_turn);
        limits.sim_time_ms = limits
            .sim_time_ms
            .max(limits.heal_at_ms + limits.liveness_ms);
    }
    out
}

/// Runs an agent-loop `scenario` once with `seed` on turmoil.
pub fn run_once(scenario: &Scenario, seed: u64) -> Result<LoopRunOutput, InputError> {
    run_once_planted(scenario, seed, |_| {})
}

/// [`run_once`] with planted defects of the loop switched on by `plant` on top of the
/// scenario's `[planted]` table: the canaries of the loop's defects that table has no switch
/// for (`LoopBugs::retry_ignores_retry_after`).
pub fn run_once_planted(
    scenario: &Scenario,
    seed: u64,
    plant: impl FnOnce(&mut LoopBugs),
) -> Result<LoopRunOutput, InputError> {
    let scenario = &with_retry_window(scenario);
    let trace = Trace::new();
    let now = sim_now(&trace);
    let plan = world::plan(scenario);
    let (responses, latencies) = loop_responses(scenario)?;
    let provider_config = Arc::new(ProviderConfig {
        port: PROVIDER_PORT,
        responses,
        hooks: PlanHooks::new(&plan, &trace, now.clone()),
    });
    let provider_state = Arc::new(Mutex::new(ProviderState::default()));
    let hooks = LoopPlanHooks::new(&plan, &trace, now, scenario.limits.heal_at_ms);
    let mut config = agent_config(scenario, seed, hooks, latencies)?;
    plant(&mut config.bugs);
    let workspace = Arc::new(Mutex::new(initial_workspace(scenario)));

    let mut sim = world::simulation(scenario, seed);
    world::provider_host(
        &mut sim,
        &trace,
        scenario.network.start,
        provider_config,
        provider_state,
    );
    let outcomes: Arc<Mutex<Option<Vec<LoopTurnOutcome>>>> = Arc::new(Mutex::new(None));
    {
        let env = SimEnv::new("client", trace.clone(), scenario.network.start.unix_ms());
        let workspace = workspace.clone();
        let outcomes = outcomes.clone();
        sim.client("client", async move {
            let result = crate::model::kimi::agent::run(env, config, workspace).await;
            *outcomes.lock().unwrap() = Some(result);
            Ok(())
        });
    }

    // The agent is turmoil's one client: the run is done when turmoil says its clients are.
    let stopped = world::run_to_end(&mut sim, scenario, &plan, &trace, |done| done, |_, _| {});
    let end_ms = trace.clock().elapsed_ms(&sim);
    // Read the trace before the hosts are torn down: a hung tool's future is dropped then,
    // outside simulated time.
    let events = trace.events();
    drop(sim);
    let outcomes = outcomes.lock().unwrap().take();
    let workspace = workspace.lock().unwrap().clone();
    Ok(LoopRunOutput {
        trace: events,
        outcomes,
        stopped,
        end_ms,
        workspace,
    })
}

/// The plan's user and tool faults, as the agent host's [`AgentFaults`]. Counting is
/// deterministic: the agent calls in its own deterministic order. After `heal_at_ms` nothing
/// more is injected.
pub struct LoopPlanHooks {
    faults: Vec<Fault>,
    trace: Trace,
    now: NowFn,
    heal_at_ms: u64,
    /// Per fault: matching events seen so far, and whether it fired.
    state: Mutex<Vec<(u32, bool)>>,
}

impl LoopPlanHooks {
    pub fn new(faults: &[Fault], trace: &Trace, now: NowFn, heal_at_ms: u64) -> Arc<Self> {
        Arc::new(LoopPlanHooks {
            faults: faults.to_vec(),
            trace: trace.clone(),
            now,
            heal_at_ms,
            state: Mutex::new(vec![(0, false); faults.len()]),
        })
    }

    /// Counts an event of `event_type` for each fault `pick` selects (it gives the fault's
    /// event filter and the count it fires at, `None` for every time), and reports and returns
    /// the faults that fire on this one. Nothing fires once the plan has healed.
    fn fire_on_event(
        &self,
        event_type: &str,
        pick: impl Fn(&Fault) -> Option<(Option<&str>, Option<u32>)>,
    ) -> Vec<&Fault> {
        if self.healed() {
            return Vec::new();
        }
        let mut fired = Vec::new();
        let mut state = self.state.lock().unwrap();
        for (i, f) in self.faults.iter().enumerate() {
            let Some((event, nth)) = pick(f) else {
                continue;
            };
            if event.is_some_and(|e| e != event_type) {
                continue;
            }
            let (count, _) = &mut state[i];
            *count += 1;
            if nth.is_none_or(|n| n == *count) {
                self.report(f);
                fired.push(f);
            }
        }
        fired
    }

    fn healed(&self) -> bool {
        (self.now)() >= self.heal_at_ms
    }

    fn report(&self, f: &Fault) {
        self.trace.push(
            (self.now)(),
            "harness",
            Observation::Fault {
                fault: f.to_string(),
            },
        );
    }
}

impl AgentFaults for LoopPlanHooks {
    fn abort_on_event(&self, event: &str) -> Option<AbortReason> {
        if self.healed() {
            return None;
        }
        let mut fired = None;
        let mut state = self.state.lock().unwrap();
        for (i, f) in self.faults.iter().enumerate() {
            let Fault::UserAbort { reason, .. } = f else {
                continue;
            };
            let Some(When::OnEvent { event: e, nth }) = f.user_trigger() else {
                continue;
            };
            let (count, done) = &mut state[i];
            if *done || e != event {
                continue;
            }
            *count += 1;
            if *count == nth {
                *done = true;
                self.report(f);
                fired = fired.or(Some(reason.unwrap_or(AbortReason::User)));
            }
        }
        fired
    }

    fn abort_times(&self) -> Vec<u64> {
        let mut times: Vec<u64> = self
            .faults
            .iter()
            .filter_map(|f| match f.user_trigger() {
                Some(When::AtMs(t)) if t < self.heal_at_ms => Some(t),
                _ => None,
            })
            .collect();
        times.sort_unstable();
        times.dedup();
        times
    }

    fn abort_at(&self, now_ms: u64) -> Option<AbortReason> {
        let mut fired = None;
        let mut state = self.state.lock().unwrap();
        for (i, f) in self.faults.iter().enumerate() {
            let Fault::UserAbort { reason, .. } = f else {
                continue;
            };
            if f.user_trigger() == Some(When::AtMs(now_ms)) && !state[i].1 {
                state[i].1 = true;
                self.report(f);
                fired = fired.or(Some(reason.unwrap_or(AbortReason::User)));
            }
        }
        fired
    }

    fn listener(&self, event_type: &str) -> Option<ListenerFault> {
        let fired = self.fire_on_event(event_type, |f| match f {
            Fault::ListenerThrows { event, nth, .. } => Some((event.as_deref(), *nth)),
            _ => None,
        });
        fired.iter().find_map(|f| match f {
            Fault::ListenerThrows { how, .. } => Some(*how),
            _ => None,
        })
    }

    fn transcript_rejects(&self, event_type: &str) -> bool {
        let fired = self.fire_on_event(event_type, |f| {
            f.rejected_append().map(|(event, nth)| (event, Some(nth)))
        });
        !fired.is_empty()
    }

    fn tool(&self, execution: u32, _tool: &str, _tool_call_id: &str) -> ToolAct {
        if self.healed() {
            return ToolAct::Run;
        }
        for f in &self.faults {
            let act = match f {
                Fault::ToolHang {
                    execution: e,
                    abort_after_ms,
                } if *e == execution => ToolAct::Hang {
                    abort_after_ms: *abort_after_ms,
                },
                Fault::ToolGarbage {
                    execution: e,
                    value,
                } if *e == execution => ToolAct::Garbage(*value),
                _ => continue,
            };
            self.report(f);
            return act;
        }
        ToolAct::Run
    }
}
