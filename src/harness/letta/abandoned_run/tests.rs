use super::*;
use crate::harness::letta::test_trace::{client, server, started};

const RUN: &str = "run-1";
const GAVE_UP: &str = "error: stop_reason=error (error reading a body from connection)";

fn send() -> TraceEvent {
    client(
        0,
        Observation::ClientSend {
            turn: 1,
            method: "POST".into(),
            path: "/v1/conversations/default/messages".into(),
            items: "message".into(),
            otids: vec![],
            response_state: false,
        },
    )
}

/// A run read the server answered and the client got: the server's answer, then the client's.
fn read(status: u16) -> [TraceEvent; 2] {
    let path = format!("/v1/runs/{RUN}");
    [
        server(
            0,
            Observation::ServerRequest {
                method: "GET".into(),
                path: path.clone(),
                status,
            },
        ),
        client(
            0,
            Observation::ClientResponse {
                method: "GET".into(),
                path,
                status,
                retry_after: None,
            },
        ),
    ]
}

fn ended() -> TraceEvent {
    server(
        0,
        Observation::RunEnded {
            run_id: RUN.into(),
            stop_reason: "error".into(),
        },
    )
}

fn cancel() -> TraceEvent {
    client(
        0,
        Observation::ClientRequest {
            method: "POST".into(),
            path: "/v1/agents/agent-1/messages/cancel".into(),
            retry: 0,
        },
    )
}

fn turn_end(outcome: &str) -> TraceEvent {
    client(
        0,
        Observation::TurnEnd {
            turn: 1,
            outcome: outcome.into(),
        },
    )
}

fn messages(parts: Vec<Vec<TraceEvent>>) -> Vec<String> {
    let trace: Vec<TraceEvent> = parts.into_iter().flatten().collect();
    abandoned_run_cancelled(&trace)
        .into_iter()
        .map(|v| v.message)
        .collect()
}

#[test]
fn a_headless_turn_given_up_with_its_run_read_active_cancels_it() {
    let faithful = messages(vec![
        vec![started("headless"), send()],
        read(200).into(),
        read(200).into(),
        vec![cancel(), turn_end(GAVE_UP)],
    ]);
    assert_eq!(faithful, Vec::<String>::new());

    let left = messages(vec![
        vec![started("headless"), send()],
        read(200).into(),
        vec![turn_end(GAVE_UP)],
    ]);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].contains("left run run-1 running") && left[0].contains("B.5.6"),
        "{left:?}"
    );
}

#[test]
fn only_a_headless_turn_given_up_on_a_stream_error_owes_a_cancel() {
    for (mode, outcome) in [
        ("interactive", GAVE_UP),
        ("headless", "error: stop_reason=llm_api_error (overloaded)"),
        (
            "headless",
            "error: Approval drain ended with stop reason: error",
        ),
        ("headless", "stopped: end_turn"),
    ] {
        let found = messages(vec![
            vec![started(mode), send()],
            read(200).into(),
            vec![turn_end(outcome)],
        ]);
        assert_eq!(found, Vec::<String>::new(), "{mode} {outcome}");
    }
}

#[test]
fn a_run_found_ended_or_a_read_that_failed_owes_nothing() {
    let ended_first = messages(vec![
        vec![started("headless"), send(), ended()],
        read(200).into(),
        vec![turn_end(GAVE_UP)],
    ]);
    assert_eq!(ended_first, Vec::<String>::new());

    // The meta read found it active; the decisive read got a 500.
    let failed = messages(vec![
        vec![started("headless"), send()],
        read(200).into(),
        read(500).into(),
        vec![turn_end(GAVE_UP)],
    ]);
    assert_eq!(failed, Vec::<String>::new());

    // The head said 200 and the body never came.
    let body_lost = messages(vec![
        vec![started("headless"), send()],
        read(200).into(),
        vec![
            client(
                0,
                Observation::ClientBodyFailed {
                    method: "GET".into(),
                    path: format!("/v1/runs/{RUN}"),
                    error: "Request timed out".into(),
                },
            ),
            turn_end(GAVE_UP),
        ],
    ]);
    assert_eq!(body_lost, Vec::<String>::new());
}

#[test]
fn answers_on_both_sides_of_the_runs_end_leave_what_the_client_read_unknown() {
    let [answer_before, _] = read(200);
    let found = messages(vec![
        vec![started("headless"), send(), answer_before, ended()],
        read(200).into(),
        vec![turn_end(GAVE_UP)],
    ]);
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn a_cancel_follows_only_a_read_that_found_the_run_active() {
    let after_end = messages(vec![
        vec![started("headless"), send(), ended()],
        read(200).into(),
        vec![cancel(), turn_end(GAVE_UP)],
    ]);
    assert_eq!(after_end.len(), 1, "{after_end:?}");
    assert!(after_end[0].contains("already ended"), "{after_end:?}");

    let unread = messages(vec![vec![
        started("headless"),
        send(),
        cancel(),
        turn_end(GAVE_UP),
    ]]);
    assert_eq!(unread.len(), 1, "{unread:?}");
    assert!(unread[0].contains("no read of a run"), "{unread:?}");
}

#[test]
fn only_the_run_read_and_the_agents_run_cancel_are_recognised() {
    assert_eq!(run_read("/v1/runs/run-1"), Some("run-1"));
    assert_eq!(run_read("/v1/runs/"), None);
    assert_eq!(run_read("/v1/runs/run-1/stream"), None);
    assert!(is_run_cancel("/v1/agents/agent-1/messages/cancel"));
    assert!(!is_run_cancel("/v1/conversations/conv-1/cancel"));
    assert!(!is_run_cancel("/v1/agents/agent-1/messages"));
    assert!(gave_up_on_stream_error("error: stop_reason=error"));
    assert!(!gave_up_on_stream_error(
        "error: stop_reason=error_max_steps"
    ));
}
