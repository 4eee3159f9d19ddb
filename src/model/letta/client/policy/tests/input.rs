//! §A.3.1: the input of the next request (fresh otids, fresh denials) and what items hold.

use super::*;

fn user(text: &str, otid: &str) -> MessageItem {
    MessageItem::Message(MessageCreate {
        kind: Some("message".into()),
        role: "user".into(),
        content: Content::Text(text.into()),
        otid: Some(otid.into()),
    })
}

fn approval(ids: &[&str], otid: &str) -> MessageItem {
    MessageItem::Approval(ApprovalCreate {
        kind: "approval".into(),
        approvals: ids
            .iter()
            .map(|id| ApprovalItem::Approval {
                tool_call_id: id.to_string(),
                approve: false,
                reason: Some("old".into()),
            })
            .collect(),
        otid: Some(otid.into()),
    })
}

fn counter() -> impl FnMut() -> String {
    let mut n = 0;
    move || {
        n += 1;
        format!("fresh-{n}")
    }
}

fn server(ids: &[&str]) -> Vec<ServerApproval> {
    ids.iter()
        .map(|id| ServerApproval {
            tool_call_id: id.to_string(),
            tool_name: "Bash".into(),
        })
        .collect()
}

#[test]
fn a31_refresh_input_otids_for_new_request() {
    let input = vec![approval(&["a"], "o1"), user("hi", "o2")];
    let out = refresh_input_otids_for_new_request(&input, &mut counter());
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].otid(), Some("fresh-1"));
    assert_eq!(out[1].otid(), Some("fresh-2"));
    assert!(matches!(out[0], MessageItem::Approval(_)));
    assert!(matches!(out[1], MessageItem::Message(_)));
    // The input is untouched (new array, new objects).
    assert_eq!(input[0].otid(), Some("o1"));
}

#[test]
fn a31_rebuild_input_with_fresh_denials() {
    // [stale approval, user] + 1 server approval → [approval, message].
    let out = rebuild_input_with_fresh_denials(
        &[approval(&["old"], "o1"), user("hi", "o2")],
        &server(&["new-1"]),
        STALE_APPROVAL_RECOVERY_DENIAL_REASON,
        &mut counter(),
    );
    assert_eq!(out.len(), 2);
    let MessageItem::Approval(a) = &out[0] else {
        panic!()
    };
    assert_eq!(
        a.approvals,
        vec![ApprovalItem::Approval {
            tool_call_id: "new-1".into(),
            approve: false,
            reason: Some(STALE_APPROVAL_RECOVERY_DENIAL_REASON.into())
        }]
    );
    // Remaining items first get fresh otids, then the container.
    assert_eq!(out[1].otid(), Some("fresh-1"));
    assert_eq!(a.otid.as_deref(), Some("fresh-2"));
    // [approval(empty), user] + none → [message].
    let out = rebuild_input_with_fresh_denials(
        &[approval(&[], "o1"), user("hi", "o2")],
        &[],
        STALE_APPROVAL_RECOVERY_DENIAL_REASON,
        &mut counter(),
    );
    assert_eq!(out.len(), 1);
    assert!(matches!(out[0], MessageItem::Message(_)));
    // [user] + 1 → 2.
    let out =
        rebuild_input_with_fresh_denials(&[user("hi", "o2")], &server(&["x"]), "r", &mut counter());
    assert_eq!(out.len(), 2);
    // A.3.2: two stale items + two server approvals → one item with 2 denials in server order.
    let out = rebuild_input_with_fresh_denials(
        &[
            approval(&["s1"], "o1"),
            approval(&["s2"], "o3"),
            user("hi", "o2"),
        ],
        &server(&["new-1", "new-2"]),
        "r",
        &mut counter(),
    );
    assert_eq!(out.len(), 2);
    let MessageItem::Approval(a) = &out[0] else {
        panic!()
    };
    let ids: Vec<&str> = a.approvals.iter().map(ApprovalItem::tool_call_id).collect();
    assert_eq!(ids, vec!["new-1", "new-2"]);
}

#[test]
fn stream_otid_and_approval_only() {
    let items = vec![approval(&["a"], "o1"), user("hi", "o2")];
    assert_eq!(stream_otid(&items).as_deref(), Some("o1"));
    assert!(!is_approval_only(&items));
    assert!(is_approval_only(&items[..1]));
    let no_otid = MessageItem::Message(MessageCreate {
        kind: None,
        role: "user".into(),
        content: Content::Text(KEEP_GOING.into()),
        otid: None,
    });
    assert_eq!(stream_otid(&[no_otid.clone(), user("x", "o9")]), None);
    assert_eq!(
        first_otid(&[no_otid, user("x", "o9")]).as_deref(),
        Some("o9")
    );
    assert!(is_approval_pending_conflict(Some(APPROVAL_CONFLICT)));
    assert!(!is_approval_pending_conflict(Some(BUSY)));
    assert_eq!(
        approval_comment_text("Ship it"),
        "The user approved the tool execution with the following comment: \"Ship it\""
    );
}
