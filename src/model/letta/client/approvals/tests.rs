//! Approval classification, resource keys, batch execution and normalisation: the cases of
//! letta-tests-and-real-client.md §A.5 (proposed cases 1-8, A.5.1, A.5.3).

use std::cell::RefCell;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::*;

fn ap(id: &str, name: &str, args: &str) -> Approval {
    Approval {
        tool_call_id: id.into(),
        tool_name: name.into(),
        tool_args: args.into(),
        message_id: Some("m1".into()),
    }
}

// ---- A.5 cases 1-3, 5: resource keys -----------------------------------------------------------

#[test]
fn a5_resource_keys() {
    for t in GLOBAL_LOCK_TOOLS {
        assert_eq!(
            resource_key(t, "{}", "/w").as_deref(),
            Some(GLOBAL_KEY),
            "{t}"
        );
    }
    for t in FILE_PATH_TOOLS {
        assert_eq!(
            resource_key(t, r#"{"file_path":"a/../b/./c.txt"}"#, "/w").as_deref(),
            Some("/w/b/c.txt"),
            "{t}"
        );
        assert_eq!(
            resource_key(t, r#"{"file_path":"/x//y/../z"}"#, "/w").as_deref(),
            Some("/x/z"),
            "{t}"
        );
        assert_eq!(resource_key(t, r#"{}"#, "/w").as_deref(), Some(GLOBAL_KEY));
        assert_eq!(
            resource_key(t, r#"{"file_path":3}"#, "/w").as_deref(),
            Some(GLOBAL_KEY)
        );
        // Case 5: unparseable args → __global__.
        assert_eq!(
            resource_key(t, r#"{"file_path":"/a"#, "/w").as_deref(),
            Some(GLOBAL_KEY)
        );
    }
    for t in PARALLEL_SAFE_TOOLS {
        assert_eq!(resource_key(t, r#"{"file_path":"/a"}"#, "/w"), None, "{t}");
    }
    assert_eq!(
        resource_key("SomeMcpTool", "{}", "/w").as_deref(),
        Some(GLOBAL_KEY)
    );
    assert_eq!(parse_args("{\"comm"), json!({}));
    assert_eq!(parse_args(""), json!({}));
    assert_eq!(parse_args("[1]"), json!({}));
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

// ---- A.5.1 normalisation ---------------------------------------------------------------------

fn tool(id: &str, ret: Option<Content>, reason: Option<&str>) -> ApprovalResult {
    ApprovalResult::Tool {
        tool_call_id: id.into(),
        tool_return: ret,
        status: "success".into(),
        stdout: None,
        stderr: None,
        reason: reason.map(str::to_string),
    }
}

#[test]
fn a51_normalize_approval_results() {
    let legacy = |ret: Option<&str>| ApprovalResult::Approval {
        tool_call_id: "c".into(),
        approve: true,
        reason: None,
        tool_return: ret.map(|t| Content::Text(t.into())),
        status: None,
    };
    assert_eq!(
        normalize_approval_results(&[legacy(Some("legacy result"))], &[], false),
        vec![ApprovalItem::Tool {
            tool_call_id: "c".into(),
            tool_return: Content::Text("legacy result".into()),
            status: "success".into(),
            stdout: None,
            stderr: None
        }]
    );
    assert!(
        matches!(&normalize_approval_results(&[legacy(None)], &[], false)[0],
        ApprovalItem::Tool { tool_return: Content::Text(t), status, .. } if t.is_empty() && status == "success")
    );
    // Interrupted ids forced to error; others untouched.
    let out = normalize_approval_results(
        &[
            tool("call-1", Some(Content::Text("x".into())), None),
            tool("call-2", Some(Content::Text("y".into())), None),
        ],
        &["call-1".into()],
        false,
    );
    assert!(matches!(&out[0], ApprovalItem::Tool { status, .. } if status == "error"));
    assert!(matches!(&out[1], ApprovalItem::Tool { status, .. } if status == "success"));
    // Legacy text fallback.
    let t = tool("c", Some(Content::Text(INTERRUPTED_BY_USER.into())), None);
    assert!(
        matches!(&normalize_approval_results(std::slice::from_ref(&t), &[], true)[0], ApprovalItem::Tool { status, .. } if status == "error")
    );
    assert!(
        matches!(&normalize_approval_results(&[t], &[], false)[0], ApprovalItem::Tool { status, .. } if status == "success")
    );
    // Approval comment on a string return.
    let out = normalize_approval_results(
        &[tool(
            "c",
            Some(Content::Text("bash output".into())),
            Some("Ship it"),
        )],
        &[],
        false,
    );
    let ApprovalItem::Tool { tool_return, .. } = &out[0] else {
        panic!()
    };
    assert_eq!(
        *tool_return,
        Content::Parts(vec![
            json!({"type":"text","text":"The user approved the tool execution with the following comment: \"Ship it\""}),
            json!({"type":"text","text":"bash output"}),
        ])
    );
    // On a structured return the comment is prepended; image parts are kept.
    let img =
        json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}});
    let out = normalize_approval_results(
        &[tool(
            "c",
            Some(Content::Parts(vec![img.clone()])),
            Some("ok"),
        )],
        &[],
        false,
    );
    let ApprovalItem::Tool {
        tool_return: Content::Parts(p),
        ..
    } = &out[0]
    else {
        panic!()
    };
    assert_eq!(p.len(), 2);
    assert_eq!(p[1], img);
    // On a null return only the comment remains; a blank comment changes nothing.
    let out = normalize_approval_results(&[tool("c", None, Some("ok"))], &[], false);
    assert!(
        matches!(&out[0], ApprovalItem::Tool { tool_return: Content::Parts(p), .. } if p.len() == 1)
    );
    let out = normalize_approval_results(
        &[tool(
            "c",
            Some(Content::Parts(vec![img.clone()])),
            Some("  "),
        )],
        &[],
        false,
    );
    assert!(
        matches!(&out[0], ApprovalItem::Tool { tool_return: Content::Parts(p), .. } if p == &vec![img.clone()])
    );
    // Denials pass through.
    assert_eq!(
        normalize_approval_results(&[ApprovalResult::denial("d", "why")], &[], false),
        vec![ApprovalItem::Approval {
            tool_call_id: "d".into(),
            approve: false,
            reason: Some("why".into())
        }]
    );
}

// ---- A.5.3 classifyApprovals ---------------------------------------------------------------

fn opts_with_bash_schema() -> ClassifyOptions {
    let mut o = ClassifyOptions {
        require_args_for_auto_approve: true,
        ..Default::default()
    };
    o.required_args
        .insert("Bash".into(), vec!["command".into(), "description".into()]);
    o.required_args
        .insert("exec_command".into(), vec!["cmd".into()]);
    o
}

fn unrestricted() -> PermissionRules {
    PermissionRules {
        rules: vec![],
        default: Permission::Allow,
    }
}

#[test]
fn a53_missing_required_args() {
    let mut o = opts_with_bash_schema();
    o.required_args
        .insert("Bash".into(), vec!["command".into()]);
    let c = classify_approvals(
        &[ap("t", "Bash", r#"{"description":"d"}"#)],
        &unrestricted(),
        &o,
    );
    assert_eq!(c.auto_denied.len(), 1);
    assert_eq!(
        c.auto_denied[0].missing_required_args,
        Some(vec!["command".to_string()])
    );
    assert_eq!(
        c.auto_denied[0].deny_reason.as_deref(),
        Some("Bash tool missing required parameter: command. Received parameters: description")
    );

    let o = opts_with_bash_schema();
    let c = classify_approvals(&[ap("t", "Bash", "{}")], &unrestricted(), &o);
    let e = &c.auto_denied[0];
    assert_eq!(
        e.missing_required_args,
        Some(vec!["command".to_string(), "description".to_string()])
    );
    let r = e.deny_reason.as_deref().unwrap();
    assert!(r.contains("arrived with empty arguments"), "{r}");
    assert!(r.contains("Do not resend an identical call"), "{r}");

    let c = classify_approvals(
        &[ap("t", "Bash", r#"{"command":"echo hello"#)],
        &unrestricted(),
        &o,
    );
    let e = &c.auto_denied[0];
    assert_eq!(e.parsed_args, json!({}));
    let r = e.deny_reason.as_deref().unwrap();
    assert!(
        r.contains("The raw arguments (22 chars) were not valid JSON"),
        "{r}"
    );
    assert!(r.contains("Do not resend an identical call"), "{r}");

    let c = classify_approvals(
        &[ap("t", "exec_command", r#"{"description":"d"}"#)],
        &unrestricted(),
        &o,
    );
    assert_eq!(
        c.auto_denied[0].deny_reason.as_deref(),
        Some("exec_command tool missing required parameter: cmd. Received parameters: description")
    );
}

#[test]
fn a53_always_ask_and_treat_ask_as_deny() {
    let rules = PermissionRules {
        rules: vec![("Bash(git push:*)".into(), Permission::AlwaysAsk)],
        default: Permission::Allow,
    };
    let push = ap(
        "t",
        "Bash",
        r#"{"command":"git push origin main","description":"d"}"#,
    );
    let c = classify_approvals(
        std::slice::from_ref(&push),
        &rules,
        &opts_with_bash_schema(),
    );
    assert_eq!(c.needs_user_input.len(), 1);
    assert_eq!(
        c.needs_user_input[0].permission,
        Some(PermissionResult {
            decision: Permission::AlwaysAsk,
            matched_rule: Some("Bash(git push:*)".into()),
            reason: "Matched alwaysAsk rule".into()
        })
    );
    let mut o = opts_with_bash_schema();
    o.treat_ask_as_deny = true;
    let c = classify_approvals(std::slice::from_ref(&push), &rules, &o);
    assert_eq!(
        c.auto_denied[0].deny_reason.as_deref(),
        Some("Tool requires approval (headless mode)")
    );
    // Other Bash commands stay auto-allowed in unrestricted mode.
    let c = classify_approvals(
        &[ap("u", "Bash", r#"{"command":"ls","description":"d"}"#)],
        &rules,
        &opts_with_bash_schema(),
    );
    assert_eq!(c.auto_allowed.len(), 1);
}

#[test]
fn a53_explicit_deny_overrides_always_ask_and_order_is_kept() {
    let rules = PermissionRules {
        rules: vec![
            ("Write".into(), Permission::Deny),
            ("Write".into(), Permission::AlwaysAsk),
            ("Read".into(), Permission::Allow),
        ],
        default: Permission::Ask,
    };
    let c = classify_approvals(
        &[
            ap("1", "Read", "{}"),
            ap("2", "Write", "{}"),
            ap("3", "", "{}"),
            ap("4", "Edit", "{}"),
            ap("5", "Read", "{}"),
            ap("6", "AskUserQuestion", "{}"),
        ],
        &PermissionRules {
            rules: [
                rules.rules.clone(),
                vec![("AskUserQuestion".into(), Permission::Allow)],
            ]
            .concat(),
            ..rules
        },
        &ClassifyOptions::default(),
    );
    let ids = |v: &Vec<Classified>| {
        v.iter()
            .map(|c| c.approval.tool_call_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&c.auto_allowed), vec!["1", "5"]);
    assert_eq!(ids(&c.auto_denied), vec!["2", "3"]);
    // alwaysRequiresUserInput upgrades allow to ask.
    assert_eq!(ids(&c.needs_user_input), vec!["4", "6"]);
    assert_eq!(
        c.auto_denied[1].deny_reason.as_deref(),
        Some("Tool call incomplete - missing name")
    );
}

#[test]
fn human_answers_in_order_last_repeats() {
    let mut h = Human {
        answers: vec![HumanAnswer::Deny("no".into()), HumanAnswer::Approve],
        next: 0,
    };
    assert_eq!(h.answer(), HumanAnswer::Deny("no".into()));
    assert_eq!(h.answer(), HumanAnswer::Approve);
    assert_eq!(h.answer(), HumanAnswer::Approve);
    assert_eq!(Human::default().answer(), HumanAnswer::Never);
    assert!(pattern_matches("*", "X", &json!({})));
    assert!(pattern_matches("Bash*", "BashOutput", &json!({})));
    assert!(!pattern_matches(
        "Bash(ls)",
        "Bash",
        &json!({"command":"ls -l"})
    ));
    assert!(pattern_matches(
        "Bash(ls)",
        "Bash",
        &json!({"command":"ls"})
    ));
}
