//! The invariant framework: a [`Violation`] and the catalogue of stable invariant ids
//! (DESIGN.md §5, docs/invariants.md). Each system's oracles live in its own folder
//! (`letta::invariants`, `letta::client_invariants`, `kimi::invariants`); they return the
//! violations they found, each pointing at the event that broke it. The one oracle both
//! systems share, `history-valid`, lives here: both talk to the same fake provider.

use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    /// Index of the trace event that broke it (0-based), when there is one.
    pub event: Option<usize>,
    pub message: String,
}

impl Violation {
    /// A violation of `invariant` at trace event `event`.
    pub fn at(invariant: &'static str, event: usize, message: String) -> Violation {
        Violation {
            invariant,
            event: Some(event),
            message,
        }
    }
}

/// Every tool call the server asked about gets exactly one resolution.
pub const TOOL_CALL_RESOLVED: &str = "tool-call-resolved";
/// The same (scenario, seed, build) gives the same trace.
pub const DETERMINISTIC: &str = "deterministic";
/// Liveness: after the world heals, every user turn reaches a terminal state in the budget.
pub const TURN_TERMINATES: &str = "turn-terminates";
/// Agent loop: step envelopes well formed, tool results in provider order, usage totals.
pub const LOOP_ENVELOPE: &str = "loop-envelope";
/// Conflicting tool executions never overlap in simulated time (each system checks it).
pub const LOCK_SAFETY: &str = "lock-safety";
/// The server never starts two runs for one request token.
pub const ONE_RUN_PER_REQUEST: &str = "one-run-per-request";
/// A message the server acknowledged survives a server crash and restart.
pub const DURABLE_ACK: &str = "durable-ack";
/// Every request the server sends the provider is valid for it.
pub const HISTORY_VALID: &str = "history-valid";
/// A tool call's side effect happens at most once.
pub const NO_DOUBLE_EXECUTION: &str = "no-double-execution";
/// The chunks the client processed are the server's recorded chunks, gapless, in order.
pub const STREAM_GAPLESS: &str = "stream-gapless";
/// A run that emitted approval requests is acted on as `requires_approval`.
pub const STOP_REASON_CONSISTENT: &str = "stop-reason-consistent";
/// The arguments a tool ran with equal the arguments the provider produced.
pub const ARGS_INTACT: &str = "args-intact";
/// Retries stay within their budgets; delays follow the documented formulas.
pub const BUDGET_RESPECTED: &str = "budget-respected";
/// A denial no user made is never presented as the user's.
pub const APPROVAL_ATTRIBUTION: &str = "approval-attribution";
/// Approval results are sent in decision order.
pub const RESULTS_ORDERED: &str = "results-ordered";
/// Compaction never separates a tool call from its result, cuts only at an assistant message,
/// summarises exactly what it removes and brings the estimate under the threshold.
pub const COMPACTION_SAFE: &str = "compaction-safe";
/// A stream that answers a send on conversation A never carries a run of conversation B.
pub const STREAM_STAYS_IN_CONVERSATION: &str = "stream-stays-in-conversation";
/// A turn never ends on the approval-pending conflict while the conflicting call stays pending.
pub const APPROVAL_CONFLICT_RECOVERED: &str = "approval-conflict-recovered";
/// A run whose faults all heal within the client's budgets ends every turn as its fault-free
/// twin (same scenario and seed, no faults) does.
pub const RECOVERY_COMPLETES: &str = "recovery-completes";
/// A client process that starts with a call pending on its conversation decides it in its
/// first send.
pub const PENDING_DENIED_AT_START: &str = "pending-denied-at-start";
/// A run of a scenario as written ends each turn as its `[scenario] outcomes` declare.
pub const ENDS_AS_DECLARED: &str = "ends-as-declared";
/// The user interrupts and client crashes a plan scripts after a turn's n-th chunk fire there.
pub const CLIENT_FAULTS_FIRE: &str = "client-faults-fire";
/// A send repeats the previous send's otids exactly (a retry) or draws only fresh ones.
pub const OTIDS_FRESH: &str = "otids-fresh";
/// Every answer the Letta server gives names its content type.
pub const ANSWERS_TYPED: &str = "answers-typed";
/// Every request the Letta client sends reaches a route the server serves.
pub const REQUESTS_ROUTED: &str = "requests-routed";
/// Every chunk reaches the Letta client with its message id, and text chunks with their otid.
pub const CHUNKS_NAMED: &str = "chunks-named";
/// Every HTTP date the Letta server writes names the instant it means on the world's clock.
pub const DATES_TRUE: &str = "dates-true";
/// Every `X-Letta-Response-State` header the Letta client sends names, in unpadded base64url
/// JSON, the response id of a `response_state` chunk the server sent before it, and the header
/// comes on, and only on, the approval-only continuation after an offer that no human decided.
pub const RESPONSE_STATE_REUSED: &str = "response-state-reused";
/// Every start-up tail read the Letta client sends carries letta-protocol.md §6.1's query, and
/// the transcript it backfills from the listing is §6.2's.
pub const BACKFILL_FAITHFUL: &str = "backfill-faithful";
/// The status the Letta server records for a tool's result is the status the client's run of
/// the tool produced.
pub const RESULT_STATUS_INTACT: &str = "result-status-intact";
/// A headless Letta client that gives a turn up on a stream error cancels the run it last read
/// still active, and cancels no run otherwise.
pub const ABANDONED_RUN_CANCELLED: &str = "abandoned-run-cancelled";
/// Every send fault the plan numbers fires on that send, once the Letta server has taken that
/// many message sends.
pub const SEND_FAULTS_FIRE: &str = "send-faults-fire";
/// Agent loop: a session resumed from the host's record log holds the context the host held.
pub const TRANSCRIPT_RESUMES: &str = "transcript-resumes";

/// Every invariant id `sim run` knows (a scenario's `[[expect]]` table names one of these).
pub const ALL: [&str; 33] = [
    TOOL_CALL_RESOLVED,
    TURN_TERMINATES,
    LOOP_ENVELOPE,
    ONE_RUN_PER_REQUEST,
    DURABLE_ACK,
    HISTORY_VALID,
    NO_DOUBLE_EXECUTION,
    STREAM_GAPLESS,
    STOP_REASON_CONSISTENT,
    ARGS_INTACT,
    RESULT_STATUS_INTACT,
    BUDGET_RESPECTED,
    APPROVAL_ATTRIBUTION,
    RESULTS_ORDERED,
    COMPACTION_SAFE,
    STREAM_STAYS_IN_CONVERSATION,
    APPROVAL_CONFLICT_RECOVERED,
    PENDING_DENIED_AT_START,
    RECOVERY_COMPLETES,
    ENDS_AS_DECLARED,
    CLIENT_FAULTS_FIRE,
    SEND_FAULTS_FIRE,
    OTIDS_FRESH,
    ANSWERS_TYPED,
    REQUESTS_ROUTED,
    CHUNKS_NAMED,
    DATES_TRUE,
    RESPONSE_STATE_REUSED,
    BACKFILL_FAITHFUL,
    ABANDONED_RUN_CANCELLED,
    TRANSCRIPT_RESUMES,
    LOCK_SAFETY,
    DETERMINISTIC,
];

/// `history-valid`: every request the Letta server or the agent loop sent the provider was
/// valid for it; the fake provider validates as the real API does (a tool use without its
/// result, an empty conversation: a 400) and reports each refusal
/// (`model::provider::validate`).
pub fn history_valid(events: &[TraceEvent]) -> Vec<Violation> {
    history_valid_except(events, |_| false)
}

/// `history-valid` with the refusals `expected` names left out: those a system's own contract
/// sends on purpose and answers (the agent loop's normal projection leaves a trailing call
/// unanswered and resends strictly on the API's refusal, kimi-loop.md §4.7).
pub fn history_valid_except(
    events: &[TraceEvent],
    expected: impl Fn(&str) -> bool,
) -> Vec<Violation> {
    events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.obs {
            Observation::ProviderRejected {
                call,
                status,
                message,
            } if !expected(message) => Some(Violation {
                invariant: HISTORY_VALID,
                event: Some(i),
                message: format!(
                    "the provider refused model call #{call} with {status}: {message}"
                ),
            }),
            _ => None,
        })
        .collect()
}
