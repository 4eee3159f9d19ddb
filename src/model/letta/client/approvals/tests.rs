//! Approval classification, resource keys and normalisation: the cases of
//! letta-tests-and-real-client.md §A.5 (proposed cases 1-3 and 5, A.5.1, A.5.3).

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
