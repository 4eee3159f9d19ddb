//! The fixed texts of the client (letta-protocol.md §3.11, §3.12, §9.1, §4.3, §3.10).

/// `STALE_APPROVAL_RECOVERY_DENIAL_REASON` (letta-protocol.md §3.11; verbatim in
/// captures/letta_e2e flow d).
pub const STALE_APPROVAL_RECOVERY_DENIAL_REASON: &str = "The agent harness automatically closed this stale pending tool call to recover from a client/server state desync: the server was still waiting on a result for it, but the harness had no matching tool execution in flight and no result was ever recorded. It was not denied by the user or a permissions policy. Re-issue the tool call if you still need it.";
/// `INTERRUPTED_BY_USER`: tool_return of interrupted client tools (letta-protocol.md §3.12).
pub const INTERRUPTED_BY_USER: &str = "Interrupted by user";
/// Denial reason for pending approvals at interrupt time (letta-protocol.md §3.12, §9.1).
pub const USER_INTERRUPTED_THE_STREAM: &str = "User interrupted the stream";
/// Denial reason when the user queued a message (letta-protocol.md §3.12).
pub const USER_CANCELLED_NEW_MESSAGE_QUEUED: &str = "User cancelled - new message queued";
/// Headless denial for tools that need a human (letta-protocol.md §3.12; captures letta_e2e b).
pub const HEADLESS_ASK_DENY_REASON: &str = "Tool requires approval (headless mode)";
/// Missing tool name, TUI (letta-protocol.md §3.12).
pub const MISSING_NAME_REASON_TUI: &str = "Tool call incomplete - missing name or arguments";
/// Missing tool name, headless (letta-protocol.md §3.12, §5.4 default).
pub const MISSING_NAME_REASON_HEADLESS: &str = "Tool call incomplete - missing name";
/// Prefix of a failed tool execution's result (letta-protocol.md §3.12, §5.3).
pub const ERROR_EXECUTING_TOOL_PREFIX: &str = "Error executing tool: ";
/// UI/wire echo of a denial (letta-protocol.md §3.12; captures letta_e2e b stdout).
pub const DENIED_USER_REASON_PREFIX: &str = "Error: request to call tool denied. User reason: ";
/// Marks an incomplete tool line when a stream fails (letta-protocol.md §4.2, §4.4 step 9).
pub const STREAM_ERROR: &str = "Stream error";
/// Recorded when a resumed stream ends with no detail (letta-protocol.md §4.4 step 7).
pub const RESUMED_STREAM_ENDED_UNEXPECTEDLY: &str = "Resumed stream ended unexpectedly";
/// Status line of the terminal-EOF guard (letta-protocol.md §4.3).
pub const TERMINAL_EOF_STATUS: &str =
    "Stream did not close after completing, continued without waiting";
/// Status line of the stall reconciler (letta-protocol.md §4.3).
pub const STALL_RECONCILER_STATUS: &str =
    "Stream went silent after the run completed, recovering the missed tail";
/// Run discovery timeout message (letta-protocol.md §2.6).
pub const RUN_DISCOVERY_TIMEOUT: &str = "Fallback run discovery timed out after 5000ms";
/// Status of the busy wait (letta-protocol.md §3.4; reference A.7 retry delta).
pub const CONVERSATION_BUSY_WAITING: &str = "Conversation is busy, waiting and retrying…";
/// The headless error when a stale-approval denial's drain ends `error` or `cancelled`; the stop
/// reason follows (headless.ts `resolveAllPendingApprovals`, 0.32.18; the real CLI's output in
/// the real-client sweep, docs/findings.md).
pub const APPROVAL_DRAIN_ENDED: &str = "Approval drain ended with stop reason: ";
/// Headless recovery notice (reference B.5.3 stdout).
pub const APPROVAL_PENDING_RECOVERY_NOTICE: &str =
    "Detected pending approval conflict on send; resolving before retry";
/// The empty-response nudge appended on the last empty-response retry (letta-protocol.md §3.10
/// step 6).
pub const EMPTY_RESPONSE_NUDGE: &str = "<system-reminder>The previous response was empty. Please provide a response with either text content or a tool call.</system-reminder>";
/// The quota auto-swap message (letta-protocol.md §3.10 step 5).
pub const KEEP_GOING: &str = "Keep going.";
/// The quota auto-swap model (letta-protocol.md §3.10 step 5).
pub const LETTA_AUTO_MODEL: &str = "letta/auto";
/// First text part of every new user message after an interrupt (letta-protocol.md §9.1).
pub const INTERRUPT_REMINDER: &str =
    "<system-reminder>The user interrupted the active stream.</system-reminder>";
/// The interrupt message (letta-protocol.md §9.1).
pub const INTERRUPT_MESSAGE: &str = "Interrupted – tell the agent what to do differently. Something went wrong? Use /feedback to report issues.";
/// A `requires_approval` drain with no approvals (letta-protocol.md §10.3 item 1; reference A.7).
pub const UNEXPECTED_EMPTY_APPROVALS: &str = "Unexpected empty approvals with stop reason";
/// The listener's safe terminal error for the same case (reference A.7).
pub const REQUEST_FAILED_TRY_AGAIN: &str = "The request failed. Please try again.";
/// Headless invalid-ids resync that produced nothing to send (letta-protocol.md §3.10).
pub const APPROVAL_RESYNC_EMPTY: &str = "Approval resync produced no retryable input";
/// Text of the approval-with-nothing-pending error that the StreamProcessor swallows
/// (letta-protocol.md §3.2, §4.1 rule 5).
pub const NOTHING_AWAITING_APPROVAL: &str = "No tool call is currently awaiting approval";
/// The approval comment prefix of "allow with comment" (letta-protocol.md §2.3).
pub fn approval_comment_text(reason: &str) -> String {
    format!("The user approved the tool execution with the following comment: \"{reason}\"")
}
