//! Stale approval recovery and otid refresh (letta-protocol.md §3.11, §2.4): the input of the
//! next request, and what a request's items hold.

use serde_json::Value;

use crate::wire::letta::{ApprovalCreate, ApprovalItem, MessageItem};

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

/// Every item is a user message (what an interrupt recovery resends, letta-protocol.md §9.1).
pub fn is_user_only(items: &[MessageItem]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|i| matches!(i, MessageItem::Message(m) if m.role == "user"))
}

/// Some item is an approval container.
pub fn has_approval(items: &[MessageItem]) -> bool {
    items.iter().any(|i| matches!(i, MessageItem::Approval(_)))
}
