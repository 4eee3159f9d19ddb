//! The pre-stream actions of letta-protocol.md §3.4: `getPreStreamErrorAction`.

use serde_json::Value;

use super::classifiers::{is_approval_pending_error, is_conversation_busy_error};
use super::retry_decisions::should_retry_pre_stream_transient_error;

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
