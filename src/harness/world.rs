//! What every system's world is made of: the seeds, the ports, the turmoil simulation a
//! scenario configures, the fake provider's host, the step/heal loop that drives the
//! simulation to its end, and the run result the generic run flow reads.
//!
//! Seeds: one run seed; every consumer gets a seed derived from it by name
//! ([`derive_seed`]), so adding a consumer never shifts another's stream.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::env::SimEnv;
use super::faults::{Fault, FaultRuntime, NowFn};
use super::scenario::Scenario;
use super::trace::{Trace, TraceEvent};
use super::world_start::WorldStart;
use crate::model::letta::client::backend::RequestRecord;
use crate::model::provider::{self, ProviderConfig, ProviderState};

/// The fake provider's port on its host.
pub const PROVIDER_PORT: u16 = 9000;

/// A seed for `label` derived from the run seed: the first 8 bytes of SHA-256(seed ‖ label).
pub fn derive_seed(seed: u64, label: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update(label.as_bytes());
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
}

/// Simulated time in milliseconds on the world of `trace`, read inside the running simulation
/// (virtual time: turmoil's plus the warp).
pub fn sim_now(trace: &Trace) -> NowFn {
    let clock = trace.clock().clone();
    Arc::new(move || clock.now().as_millis() as u64)
}

/// The scenario's fault plan, as a list.
pub fn plan(scenario: &Scenario) -> Vec<Fault> {
    scenario
        .faults
        .iter()
        .map(|f| f.get_ref().clone())
        .collect()
}

/// The turmoil simulation of a scenario and seed: seeded, at the scenario's start, with the
/// scenario's tick and latency range. Its time budget is [`run_to_end`]'s, on virtual time:
/// turmoil's own clock lags virtual time by the warp, so turmoil is given no limit.
pub fn simulation(scenario: &Scenario, seed: u64) -> turmoil::Sim<'static> {
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(derive_seed(seed, "turmoil"))
        .epoch(UNIX_EPOCH + Duration::from_millis(scenario.network.start.unix_ms()))
        .tick_duration(Duration::from_millis(scenario.network.tick_ms))
        .min_message_latency(Duration::from_millis(scenario.network.latency_ms[0]))
        .max_message_latency(Duration::from_millis(scenario.network.latency_ms[1]))
        .simulation_duration(Duration::MAX);
    builder.build()
}

/// Adds the fake provider as host `provider`. turmoil re-runs the closure on a restart: the
/// config is shared, the provider's durable state survives.
pub fn provider_host(
    sim: &mut turmoil::Sim<'_>,
    trace: &Trace,
    start: WorldStart,
    config: Arc<ProviderConfig>,
    state: Arc<Mutex<ProviderState>>,
) {
    let trace = trace.clone();
    sim.host("provider", move || {
        let env = SimEnv::new("provider", trace.clone(), start.unix_ms());
        let config = config.clone();
        let state = state.clone();
        async move {
            provider::run(env, config, state)
                .await
                .map_err(|e| e.to_string().into())
        }
    });
}

/// Steps `sim` until `done` says the system finished, a host fails, or time runs out, running
/// the fault plan on every step and healing the world from `heal_at_ms` on. `done` gets what
/// turmoil's step said (every client host finished); `each_step` runs after every step, before
/// the faults, for what a system does between steps. Returns why the run stopped early, if it
/// did.
///
/// Time is the trace's [`WorldClock`](super::warp::WorldClock). With the scenario's `warp` on,
/// whenever the world is quiescent between two steps the loop skips the whole idle ticks
/// before the next thing that can happen ([`idle_ticks`]), which gives the same trace as
/// stepping through them.
pub fn run_to_end(
    sim: &mut turmoil::Sim<'_>,
    scenario: &Scenario,
    plan: &[Fault],
    trace: &Trace,
    mut done: impl FnMut(bool) -> bool,
    mut each_step: impl FnMut(&mut turmoil::Sim<'_>, &mut FaultRuntime),
) -> Option<String> {
    let clock = trace.clock().clone();
    clock.set_warp(scenario.network.warp);
    let tick = Duration::from_millis(scenario.network.tick_ms);
    let mut faults = FaultRuntime::new(plan, scenario.network.latency_ms);
    let heal_at = scenario.limits.heal_at_ms;
    let deadline = heal_at.saturating_add(scenario.limits.liveness_ms);
    let budget = Duration::from_millis(scenario.limits.sim_time_ms);
    let quiet_steps = if scenario.network.latency_ms[0] == 0 {
        QUIET_STEPS_ZERO_LATENCY
    } else {
        QUIET_STEPS
    };
    let mut quiet = 0u32;
    loop {
        note_step(clock.hosts());
        let activity = clock.activity();
        let actions = faults.actions();
        let clients_finished = match sim.step() {
            Ok(finished) => finished,
            Err(e) => return Some(e.to_string()),
        };
        let elapsed = clock.elapsed(sim);
        if elapsed > budget && !clients_finished {
            // turmoil's own duration check, in its words, on virtual time.
            return Some(format!(
                "Ran for duration: {budget:?} steps: {} without completing",
                elapsed.as_nanos() / tick.as_nanos() + 1
            ));
        }
        if done(clients_finished) {
            return None;
        }
        // turmoil checks its duration only while a client host runs; a system whose process
        // is a host (so it can crash and restart) is held to the budget here.
        if elapsed > budget {
            return Some(format!("Ran for duration: {budget:?} without completing"));
        }
        each_step(sim, &mut faults);
        let now = clock.elapsed_ms(sim);
        if now >= heal_at {
            faults.heal(sim, now, trace);
        } else {
            faults.on_step(sim, now, trace);
        }
        if now >= deadline {
            return Some(format!(
                "not finished {} ms after the world healed at {heal_at} ms",
                scenario.limits.liveness_ms
            ));
        }
        if !clock.warps() {
            note(Why::NoWarp);
            continue;
        }
        // Quiet: no host used its Env during the step, nothing was applied to the world after
        // it, and no message is on a link that delivers (a held link delivers nothing before
        // its release, a fault action the horizon below waits for).
        let busy = clock.activity() != activity || faults.actions() != actions;
        let flying = !busy && in_flight(sim, faults.held());
        quiet = if !busy && !flying { quiet + 1 } else { 0 };
        if quiet < quiet_steps {
            note(if busy {
                Why::Busy
            } else if flying {
                Why::InFlight
            } else {
                Why::QuietWait
            });
            continue;
        }
        let now = clock.elapsed(sim);
        let mut horizon = [
            clock.next_deadline(now),
            faults.next_due_ms().map(Duration::from_millis),
            (!faults.healed).then(|| Duration::from_millis(heal_at)),
            Some(Duration::from_millis(deadline)),
            Some(budget + Duration::from_nanos(1)),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("the budget is always there");
        if horizon < now {
            horizon = now;
        }
        let idle = idle_ticks(now, horizon, tick);
        if idle == 0 {
            note(Why::Due);
        } else {
            note(Why::Skipped);
            note_skipped(idle);
            clock.advance(now, tick * idle);
        }
    }
}

/// Why a step of [`run_to_end`] was followed by another step instead of a skip (or that it
/// was followed by one), counted per thread for `sim bench`: where a run spends its steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Warping is off.
    NoWarp,
    /// A host used its Env during the step, or a fault action was applied after it.
    Busy,
    /// Quiet, but a message is on a link.
    InFlight,
    /// Quiet, but the loop waits for a second quiet step (zero minimum latency).
    QuietWait,
    /// Quiet, and something is due within the next tick.
    Due,
    /// Quiet, and the idle ticks before the next deadline were skipped.
    Skipped,
}

/// Steps taken and ticks skipped by [`run_to_end`] on this thread, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepStats {
    pub steps: u64,
    /// Steps by [`Why`], in the order of its variants.
    pub by_why: [u64; 6],
    pub skipped_ticks: u64,
    /// Steps by how many hosts the world had (index = hosts, the last slot also counts more):
    /// what `sim bench --floor` steps idle worlds of.
    pub by_hosts: [u64; HOST_SLOTS],
}

/// Slots of [`StepStats::by_hosts`]: worlds have two to four hosts.
pub const HOST_SLOTS: usize = 8;

impl StepStats {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &StepStats) -> StepStats {
        let mut by_why = [0; 6];
        for (i, n) in by_why.iter_mut().enumerate() {
            *n = self.by_why[i] - earlier.by_why[i];
        }
        let mut by_hosts = [0; HOST_SLOTS];
        for (i, n) in by_hosts.iter_mut().enumerate() {
            *n = self.by_hosts[i] - earlier.by_hosts[i];
        }
        StepStats {
            steps: self.steps - earlier.steps,
            by_why,
            skipped_ticks: self.skipped_ticks - earlier.skipped_ticks,
            by_hosts,
        }
    }
}

thread_local! {
    static STEP_STATS: std::cell::Cell<StepStats> = const {
        std::cell::Cell::new(StepStats {
            steps: 0,
            by_why: [0; 6],
            skipped_ticks: 0,
            by_hosts: [0; HOST_SLOTS],
        })
    };
}

/// The steps counted on this thread so far.
pub fn step_stats() -> StepStats {
    STEP_STATS.with(|s| s.get())
}

fn note_step(hosts: usize) {
    STEP_STATS.with(|s| {
        let mut v = s.get();
        v.steps += 1;
        v.by_hosts[hosts.min(HOST_SLOTS - 1)] += 1;
        s.set(v);
    });
}

fn note(why: Why) {
    STEP_STATS.with(|s| {
        let mut v = s.get();
        v.by_why[why as usize] += 1;
        s.set(v);
    });
}

fn note_skipped(ticks: u32) {
    STEP_STATS.with(|s| {
        let mut v = s.get();
        v.skipped_ticks += u64::from(ticks);
        s.set(v);
    });
}

/// Consecutive quiet steps before the warp may skip: one shows that no host ran. Every message
/// sent then is still on its link, due at least the minimum latency after the step ends.
const QUIET_STEPS: u32 = 1;

/// The same with a minimum latency of zero, which needs a second quiet step: a message sent
/// with zero latency is due at once and waits in turmoil's delivery queue for its host's next
/// turn, where [`turmoil::Sim::links`] does not show it, and a segment delivered to a closed
/// socket queues its reset there too. After two steps in which no host ran, the queue is empty
/// (a reset answers nothing).
const QUIET_STEPS_ZERO_LATENCY: u32 = 2;

/// How many whole ticks from `now` can be skipped before `horizon`, the earliest time
/// something can happen (a timer's deadline, a fault, the heal, the liveness deadline, the end
/// of the budget): the skipped steps end strictly before it, so the step that reaches it runs,
/// and a timer fires at its own instant inside that step, as without the skip.
pub fn idle_ticks(now: Duration, horizon: Duration, tick: Duration) -> u32 {
    if horizon <= now || tick.is_zero() {
        return 0;
    }
    let gap = (horizon - now).as_nanos() - 1;
    u32::try_from(gap / tick.as_nanos()).unwrap_or(u32::MAX)
}

/// Whether any message is on a turmoil link that is not `held` (turmoil holds every message
/// of a held link, old and new, until its release).
fn in_flight(sim: &turmoil::Sim<'_>, held: &BTreeSet<(String, String)>) -> bool {
    let held: Vec<(IpAddr, IpAddr)> = held
        .iter()
        .map(|(a, b)| {
            let (a, b) = (sim.lookup(a.as_str()), sim.lookup(b.as_str()));
            (a.min(b), a.max(b))
        })
        .collect();
    let mut any = false;
    sim.links(|links| {
        for mut link in links {
            if !held.contains(&link.pair()) && link.next().is_some() {
                any = true;
                break;
            }
        }
    });
    any
}

/// What the generic run flow reads off one world run, whichever system ran it.
#[derive(Debug, Clone)]
pub struct WorldRun {
    pub trace: Vec<TraceEvent>,
    /// Each turn's outcome, rendered; `None` if the system never finished its turns.
    pub outcomes: Option<Vec<String>>,
    /// Why the simulation stopped early (time budget, host error).
    pub stopped: Option<String>,
    /// Simulated time at the end.
    pub end_ms: u64,
    /// Tool calls awaiting approval at the end: (conversation, tool call id).
    pub pending: Vec<(String, String)>,
    /// The client's requests in order (the conformance log), for a system that keeps one.
    pub requests: Vec<RequestRecord>,
}
