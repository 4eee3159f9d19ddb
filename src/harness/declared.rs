//! `ends-as-declared` (docs/invariants.md): a run of a scenario as written ends each turn as the
//! scenario's `[scenario] outcomes` declare, its history resolves each tool call as its
//! `[scenario] resolutions` declare, its compactions go as its `[scenario] compactions` declare,
//! and its probe requests are answered with the statuses and stream shapes their `[[requests]]
//! status` and `stream` declare. Pure: it reads the scenario and a finished run.

use std::collections::BTreeMap;

use super::invariants::{ENDS_AS_DECLARED, Violation};
use super::scenario::Scenario;
use super::trace::{TraceEvent, turn_ends};
use crate::model::port::observe::{HistoryEntry, Observation};

/// `ends-as-declared`: a run of the scenario as written (its own faults and cassettes, no plan)
/// ends each turn as its `[scenario] outcomes` say, resolves tool calls and compacts as its
/// `resolutions` and `compactions` say, and the server answers each probe request with its
/// `[[requests]] status` and, where declared, the stream shape its `stream` gives or the JSON
/// answer its `answer` gives, on every seed. The sweeps' twin comparisons hold a faulted run to
/// a fault-free one of the same build, so a model that ends a fault-free turn wrongly (a stream
/// that closes before its run ends, a retry that never comes) passes them; the declaration is
/// the fixed point the build is held to. `None` when there is nothing to check: no
/// declaration, a plan or a shrink changed the scenario, or no turn list (a run that did not
/// finish is `turn-terminates`'s). Each violation points at its event in `trace`: the turn's
/// `turn_end`, the history entry or compaction, the probe's `probe_response`.
pub fn ends_as_declared(
    scenario: &Scenario,
    outcomes: Option<&[String]>,
    trace: &[TraceEvent],
) -> Option<Vec<Violation>> {
    let declared = &scenario.scenario.outcomes;
    // Each probe request's declared answer: its status, and its stream's shape or its JSON
    // answer, each with the offset of the key that declares it.
    let answers: Vec<(usize, Declared, usize)> = scenario
        .requests
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            let request = r.get_ref();
            let status = request.status.map(|s| (Declared::Status(s), "status"));
            let summary = |key: &'static str, text: &Option<String>| {
                text.clone().map(|t| (Declared::Summary(key, t), key))
            };
            let stream = summary("stream", &request.stream);
            let answer = summary("answer", &request.answer);
            let start = r.span().start;
            [status, stream, answer]
                .into_iter()
                .flatten()
                .map(move |(want, key)| (i + 1, want, key_offset(&scenario.source, start, key)))
        })
        .collect();
    let resolved = &scenario.scenario.resolutions;
    let compacted = &scenario.scenario.compactions;
    if (declared.is_empty() && answers.is_empty() && resolved.is_empty() && compacted.is_empty())
        || !scenario.runs_as_written()
    {
        return None;
    }
    let outcomes = outcomes?;
    let line = |start: usize| {
        let start = start.min(scenario.source.len());
        scenario.source[..start].matches('\n').count() + 1
    };
    let path = scenario.path.display();
    let ends = turn_ends(trace);
    let mut out = Vec::new();
    for i in 0..declared.len().max(outcomes.len()) {
        if declared.is_empty() {
            break; // Only the probes are declared.
        }
        let want = declared.get(i).map(|d| d.get_ref().as_str());
        let got = outcomes.get(i).map(String::as_str);
        if want == got {
            continue;
        }
        let message = match (want, got) {
            (Some(w), Some(g)) => format!(
                "turn {} ended {g:?}; {path}:{} declares {w:?} ([scenario] outcomes)",
                i + 1,
                line(declared[i].span().start),
            ),
            (Some(w), None) => format!(
                "turn {} never ran; {path}:{} declares {w:?} ([scenario] outcomes)",
                i + 1,
                line(declared[i].span().start),
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
    for (key, what, declared, got) in [
        (
            "resolutions",
            "tool call resolution",
            resolved,
            resolutions(trace),
        ),
        ("compactions", "compaction", compacted, compactions(trace)),
    ] {
        out.extend(held_to_list(key, what, declared, &got, &path, line));
    }
    for (n, want, at) in answers {
        let answer = trace.iter().enumerate().find_map(|(i, e)| match &e.obs {
            Observation::ProbeResponse {
                n: m,
                status,
                summary,
            } if *m as usize == n => Some((i, *status, summary)),
            _ => None,
        });
        let (event, message) = match (answer, &want) {
            (Some((_, got, _)), Declared::Status(w)) if got == *w => continue,
            (Some((_, _, got)), Declared::Summary(_, w)) if got == w => continue,
            (Some((i, got, summary)), Declared::Status(w)) => (
                Some(i),
                format!(
                    "probe request {n} was answered {got} ({summary}); {path}:{} declares status {w} ([[requests]] status)",
                    line(at)
                ),
            ),
            (Some((i, got, summary)), Declared::Summary(key, w)) => (
                Some(i),
                format!(
                    "probe request {n} was answered {got} with {summary:?}; {path}:{} declares the {key} {w:?} ([[requests]] {key})",
                    line(at)
                ),
            ),
            (None, Declared::Status(w)) => (
                None,
                format!(
                    "probe request {n} was never answered; {path}:{} declares status {w} ([[requests]] status)",
                    line(at)
                ),
            ),
            (None, Declared::Summary(key, w)) => (
                None,
                format!(
                    "probe request {n} was never answered; {path}:{} declares the {key} {w:?} ([[requests]] {key})",
                    line(at)
                ),
            ),
        };
        out.push(Violation {
            invariant: ENDS_AS_DECLARED,
            event,
            message,
        });
    }
    Some(out)
}

/// The violations of a run whose `got` (each with its event) is not the list `[scenario] key`
/// declares, one per differing entry; none when nothing is declared.
fn held_to_list(
    key: &str,
    what: &str,
    declared: &[toml::Spanned<String>],
    got: &[(usize, String)],
    path: &std::path::Display<'_>,
    line: impl Fn(usize) -> usize,
) -> Vec<Violation> {
    if declared.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for i in 0..declared.len().max(got.len()) {
        let want = declared.get(i).map(|d| d.get_ref().as_str());
        let here = got.get(i);
        if want == here.map(|(_, g)| g.as_str()) {
            continue;
        }
        let message = match (want, here) {
            (Some(w), Some((_, g))) => format!(
                "{what} {} was {g:?}; {path}:{} declares {w:?} ([scenario] {key})",
                i + 1,
                line(declared[i].span().start),
            ),
            (Some(w), None) => format!(
                "the run had {} {what}(s); {path}:{} declares {what} {} {w:?} ([scenario] {key})",
                got.len(),
                line(declared[i].span().start),
                i + 1,
            ),
            (None, Some((_, g))) => format!(
                "{what} {} was {g:?}, but {path} declares {} ([scenario] {key})",
                i + 1,
                declared.len(),
            ),
            (None, None) => unreachable!("i is below one of the lengths"),
        };
        out.push(Violation {
            invariant: ENDS_AS_DECLARED,
            event: here.map(|(e, _)| *e),
            message,
        });
    }
    out
}

/// Each compaction of the run, with its event, as `[scenario] compactions` declares them:
/// `"<mode>: removed <n>, kept <m>"`, the kept messages counting the summary; a sliding window
/// that found no cut and fell back to `all` reads `"all (the sliding window found no cut): …"`
/// (letta-protocol.md §8.3).
fn compactions(trace: &[TraceEvent]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, e) in trace.iter().enumerate() {
        if let Observation::Compaction {
            mode,
            removed,
            kept,
            fell_back,
            ..
        } = &e.obs
        {
            let fallback = if *fell_back {
                " (the sliding window found no cut)"
            } else {
                ""
            };
            out.push((
                i,
                format!(
                    "{mode}{fallback}: removed {}, kept {}",
                    removed.len(),
                    kept.len()
                ),
            ));
        }
    }
    out
}

/// Each tool call's resolution in the server's history, in the order it recorded them, with
/// its event, as `[scenario] resolutions` declares them: `"<tool>: returned <status>"` (a tool
/// return), `"<tool>: denied: <reason>"`, `"<tool>: settled: <reason>"` (the server closed the
/// call itself, letta-protocol.md §7.2).
fn resolutions(trace: &[TraceEvent]) -> Vec<(usize, String)> {
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in trace.iter().enumerate() {
        let Observation::History { entry, .. } = &e.obs else {
            continue;
        };
        let name = |id: &str| names.get(id).copied().unwrap_or("(unknown tool)");
        let text = match entry {
            HistoryEntry::ToolCall {
                tool_call_id, name, ..
            } => {
                names.insert(tool_call_id, name);
                continue;
            }
            HistoryEntry::ToolReturn {
                tool_call_id,
                status,
            } => format!("{}: returned {status}", name(tool_call_id)),
            HistoryEntry::Denial {
                tool_call_id,
                reason,
            } => format!("{}: denied: {reason}", name(tool_call_id)),
            HistoryEntry::Settled {
                tool_call_id,
                reason,
            } => format!("{}: settled: {reason}", name(tool_call_id)),
            HistoryEntry::User { .. } | HistoryEntry::Assistant { .. } => continue,
        };
        out.push((i, text));
    }
    out
}

/// What a probe request's `[[requests]]` entry declares of its answer.
enum Declared {
    Status(u16),
    /// The answer's summary in the trace, declared by `stream` (an SSE answer's shape) or
    /// `answer` (a JSON answer), the key named first.
    Summary(&'static str, String),
}

/// Where `key` is written in the `[[requests]]` entry that starts at `start`, to name that
/// line: in the lines from its header to the next header (the header's offset if not found).
fn key_offset(source: &str, start: usize, key: &str) -> usize {
    source
        .get(start..)
        .unwrap_or_default()
        .lines()
        .scan(start, |offset, l| {
            let here = *offset;
            *offset += l.len() + 1;
            Some((here, l))
        })
        .enumerate()
        .take_while(|(k, (_, l))| *k == 0 || !l.trim_start().starts_with('['))
        .find(|(_, (_, l))| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(start, |(_, (here, _))| here)
}
