//! `runTurn` (kimi-loop.md §2.6, §3.3, `run-turn.ts`): turn-level convergence. Abort and
//! max-steps are checked at the top of every iteration (the safe points); usage totals are
//! kept across steps; `shouldContinueAfterStop` may extend the turn after a non-tool stop;
//! every failure is reported exactly once as `turn.interrupted`.

use super::errors::LoopError;
use super::events::{InterruptCause, InterruptReason, LoopLiveOnlyEvent, TurnInterruptedEvent};
use super::hooks::{StepHookContext, StoppedStepContext};
use super::input::RunTurnInput;
use super::llm::RequestTrace;
use super::step::{TurnState, execute_loop_step};
use super::types::{TokenUsage, TurnResult, TurnStopReason};

/// Run one turn. `Ok` for terminal stops and aborts (`aborted` is returned, never raised);
/// `Err` for max-steps exhaustion (the `loop.max_steps_exceeded` `KimiError`) and every other
/// failure, after exactly one `turn.interrupted`.
///
/// Choice (open question 5, untested upstream): an abort that lands after the final
/// `step.end`, with no `shouldContinueAfterStop` hook that checks the signal, returns the
/// terminal reason, not `aborted` — the reference code does the same.
pub async fn run_turn(input: &RunTurnInput) -> Result<TurnResult, LoopError> {
    let mut state = TurnState {
        steps: 0,
        usage: TokenUsage::empty(),
        active_step: None,
        trace: RequestTrace::new(),
        sticky: None,
    };
    match turn_loop(input, &mut state).await {
        Ok(stop_reason) => Ok(TurnResult {
            stop_reason,
            steps: state.steps,
            usage: state.usage,
        }),
        Err(error) => interrupt(input, &state, error),
    }
}

async fn turn_loop(
    input: &RunTurnInput,
    state: &mut TurnState,
) -> Result<TurnStopReason, LoopError> {
    loop {
        input.signal.throw_if_aborted()?;
        if let Some(max_steps) = input.max_steps.filter(|&max| max > 0)
            && state.steps >= max_steps
        {
            return Err(LoopError::max_steps(max_steps));
        }
        state.steps += 1;
        let step = state.steps;
        state.active_step = Some(step);
        let outcome = execute_loop_step(input, state, step).await?;
        state.active_step = None;
        let Some(terminal) = outcome.reason.terminal() else {
            continue;
        };
        let context = StoppedStepContext {
            step: StepHookContext {
                turn_id: &input.turn_id,
                step_number: step,
                signal: &input.signal,
                llm: input.llm.as_ref(),
            },
            usage: outcome.usage,
            stop_reason: terminal,
        };
        let decision = input.hooks.should_continue_after_stop(context).await?;
        if !decision.is_some_and(|decision| decision.continue_turn) {
            return Ok(terminal.into());
        }
    }
}

/// The catch-all of `runTurn`: abort-shaped errors, or any error once the signal fired,
/// become an `aborted` result; max-steps and everything else are re-raised.
fn interrupt(
    input: &RunTurnInput,
    state: &TurnState,
    error: LoopError,
) -> Result<TurnResult, LoopError> {
    let user_cancelled = error.is_user_cancellation()
        || input
            .signal
            .reason()
            .is_some_and(|reason| reason.user_cancelled);
    let aborted = error.is_abort() || input.signal.aborted();
    let max_steps = error.code() == Some(super::errors::MAX_STEPS_EXCEEDED_CODE);
    let (reason, cause) = if aborted {
        let cause = if user_cancelled {
            InterruptCause::UserCancelled
        } else {
            InterruptCause::Aborted
        };
        (InterruptReason::Aborted, cause)
    } else if max_steps {
        (InterruptReason::MaxSteps, InterruptCause::MaxSteps)
    } else {
        (InterruptReason::Error, InterruptCause::Error)
    };
    input
        .dispatcher
        .publish(LoopLiveOnlyEvent::TurnInterrupted(TurnInterruptedEvent {
            reason,
            attempted_steps: state.steps,
            active_step: state.active_step,
            message: (!aborted).then(|| error.message().to_owned()),
            interrupt_reason: cause,
            trace_id: state.trace.trace_id(),
        }));
    if aborted {
        return Ok(TurnResult {
            stop_reason: TurnStopReason::Aborted,
            steps: state.steps,
            usage: state.usage,
        });
    }
    Err(error)
}
