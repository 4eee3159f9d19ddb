//! Batch execution: the cases of letta-tests-and-real-client.md §A.5 (proposed cases 4, 6, 7,
//! 8).

use std::cell::RefCell;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::*;
use crate::model::letta::client::approvals::Origin;

fn ap(id: &str, name: &str, args: &str) -> Approval {
    Approval {
        tool_call_id: id.into(),
        tool_name: name.into(),
        tool_args: args.into(),
        message_id: Some("m1".into()),
    }
}

// ---- A.5 cases 4, 6, 7, 8: batch execution -----------------------------------------------------

/// A future that is pending `n` times before it completes: a tool that takes `n` polls.
struct Polls(u32);
impl Future for Polls {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            Poll::Ready(())
        } else {
            self.0 -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

fn approve(a: Approval) -> Decision {
    Decision::Approve {
        approval: a,
        comment: None,
        origin: Origin::Policy,
    }
}

fn deny(a: Approval, r: &str) -> Decision {
    Decision::Deny {
        approval: a,
        reason: r.into(),
        origin: Origin::Policy,
    }
}

/// Runs a batch whose tools take `polls(name)` polls each; returns results and the event log
/// (`start:id` / `end:id`, in the order they happened).
fn run_batch(
    decisions: &[Decision],
    scheme: LockScheme,
    polls: &dyn Fn(&str) -> u32,
    aborted: bool,
) -> (Vec<ApprovalResult>, Vec<String>) {
    let log = RefCell::new(Vec::new());
    let results = futures::executor::block_on(execute_approval_batch(
        decisions,
        "/w",
        scheme,
        &|| aborted,
        |_, a: Approval| {
            let log = &log;
            let n = polls(&a.tool_call_id);
            async move {
                log.borrow_mut().push(format!("start:{}", a.tool_call_id));
                Polls(n).await;
                log.borrow_mut().push(format!("end:{}", a.tool_call_id));
                if a.tool_name == "Boom" {
                    return ToolRun::Failed("kaboom".into());
                }
                if a.tool_name == "Abortable" {
                    return ToolRun::Aborted;
                }
                ToolRun::Done {
                    tool_return: Content::Text(format!("ran {}", a.tool_call_id)),
                    status: "success".into(),
                    stdout: Some(vec!["out".into()]),
                    stderr: None,
                }
            }
        },
    ));
    (results, log.into_inner())
}

fn overlaps(log: &[String], a: &str, b: &str) -> bool {
    let pos = |e: &str| log.iter().position(|x| x == e).unwrap();
    let (sa, ea, sb, eb) = (
        pos(&format!("start:{a}")),
        pos(&format!("end:{a}")),
        pos(&format!("start:{b}")),
        pos(&format!("end:{b}")),
    );
    sa < eb && sb < ea
}

#[test]
fn a5_results_in_decision_order_whatever_the_completion_order() {
    let d = vec![
        approve(ap("slow", "Read", r#"{"file_path":"/a"}"#)),
        deny(ap("no", "Write", r#"{"file_path":"/b"}"#), "not now"),
        approve(ap("fast", "Grep", "{}")),
    ];
    let (r, log) = run_batch(
        &d,
        LockScheme::PerKey,
        &|id| if id == "slow" { 5 } else { 0 },
        false,
    );
    let ids: Vec<&str> = r.iter().map(ApprovalResult::tool_call_id).collect();
    assert_eq!(ids, vec!["slow", "no", "fast"]);
    // fast finished first, yet results keep decision order; parallel-safe tools overlap.
    assert!(log.iter().position(|e| e == "end:fast") < log.iter().position(|e| e == "end:slow"));
    assert!(overlaps(&log, "slow", "fast"));
    // Case 8: a denial is {type:"approval", approve:false, reason}.
    assert_eq!(r[1], ApprovalResult::denial("no", "not now"));
    // Case 7: an approved result carries the tool's return, status and stdout.
    assert_eq!(
        r[0],
        ApprovalResult::Tool {
            tool_call_id: "slow".into(),
            tool_return: Some(Content::Text("ran slow".into())),
            status: "success".into(),
            stdout: Some(vec!["out".into()]),
            stderr: None,
            reason: None
        }
    );
}

#[test]
fn a5_same_key_serialises_different_keys_run_concurrently() {
    let d = vec![
        approve(ap("w1", "Write", r#"{"file_path":"/a"}"#)),
        approve(ap("w2", "Edit", r#"{"file_path":"a"}"#)), // resolves to /w/a, not /a
        approve(ap("w3", "Write", r#"{"file_path":"/a"}"#)),
        approve(ap("b1", "Bash", r#"{"command":"ls"}"#)),
        approve(ap("b2", "Bash", r#"{"command":"ls"}"#)),
    ];
    let (_, log) = run_batch(&d, LockScheme::PerKey, &|_| 3, false);
    assert!(!overlaps(&log, "w1", "w3"), "{log:?}");
    assert!(!overlaps(&log, "b1", "b2"), "{log:?}");
    // Original order inside a queue.
    assert!(
        log.iter().position(|e| e == "end:w1").unwrap()
            < log.iter().position(|e| e == "start:w3").unwrap()
    );
    assert!(overlaps(&log, "w1", "w2"), "different files run together");
    // The published client: __global__ does not serialise with per-file tools (§10.3 item 5).
    assert!(overlaps(&log, "b1", "w1"), "{log:?}");

    // The reference: a global tool serialises with every non-parallel-safe tool.
    let (_, log) = run_batch(&d, LockScheme::GlobalExclusive, &|_| 3, false);
    for (a, b) in [("b1", "w1"), ("b1", "w2"), ("b2", "w3"), ("w1", "w2")] {
        assert!(!overlaps(&log, a, b), "{a} {b} {log:?}");
    }
    let b = bucket_decisions(&d, "/w", LockScheme::PerKey);
    assert_eq!(
        b.queues.keys().cloned().collect::<Vec<_>>(),
        vec!["/a".to_string(), "/w/a".into(), GLOBAL_KEY.into()]
    );
}

/// The planted defect runs every approved tool at once: two on one file overlap too, which the
/// published client's per-key queues would serialise (so `lock-safety` fails for the defect
/// itself, not only for the global-tool ordering the profiles differ on).
#[test]
fn the_unlocked_scheme_queues_nothing() {
    let d = vec![
        approve(ap("w1", "Write", r#"{"file_path":"/w/a"}"#)),
        approve(ap("w2", "Write", r#"{"file_path":"/w/a"}"#)),
        approve(ap("b1", "Bash", "{}")),
    ];
    let b = bucket_decisions(&d, "/w", LockScheme::Unlocked);
    assert_eq!(b.parallel, [0, 1, 2]);
    assert!(b.queues.is_empty(), "{:?}", b.queues);
    let (_, log) = run_batch(&d, LockScheme::Unlocked, &|_| 3, false);
    assert!(overlaps(&log, "w1", "w2"), "{log:?}");
}

#[test]
fn a5_abort_failures_and_unparseable_args() {
    let d = vec![
        approve(ap("x", "Bash", "{}")),
        deny(ap("y", "Bash", "{}"), "r"),
    ];
    // Case 6: an already-aborted signal gives "Interrupted by user" without executing.
    let (r, log) = run_batch(&d, LockScheme::PerKey, &|_| 0, true);
    assert!(log.is_empty());
    assert_eq!(r[0], ApprovalResult::interrupted("x"));
    assert_eq!(r[1], ApprovalResult::denial("y", "r"));
    // Case 7: AbortError → Interrupted by user; other throw → Error executing tool.
    let d = vec![
        approve(ap("a", "Abortable", "{}")),
        approve(ap("b", "Boom", "not json")),
    ];
    let (r, _) = run_batch(&d, LockScheme::PerKey, &|_| 0, false);
    assert_eq!(r[0], ApprovalResult::interrupted("a"));
    assert!(
        matches!(&r[1], ApprovalResult::Tool { tool_return: Some(Content::Text(t)), status, .. }
        if t == "Error executing tool: kaboom" && status == "error")
    );
}
