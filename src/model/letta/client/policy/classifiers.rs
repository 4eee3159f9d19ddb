//! The classifiers of letta-protocol.md §3.2: case-insensitive substring tests on the detail
//! string (approval pending, conversation busy, invalid tool call ids, empty response, the
//! display-busy patterns).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

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

/// `CONVERSATION_BUSY_RUN_ID_PATTERN` of the published client (Letta Code 0.32.18),
/// `/\brun_id=([A-Za-z0-9_-]+)/i`: the key in any case, the id as written.
static BUSY_RUN_ID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)run_id=((?-i:[A-Za-z0-9_-])+)").expect("the pattern compiles")
});

/// `extractConversationBusyRunId`: the first `run_id=<id>` after a word boundary, only for a
/// busy error (letta-protocol.md §3.2).
pub fn extract_conversation_busy_run_id(detail: &str) -> Option<String> {
    if !is_conversation_busy_error(&Value::String(detail.to_string())) {
        return None;
    }
    Some(BUSY_RUN_ID.captures(detail)?.get(1)?.as_str().to_owned())
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
