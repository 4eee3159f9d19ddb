//! What a run's trace tells a guided sweep (`harness::guided`): the protocol points it reached,
//! where a fault can be placed; the signals it showed, by which the sweep keeps the runs that
//! did something new; and the spelling of an explicit plan on `sim run`'s command line.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::faults::Fault;
use super::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// A protocol point a run reached: the `nth` trace event named `event`, which is a `label`
/// point (`after-requires-approval`, …). A fault triggered `on_event = event, nth` lands there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    pub label: String,
    pub event: String,
    pub nth: u32,
}

/// What a run tells the guided sweep: the signals it showed (for the corpus), the protocol
/// points it reached (where an edit of its plan can place a fault), the server-stream frames
/// that carried a tool call (`(response, frame)`, 1-based).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guidance {
    pub signals: Vec<String>,
    pub points: Vec<Point>,
    pub tool_frames: Vec<(u64, u64)>,
}

/// The points of `trace` that are protocol-meaningful places for a fault.
pub fn points(trace: &[TraceEvent]) -> Vec<Point> {
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in trace.iter().enumerate() {
        let name = e.obs.name();
        let n = counts.entry(name.clone()).or_insert(0);
        *n += 1;
        let nth = *n;
        if let Some(label) = point_label(trace, i) {
            out.push(Point {
                label: label.into(),
                event: name,
                nth,
            });
        }
    }
    out
}

/// The label of trace event `i` when it is a protocol point.
fn point_label(trace: &[TraceEvent], i: usize) -> Option<&'static str> {
    Some(match &trace[i].obs {
        // letta-protocol.md §2: the run pauses; the client must answer the pending call.
        Observation::RunEnded { stop_reason, .. } if stop_reason == "requires_approval" => {
            "after-requires-approval"
        }
        // The tool's side effect happened; its result is not sent yet.
        Observation::ToolExecuted { .. } => "after-tool-effect",
        Observation::ClientDecision { .. } => "after-approval-decision",
        Observation::ClientResume { .. } => "during-resume",
        Observation::ClientRetry { kind, .. } if kind == "busy" => "across-busy-retry",
        Observation::ClientRetry { .. } => "during-retry",
        Observation::ClientSend { items, .. } if items.contains("approval") => "after-result-send",
        // kimi-loop.md: the step's tool batch.
        Observation::LoopToolCall { .. } => "after-tool-call",
        Observation::LoopToolEnd { .. } => "after-tool-effect",
        Observation::LoopToolResult { .. } if more_tools_in_step(trace, i) => "between-batch-tools",
        Observation::LoopRetrying { .. } => "during-retry",
        Observation::LoopProviderResponse { .. } => "after-provider-response",
        _ => return None,
    })
}

/// Whether another tool of the same step follows event `i`.
fn more_tools_in_step(trace: &[TraceEvent], i: usize) -> bool {
    for e in &trace[i + 1..] {
        match &e.obs {
            Observation::LoopStepEnd { .. } => return false,
            Observation::LoopToolResult { .. } | Observation::LoopToolStart { .. } => {
                return true;
            }
            _ => {}
        }
    }
    false
}

/// The server-stream frames of `trace` that carried a tool call the client must answer, as
/// `(response, frame)` in the numbering of `server_stream` faults.
pub fn tool_frames(trace: &[TraceEvent]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(String, u64)> = Vec::new();
    let mut out = Vec::new();
    for e in trace {
        if let Observation::ChunkRecorded {
            run_id,
            message_type,
            ..
        } = &e.obs
        {
            let r = match runs.iter().position(|(r, _)| r == run_id) {
                Some(r) => r,
                None => {
                    runs.push((run_id.clone(), 0));
                    runs.len() - 1
                }
            };
            runs[r].1 += 1;
            if message_type == "approval_request_message" || message_type == "tool_call_message" {
                out.push((r as u64 + 1, runs[r].1));
            }
        }
    }
    out
}

/// Event counts whose bucket is a signal: a run that retried, resumed or looped more often
/// than any before it is new.
const COUNTED: [&str; 10] = [
    "client_retry",
    "client_resume",
    "client_recovery",
    "run_ended",
    "tool_executed",
    "provider_call",
    "loop_retrying",
    "loop_step_begin",
    "loop_tool_result",
    "loop_interrupted",
];

/// The signals of one run: the goals it reached, each fault with the protocol state it landed
/// in (the last event before it), and bucketed counts of retries, resumes and steps.
pub fn signals(goals: &[&str], trace: &[TraceEvent]) -> Vec<String> {
    let mut out: BTreeSet<String> = goals.iter().map(|g| format!("goal:{g}")).collect();
    let mut last = "start".to_string();
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for e in trace {
        let name = e.obs.name();
        match &e.obs {
            Observation::Fault { fault } => {
                let kind = fault.split(' ').next().unwrap_or("");
                out.insert(format!("fault:{kind}@{last}"));
            }
            _ => {
                if COUNTED.contains(&name.as_str()) {
                    *counts.entry(name.clone()).or_insert(0) += 1;
                }
                last = name;
            }
        }
    }
    for (name, n) in counts {
        out.insert(format!("count:{name}:{}", bucket(n)));
    }
    out.into_iter().collect()
}

/// AFL's hit-count buckets: 1, 2, 3, 4-7, 8-15, 16-31, 32+.
fn bucket(n: u32) -> u32 {
    match n {
        0..=3 => n,
        4..=7 => 4,
        8..=15 => 8,
        16..=31 => 16,
        _ => 32,
    }
}

/// The guidance of one run.
pub fn guidance(goals: &[&str], trace: &[TraceEvent]) -> Guidance {
    Guidance {
        signals: signals(goals, trace),
        points: points(trace),
        tool_frames: tool_frames(trace),
    }
}

/// The `--plan` flags that give `sim run` a plan: one per fault, its TOML inline table in
/// single quotes.
pub fn plan_flags(plan: &[Fault]) -> String {
    plan.iter()
        .map(|f| format!(" --plan '{}'", f.to_toml().replace('\'', r"'\''")))
        .collect()
}

/// Reads one `--plan` value (a fault as a TOML inline table, docs/faults.md).
pub fn parse_plan_fault(text: &str) -> Result<Fault, String> {
    #[derive(Deserialize)]
    struct One {
        fault: Fault,
    }
    let one: One = toml::from_str(&format!("fault = {text}"))
        .map_err(|e| format!("--plan {text:?} is not a fault: {}", e.message()))?;
    if let Some(p) = one.fault.problem() {
        return Err(format!("--plan {text:?}: {p}"));
    }
    Ok(one.fault)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::faults::When;

    fn ev(t_ms: u64, host: &str, obs: Observation) -> TraceEvent {
        TraceEvent {
            t_ms,
            host: host.into(),
            obs,
        }
    }

    #[test]
    fn points_name_the_protocol_places_and_count_like_on_event() {
        let t = vec![
            ev(
                1,
                "server",
                Observation::RunEnded {
                    run_id: "r1".into(),
                    stop_reason: "end_turn".into(),
                },
            ),
            ev(
                2,
                "server",
                Observation::RunEnded {
                    run_id: "r2".into(),
                    stop_reason: "requires_approval".into(),
                },
            ),
        ];
        assert_eq!(
            points(&t),
            vec![Point {
                label: "after-requires-approval".into(),
                event: "run_ended".into(),
                nth: 2,
            }]
        );
    }

    #[test]
    fn signals_pair_each_fault_with_the_state_it_landed_in() {
        let t = vec![
            ev(
                1,
                "server",
                Observation::RunEnded {
                    run_id: "r1".into(),
                    stop_reason: "requires_approval".into(),
                },
            ),
            ev(
                1,
                "harness",
                Observation::Fault {
                    fault: "crash host=server on_event=run_ended nth=1".into(),
                },
            ),
        ];
        let s = signals(&["busy-409"], &t);
        assert!(s.contains(&"goal:busy-409".to_string()), "{s:?}");
        assert!(s.contains(&"fault:crash@run_ended".to_string()), "{s:?}");
        assert!(s.contains(&"count:run_ended:1".to_string()), "{s:?}");
    }

    #[test]
    fn a_plan_flag_reads_back_as_its_fault() {
        let f = Fault::Crash {
            host: "server".into(),
            when: When::OnEvent {
                event: "run_ended".into(),
                nth: 2,
            },
            restart_after_ms: Some(300),
        };
        let flag = plan_flags(std::slice::from_ref(&f));
        let text = flag
            .trim()
            .strip_prefix("--plan '")
            .and_then(|s| s.strip_suffix('\''))
            .unwrap();
        assert_eq!(parse_plan_fault(text), Ok(f));
        let err = parse_plan_fault("{ kind = \"crash\" }").unwrap_err();
        assert!(err.contains("is not a fault"), "{err}");
    }
}
