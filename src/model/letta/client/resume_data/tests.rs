//! check-approval: the cases of letta-tests-and-real-client.md §A.6.1-A.6.3 against a scripted
//! backend.

use serde_json::json;

use super::*;
use crate::model::letta::client::backend::mock::MockBackend;
use crate::model::letta::client::stream::tests::on_sim;

fn approval_msg(id: &str, calls: Value) -> Value {
    json!({"id": id, "date": "2026-01-01T00:00:01+00:00", "message_type": "approval_request_message", "tool_calls": calls})
}

// ---- A.6.1 extractApprovals -----------------------------------------------------------------

#[test]
fn a61_extract_approvals() {
    let one = json!({"id": "test-msg-id", "tool_calls": [{"tool_call_id": "call-1", "name": "Bash", "arguments": "{}"}]});
    let a = extract_approvals(&one);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].tool_call_id, "call-1");
    assert_eq!(a[0].message_id.as_deref(), Some("test-msg-id"));

    let three = json!({"id": "m", "tool_calls": [
        {"tool_call_id": "a", "name": "Bash", "arguments": "{}"},
        {"tool_call_id": "b", "name": "web_search", "arguments": "{}"},
        {"tool_call_id": "c", "name": "Read", "arguments": "{}"}]});
    let names: Vec<String> = extract_approvals(&three)
        .into_iter()
        .map(|a| a.tool_name)
        .collect();
    assert_eq!(names, vec!["Bash", "web_search", "Read"]);

    let legacy = json!({"id": "m", "tool_call": {"tool_call_id": "call-legacy", "name": "Write", "arguments": "{}"}});
    assert_eq!(extract_approvals(&legacy)[0].tool_call_id, "call-legacy");

    let both = json!({"id": "m", "tool_call": {"tool_call_id": "call-old", "name": "Write"},
        "tool_calls": [{"tool_call_id": "call-new", "name": "Write"}]});
    let a = extract_approvals(&both);
    assert_eq!((a.len(), a[0].tool_call_id.as_str()), (1, "call-new"));

    let holes = json!({"id": "m", "tool_calls": [
        {"tool_call_id": "x", "name": "A"}, {"name": "B"}, {"tool_call_id": "", "name": "C"}, {"tool_call_id": "y", "name": "D"}]});
    assert_eq!(extract_approvals(&holes).len(), 2);

    assert!(extract_approvals(&json!({"id": "m"})).is_empty());
    let bare = extract_approvals(&json!({"id": "m", "tool_calls": [{"tool_call_id": "z"}]}));
    assert_eq!(
        (bare[0].tool_name.as_str(), bare[0].tool_args.as_str()),
        ("", "")
    );
    // A single-object tool_calls (the real server's token-streaming shape) counts.
    let single =
        json!({"id": "m", "tool_calls": {"tool_call_id": "s", "name": "Bash", "arguments": "{}"}});
    assert_eq!(extract_approvals(&single)[0].tool_call_id, "s");
}

// ---- A.6.2 getResumeDataFromBackend ---------------------------------------------------------

fn resume(
    mock: &MockBackend,
    conv: &str,
    history: bool,
) -> (Result<ResumeData, Value>, Vec<String>) {
    let m = mock.clone();
    let conv = conv.to_string();
    let r = on_sim(async move { get_resume_data(&m, "agent-1", &conv, history, type_rank).await });
    (r, mock.calls())
}

fn count(calls: &[String], prefix: &str) -> usize {
    calls.iter().filter(|c| c.starts_with(prefix)).count()
}

fn bash_pending(id: &str) -> Value {
    approval_msg(
        id,
        json!([{"tool_call_id": "tool-1", "name": "Bash", "arguments": "{}"}]),
    )
}

#[test]
fn a62_is_resumed_conversation() {
    assert!(is_resumed_conversation(None));
    assert!(!is_resumed_conversation(Some(
        &json!({"summary": null, "in_context_message_ids": []})
    )));
    assert!(is_resumed_conversation(Some(
        &json!({"summary": "x", "in_context_message_ids": []})
    )));
    assert!(is_resumed_conversation(Some(
        &json!({"in_context_message_ids": ["m"]})
    )));
}

#[test]
fn a62_history_off_named_conversation() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.conversation = Some(Ok(
            json!({"id": "conv-1", "in_context_message_ids": ["msg-last"]}),
        ));
        st.messages
            .push(("msg-last".into(), Ok(vec![bash_pending("msg-last")])));
    }
    let (r, calls) = resume(&mock, "conv-1", false);
    let r = r.unwrap();
    assert_eq!(count(&calls, "retrieve_conversation"), 1);
    assert_eq!(count(&calls, "retrieve_message msg-last"), 1);
    assert_eq!(count(&calls, "list_"), 0);
    assert_eq!(r.pending_approvals.len(), 1);
    assert_eq!(r.pending_approvals[0].tool_name, "Bash");
    assert!(r.message_history.is_empty());
    assert!(r.conversation.is_some());
}

#[test]
fn a62_history_off_default_conversation_prefers_in_context_ids() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.agent = Some(Ok(
            json!({"id": "agent-1", "in_context_message_ids": ["msg-live"], "message_ids": ["msg-stale"]}),
        ));
        st.messages
            .push(("msg-live".into(), Ok(vec![bash_pending("msg-live")])));
        st.messages.push(("msg-stale".into(), Ok(vec![])));
    }
    let (r, calls) = resume(&mock, "default", false);
    assert_eq!(count(&calls, "retrieve_message msg-live"), 1);
    assert_eq!(count(&calls, "retrieve_message msg-stale"), 0);
    assert_eq!(count(&calls, "list_"), 0);
    assert_eq!(r.unwrap().pending_approvals[0].tool_call_id, "tool-1");
}

#[test]
fn a62_default_conversation_falls_back_to_message_ids() {
    for history in [false, true] {
        let mock = MockBackend::default();
        {
            let mut st = mock.state.lock().unwrap();
            st.agent = Some(Ok(
                json!({"id": "agent-1", "message_ids": ["msg-pending-approval"]}),
            ));
            st.messages.push((
                "msg-pending-approval".into(),
                Ok(vec![bash_pending("msg-pending-approval")]),
            ));
        }
        let (r, calls) = resume(&mock, "default", history);
        assert_eq!(count(&calls, "retrieve_message msg-pending-approval"), 1);
        assert_eq!(count(&calls, "list_agent_messages"), usize::from(history));
        assert_eq!(r.unwrap().pending_approvals.len(), 1);
    }
}

/// The default conversation's tail is the agent's message list: a 404 or 422 there (the agent
/// is gone) is re-thrown like the conversation's own, any other failure gives empty data.
#[test]
fn a62_default_conversation_rethrows_a_404_of_the_agent_messages() {
    for (status, rethrown) in [(404, true), (422, true), (500, false)] {
        let mock = MockBackend::default();
        {
            let mut st = mock.state.lock().unwrap();
            st.agent = Some(Ok(json!({"id": "agent-1", "in_context_message_ids": []})));
            st.agent_messages = Some(Err(json!({"status": status, "message": "gone"})));
        }
        let (r, _) = resume(&mock, "default", false);
        match r {
            Err(_) => assert!(rethrown, "a {status} was re-thrown"),
            Ok(data) => {
                assert!(!rethrown, "a {status} gave data instead of the error");
                assert_eq!(data, ResumeData::default());
            }
        }
    }
}

#[test]
fn a62_default_conversation_with_empty_in_context_ids_lists_one_row() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.agent = Some(Ok(json!({"id": "agent-1", "in_context_message_ids": []})));
        st.agent_messages = Some(Ok(vec![bash_pending("msg-row")]));
    }
    let (r, calls) = resume(&mock, "default", false);
    assert_eq!(count(&calls, "retrieve_message"), 0);
    assert_eq!(
        calls
            .iter()
            .find(|c| c.starts_with("list_agent_messages"))
            .unwrap(),
        "list_agent_messages agent-1 conversation_id=default&limit=1&order=desc&include_return_message_types=user_message&include_return_message_types=assistant_message&include_return_message_types=reasoning_message&include_return_message_types=event_message&include_return_message_types=summary_message&include_return_message_types=approval_request_message&include_return_message_types=tool_return_message&include_return_message_types=approval_response_message"
    );
    assert_eq!(r.unwrap().pending_approvals[0].tool_call_id, "tool-1");
}

fn msg(id: &str, ty: &str, date: &str) -> Value {
    json!({"id": id, "message_type": ty, "date": date})
}

#[test]
fn a62_history_enabled_by_default_lists_50() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.conversation = Some(Ok(
            json!({"id": "conv-1", "in_context_message_ids": ["u1"]}),
        ));
        st.conversation_messages = Some(Ok(vec![
            msg("a1", "assistant_message", "2026-01-01T00:00:02Z"),
            msg("u1", "user_message", "2026-01-01T00:00:01Z"),
        ]));
    }
    let (r, calls) = resume(&mock, "conv-1", true);
    let r = r.unwrap();
    assert!(calls[0].contains("limit=50&order=desc"), "{calls:?}");
    assert!(r.pending_approvals.is_empty());
    assert_eq!(r.message_history.len(), 2);
    assert!(
        r.warnings.is_empty(),
        "an empty conversation gives no warning"
    );
}

#[test]
fn a62_stale_in_context_id_404s() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.conversation = Some(Ok(
            json!({"id": "conv-1", "in_context_message_ids": ["gone"]}),
        ));
        st.conversation_messages = Some(Ok(vec![msg(
            "ui-msg-earlier",
            "user_message",
            "2026-01-01T00:00:01Z",
        )]));
        // `gone` is not scripted: the mock answers 404.
    }
    let (r, _) = resume(&mock, "conv-1", true);
    let r = r.unwrap();
    assert!(r.pending_approvals.is_empty());
    assert_eq!(r.pending_approval(), None);
    assert_eq!(r.message_history[0]["id"], "ui-msg-earlier");
    // A 404 on the conversation itself is re-thrown.
    let mock = MockBackend::default();
    mock.state.lock().unwrap().conversation = Some(Err(json!({"status": 404, "message": "404"})));
    assert!(resume(&mock, "conv-x", true).0.is_err());
    // Any other failure gives empty data.
    let mock = MockBackend::default();
    mock.state.lock().unwrap().conversation = Some(Err(json!({"status": 500, "message": "500"})));
    assert_eq!(
        resume(&mock, "conv-x", true).0.unwrap(),
        ResumeData::default()
    );
}

#[test]
fn a62_full_scan_with_no_assistant_rows_warns() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.conversation = Some(Ok(json!({"id": "conv-1", "in_context_message_ids": []})));
        st.conversation_messages = Some(Ok((0..50)
            .map(|i| msg(&format!("u{i}"), "user_message", "2026-01-01T00:00:01Z"))
            .collect()));
    }
    let r = resume(&mock, "conv-1", true).0.unwrap();
    assert_eq!(
        r.warnings,
        vec!["Backfill scan found 0 assistant messages in last 50 messages".to_string()]
    );
    // One assistant row among the 50 is one found: no warning.
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.conversation = Some(Ok(json!({"id": "conv-1", "in_context_message_ids": []})));
        st.conversation_messages = Some(Ok((0..50)
            .map(|i| {
                let kind = if i == 0 {
                    "assistant_message"
                } else {
                    "user_message"
                };
                msg(&format!("m{i}"), kind, "2026-01-01T00:00:01Z")
            })
            .collect()));
    }
    let r = resume(&mock, "conv-1", true).0.unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn a62_tail_with_all_variants_or_partial_tail() {
    // The tail already holds every variant of the last in-context source message: no retrieve.
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.conversation = Some(Ok(
            json!({"id": "conv-1", "in_context_message_ids": ["msg-live"]}),
        ));
        st.conversation_messages = Some(Ok(vec![
            approval_msg(
                "msg-live:tool:tool-1:request",
                json!([{"tool_call_id": "tool-1", "name": "Bash"}]),
            ),
            msg("u0", "user_message", "2026-01-01T00:00:00Z"),
        ]));
    }
    let (r, calls) = resume(&mock, "conv-1", true);
    assert_eq!(count(&calls, "retrieve_message"), 0);
    assert_eq!(r.unwrap().pending_approvals[0].tool_call_id, "tool-1");

    // The tail starts inside the source message: verified by retrieving all its variants, which
    // hold the matching return.
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.conversation = Some(Ok(
            json!({"id": "conv-1", "in_context_message_ids": ["msg-live"]}),
        ));
        st.conversation_messages = Some(Ok(vec![approval_msg(
            "msg-live:tool:tool-1:request",
            json!([{"tool_call_id": "tool-1", "name": "Bash"}]),
        )]));
        st.messages.push(("msg-live".into(), Ok(vec![
            approval_msg("msg-live:tool:tool-1:request", json!([{"tool_call_id": "tool-1", "name": "Bash"}])),
            json!({"id": "msg-live:tool:tool-1:return", "message_type": "tool_return_message", "tool_call_id": "tool-1", "status": "success"}),
        ])));
    }
    let (r, calls) = resume(&mock, "conv-1", true);
    assert_eq!(count(&calls, "retrieve_message msg-live"), 1);
    assert!(r.unwrap().pending_approvals.is_empty());
}

#[test]
fn a62_ordering_and_completed_variants() {
    // Rows listed newest-first with equal timestamps come back user → approval_request →
    // tool_return → assistant.
    let t = "2026-01-01T00:00:05+00:00";
    let rows = vec![
        msg("a", "assistant_message", t),
        msg("r", "tool_return_message", t),
        msg("q", "approval_request_message", t),
        msg("u", "user_message", t),
    ];
    let ids: Vec<String> = dedupe_and_sort(&rows, type_rank)
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, vec!["u", "q", "r", "a"]);
    // Completed local approval variants are not pending.
    let v = vec![
        approval_msg(
            "ui-msg-1:tool:call-1:request",
            json!([{"tool_call_id": "call-1", "name": "Bash"}]),
        ),
        json!({"id": "ui-msg-1:tool:call-1:return", "message_type": "tool_return_message", "tool_call_id": "call-1"}),
    ];
    assert!(pending_from_variants(&v).is_empty());
    // Many variants under one source id: exactly one pending.
    let v = vec![
        approval_msg(
            "ui-msg-122:tool:call-old:request",
            json!([{"tool_call_id": "call-old", "name": "Bash"}]),
        ),
        json!({"id": "ui-msg-122:tool:call-old:return", "message_type": "tool_return_message", "tool_returns": [{"tool_call_id": "call-old"}]}),
        approval_msg(
            "ui-msg-122:tool:call-latest:request",
            json!([{"tool_call_id": "call-latest", "name": "ApplyPatch"}]),
        ),
    ];
    let p = pending_from_variants(&v);
    assert_eq!(p.len(), 1);
    assert_eq!(
        (p[0].tool_call_id.as_str(), p[0].tool_name.as_str()),
        ("call-latest", "ApplyPatch")
    );
    // approval_response_message completes too.
    let v = vec![
        approval_msg("m", json!([{"tool_call_id": "x", "name": "Bash"}])),
        json!({"id": "m2", "message_type": "approval_response_message", "approvals": [{"tool_call_id": "x"}]}),
    ];
    assert!(pending_from_variants(&v).is_empty());
    assert_eq!(source_id("ui-msg-122:tool:call-old:request"), "ui-msg-122");
    assert_eq!(source_id("m:assistant:0"), "m");
    assert_eq!(source_id("plain"), "plain");
    // Dedupe: otid first, else id + type; unparseable dates sort first.
    let rows = vec![
        json!({"id": "x", "otid": "o", "message_type": "user_message", "date": "2026-01-01T00:00:02Z"}),
        json!({"id": "y", "otid": "o", "message_type": "user_message", "date": "2026-01-01T00:00:03Z"}),
        json!({"id": "z", "message_type": "user_message", "date": "garbage"}),
        json!({"message_type": "user_message"}),
    ];
    let ids: Vec<String> = dedupe_and_sort(&rows, type_rank)
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, vec!["z", "x"]);
}

// ---- A.6.3 prepareMessageHistory ------------------------------------------------------------

#[test]
fn a63_prepare_message_history() {
    let types = [
        "user_message",
        "tool_call_message",
        "approval_request_message",
        "tool_return_message",
        "assistant_message",
        "reasoning_message",
        "approval_response_message",
        "event_message",
        "summary_message",
    ];
    let rows: Vec<Value> = types
        .iter()
        .enumerate()
        .map(|(i, t)| msg(&format!("m{i}"), t, "x"))
        .collect();
    assert_eq!(prepare_message_history(&rows).len(), 9);

    // 14 users with an approval/return pair after u12 and a final assistant → starts at u5.
    let mut rows: Vec<Value> = (1..=12)
        .map(|i| msg(&format!("u{i}"), "user_message", "x"))
        .collect();
    rows.push(msg("tool-12", "approval_request_message", "x"));
    rows.push(msg("return-12", "tool_return_message", "x"));
    rows.push(msg("u13", "user_message", "x"));
    rows.push(msg("a1", "assistant_message", "x"));
    let ids: Vec<String> = prepare_message_history(&rows)
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ids,
        vec![
            "u5",
            "u6",
            "u7",
            "u8",
            "u9",
            "u10",
            "u11",
            "u12",
            "tool-12",
            "return-12",
            "u13",
            "a1"
        ]
    );

    // Leading orphan tool returns are dropped.
    let rows = vec![
        msg("r1", "tool_return_message", "x"),
        msg("r2", "tool_return_message", "x"),
        msg("a", "assistant_message", "x"),
    ];
    let out = prepare_message_history(&rows);
    assert_eq!(out[0]["id"], "a");

    // The cap: at most 40 renderable messages.
    let rows: Vec<Value> = (0..60)
        .map(|i| {
            msg(
                &format!("t{i}"),
                if i % 2 == 0 {
                    "approval_request_message"
                } else {
                    "tool_return_message"
                },
                "x",
            )
        })
        .collect();
    assert_eq!(prepare_message_history(&rows).len(), 40);
    // Non-renderable types are dropped.
    assert!(prepare_message_history(&[msg("s", "system_message", "x")]).is_empty());
}
