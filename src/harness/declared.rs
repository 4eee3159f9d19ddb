//! `ends-as-declared` (docs/invariants.md): a run of a scenario as written ends each turn as the
//! scenario's `[scenario] outcomes` declare. Pure: it reads the scenario and a finished run.

use super::invariants::{ENDS_AS_DECLARED, Violation};
use super::scenario::Scenario;
use super::trace::{TraceEvent, turn_ends};

/// `ends-as-declared`: a run of the scenario as written (its own faults and cassettes, no plan)
/// ends each turn as its `[scenario] outcomes` say, on every seed. The sweeps' twin comparisons
/// hold a faulted run to a fault-free one of the same build, so a model that ends a fault-free
/// turn wrongly (a stream that closes before its run ends, a retry that never comes) passes
/// them; the declaration is the fixed point the build is held to. `None` when there is nothing
/// to check: no declaration, a plan or a shrink changed the faults, or no turn list (a run that
/// did not finish is `turn-terminates`'s). With the run's `trace`, each violation points at its
/// turn's `turn_end`.
pub fn ends_as_declared(
    scenario: &Scenario,
    outcomes: Option<&[String]>,
    trace: Option<&[TraceEvent]>,
) -> Option<Vec<Violation>> {
    let declared = &scenario.scenario.outcomes;
    if declared.is_empty() || !scenario.runs_as_written() {
        return None;
    }
    let outcomes = outcomes?;
    let line = |span: std::ops::Range<usize>| {
        let start = span.start.min(scenario.source.len());
        scenario.source[..start].matches('\n').count() + 1
    };
    let ends = turn_ends(trace.unwrap_or_default());
    let mut out = Vec::new();
    for i in 0..declared.len().max(outcomes.len()) {
        let want = declared.get(i).map(|d| d.get_ref().as_str());
        let got = outcomes.get(i).map(String::as_str);
        if want == got {
            continue;
        }
        let path = scenario.path.display();
        let message = match (want, got) {
            (Some(w), Some(g)) => format!(
                "turn {} ended {g:?}; {path}:{} declares {w:?} ([scenario] outcomes)",
                i + 1,
                line(declared[i].span()),
            ),
            (Some(w), None) => format!(
                "turn {} never ran; {path}:{} declares {w:?} ([scenario] outcomes)",
                i + 1,
                line(declared[i].span()),
            ),
            (None, Some(g)) => format!(
                "turn {} ended {g:?}, but {path} declares {} turn outcome(s) ([scenario] outcomes)",
                i + 1,
                declared.len(),
            ),
            (None, None) => unreachable!("i is below one of the lengths"),
        };
        out.push(Violation {
            invariant: ENDS_AS_DECLARED,
            event: ends.get(i).copied(),
            message,
        });
    }
    Some(out)
}
