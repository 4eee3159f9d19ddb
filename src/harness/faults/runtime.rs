//! Network and process faults on a turmoil world: fired by their trigger as the simulation
//! steps, undone when their duration ends, and all stopped when the world heals.

use std::collections::BTreeSet;

use super::plan::Fault;
use super::trigger::When;
use crate::harness::trace::Trace;
use crate::model::port::observe::Observation;

/// What the world loop does to turmoil.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    SetMaxLatency(u64),
    Partition(String, String),
    Repair(String, String),
    Hold(String, String),
    Release(String, String),
    Crash(String),
    Restart(String),
}

/// Drives the plan's network and process faults as the simulation steps.
pub struct FaultRuntime {
    /// (fault, its trigger, fired yet)
    armed: Vec<(Fault, When, bool)>,
    /// Follow-up actions at a time (repairs, restarts), in the order they were scheduled.
    scheduled: Vec<(u64, Action)>,
    crashed: BTreeSet<String>,
    partitioned: BTreeSet<(String, String)>,
    held: BTreeSet<(String, String)>,
    base_max_latency: u64,
    /// The scenario's minimum latency (links are pinned to it while a host crashes).
    base_min_latency: u64,
    /// The maximum latency in force now (a latency fault raises it).
    current_max_latency: u64,
    latency_raised: bool,
    /// How many trace events the event triggers have looked at.
    cursor: usize,
    event_counts: Vec<u32>,
    pub healed: bool,
    /// Actions applied to turmoil so far (the warp does not skip time right after one).
    actions: u64,
}

impl FaultRuntime {
    pub fn new(faults: &[Fault], latency_ms: [u64; 2]) -> Self {
        let [base_min_latency, base_max_latency] = latency_ms;
        let armed: Vec<_> = faults
            .iter()
            .filter_map(|f| f.trigger().map(|t| (f.clone(), t, false)))
            .collect();
        let n = armed.len();
        FaultRuntime {
            armed,
            scheduled: Vec::new(),
            crashed: BTreeSet::new(),
            partitioned: BTreeSet::new(),
            held: BTreeSet::new(),
            base_max_latency,
            base_min_latency,
            current_max_latency: base_max_latency,
            latency_raised: false,
            cursor: 0,
            event_counts: vec![0; n],
            healed: false,
            actions: 0,
        }
    }

    /// How many actions (and heals) have been applied to the world so far.
    pub fn actions(&self) -> u64 {
        self.actions
    }

    /// The earliest time (ms) at which [`FaultRuntime::on_step`] would act without a new trace
    /// event: an unfired `at_ms` trigger or a scheduled follow-up; `None` once healed or when
    /// nothing is timed.
    pub fn next_due_ms(&self) -> Option<u64> {
        if self.healed {
            return None;
        }
        let triggers = self.armed.iter().filter_map(|(_, t, fired)| match t {
            When::AtMs(at) if !*fired => Some(*at),
            _ => None,
        });
        let follow_ups = self.scheduled.iter().map(|(at, _)| *at);
        triggers.chain(follow_ups).min()
    }

    /// Host pairs whose links hold their messages now (until a scheduled release or the heal).
    pub fn held(&self) -> &BTreeSet<(String, String)> {
        &self.held
    }

    /// Hosts crashed and not yet restarted.
    pub fn crashed(&self) -> &BTreeSet<String> {
        &self.crashed
    }

    /// Fires due faults and follow-ups. Called after every step.
    pub fn on_step(&mut self, sim: &mut turmoil::Sim<'_>, now_ms: u64, trace: &Trace) {
        if self.healed {
            return;
        }
        let mut due: Vec<usize> = Vec::new();
        let needs_events = self
            .armed
            .iter()
            .any(|(_, t, fired)| !fired && matches!(t, When::OnEvent { .. }));
        if needs_events {
            let new = trace.events_since(self.cursor);
            self.cursor += new.len();
            for e in &new {
                let name = e.obs.name();
                for (i, (_, t, fired)) in self.armed.iter().enumerate() {
                    if let When::OnEvent { event, nth } = t
                        && !*fired
                        && *event == name
                    {
                        self.event_counts[i] += 1;
                        if self.event_counts[i] == *nth {
                            due.push(i);
                        }
                    }
                }
            }
        }
        for (i, (_, t, fired)) in self.armed.iter().enumerate() {
            if let When::AtMs(at) = t
                && !*fired
                && now_ms >= *at
            {
                due.push(i);
            }
        }
        due.sort_unstable();
        due.dedup();
        for i in due {
            self.armed[i].2 = true;
            let fault = self.armed[i].0.clone();
            trace.push(
                now_ms,
                "harness",
                Observation::Fault {
                    fault: fault.to_string(),
                },
            );
            match fault {
                Fault::Latency { max_ms, .. } => {
                    self.apply(sim, Action::SetMaxLatency(max_ms));
                }
                Fault::Partition {
                    between: [a, b],
                    duration_ms,
                    ..
                } => {
                    self.apply(sim, Action::Partition(a.clone(), b.clone()));
                    self.scheduled
                        .push((now_ms + duration_ms, Action::Repair(a, b)));
                }
                Fault::Hold {
                    between: [a, b],
                    duration_ms,
                    ..
                } => {
                    self.apply(sim, Action::Hold(a.clone(), b.clone()));
                    self.scheduled
                        .push((now_ms + duration_ms, Action::Release(a, b)));
                }
                Fault::Crash {
                    host,
                    restart_after_ms,
                    ..
                } => {
                    if self.crashed.contains(&host) {
                        continue;
                    }
                    self.apply(sim, Action::Crash(host.clone()));
                    if let Some(r) = restart_after_ms {
                        self.scheduled.push((now_ms + r, Action::Restart(host)));
                    }
                }
                _ => {}
            }
        }
        let mut i = 0;
        while i < self.scheduled.len() {
            if self.scheduled[i].0 <= now_ms {
                let (_, action) = self.scheduled.remove(i);
                trace.push(
                    now_ms,
                    "harness",
                    Observation::Fault {
                        fault: describe(&action),
                    },
                );
                self.apply(sim, action);
            } else {
                i += 1;
            }
        }
    }

    /// Ends the fault phase: every fault stops and the world is repaired.
    pub fn heal(&mut self, sim: &mut turmoil::Sim<'_>, now_ms: u64, trace: &Trace) {
        if self.healed {
            return;
        }
        self.healed = true;
        self.actions += 1;
        let mut actions = Vec::new();
        for (a, b) in std::mem::take(&mut self.partitioned) {
            actions.push(Action::Repair(a, b));
        }
        for (a, b) in std::mem::take(&mut self.held) {
            actions.push(Action::Release(a, b));
        }
        for h in self.crashed.clone() {
            actions.push(Action::Restart(h));
        }
        if self.latency_raised {
            actions.push(Action::SetMaxLatency(self.base_max_latency));
        }
        self.scheduled.clear();
        trace.push(
            now_ms,
            "harness",
            Observation::Fault {
                fault: "heal: faults stop, the world is repaired".into(),
            },
        );
        for a in actions {
            trace.push(
                now_ms,
                "harness",
                Observation::Fault {
                    fault: describe(&a),
                },
            );
            self.apply(sim, a);
        }
    }

    /// A crash the client process asked for (`client_crash`), and its
    /// immediate restart, with the same latency pinning as a planned crash.
    pub fn crash_and_restart(&mut self, sim: &mut turmoil::Sim<'_>, host: &str) {
        self.apply(sim, Action::Crash(host.to_string()));
        self.apply(sim, Action::Restart(host.to_string()));
    }

    fn apply(&mut self, sim: &mut turmoil::Sim<'_>, action: Action) {
        self.actions += 1;
        match action {
            Action::SetMaxLatency(ms) => {
                // turmoil draws each message's latency from [min, max]; a max below the
                // minimum would underflow there, so it is held at the minimum.
                let ms = ms.max(self.base_min_latency);
                sim.set_max_message_latency(std::time::Duration::from_millis(ms));
                self.latency_raised = ms != self.base_max_latency;
                self.current_max_latency = ms;
            }
            Action::Partition(a, b) => {
                sim.partition(a.as_str(), b.as_str());
                self.partitioned.insert((a, b));
            }
            Action::Repair(a, b) => {
                sim.repair(a.as_str(), b.as_str());
                self.partitioned.remove(&(a, b));
            }
            Action::Hold(a, b) => {
                sim.hold(a.as_str(), b.as_str());
                self.held.insert((a, b));
            }
            Action::Release(a, b) => {
                sim.release(a.as_str(), b.as_str());
                self.held.remove(&(a, b));
            }
            Action::Crash(h) => {
                // A crash drops the host's sockets in the order tokio keeps its tasks, which
                // follows process-wide task ids: two runs of one seed in one process can drop
                // them in different orders. Each dropped socket sends a FIN whose latency
                // turmoil draws from the shared PRNG, so the order would decide which FIN gets
                // which latency. Pinning the host's links to one latency for the crash makes
                // every draw give the same value (turmoil still consumes one draw per message,
                // so the PRNG stream after the crash is unchanged), and the order stops
                // mattering. The links get their range back right after.
                let ip = sim.lookup(h.as_str());
                let mut pairs = Vec::new();
                sim.links(|links| {
                    for link in links {
                        let (a, b) = link.pair();
                        if a == ip || b == ip {
                            pairs.push((a, b));
                        }
                    }
                });
                let min = std::time::Duration::from_millis(self.base_min_latency);
                let max = std::time::Duration::from_millis(self.current_max_latency);
                for (a, b) in &pairs {
                    sim.set_link_latency(*a, *b, min);
                }
                sim.crash(h.as_str());
                for (a, b) in &pairs {
                    sim.set_link_max_message_latency(*a, *b, max);
                }
                self.crashed.insert(h);
            }
            Action::Restart(h) => {
                if self.crashed.remove(&h) {
                    sim.bounce(h.as_str());
                }
            }
        }
    }
}

fn describe(a: &Action) -> String {
    match a {
        Action::SetMaxLatency(ms) => format!("latency max_ms={ms}"),
        Action::Partition(a, b) => format!("partition {a},{b}"),
        Action::Repair(a, b) => format!("repair {a},{b}"),
        Action::Hold(a, b) => format!("hold {a},{b}"),
        Action::Release(a, b) => format!("release {a},{b}"),
        Action::Crash(h) => format!("crash {h}"),
        Action::Restart(h) => format!("restart {h}"),
    }
}
