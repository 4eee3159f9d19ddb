//! The turn-recovery policy of Letta Code as a pure module: no I/O, no clock, no randomness
//! (otids come from a generator the caller passes). Every table, classifier, decision function,
//! delay formula, budget and fixed text of letta-protocol.md §3 lives here, with the section it
//! comes from; the upstream tests of letta-tests-and-real-client.md Part A §A.3-A.4 are its unit
//! tests.
//!
//! Thrown values are modelled as JSON ([`serde_json::Value`]) shaped like the SDK's `APIError`
//! (`{status?, error?, message, headers?}`), because `extractConflictDetail` (§3.1) inspects
//! them dynamically and must tolerate anything (`null`, `42`, a string).

use serde_json::{Value, json};

use crate::wire::letta::{ApprovalCreate, ApprovalItem, MessageItem, StopReason};

// ---------------------------------------------------------------------------------------------
// Fixed texts (letta-protocol.md §3.11, §3.12, §9.1, §4.3, §3.10)
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Budgets and constants (letta-protocol.md §3.3, §3.4, §3.8, §3.9, §4.4)
// ---------------------------------------------------------------------------------------------

/// `LLM_API_ERROR_MAX_RETRIES`: shared by pre-stream transient retries, TUI approval-pending
/// recovery and post-stream retries (letta-protocol.md §3.9).
pub const LLM_API_ERROR_MAX_RETRIES: u32 = 3;
/// `EMPTY_RESPONSE_MAX_RETRIES` (letta-protocol.md §3.9).
pub const EMPTY_RESPONSE_MAX_RETRIES: u32 = 2;
/// `CONVERSATION_BUSY_MAX_RETRIES` (letta-protocol.md §3.9).
pub const CONVERSATION_BUSY_MAX_RETRIES: u32 = 3;
/// `CLOUD_API_SHUTDOWN_MAX_RETRIES`: inside the send, independent (letta-protocol.md §3.3).
pub const CLOUD_API_SHUTDOWN_MAX_RETRIES: u32 = 3;
/// Default 503 shutdown retry delay without `Retry-After` (letta-protocol.md §3.3).
pub const CLOUD_API_SHUTDOWN_DEFAULT_DELAY_MS: u64 = 1000;
/// `maxTransientRetries` passed to `getPreStreamErrorAction` (letta-protocol.md §3.4).
pub const MAX_TRANSIENT_RETRIES: u32 = 3;
/// Transient provider backoff base (letta-protocol.md §3.8).
pub const TRANSIENT_BASE_DELAY_MS: u64 = 1000;
/// Transient backoff base for a Cloudflare edge 52x detail (letta-protocol.md §3.8).
pub const CLOUDFLARE_BASE_DELAY_MS: u64 = 5000;
/// Conversation-busy backoff base (letta-protocol.md §3.8).
pub const CONVERSATION_BUSY_BASE_DELAY_MS: u64 = 10_000;
/// Empty-response linear step (letta-protocol.md §3.8).
pub const EMPTY_RESPONSE_STEP_MS: u64 = 500;
/// The busy wait polls the abort signal this often (letta-protocol.md §3.4).
pub const BUSY_WAIT_ABORT_POLL_MS: u64 = 100;
/// Whole-discovery timeout of the fallback run lookup (letta-protocol.md §2.6).
pub const RUN_DISCOVERY_TIMEOUT_MS: u64 = 5000;
/// `batch_size` of every resume request (letta-protocol.md §2.5).
pub const RESUME_BATCH_SIZE: u64 = 1000;

/// The policy of the mid-stream resume loop (letta-protocol.md §4.4 step 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePolicy {
    pub initial_delay_ms: u64,
    pub max_attempts: u32,
    pub max_delay_ms: u64,
}

impl ResumePolicy {
    /// TUI and listener: no policy passed, a single immediate attempt (letta-protocol.md §3.9,
    /// §4.4 note).
    pub const INTERACTIVE: ResumePolicy = ResumePolicy {
        initial_delay_ms: 0,
        max_attempts: 1,
        max_delay_ms: 0,
    };
    /// Headless: `{250, 20, 2000}` (letta-protocol.md §3.9; reference B.5.6).
    pub const HEADLESS: ResumePolicy = ResumePolicy {
        initial_delay_ms: 250,
        max_attempts: 20,
        max_delay_ms: 2000,
    };

    /// Wait before attempt `attempt + 1` after attempt `attempt` failed (1-based):
    /// `min(initial · 2^(attempt-1), max)` (letta-protocol.md §4.4 step 7).
    pub fn delay_after(&self, attempt: u32) -> u64 {
        let exp = attempt.saturating_sub(1).min(40);
        self.initial_delay_ms
            .saturating_mul(1u64 << exp)
            .min(self.max_delay_ms)
    }
}

/// The retry counters of one user turn (letta-protocol.md §3.9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budgets {
    /// Shared LLM budget: pre-stream transient, TUI approval-pending recovery, post-stream.
    pub llm_api_error_retries: u32,
    pub empty_response_retries: u32,
    pub conversation_busy_retries: u32,
    /// The quota auto-swap happens at most once per turn.
    pub quota_swap_tried: bool,
}

impl Budgets {
    /// A non-reentrant turn start, `end_turn`, or a terminal error shown: everything resets
    /// (letta-protocol.md §3.9). Reentrant continuations keep the counters.
    pub fn reset(&mut self) {
        *self = Budgets::default();
    }

    /// "The busy counter also resets on a transient retry and on any non-busy pre-stream error"
    /// (letta-protocol.md §3.9).
    pub fn reset_busy(&mut self) {
        self.conversation_busy_retries = 0;
    }

    pub fn llm_budget_left(&self) -> bool {
        self.llm_api_error_retries < LLM_API_ERROR_MAX_RETRIES
    }
}

// ---------------------------------------------------------------------------------------------
// §3.1 extractConflictDetail
// ---------------------------------------------------------------------------------------------

fn non_empty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The detail string of a thrown pre-stream error (letta-protocol.md §3.1; order fixed by the
/// A.3.1 test: `e.error.error.detail`, `e.error.error.message`, `e.error.error` as a string,
/// `e.error` as a string, `e.error.detail`, `e.error.message`, `e.message`, else "").
/// Anything that is not an object (`null`, `42`, `"string"`) gives "".
pub fn extract_conflict_detail(thrown: &Value) -> String {
    let Some(obj) = thrown.as_object() else {
        return String::new();
    };
    let error = obj.get("error");
    if let Some(inner) = error.and_then(|e| e.get("error")) {
        if inner.is_object() {
            if let Some(d) = non_empty_str(inner.get("detail")) {
                return d.to_string();
            }
            if let Some(m) = non_empty_str(inner.get("message")) {
                return m.to_string();
            }
        } else if let Some(s) = inner.as_str().filter(|s| !s.is_empty()) {
            return s.to_string();
        }
    }
    if let Some(s) = error.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        return s.to_string();
    }
    if let Some(e) = error.filter(|e| e.is_object()) {
        // `detail` may itself be an object (capture d3: {code, message, pending_request_id}).
        match e.get("detail") {
            Some(Value::String(s)) if !s.is_empty() => return s.clone(),
            Some(Value::Object(d)) => {
                if let Some(m) = non_empty_str(d.get("message")) {
                    return m.to_string();
                }
            }
            _ => {}
        }
        if let Some(m) = non_empty_str(e.get("message")) {
            return m.to_string();
        }
    }
    non_empty_str(obj.get("message"))
        .map(str::to_string)
        .unwrap_or_default()
}

/// An SDK `APIError` for a non-2xx response (letta-protocol.md §1.1: `error` is the parsed JSON
/// body, or absent with the raw text in the message when the body is not JSON; the message is
/// `"<status> <json or text>"`).
pub fn api_error(status: u16, body: &str, headers: &[(String, String)]) -> Value {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = match &parsed {
        Some(v) => format!("{status} {v}"),
        None => format!("{status} {body}"),
    };
    let mut e = json!({
        "status": status,
        "message": message,
        "headers": headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
    });
    if let Some(p) = parsed {
        e["error"] = p;
    }
    e
}

/// A thrown error without an HTTP status (network failure, SDK parse error, `event: error`).
pub fn transport_error(message: &str) -> Value {
    json!({ "message": message })
}

/// A header of a thrown `APIError` (case-insensitive name).
pub fn error_header<'a>(thrown: &'a Value, name: &str) -> Option<&'a str> {
    thrown.get("headers")?.as_array()?.iter().find_map(|pair| {
        let k = pair.get(0)?.as_str()?;
        (k.eq_ignore_ascii_case(name))
            .then(|| pair.get(1)?.as_str())
            .flatten()
    })
}

pub fn error_status(thrown: &Value) -> Option<u16> {
    thrown
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
}

// ---------------------------------------------------------------------------------------------
// §3.2 classifiers (case-insensitive substring tests on the detail string)
// ---------------------------------------------------------------------------------------------

fn lower_contains(haystack: &str, needle_lower: &str) -> bool {
    haystack.to_lowercase().contains(needle_lower)
}

/// `isApprovalPendingError`: contains `waiting for approval` (letta-protocol.md §3.2).
/// Non-strings are never approval-pending (A.3.1: 42, null, `{detail:…}` → false).
pub fn is_approval_pending_error(detail: &Value) -> bool {
    detail
        .as_str()
        .is_some_and(|d| lower_contains(d, "waiting for approval"))
}

/// `isConversationBusyError`: `is currently being processed` or `busy with another active run`
/// (letta-protocol.md §3.2).
pub fn is_conversation_busy_error(detail: &Value) -> bool {
    detail.as_str().is_some_and(|d| {
        let l = d.to_lowercase();
        l.contains("is currently being processed") || l.contains("busy with another active run")
    })
}

/// `extractConversationBusyRunId`: `\brun_id=([A-Za-z0-9_-]+)`, only for a busy error
/// (letta-protocol.md §3.2).
pub fn extract_conversation_busy_run_id(detail: &str) -> Option<String> {
    if !is_conversation_busy_error(&Value::String(detail.to_string())) {
        return None;
    }
    let bytes = detail.as_bytes();
    let mut from = 0;
    while let Some(pos) = detail[from..].find("run_id=") {
        let at = from + pos;
        let boundary = at == 0 || !is_word_byte(bytes[at - 1]);
        let start = at + "run_id=".len();
        let end = detail[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .map_or(detail.len(), |e| start + e);
        if boundary && end > start {
            return Some(detail[start..end].to_string());
        }
        from = start;
    }
    None
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `isInvalidToolCallIdsError`: contains `invalid tool call ids` (letta-protocol.md §3.2).
pub fn is_invalid_tool_call_ids_error(detail: &Value) -> bool {
    detail
        .as_str()
        .is_some_and(|d| lower_contains(d, "invalid tool call ids"))
}

/// `isEmptyResponseError`: contains `empty content in` (letta-protocol.md §3.2).
pub fn is_empty_response_error(detail: &Value) -> bool {
    detail
        .as_str()
        .is_some_and(|d| lower_contains(d, "empty content in"))
}

/// Display-only busy patterns (`src/utils/conversation-busy-error.ts`, letta-protocol.md §3.2).
pub const DISPLAY_BUSY_PATTERNS: [&str; 5] = [
    "another request is currently being processed",
    "currently being processed for this conversation",
    "busy with another active run",
    "already processing for this conversation",
    "turn still running",
];

/// Display-only busy test: "another request is (currently) (being) processed", and the others
/// (letta-protocol.md §3.2).
pub fn is_display_busy_error(detail: &str) -> bool {
    let l = detail.to_lowercase();
    if DISPLAY_BUSY_PATTERNS.iter().any(|p| l.contains(p)) {
        return true;
    }
    // "another request is (currently) (being) processed": optional words.
    ["", "currently ", "being ", "currently being "]
        .iter()
        .any(|mid| l.contains(&format!("another request is {mid}processed")))
}

/// The pre-stream conflict kinds (letta-protocol.md §3.2; A.3.1 `classifyPreStreamConflict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreStreamConflict {
    ApprovalPending,
    ConversationBusy,
}

pub fn classify_pre_stream_conflict(detail: &str) -> Option<PreStreamConflict> {
    let v = Value::String(detail.to_string());
    if is_approval_pending_error(&v) {
        Some(PreStreamConflict::ApprovalPending)
    } else if is_conversation_busy_error(&v) {
        Some(PreStreamConflict::ConversationBusy)
    } else {
        None
    }
}

/// Mid-stream, a fallback error with this text is "not resumable" (letta-protocol.md §3.2,
/// §4.4 step 3).
pub fn is_approval_pending_conflict(fallback_error: Option<&str>) -> bool {
    fallback_error.is_some_and(|e| e.contains("waiting for approval on a tool call"))
}

// ---------------------------------------------------------------------------------------------
// §3.5-3.6 pattern tables
// ---------------------------------------------------------------------------------------------

/// `RETRYABLE_PROVIDER_DETAIL_PATTERNS`: case-**sensitive** substrings (letta-protocol.md §3.5).
pub const RETRYABLE_PROVIDER_DETAIL_PATTERNS: [&str; 38] = [
    "Anthropic API error",
    "OpenAI API error",
    "Google Vertex API error",
    "ChatGPT API error",
    "ChatGPT server error",
    "Connection error during Anthropic streaming",
    "Connection error during OpenRouter streaming",
    "Connection error during streaming",
    "upstream connect error",
    "connection termination",
    "peer closed connection",
    "incomplete chunked read",
    "Network error",
    "Connection error",
    "Request timed out",
    "overloaded",
    "api_error",
    "server_error",
    "server error",
    "internal_error",
    "internal error",
    "service_unavailable",
    "service unavailable",
    "You can retry your request",
    "retry your request",
    "WebSocket closed",
    "websocket closed",
    "WebSocket error",
    "websocket error",
    "Connection ended",
    "connection ended",
    "connection lost",
    "other side closed",
    "fetch failed",
    "socket hang up",
    "ended without",
    "http2 request did not get a response",
    "terminated",
];

/// `NON_RETRYABLE_PROVIDER_DETAIL_PATTERNS`: lower-cased substrings (letta-protocol.md §3.6).
pub const NON_RETRYABLE_PROVIDER_DETAIL_PATTERNS: [&str; 12] = [
    "invalid api key",
    "incorrect api key",
    "authentication error",
    "authentication failed",
    "unauthorized",
    "permission denied",
    "forbidden",
    "invalid_request_error",
    "invalid model",
    "model_not_found",
    "context_length_exceeded",
    "invalid_encrypted_content",
];

/// `NON_RETRYABLE_RUN_ERROR_TYPES` (letta-protocol.md §3.6).
pub const NON_RETRYABLE_RUN_ERROR_TYPES: [&str; 6] = [
    "llm_authentication",
    "llm_bad_request",
    "llm_insufficient_credits",
    "llm_permission_denied",
    "llm_not_found",
    "llm_unprocessable_entity",
];

/// `NON_RETRYABLE_429_REASONS`: lower-cased substrings of the detail (letta-protocol.md §3.6).
pub const NON_RETRYABLE_429_REASONS: [&str; 7] = [
    "agents-limit-exceeded",
    "exceeded-quota",
    "free-usage-exceeded",
    "premium-usage-exceeded",
    "standard-usage-exceeded",
    "basic-usage-exceeded",
    "not-enough-credits",
];

/// `NON_RETRYABLE_QUOTA_DETAIL_PATTERNS` (letta-protocol.md §3.6).
pub const NON_RETRYABLE_QUOTA_DETAIL_PATTERNS: [&str; 3] = [
    "hosted model usage limit",
    "out of credits",
    "usage_limit_reached",
];

/// Z.ai codes that are non-retryable (letta-protocol.md §3.6): 1000–1004, 1100–1121, 1300–1310.
pub const ZAI_NON_RETRYABLE_CODE_RANGES: [(u32, u32); 3] =
    [(1000, 1004), (1100, 1121), (1300, 1310)];

/// Cloudflare edge codes (letta-protocol.md §3.6): 502 and 520–526.
pub const CLOUDFLARE_EDGE_CODES: [u32; 8] = [502, 520, 521, 522, 523, 524, 525, 526];

/// `isRetryableProviderErrorDetail`: a case-sensitive retryable pattern or a Cloudflare edge
/// 52x text (letta-protocol.md §3.5).
pub fn is_retryable_provider_detail(detail: &str) -> bool {
    RETRYABLE_PROVIDER_DETAIL_PATTERNS
        .iter()
        .any(|p| detail.contains(p))
        || is_cloudflare_edge_52x(detail)
}

/// `NON_RETRYABLE_4XX_PATTERN`: case-insensitive `Error code:` + optional spaces +
/// `4(0[0-8]|1\d|2\d|3\d|4\d|51)`, not followed by another digit (letta-protocol.md §3.6).
/// The regex is followed exactly: it matches 400–408, 410–449 and 451. The prose of §3.6 says
/// "429 is not matched", but `2\d` matches it; every caller tests the retryable-429 pattern
/// first or exempts it (`shouldRetryRunMetadataError`), so a 429 text stays retryable.
pub fn matches_non_retryable_4xx(detail: &str) -> bool {
    let l = detail.to_lowercase();
    let mut from = 0;
    while let Some(pos) = l[from..].find("error code:") {
        let rest = &l[from + pos + "error code:".len()..];
        let digits_start = rest.trim_start();
        let code: String = digits_start
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if code.len() == 3
            && let Ok(n) = code.parse::<u32>()
            && ((400..=408).contains(&n) || (410..=449).contains(&n) || n == 451)
        {
            return true;
        }
        from += pos + 1;
    }
    false
}

/// The Z.ai error code in a detail: `'code': NNNN, 'message': '...'` (Python repr) or the JSON
/// equivalent `"code": NNNN, "message"` (letta-protocol.md §3.6).
pub fn zai_error_code(detail: &str) -> Option<u32> {
    for key in ["'code':", "\"code\":"] {
        let mut from = 0;
        while let Some(pos) = detail[from..].find(key) {
            let rest = detail[from + pos + key.len()..].trim_start();
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let after = rest[digits.len()..].trim_start();
            let msg_key = if key.starts_with('\'') {
                "'message'"
            } else {
                "\"message\""
            };
            if !digits.is_empty()
                && after.starts_with(',')
                && after[1..].trim_start().starts_with(msg_key)
                && let Ok(n) = digits.parse()
            {
                return Some(n);
            }
            from += pos + 1;
        }
    }
    None
}

/// Z.ai detail with a non-retryable code (letta-protocol.md §3.6; 1200–1234 and 500 are known
/// but retryable).
pub fn is_zai_non_retryable(detail: &str) -> bool {
    zai_error_code(detail).is_some_and(|c| {
        ZAI_NON_RETRYABLE_CODE_RANGES
            .iter()
            .any(|(lo, hi)| (*lo..=*hi).contains(&c))
    })
}

/// `isNonRetryableProviderErrorDetail`: the lower-cased table, the 4xx pattern, or a Z.ai code
/// (letta-protocol.md §3.6).
pub fn is_non_retryable_provider_detail(detail: &str) -> bool {
    let l = detail.to_lowercase();
    NON_RETRYABLE_PROVIDER_DETAIL_PATTERNS
        .iter()
        .any(|p| l.contains(p))
        || matches_non_retryable_4xx(detail)
        || is_zai_non_retryable(detail)
}

/// A quota limit detail: any non-retryable 429 reason or quota pattern (letta-protocol.md §3.6).
pub fn is_quota_limit_detail(detail: &str) -> bool {
    let l = detail.to_lowercase();
    NON_RETRYABLE_429_REASONS.iter().any(|p| l.contains(p))
        || NON_RETRYABLE_QUOTA_DETAIL_PATTERNS
            .iter()
            .any(|p| l.contains(p))
}

/// `RETRYABLE_429_PATTERN`: case-insensitive `Error code:\s*429|rate limit|too many requests`
/// (letta-protocol.md §3.6).
pub fn matches_retryable_429(detail: &str) -> bool {
    let l = detail.to_lowercase();
    if l.contains("rate limit") || l.contains("too many requests") {
        return true;
    }
    let mut from = 0;
    while let Some(pos) = l[from..].find("error code:") {
        let rest = l[from + pos + "error code:".len()..].trim_start();
        if rest.starts_with("429") {
            return true;
        }
        from += pos + 1;
    }
    false
}

/// Cloudflare edge 52x text (letta-protocol.md §3.6): (a) `Cloudflare 502`/`520`–`526` as
/// words; (b) JSON text with `"cloudflare_error": true`; (c) HTML mentioning "cloudflare" that
/// looks like HTML or says "error code", with a 502/520–526 marker (`<code> <!doctype html`,
/// `error code <code>`, or a title `| <code>:`).
pub fn is_cloudflare_edge_52x(detail: &str) -> bool {
    let l = detail.to_lowercase();
    // (a)
    for code in CLOUDFLARE_EDGE_CODES {
        let needle = format!("cloudflare {code}");
        let mut from = 0;
        while let Some(pos) = l[from..].find(&needle) {
            let at = from + pos;
            let end = at + needle.len();
            let before_ok = at == 0 || !is_word_byte(l.as_bytes()[at - 1]);
            let after_ok = end == l.len() || !is_word_byte(l.as_bytes()[end]);
            if before_ok && after_ok {
                return true;
            }
            from = at + 1;
        }
    }
    // (b)
    let compact: String = l.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.contains("\"cloudflare_error\":true") {
        return true;
    }
    // (c)
    if l.contains("cloudflare")
        && (l.contains("<html") || l.contains("<!doctype html") || l.contains("error code"))
    {
        for code in CLOUDFLARE_EDGE_CODES {
            if l.contains(&format!("{code} <!doctype html"))
                || l.contains(&format!("error code {code}"))
                || l.contains(&format!("| {code}:"))
            {
                return true;
            }
        }
    }
    false
}

// ---------------------------------------------------------------------------------------------
// §3.3 503 cloud_api_shutting_down
// ---------------------------------------------------------------------------------------------

/// Retried inside the send only when all hold: HTTP 503, `e.error` an object with
/// `errorCode === "cloud_api_shutting_down"`, `admitted === false`, `retryable === true`
/// (letta-protocol.md §3.3).
pub fn is_cloud_shutdown_retryable(thrown: &Value) -> bool {
    if error_status(thrown) != Some(503) {
        return false;
    }
    let Some(e) = thrown.get("error").filter(|e| e.is_object()) else {
        return false;
    };
    e.get("errorCode").and_then(Value::as_str) == Some("cloud_api_shutting_down")
        && e.get("admitted") == Some(&Value::Bool(false))
        && e.get("retryable") == Some(&Value::Bool(true))
}

// ---------------------------------------------------------------------------------------------
// §3.4 pre-stream actions
// ---------------------------------------------------------------------------------------------

/// `getPreStreamErrorAction` result (letta-protocol.md §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreStreamAction {
    ResolveApprovalPending,
    RetryConversationBusy,
    RetryTransient,
    Rethrow,
}

/// The transient part of `getPreStreamErrorAction`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransientOptions {
    pub status: Option<u16>,
    pub transient_retries: u32,
    pub max_transient_retries: u32,
}

/// `getPreStreamErrorAction(detail, busyRetries, maxBusy, opts?)`, evaluated in order
/// (letta-protocol.md §3.4). The approval-pending budget is checked by the caller.
pub fn get_pre_stream_error_action(
    detail: &str,
    conversation_busy_retries: u32,
    max_conversation_busy_retries: u32,
    opts: Option<TransientOptions>,
) -> PreStreamAction {
    let v = Value::String(detail.to_string());
    if is_approval_pending_error(&v) {
        return PreStreamAction::ResolveApprovalPending;
    }
    if is_conversation_busy_error(&v) && conversation_busy_retries < max_conversation_busy_retries {
        return PreStreamAction::RetryConversationBusy;
    }
    if let Some(o) = opts
        && should_retry_pre_stream_transient_error(o.status, detail)
        && o.transient_retries < o.max_transient_retries
    {
        return PreStreamAction::RetryTransient;
    }
    PreStreamAction::Rethrow
}

// ---------------------------------------------------------------------------------------------
// §3.7 decision functions
// ---------------------------------------------------------------------------------------------

/// `shouldRetryPreStreamTransientError({status, detail})` (letta-protocol.md §3.7).
pub fn should_retry_pre_stream_transient_error(status: Option<u16>, detail: &str) -> bool {
    if is_quota_limit_detail(detail) {
        return false;
    }
    match status {
        Some(429) => true,
        Some(s) if s >= 500 => true,
        Some(s) if s >= 400 => false,
        _ => {
            if matches_retryable_429(detail) {
                true
            } else if is_non_retryable_provider_detail(detail) {
                false
            } else {
                is_retryable_provider_detail(detail)
            }
        }
    }
}

/// `shouldRetryRunMetadataError(errorType, detail)` (letta-protocol.md §3.7).
pub fn should_retry_run_metadata_error(error_type: Option<&str>, detail: &str) -> bool {
    if error_type.is_some_and(|t| NON_RETRYABLE_RUN_ERROR_TYPES.contains(&t)) {
        return false;
    }
    if is_quota_limit_detail(detail) {
        return false;
    }
    if is_non_retryable_provider_detail(detail) && !matches_retryable_429(detail) {
        return false;
    }
    if error_type == Some("llm_error") {
        return true;
    }
    matches_retryable_429(detail) || is_retryable_provider_detail(detail)
}

/// The error metadata of a run (`metadata.error`, or the nested `metadata.error.error`;
/// letta-protocol.md §3.7 `isRetriableError`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunErrorMeta {
    pub error_type: Option<String>,
    pub detail: Option<String>,
    pub retryable: Option<bool>,
}

impl RunErrorMeta {
    /// Reads `metadata.error.{error_type, detail, retryable}`, falling back one level to
    /// `metadata.error.error.{…}` (letta-protocol.md §3.7, A.4.1); `detail` falls back to
    /// `message` (§3.10 step 1).
    pub fn from_run(run: &Value) -> Option<RunErrorMeta> {
        let e = run.pointer("/metadata/error")?;
        if e.is_null() {
            return None;
        }
        let read = |v: &Value| RunErrorMeta {
            error_type: v
                .get("error_type")
                .and_then(Value::as_str)
                .map(str::to_string),
            detail: v
                .get("detail")
                .and_then(Value::as_str)
                .or_else(|| v.get("message").and_then(Value::as_str))
                .map(str::to_string),
            retryable: v.get("retryable").and_then(Value::as_bool),
        };
        let top = read(e);
        let nested = e.get("error").filter(|n| n.is_object()).map(read);
        Some(match nested {
            Some(n) => RunErrorMeta {
                error_type: top.error_type.or(n.error_type),
                detail: top.detail.or(n.detail),
                retryable: top.retryable.or(n.retryable),
            },
            None => top,
        })
    }
}

/// `shouldRetryPostStreamRunError({stopReason, errorType, detail, retryable})`
/// (letta-protocol.md §3.7).
pub fn should_retry_post_stream_run_error(
    stop_reason: &StopReason,
    error_type: Option<&str>,
    detail: &str,
    retryable: Option<bool>,
) -> bool {
    match retryable {
        Some(false) => return false,
        Some(true) => return true,
        None => {}
    }
    if should_retry_run_metadata_error(error_type, detail) {
        return true;
    }
    if *stop_reason != StopReason::LlmApiError {
        return false;
    }
    if error_type.is_some_and(|t| NON_RETRYABLE_RUN_ERROR_TYPES.contains(&t))
        || is_quota_limit_detail(detail)
        || is_non_retryable_provider_detail(detail)
    {
        return false;
    }
    true
}

/// Stop reasons the client never retries (letta-protocol.md §1.5, `src/cli/app/retry.ts`).
pub const NON_RETRIABLE_STOP_REASONS: [&str; 8] = [
    "cancelled",
    "requires_approval",
    "max_steps",
    "max_tokens_exceeded",
    "context_window_overflow_in_system_prompt",
    "end_turn",
    "tool_rule",
    "no_tool_call",
];

pub fn is_non_retriable_stop(stop: &StopReason) -> bool {
    NON_RETRIABLE_STOP_REASONS.contains(&stop.as_str())
}

/// The pure half of `isRetriableError(stopReason, runId, fallbackDetail)` (letta-protocol.md
/// §3.7): `meta` is what `GET /v1/runs/{id}` returned (`None` when there was no run id or the
/// lookup failed; then `fallback_detail` is used).
pub fn is_retriable_error(
    stop: &StopReason,
    meta: Option<&RunErrorMeta>,
    fallback_detail: &str,
) -> bool {
    if is_non_retriable_stop(stop) {
        return false;
    }
    match meta {
        Some(m) => should_retry_post_stream_run_error(
            stop,
            m.error_type.as_deref(),
            m.detail.as_deref().unwrap_or(fallback_detail),
            m.retryable,
        ),
        None => should_retry_post_stream_run_error(stop, None, fallback_detail, None),
    }
}

/// `isEmptyResponseRetryable(errorType, detail, retries, max)` (letta-protocol.md §3.7).
pub fn is_empty_response_retryable(
    error_type: Option<&str>,
    detail: &str,
    retries: u32,
    max: u32,
) -> bool {
    retries < max
        && error_type == Some("llm_error")
        && is_empty_response_error(&Value::String(detail.to_string()))
}

/// `shouldAttemptApprovalRecovery({approvalPendingDetected, retries, maxRetries})` (A.3.1).
pub fn should_attempt_approval_recovery(detected: bool, retries: u32, max_retries: u32) -> bool {
    detected && retries < max_retries
}

// ---------------------------------------------------------------------------------------------
// §3.8 delays
// ---------------------------------------------------------------------------------------------

/// Categories of `getRetryDelayMs` (letta-protocol.md §3.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayCategory {
    TransientProvider,
    ConversationBusy,
    EmptyResponse,
}

/// `getRetryDelayMs({category, attempt, detail, retryAfterMs})` (letta-protocol.md §3.8):
/// transient uses a parsed Retry-After verbatim, else `base · 2^(attempt-1)` with base 1000 ms
/// (5000 ms for a Cloudflare edge 52x detail), no cap; busy `10000 · 2^(attempt-1)`; empty
/// `500 · attempt`.
pub fn get_retry_delay_ms(
    category: DelayCategory,
    attempt: u32,
    detail: &str,
    retry_after_ms: Option<u64>,
) -> u64 {
    let exp = |base: u64| base.saturating_mul(1u64 << attempt.saturating_sub(1).min(40));
    match category {
        DelayCategory::TransientProvider => match retry_after_ms {
            Some(ms) => ms,
            None if is_cloudflare_edge_52x(detail) => exp(CLOUDFLARE_BASE_DELAY_MS),
            None => exp(TRANSIENT_BASE_DELAY_MS),
        },
        DelayCategory::ConversationBusy => exp(CONVERSATION_BUSY_BASE_DELAY_MS),
        DelayCategory::EmptyResponse => EMPTY_RESPONSE_STEP_MS.saturating_mul(attempt as u64),
    }
}

/// `getTransientRetryDelayMs`: the transient category (A.3.1).
pub fn get_transient_retry_delay_ms(
    attempt: u32,
    detail: &str,
    retry_after_ms: Option<u64>,
) -> u64 {
    get_retry_delay_ms(
        DelayCategory::TransientProvider,
        attempt,
        detail,
        retry_after_ms,
    )
}

/// `parseRetryAfterHeaderMs(value)` (letta-protocol.md §3.8): numeric → seconds × 1000
/// (rounded); otherwise an HTTP date minus `now_epoch_ms` (never negative); unparseable →
/// `None`. HTTP dates are read in the IMF-fixdate form (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn parse_retry_after_header_ms(value: &str, now_epoch_ms: u64) -> Option<u64> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if let Ok(secs) = v.parse::<f64>() {
        if !secs.is_finite() {
            return None;
        }
        return Some((secs * 1000.0).round().max(0.0) as u64);
    }
    let at = parse_imf_fixdate_ms(v)?;
    Some(at.saturating_sub(now_epoch_ms))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` → Unix epoch ms.
pub fn parse_imf_fixdate_ms(v: &str) -> Option<u64> {
    let rest = v.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split_whitespace().collect();
    if parts.len() != 5 || parts[4] != "GMT" {
        return None;
    }
    let day: u32 = parts[0].parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[1])? as u32
        + 1;
    let year: i64 = parts[2].parse().ok()?;
    let hms: Vec<u64> = parts[3]
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if hms.len() != 3 || hms[0] > 23 || hms[1] > 59 || hms[2] > 60 || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if days < 0 {
        return None;
    }
    Some(((days as u64 * 86_400) + hms[0] * 3600 + hms[1] * 60 + hms[2]) * 1000)
}

/// Proleptic Gregorian date → days since 1970-01-01 (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The SDK's own retry delay for calls that keep `maxRetries = 2` (letta-protocol.md §2.8):
/// `retry-after-ms`, else `retry-after`, else `min(0.5 s · 2^n, 8 s)` with up to 25 % negative
/// jitter. `jitter` is a number in `[0, 1)` from the caller's seeded PRNG; `retries_done` is `n`.
pub fn sdk_retry_delay_ms(
    retries_done: u32,
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now_epoch_ms: u64,
    jitter: f64,
) -> u64 {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return ms.round() as u64;
    }
    if let Some(ms) = retry_after.and_then(|v| parse_retry_after_header_ms(v, now_epoch_ms)) {
        return ms;
    }
    let base = (500.0 * 2f64.powi(retries_done.min(30) as i32)).min(8000.0);
    (base * (1.0 - 0.25 * jitter.clamp(0.0, 1.0))).round() as u64
}

/// The SDK retries a status when `x-should-retry: true`, or 408, 409, 429, >= 500, and never
/// when `x-should-retry: false` (letta-protocol.md §2.8).
pub fn sdk_should_retry(status: Option<u16>, x_should_retry: Option<&str>) -> bool {
    match x_should_retry {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    match status {
        None => true, // connection errors are retried
        Some(s) => matches!(s, 408 | 409 | 429) || s >= 500,
    }
}

/// The SDK's default `maxRetries` (letta-protocol.md §2.8).
pub const SDK_MAX_RETRIES: u32 = 2;

// ---------------------------------------------------------------------------------------------
// §3.10 post-stream decision order
// ---------------------------------------------------------------------------------------------

/// What the TUI does after a stop reason other than end_turn/cancelled/requires_approval
/// (letta-protocol.md §3.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostStreamAction {
    /// Step 2: the payload had an approval and the error says "invalid tool call ids": fetch the
    /// server's approvals and show them.
    ShowServerApprovals,
    /// Step 3: fresh-denial rebuild, loop.
    ResolveApprovalPending,
    /// Step 5: temporary model override `letta/auto`, append "Keep going.", loop.
    QuotaAutoSwap,
    /// Step 6: wait, refresh otids, loop; `nudge` appends the empty-response system reminder.
    EmptyResponseRetry {
        delay_ms: u64,
        attempt: u32,
        nudge: bool,
    },
    /// Step 7: wait, then resend (`empty_messages` for a local persisted-state backend) with
    /// refreshed otids; the seq threshold resets.
    TransientRetry {
        delay_ms: u64,
        attempt: u32,
        empty_messages: bool,
    },
    /// Step 8: reset counters, cancel incomplete tools ("Stream error"), show the error.
    Fail,
}

/// Inputs of [`post_stream_action`] (the run lookup of step 1 is done by the caller).
#[derive(Debug, Clone, Default)]
pub struct PostStreamInput {
    pub stop_reason: Option<StopReason>,
    /// `metadata.error.detail ?? message` of the run (step 1).
    pub run_detail: Option<String>,
    /// The latest error line text (the drain's fallback error).
    pub error_line: Option<String>,
    pub payload_had_approval: bool,
    /// `isRetriableError`'s verdict (computed by the caller from the run lookup).
    pub retriable: bool,
    /// The backend is hosted (not `localModelCatalog`).
    pub hosted: bool,
    /// Setting `autoSwapOnQuotaLimit` is not false.
    pub auto_swap_enabled: bool,
    pub on_letta_auto: bool,
    /// The backend keeps local persisted state (`localModelCatalog && !remoteMemfs`).
    pub local_persisted_state: bool,
}

/// The TUI's post-stream decision (letta-protocol.md §3.10 steps 2-8, in order; step 4, the
/// ChatGPT plan rotation of upstream HEAD, applies only to ChatGPT BYOK providers, which the
/// simulation does not have). Increments the budgets the chosen step consumes.
pub fn post_stream_action(input: &PostStreamInput, budgets: &mut Budgets) -> PostStreamAction {
    let detail = input.run_detail.clone().unwrap_or_default();
    let line = input.error_line.clone().unwrap_or_default();
    let says = |f: fn(&Value) -> bool| {
        f(&Value::String(detail.clone())) || f(&Value::String(line.clone()))
    };
    // 2.
    if input.payload_had_approval && says(is_invalid_tool_call_ids_error) {
        return PostStreamAction::ShowServerApprovals;
    }
    // 3.
    if says(is_approval_pending_error) && budgets.llm_budget_left() {
        budgets.llm_api_error_retries += 1;
        return PostStreamAction::ResolveApprovalPending;
    }
    // 5.
    let quota = is_quota_limit_detail(&detail) || is_quota_limit_detail(&line);
    if quota
        && input.hosted
        && input.auto_swap_enabled
        && !input.on_letta_auto
        && !budgets.quota_swap_tried
    {
        budgets.quota_swap_tried = true;
        return PostStreamAction::QuotaAutoSwap;
    }
    // 6. The TUI passes `llm_error` iff the stop reason is llm_api_error (§3.7).
    let error_type = (input.stop_reason == Some(StopReason::LlmApiError)).then_some("llm_error");
    let empty_detail = if is_empty_response_error(&Value::String(detail.clone())) {
        detail.clone()
    } else {
        line.clone()
    };
    if is_empty_response_retryable(
        error_type,
        &empty_detail,
        budgets.empty_response_retries,
        EMPTY_RESPONSE_MAX_RETRIES,
    ) {
        budgets.empty_response_retries += 1;
        let attempt = budgets.empty_response_retries;
        return PostStreamAction::EmptyResponseRetry {
            delay_ms: get_retry_delay_ms(
                DelayCategory::EmptyResponse,
                attempt,
                &empty_detail,
                None,
            ),
            attempt,
            nudge: attempt == EMPTY_RESPONSE_MAX_RETRIES,
        };
    }
    // 7.
    if input.retriable && budgets.llm_budget_left() {
        budgets.llm_api_error_retries += 1;
        let attempt = budgets.llm_api_error_retries;
        let d = if detail.is_empty() { &line } else { &detail };
        return PostStreamAction::TransientRetry {
            delay_ms: get_transient_retry_delay_ms(attempt, d, None),
            attempt,
            empty_messages: input.local_persisted_state,
        };
    }
    // 8.
    budgets.reset();
    PostStreamAction::Fail
}

/// What headless does after a drain (letta-protocol.md §3.10, "Headless order").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadlessPostStreamAction {
    ResolveAllPendingApprovals,
    Done,
    ExecuteApprovals,
    /// Retry with refreshed otids after `delay_ms`.
    Retry {
        delay_ms: u64,
        attempt: u32,
    },
    /// Invalid ids: rebuild the input from the server's resume data with fresh denials.
    ApprovalResync,
    /// The reference only: the empty-response retry of §3.7 (500 ms · attempt, the nudge on the
    /// last attempt) before any metadata-based decision.
    EmptyResponseRetry {
        delay_ms: u64,
        attempt: u32,
        nudge: bool,
    },
    Fail,
}

/// Inputs of [`headless_post_stream_action`].
#[derive(Debug, Clone, Default)]
pub struct HeadlessPostStreamInput {
    pub stop_reason: Option<StopReason>,
    /// The drain raised the approval-pending flag.
    pub approval_pending_flag: bool,
    pub error_line: Option<String>,
    /// `llm_api_error` retries ignore run metadata (`retryable:false` included) in the published
    /// client (letta-protocol.md §10.3 item 9); the reference honours it.
    pub honour_retryable_false: bool,
    /// `metadata.error` of the run, when the caller fetched it.
    pub run_meta: Option<RunErrorMeta>,
    /// Retry an empty response as the TUI does (§3.7) before reading metadata (the reference:
    /// an empty response is retryable whatever `retryable` its run says).
    pub empty_response_step: bool,
}

/// The headless post-stream order (letta-protocol.md §3.10): approval-pending flag →
/// resolve; end_turn → done; requires_approval → execute; llm_api_error with budget → retry
/// (no metadata check in the published client); invalid ids → resync; run-metadata based retry;
/// else fail.
pub fn headless_post_stream_action(
    input: &HeadlessPostStreamInput,
    budgets: &mut Budgets,
) -> HeadlessPostStreamAction {
    if input.approval_pending_flag {
        return HeadlessPostStreamAction::ResolveAllPendingApprovals;
    }
    let stop = input.stop_reason.clone().unwrap_or(StopReason::Error);
    match stop {
        StopReason::EndTurn => return HeadlessPostStreamAction::Done,
        StopReason::RequiresApproval => return HeadlessPostStreamAction::ExecuteApprovals,
        _ => {}
    }
    let line = input.error_line.clone().unwrap_or_default();
    let meta_detail = input
        .run_meta
        .as_ref()
        .and_then(|m| m.detail.clone())
        .unwrap_or_else(|| line.clone());
    if input.empty_response_step
        && stop == StopReason::LlmApiError
        && is_empty_response_retryable(
            Some("llm_error"),
            &line,
            budgets.empty_response_retries,
            EMPTY_RESPONSE_MAX_RETRIES,
        )
    {
        budgets.empty_response_retries += 1;
        let attempt = budgets.empty_response_retries;
        return HeadlessPostStreamAction::EmptyResponseRetry {
            delay_ms: get_retry_delay_ms(DelayCategory::EmptyResponse, attempt, &line, None),
            attempt,
            nudge: attempt == EMPTY_RESPONSE_MAX_RETRIES,
        };
    }
    let vetoed = input.honour_retryable_false
        && input.run_meta.as_ref().and_then(|m| m.retryable) == Some(false);
    if stop == StopReason::LlmApiError && budgets.llm_budget_left() && !vetoed {
        budgets.llm_api_error_retries += 1;
        let attempt = budgets.llm_api_error_retries;
        return HeadlessPostStreamAction::Retry {
            delay_ms: get_transient_retry_delay_ms(attempt, &meta_detail, None),
            attempt,
        };
    }
    if is_invalid_tool_call_ids_error(&Value::String(line.clone())) {
        return HeadlessPostStreamAction::ApprovalResync;
    }
    if !is_non_retriable_stop(&stop)
        && budgets.llm_budget_left()
        && input.run_meta.as_ref().is_some_and(|m| {
            should_retry_post_stream_run_error(
                &stop,
                m.error_type.as_deref(),
                &meta_detail,
                m.retryable,
            )
        })
    {
        budgets.llm_api_error_retries += 1;
        let attempt = budgets.llm_api_error_retries;
        return HeadlessPostStreamAction::Retry {
            delay_ms: get_transient_retry_delay_ms(attempt, &meta_detail, None),
            attempt,
        };
    }
    HeadlessPostStreamAction::Fail
}

// ---------------------------------------------------------------------------------------------
// §3.11 stale approval recovery and otid refresh (§2.4)
// ---------------------------------------------------------------------------------------------

/// A pending approval the server reports (tool call id and, for display, the tool name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerApproval {
    pub tool_call_id: String,
    pub tool_name: String,
}

/// `buildFreshDenialApprovals(pending, reason)`: one denial per pending approval, in the
/// server's order (letta-protocol.md §3.11).
pub fn build_fresh_denial_approvals(pending: &[ServerApproval], reason: &str) -> Vec<ApprovalItem> {
    pending
        .iter()
        .map(|p| ApprovalItem::Approval {
            tool_call_id: p.tool_call_id.clone(),
            approve: false,
            reason: Some(reason.to_string()),
        })
        .collect()
}

/// Sets an item's otid (items without an otid field get one: the client gives every item a
/// fresh otid here).
pub fn with_otid(item: &MessageItem, otid: String) -> MessageItem {
    match item {
        MessageItem::Message(m) => {
            let mut m = m.clone();
            m.otid = Some(otid);
            MessageItem::Message(m)
        }
        MessageItem::Approval(a) => {
            let mut a = a.clone();
            a.otid = Some(otid);
            MessageItem::Approval(a)
        }
        MessageItem::Unknown(v) => {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                o.insert("otid".into(), Value::String(otid));
            }
            MessageItem::Unknown(v)
        }
    }
}

/// `rebuildInputWithFreshDenials(input, serverApprovals, reason)`: drop every `type:"approval"`
/// item, give every remaining item a fresh otid, and prepend one approval item with a denial per
/// server approval and a fresh otid (letta-protocol.md §3.11).
pub fn rebuild_input_with_fresh_denials(
    input: &[MessageItem],
    server_approvals: &[ServerApproval],
    reason: &str,
    fresh_otid: &mut dyn FnMut() -> String,
) -> Vec<MessageItem> {
    let remaining: Vec<MessageItem> = input
        .iter()
        .filter(|i| !matches!(i, MessageItem::Approval(_)))
        .map(|i| with_otid(i, fresh_otid()))
        .collect();
    if server_approvals.is_empty() {
        return remaining;
    }
    let mut out = vec![MessageItem::Approval(ApprovalCreate {
        kind: "approval".into(),
        approvals: build_fresh_denial_approvals(server_approvals, reason),
        otid: Some(fresh_otid()),
    })];
    out.extend(remaining);
    out
}

/// `refreshInputOtidsForNewRequest(items)`: a copy of each item with a fresh otid, order and
/// everything else unchanged (letta-protocol.md §3.11, §2.4).
pub fn refresh_input_otids_for_new_request(
    items: &[MessageItem],
    fresh_otid: &mut dyn FnMut() -> String,
) -> Vec<MessageItem> {
    items.iter().map(|i| with_otid(i, fresh_otid())).collect()
}

/// Strips approval items and refreshes otids: the TUI's fallback when the resume-data fetch of
/// approval-pending recovery fails (letta-protocol.md §3.4).
pub fn strip_approvals_and_refresh(
    items: &[MessageItem],
    fresh_otid: &mut dyn FnMut() -> String,
) -> Vec<MessageItem> {
    rebuild_input_with_fresh_denials(items, &[], "", fresh_otid)
}

/// The stream otid: the otid of the first item of the (normalised) messages array
/// (letta-protocol.md §2.4).
pub fn stream_otid(items: &[MessageItem]) -> Option<String> {
    items.first().and_then(|i| i.otid()).map(str::to_string)
}

/// The first string otid found in the input (letta-protocol.md §2.5, pre-stream busy resume).
pub fn first_otid(items: &[MessageItem]) -> Option<String> {
    items.iter().find_map(|i| i.otid()).map(str::to_string)
}

/// A request is an approval-only continuation when it holds exactly one item and that item is
/// an approval (letta-protocol.md §2.3).
pub fn is_approval_only(items: &[MessageItem]) -> bool {
    items.len() == 1 && matches!(items[0], MessageItem::Approval(_))
}

#[cfg(test)]
mod tests;
