//! Coverage goals: interesting situations a sweep should reach at least once. Each goal is a
//! predicate over one run's trace; a sweep counts the seeds that reached each goal and says
//! plainly which goals it never reached. Each system lists its goals in its own folder
//! (`letta::coverage`, `kimi::coverage`); this is what they are made of.

use super::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// A coverage goal: a stable id and what it means.
pub struct Goal {
    pub id: &'static str,
    pub what: &'static str,
    pub(crate) reached: fn(&[TraceEvent]) -> bool,
}

impl Goal {
    pub fn reached(&self, trace: &[TraceEvent]) -> bool {
        (self.reached)(trace)
    }
}

/// Whether any event of the trace satisfies `f`.
pub(crate) fn any(trace: &[TraceEvent], f: impl Fn(&Observation) -> bool) -> bool {
    trace.iter().any(|e| f(&e.obs))
}

/// Whether `o` is a fault the harness reported whose text starts with `prefix`.
pub(crate) fn is_fault(o: &Observation, prefix: &str) -> bool {
    matches!(o, Observation::Fault { fault } if fault.starts_with(prefix))
}

/// The ids of the goals one trace reached, in the goals' order.
pub fn reached(goals: &[Goal], trace: &[TraceEvent]) -> Vec<&'static str> {
    goals
        .iter()
        .filter(|g| g.reached(trace))
        .map(|g| g.id)
        .collect()
}

/// Whether a fault triggered `on_event` fired at a protocol point labelled `label`
/// ([`super::guidance::points`]): the fault's text names the event and count of that point.
pub(crate) fn placed(trace: &[TraceEvent], label: &str) -> bool {
    // Most runs have no such fault: skip the points (they name every event) then.
    let placed_any = trace
        .iter()
        .any(|e| matches!(&e.obs, Observation::Fault { fault } if fault.contains("on_event=")));
    if !placed_any {
        return false;
    }
    let points = super::guidance::points(trace);
    trace.iter().any(|e| match &e.obs {
        Observation::Fault { fault } => points.iter().any(|p| {
            p.label == label && fault.contains(&format!("on_event={} nth={}", p.event, p.nth))
        }),
        _ => false,
    })
}
