//! What an agent-loop run adds to the harness's run flow: its world run, its invariants
//! (`loop-envelope`, `lock-safety`, `budget-respected`, `client-faults-fire`, `history-valid`,
//! `transcript-resumes`) and its liveness diagnosis.

use crate::harness::invariants::{
    BUDGET_RESPECTED, CLIENT_FAULTS_FIRE, HISTORY_VALID, LOCK_SAFETY, LOOP_ENVELOPE,
    TRANSCRIPT_RESUMES, Violation, history_valid_except,
};
use crate::harness::kimi::budget::is_request_structure_rejection;
use crate::harness::kimi::faults_fire::{
    listener_faults_fire, tool_faults_fire, transcript_faults_fire,
};
use crate::harness::kimi::invariants::{
    budget_respected, lock_safety, loop_envelope, transcript_resumes,
};
use crate::harness::kimi::shown_rule;
use crate::harness::kimi::world::run_once;
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::trace::TraceEvent;
use crate::harness::world::WorldRun;
use crate::model::port::observe::Observation;

/// Runs the agent-loop world once and reads what the run flow needs off it.
pub fn run_world(scenario: &Scenario, seed: u64) -> Result<WorldRun, InputError> {
    let out = run_once(scenario, seed)?;
    Ok(WorldRun {
        outcomes: out
            .outcomes
            .as_ref()
            .map(|o| o.iter().map(ToString::to_string).collect()),
        trace: out.trace,
        stopped: out.stopped,
        end_ms: out.end_ms,
        pending: Vec::new(),
        requests: Vec::new(),
    })
}

/// The invariants of an agent-loop run, in report order.
pub fn invariants(
    scenario: &Scenario,
    trace: &[TraceEvent],
) -> Vec<(&'static str, Vec<Violation>)> {
    vec![
        (LOOP_ENVELOPE, loop_envelope(trace)),
        (LOCK_SAFETY, lock_safety(trace)),
        (BUDGET_RESPECTED, budget_respected(trace)),
        (CLIENT_FAULTS_FIRE, {
            let plan = crate::harness::world::plan(scenario);
            let heal = scenario.limits.heal_at_ms;
            let mut v = listener_faults_fire(&plan, heal, trace);
            v.extend(tool_faults_fire(&plan, heal, trace));
            v.extend(transcript_faults_fire(&plan, heal, trace));
            v
        }),
        // A request-structure refusal is the loop's designed path to its strict projection
        // (kimi-loop.md §4.7); `budget-respected` checks that it gets its one resend. What a
        // request shows of each tool result is judged by `shown_rule` (§8.3).
        (HISTORY_VALID, {
            let mut v = history_valid_except(trace, is_request_structure_rejection);
            v.extend(shown_rule::violations(trace));
            v
        }),
        (TRANSCRIPT_RESUMES, transcript_resumes(trace)),
    ]
}

/// What the agent was doing when the run ran out of time.
pub fn liveness_diagnosis(out: &WorldRun, scenario: &Scenario) -> String {
    let agent: Vec<(usize, &Observation, u64)> = out
        .trace
        .iter()
        .enumerate()
        .filter(|(_, e)| e.host == "client")
        .map(|(i, e)| (i, &e.obs, e.t_ms))
        .collect();
    let turn = agent
        .iter()
        .rev()
        .find_map(|(_, o, _)| match o {
            Observation::TurnStart { turn, .. } => Some(*turn),
            _ => None,
        })
        .unwrap_or(0);
    let step = agent.iter().rev().find_map(|(_, o, _)| match o {
        Observation::LoopStepBegin { step, .. } => Some(*step),
        _ => None,
    });
    // Tools started and never ended.
    let mut running: Vec<(String, String, u64)> = Vec::new();
    for (_, o, t) in &agent {
        match o {
            Observation::LoopToolStart {
                tool_call_id, tool, ..
            } => running.push((tool.clone(), tool_call_id.clone(), *t)),
            Observation::LoopToolEnd { tool_call_id, .. } => {
                running.retain(|(_, id, _)| id != tool_call_id)
            }
            _ => {}
        }
    }
    let last = agent.last().map(|(_, o, _)| *o);
    let waiting = if let Some((tool, id, since)) = running.first() {
        format!(
            "waiting for tool {tool} {id}, running since {since} ms and not honouring the abort"
        )
    } else {
        match last {
            Some(Observation::LoopProviderRequest { call, .. }) => {
                format!("waiting for the provider's answer to call {call}")
            }
            Some(Observation::LoopProviderResponse { call, .. }) => {
                format!("reading the provider's stream of call {call}")
            }
            Some(Observation::LoopRetrying { delay_ms, .. }) => {
                format!("sleeping {delay_ms} ms before a retry")
            }
            _ => "between events".into(),
        }
    };
    let step = step.map(|s| format!(" in step {s}")).unwrap_or_default();
    format!(
        "turn {turn} stuck{step} {waiting}; the world healed at {} ms and the run stopped at {} ms ({}); last agent event: {}",
        scenario.limits.heal_at_ms,
        out.end_ms,
        out.stopped.as_deref().unwrap_or("stopped"),
        agent
            .last()
            .map(|(i, _, _)| out.trace[*i].render().trim().to_string())
            .unwrap_or_else(|| "none".into())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(message: &str) -> TraceEvent {
        TraceEvent {
            t_ms: 0,
            host: "provider".into(),
            obs: Observation::ProviderRejected {
                call: 0,
                status: 400,
                message: message.into(),
            },
        }
    }

    /// The agent loop's `history-valid` leaves out the refusal its normal projection courts
    /// (a trailing call without its result, answered by the strict resend) and keeps every
    /// other.
    #[test]
    fn history_valid_of_the_agent_loop_leaves_out_only_request_structure_refusals() {
        let scenario = crate::harness::kimi::test_events::bundled("max_steps.toml");
        let judged = |message: &str| {
            invariants(&scenario, &[refusal(message)])
                .into_iter()
                .find(|(id, _)| *id == HISTORY_VALID)
                .map(|(_, v)| v.len())
        };
        assert_eq!(
            judged(
                "messages.1: `tool_use` ids were found without `tool_result` blocks immediately \
                 after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` \
                 block in the next message."
            ),
            Some(0)
        );
        assert_eq!(
            judged("messages: at least one message is required"),
            Some(1)
        );
        assert_eq!(judged("[] is too short - 'messages'"), Some(1));
    }
}
