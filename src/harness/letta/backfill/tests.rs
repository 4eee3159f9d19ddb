use super::*;

/// The tail read's type parameters, in §6.1's order.
const TYPES: &str = "include_return_message_types=user_message&include_return_message_types=assistant_message&include_return_message_types=reasoning_message&include_return_message_types=event_message&include_return_message_types=summary_message&include_return_message_types=approval_request_message&include_return_message_types=tool_return_message&include_return_message_types=approval_response_message";

fn ev(host: &str, obs: Observation) -> TraceEvent {
    TraceEvent {
        t_ms: 0,
        host: host.into(),
        obs,
    }
}

fn listing(route: &str, query: &str) -> TraceEvent {
    ev(
        "client",
        Observation::ClientRequest {
            method: "GET".into(),
            path: format!("{route}?{query}"),
            retry: 0,
        },
    )
}

fn backfilled(listed: &[&str], shown: &[u32]) -> TraceEvent {
    ev(
        "client",
        Observation::ClientBackfill {
            conversation_id: "conv-1".into(),
            listed: listed.iter().map(|l| l.to_string()).collect(),
            shown: shown.to_vec(),
        },
    )
}

fn messages(trace: &[TraceEvent]) -> Vec<String> {
    backfill_faithful(trace)
        .into_iter()
        .map(|v| v.message)
        .collect()
}

#[test]
fn the_published_clis_captured_tail_read_passes() {
    // captures/letta_e2e d_pending_approval_stale_recovery, byte for byte.
    let query = format!("limit=50&order=desc&{TYPES}");
    let path = "/v1/conversations/conv-b55cddff-9bee-4b95-ab5c-9b587d7370ca/messages";
    assert_eq!(messages(&[listing(path, &query)]), Vec::<String>::new());
}

#[test]
fn the_agents_listing_names_the_default_conversation_and_may_ask_for_one() {
    let path = "/v1/agents/agent-1/messages";
    for limit in ["50", "1"] {
        let query = format!("conversation_id=default&limit={limit}&order=desc&{TYPES}");
        assert_eq!(messages(&[listing(path, &query)]), Vec::<String>::new());
    }
    // Without the conversation it lists every conversation of the agent.
    let found = messages(&[listing(path, &format!("limit=50&order=desc&{TYPES}"))]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("conversation_id=default"), "{}", found[0]);
}

#[test]
fn a_listing_off_the_tail_reads_query_fails_and_names_both() {
    let path = "/v1/conversations/conv-1/messages";
    for query in [
        "=xyzzy".to_string(),
        format!("limit=1&order=desc&{TYPES}"),
        format!("limit=50&order=asc&{TYPES}"),
        "limit=50&order=desc&include_return_message_types=user_message".to_string(),
        format!("limit=50&order=desc&{TYPES}&include_return_message_types=tool_call_message"),
    ] {
        let found = messages(&[listing(path, &query)]);
        assert_eq!(found.len(), 1, "{query}: {found:?}");
        assert!(
            found[0].contains("the tail read's is") && found[0].contains("§6.1"),
            "{}",
            found[0]
        );
    }
    // A listing with no query at all is not the tail read either.
    let bare = ev(
        "client",
        Observation::ClientRequest {
            method: "GET".into(),
            path: path.into(),
            retry: 0,
        },
    );
    assert_eq!(messages(&[bare]).len(), 1);
    // Parameters of different names may come in any order; one name's values may not.
    let reordered = format!("order=desc&{TYPES}&limit=50");
    assert_eq!(messages(&[listing(path, &reordered)]), Vec::<String>::new());
    let swapped =
        TYPES
            .replacen("user_message", "xx", 1)
            .replacen("assistant_message", "user_message", 1);
    let swapped = swapped.replacen("xx", "assistant_message", 1);
    assert_eq!(
        messages(&[listing(path, &format!("limit=50&order=desc&{swapped}"))]).len(),
        1
    );
}

/// A turn dated to the second, listed newest first: the user message and the approval
/// request answering it share a date.
const TURN: [&str; 4] = [
    "message-3 approval_request_message 2026-12-07T10:00:01+00:00 -",
    "message-2 assistant_message 2026-12-07T10:00:01+00:00 -",
    "message-1 user_message 2026-12-07T10:00:01+00:00 otid-1",
    "message-0 user_message 2026-12-07T10:00:00+00:00 otid-0",
];

#[test]
fn ties_of_one_date_are_broken_by_type_rank() {
    // user, approval request (rank 2), assistant (rank 4).
    assert_eq!(
        messages(&[backfilled(&TURN, &[3, 2, 0, 1])]),
        Vec::<String>::new()
    );
    let found = messages(&[backfilled(&TURN, &[3, 0, 1, 2])]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("shows [user_message message-0, approval_request_message message-3, assistant_message message-2, user_message message-1]")
            && found[0].contains("as [user_message message-0, user_message message-1, approval_request_message message-3, assistant_message message-2]"),
        "{}",
        found[0]
    );
}

#[test]
fn dedupe_keeps_the_first_of_an_otid_and_of_an_id_and_type() {
    let listed = [
        "message-2 user_message 2026-12-07T10:00:02+00:00 otid-1",
        "message-1 user_message 2026-12-07T10:00:01+00:00 otid-1",
        "message-0 assistant_message 2026-12-07T10:00:00+00:00 -",
        "message-0 assistant_message 2026-12-07T10:00:00+00:00 -",
        "- user_message 2026-12-07T10:00:00+00:00 otid-9",
    ];
    assert_eq!(
        messages(&[backfilled(&listed, &[2, 0])]),
        Vec::<String>::new()
    );
    assert_eq!(messages(&[backfilled(&listed, &[2, 1])]).len(), 1);
}

#[test]
fn unparseable_dates_sort_first_and_unrenderable_types_are_left_out() {
    let listed = [
        "message-1 user_message 2026-12-07T10:00:01+00:00 -",
        "message-0 system_message 2026-12-07T10:00:00+00:00 -",
        "message-9 assistant_message yesterday -",
    ];
    assert_eq!(
        messages(&[backfilled(&listed, &[2, 0])]),
        Vec::<String>::new()
    );
}

#[test]
fn the_window_starts_at_the_tenth_primary_keeps_forty_and_drops_leading_orphans() {
    // Twelve user messages, one a second, each followed by a tool return: the window starts
    // at the tenth user message from the end.
    let mut listed: Vec<String> = Vec::new();
    for k in 0..12 {
        listed.push(format!(
            "message-u{k} user_message 2026-12-07T10:00:{k:02}+00:00 -"
        ));
        listed.push(format!(
            "message-t{k} tool_return_message 2026-12-07T10:00:{k:02}+00:00 -"
        ));
    }
    let refs: Vec<&str> = listed.iter().map(String::as_str).collect();
    let expected: Vec<u32> = (4..24).collect();
    assert_eq!(
        messages(&[backfilled(&refs, &expected)]),
        Vec::<String>::new()
    );

    // Forty-five tool returns after one user message: the window keeps the last forty, all
    // tool returns, so every one of them leads and is dropped as an orphan.
    let mut listed = vec!["message-u user_message 2026-12-07T10:00:00+00:00 -".to_string()];
    for k in 0..45 {
        listed.push(format!(
            "message-t{k} tool_return_message 2026-12-07T10:01:{k:02}+00:00 -"
        ));
    }
    let refs: Vec<&str> = listed.iter().map(String::as_str).collect();
    assert_eq!(messages(&[backfilled(&refs, &[])]), Vec::<String>::new());
    assert_eq!(messages(&[backfilled(&refs, &[0])]).len(), 1);
}

#[test]
fn only_the_clients_listings_are_judged() {
    let other = |obs| ev("client", obs);
    let trace = [
        other(Observation::ClientRequest {
            method: "GET".into(),
            path: "/v1/messages/message-1".into(),
            retry: 0,
        }),
        other(Observation::ClientRequest {
            method: "POST".into(),
            path: "/v1/conversations/conv-1/messages".into(),
            retry: 0,
        }),
        ev(
            "probe",
            Observation::ProbeRequest {
                n: 1,
                method: "GET".into(),
                path: "/v1/conversations/conv-nope/messages".into(),
                approvals: Vec::new(),
            },
        ),
    ];
    assert_eq!(messages(&trace), Vec::<String>::new());
    assert!(is_listing("/v1/agents/agent-1/messages"));
    assert!(is_listing("/v1/conversations/default/messages/"));
    assert!(!is_listing("/v1/conversations/conv-1/messages/stream"));
    assert!(!is_listing("/v1/messages/message-1"));
}
