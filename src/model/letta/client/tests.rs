//! The turn loop against a scripted backend: response-state reuse (letta-protocol.md §10.1),
//! malformed chunks, unknown chunk types, non-JSON error bodies and invalid tool call ids take
//! the reference's path, and the client never panics or waits without a bound.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use crate::model::port::clock::Clock;
use crate::model::port::spawn::Spawner;
use serde_json::{Value, json};

use super::backend::mock::{MockBackend, StreamAnswer};
use super::response_state::header_value;
use super::sdk_stream::{ScriptEnd, SdkEvent, Thrown, ThrownKind};
use super::stream::tests::on_sim;
use super::*;
use crate::wire::letta::LettaChunk;

fn c(json: &str) -> SdkEvent {
    SdkEvent::Chunk(Box::new(LettaChunk::from_json(json).unwrap()))
}

fn ok(events: Vec<SdkEvent>) -> StreamAnswer {
    Ok((events.into_iter().map(|e| (0, e)).collect(), ScriptEnd::Eof))
}

const APPROVAL: &str = r#"{"id":"m1","message_type":"approval_request_message","run_id":"run-1","seq_id":2,"tool_call":{"name":"Read","arguments":"{\"file_path\":\"/a\"}","tool_call_id":"t1"}}"#;
const RA: &str = r#"{"message_type":"stop_reason","stop_reason":"requires_approval"}"#;
const END: &str = r#"{"message_type":"stop_reason","stop_reason":"end_turn"}"#;
const PING1: &str = r#"{"id":"p","message_type":"ping","run_id":"run-1","seq_id":1}"#;
const STATE: &str = r#"{"id":"rs","message_type":"response_state","run_id":"run-1","seq_id":3,"response_id":"resp-42","cache_scope":"approval_boundary"}"#;

struct Ran {
    outcomes: Vec<TurnOutcome>,
    calls: Vec<String>,
    bodies: Vec<Value>,
    events: Vec<Observation>,
}

fn run_client(mock: MockBackend, config: ClientConfig) -> Ran {
    let events: Arc<Mutex<Vec<Observation>>> = Default::default();
    let sink = events.clone();
    let m = mock.clone();
    let outcomes = on_sim(async move {
        let io = io(m, Arc::new(move |o| sink.lock().unwrap().push(o)));
        Client::new(config, io).run().await
    });
    let st = mock.state.lock().unwrap();
    Ran {
        outcomes,
        calls: st.calls.clone(),
        bodies: st
            .sent_bodies
            .iter()
            .map(|b| serde_json::to_value(b).unwrap())
            .collect(),
        events: events.lock().unwrap().clone(),
    }
}

fn io(
    backend: MockBackend,
    observe: Arc<dyn Fn(Observation) + Send + Sync>,
) -> ClientIo<MockBackend> {
    ClientIo {
        backend,
        observe,
        epoch_now_ms: Arc::new(|| 1_767_225_600_000),
        workspace: Arc::new(Mutex::new(Workspace::with_files([(
            "/a".to_string(),
            "alpha".to_string(),
        )]))),
        progress: Default::default(),
        crash: None,
        turn: Arc::new(AtomicU32::new(0)),
        clock: Clock::tokio(),
        spawner: Spawner::Runtime,
    }
}

fn config(human: Vec<HumanAnswer>, allow_read: bool) -> ClientConfig {
    let mut c = ClientConfig::new("server:8283", "agent-1", vec!["hi".into()]);
    c.conversation_id = "conv-1".into();
    c.human = human;
    if allow_read {
        c.permissions.rules = vec![("Read".into(), approvals::Permission::Allow)];
    }
    c
}

fn idle_conversation(mock: &MockBackend) {
    let mut st = mock.state.lock().unwrap();
    st.conversation = Some(Ok(json!({"id": "conv-1", "in_context_message_ids": []})));
}

#[test]
fn response_state_is_reused_only_by_an_auto_handled_approval_continuation() {
    let script = |mock: &MockBackend| {
        idle_conversation(mock);
        let mut st = mock.state.lock().unwrap();
        st.sends
            .push_back(ok(vec![c(PING1), c(APPROVAL), c(STATE), c(RA)]));
        st.sends.push_back(ok(vec![c(END)]));
    };
    // Every approval auto-handled: the continuation carries the header, the id is consumed.
    let mock = MockBackend::default();
    script(&mock);
    let r = run_client(mock, config(vec![], true));
    assert_eq!(r.outcomes, vec![TurnOutcome::Stopped("end_turn".into())]);
    let sends: Vec<&String> = r.calls.iter().filter(|c| c.starts_with("send")).collect();
    assert_eq!(sends[0], "send conv-1");
    assert_eq!(
        sends[1],
        &format!("send conv-1 response_state={}", header_value("resp-42"))
    );
    // A human in the loop: no header.
    let mock = MockBackend::default();
    script(&mock);
    let r = run_client(mock, config(vec![HumanAnswer::Approve], false));
    let sends: Vec<&String> = r.calls.iter().filter(|c| c.starts_with("send")).collect();
    assert_eq!(sends[1], "send conv-1");
    assert_eq!(
        r.bodies[1]["messages"][0]["approvals"][0]["tool_return"],
        "alpha"
    );
}

#[test]
fn a_malformed_chunk_is_an_error_and_the_stream_is_resumed() {
    let mock = MockBackend::default();
    idle_conversation(&mock);
    {
        let mut st = mock.state.lock().unwrap();
        st.sends.push_back(ok(vec![
            c(PING1),
            SdkEvent::Thrown(Thrown {
                kind: ThrownKind::Parse,
                message: "Could not parse message into JSON: key must be a string".into(),
                error: None,
            }),
        ]));
        st.run_streams.push_back(ok(vec![c(APPROVAL), c(RA)]));
        st.sends.push_back(ok(vec![c(END)]));
    }
    let r = run_client(mock, config(vec![], true));
    assert_eq!(r.outcomes, vec![TurnOutcome::Stopped("end_turn".into())]);
    assert!(
        r.calls
            .iter()
            .any(|c| c == r#"stream_run run-1 {"starting_after":1,"batch_size":1000}"#),
        "{:?}",
        r.calls
    );
}

#[test]
fn unknown_chunk_types_are_ignored() {
    let mock = MockBackend::default();
    idle_conversation(&mock);
    mock.state.lock().unwrap().sends.push_back(ok(vec![
        c(PING1),
        c(r#"{"id":"x","message_type":"brand_new_kind","run_id":"run-1","seq_id":2,"payload":[1,2]}"#),
        c(r#"{"id":"e","message_type":"event_message","event_type":"compaction","event_data":{}}"#),
        c(END),
    ]));
    let r = run_client(mock, config(vec![], true));
    assert_eq!(r.outcomes, vec![TurnOutcome::Stopped("end_turn".into())]);
}

#[test]
fn a_non_json_5xx_error_body_is_a_transient_pre_stream_error() {
    let mock = MockBackend::default();
    idle_conversation(&mock);
    {
        let mut st = mock.state.lock().unwrap();
        st.sends.push_back(Err(policy::api_error(
            502,
            "<html><body>502 Bad Gateway</body></html>",
            &[],
        )));
        st.sends.push_back(ok(vec![c(PING1), c(END)]));
    }
    let r = run_client(mock, config(vec![], true));
    assert_eq!(r.outcomes, vec![TurnOutcome::Stopped("end_turn".into())]);
    let retry = r
        .events
        .iter()
        .find_map(|e| match e {
            Observation::ClientRetry {
                kind,
                attempt,
                delay_ms,
                ..
            } => Some((kind.clone(), *attempt, *delay_ms)),
            _ => None,
        })
        .unwrap();
    assert_eq!(retry, ("transient".to_string(), 1, 1000));
    // Same request retried: same otid (§2.4).
    assert_eq!(
        r.bodies[0]["messages"][0]["otid"],
        r.bodies[1]["messages"][0]["otid"]
    );
}

#[test]
fn a_4xx_error_that_is_not_a_conflict_ends_the_turn_without_retry() {
    let mock = MockBackend::default();
    idle_conversation(&mock);
    mock.state
        .lock()
        .unwrap()
        .sends
        .push_back(Err(policy::api_error(422, "not json at all", &[])));
    let r = run_client(mock, config(vec![], true));
    assert_eq!(
        r.outcomes,
        vec![TurnOutcome::Error("422 not json at all".into())]
    );
    assert_eq!(r.calls.iter().filter(|c| c.starts_with("send")).count(), 1);
}

#[test]
fn invalid_tool_call_ids_fetch_the_servers_approvals_and_decide_them() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.sends.push_back(ok(vec![c(PING1), c(APPROVAL), c(RA)]));
        st.sends.push_back(Err(policy::api_error(
            400,
            &json!({"detail": "Invalid tool call IDs. Expected '['t9']', but received '['t1']'."})
                .to_string(),
            &[],
        )));
        st.sends.push_back(ok(vec![c(END)]));
    }
    // Every resume-data read sees call t9 pending (the in-context anchor msg-9).
    {
        let mut st = mock.state.lock().unwrap();
        st.messages.push((
            "msg-9".into(),
            Ok(vec![json!({"id": "msg-9", "message_type": "approval_request_message",
                "tool_calls": [{"tool_call_id": "t9", "name": "Read", "arguments": "{\"file_path\":\"/a\"}"}]})]),
        ));
        st.conversation = Some(Ok(
            json!({"id": "conv-1", "in_context_message_ids": ["msg-9"]}),
        ));
    }
    let mut cfg = config(vec![], true);
    cfg.backfill = false;
    let r = run_client(mock, cfg);
    assert_eq!(r.outcomes, vec![TurnOutcome::Stopped("end_turn".into())]);
    // The start-up check saw t9 as stale; the retry after the 400 answers t9 by executing it.
    let last = r.bodies.last().unwrap();
    assert_eq!(last["messages"][0]["approvals"][0]["tool_call_id"], "t9");
}

/// After "Invalid tool call IDs" the client shows every approval the server holds, including
/// one it already ran (t1). The reference answers t1 with the result it has; the published
/// client runs it a second time (docs/findings.md#resume-drops-approvals-completed-before-the-cut).
#[test]
fn a_resync_after_invalid_tool_call_ids_reruns_a_finished_tool_only_in_the_published_client() {
    let executions = |profile: Profile| {
        let mock = MockBackend::default();
        {
            let mut st = mock.state.lock().unwrap();
            st.sends.push_back(ok(vec![c(PING1), c(APPROVAL), c(RA)]));
            st.sends.push_back(Err(policy::api_error(
                400,
                &json!({"detail": "Invalid tool call IDs. Expected '['t1', 't2']', but received '['t1']'."})
                    .to_string(),
                &[],
            )));
            st.sends.push_back(ok(vec![c(END)]));
            st.messages.push((
                "msg-9".into(),
                Ok(vec![json!({"id": "msg-9", "message_type": "approval_request_message",
                    "tool_calls": [
                        {"tool_call_id": "t1", "name": "Read", "arguments": "{\"file_path\":\"/a\"}"},
                        {"tool_call_id": "t2", "name": "Read", "arguments": "{\"file_path\":\"/a\"}"}
                    ]})]),
            ));
            st.conversation = Some(Ok(
                json!({"id": "conv-1", "in_context_message_ids": ["msg-9"]}),
            ));
        }
        let mut cfg = config(vec![], true);
        cfg.backfill = false;
        cfg.profile = profile;
        let r = run_client(mock, cfg);
        assert_eq!(r.outcomes, vec![TurnOutcome::Stopped("end_turn".into())]);
        let last = r.bodies.last().unwrap();
        let ids: Vec<&str> = last["messages"][0]["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["tool_call_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["t1", "t2"], "{profile:?}");
        r.events
            .iter()
            .filter(|e| matches!(e, Observation::ToolExecuted { tool_call_id, .. } if tool_call_id == "t1"))
            .count()
    };
    assert_eq!(executions(Profile::Reference), 1);
    assert_eq!(executions(Profile::LettaCode), 2);
}

#[test]
fn a_body_that_never_closes_before_its_stop_reason_is_bounded() {
    // No run id ever arrives, so the stall reconciler cannot poll; the silence bound (the SDK
    // request timeout) ends the read. "Request timed out" is a retryable detail (§3.5): the
    // client resends with fresh otids until the shared budget of 3 is spent, then gives up.
    let mock = MockBackend::default();
    idle_conversation(&mock);
    for _ in 0..4 {
        mock.state.lock().unwrap().sends.push_back(Ok((
            vec![(0, c(r#"{"id":"p","message_type":"ping"}"#))],
            ScriptEnd::Hang,
        )));
    }
    let mut cfg = config(vec![], true);
    cfg.timers.max_silence_ms = 5_000;
    let r = run_client(mock, cfg);
    assert!(
        matches!(&r.outcomes[0], TurnOutcome::Error(e) if e.contains("Request timed out after 5000 ms")),
        "{:?}",
        r.outcomes
    );
    assert_eq!(r.calls.iter().filter(|c| c.starts_with("send")).count(), 4);
    let delays: Vec<u64> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Observation::ClientRetry { delay_ms, .. } => Some(*delay_ms),
            _ => None,
        })
        .collect();
    assert_eq!(delays, vec![1000, 2000, 4000]);
}

#[test]
fn a34_an_abort_while_waiting_for_a_503_retry_ends_the_turn_after_one_attempt() {
    let mock = MockBackend::default();
    idle_conversation(&mock);
    mock.state
        .lock()
        .unwrap()
        .sends
        .push_back(Err(policy::api_error(
            503,
            &json!({"error": "Service temporarily unavailable. Please retry your request.",
            "errorCode": "cloud_api_shutting_down", "admitted": false, "retryable": true})
            .to_string(),
            &[("retry-after".into(), "10".into())],
        )));
    let m = mock.clone();
    let (outcomes, elapsed) = on_sim(async move {
        let io = ClientIo {
            backend: m,
            observe: Arc::new(|_| {}),
            epoch_now_ms: Arc::new(|| 1_767_225_600_000),
            workspace: Arc::new(Mutex::new(Workspace::new())),
            progress: Default::default(),
            crash: None,
            turn: Arc::new(AtomicU32::new(0)),
            clock: Clock::tokio(),
            spawner: Spawner::Runtime,
        };
        let mut client = Client::new(config(vec![], true), io);
        let interrupt = client.interrupt.clone();
        let clock = Clock::tokio();
        let waits = clock.clone();
        let (outcomes, _) = tokio::join!(client.run(), async move {
            waits.sleep(std::time::Duration::from_millis(1000)).await;
            interrupt.abort();
        });
        (outcomes, clock.now_ms())
    });
    assert!(
        matches!(&outcomes[0], TurnOutcome::Interrupted(_)),
        "{outcomes:?}"
    );
    assert!(elapsed < 10_000, "the 10 s wait was cut short: {elapsed}");
    assert_eq!(
        mock.calls()
            .iter()
            .filter(|c| c.starts_with("send"))
            .count(),
        1
    );
}

/// A scenario names its client by profile (docs/scenario.md `client_profile`): each name reads
/// as its own profile and back, and an unknown name is refused rather than read as the default.
#[test]
fn each_client_profile_name_reads_as_its_own_profile() {
    for p in [Profile::Reference, Profile::LettaCode] {
        assert_eq!(Profile::from_name(p.as_str()), Some(p));
    }
    assert_eq!(Profile::from_name("letta-code"), Some(Profile::LettaCode));
    assert_eq!(Profile::from_name("letta_code"), None);
}

/// Run discovery (letta-protocol.md §2.6) asks for the default conversation by its resolved
/// id, the agent's: the server keeps the default conversation under the agent id, and a query
/// for `conversation_id=default` finds no run. A named conversation resolves to itself.
#[test]
fn run_discovery_resolves_the_default_conversation_to_the_agent() {
    let context = |conversation: &str| {
        let mut c = config(vec![], false);
        c.conversation_id = conversation.into();
        let client = Client::new(c, io(MockBackend::default(), Arc::new(|_| {})));
        client.request_context(&[], 0, None)
    };
    let default = context("default");
    assert_eq!(default.conversation_id, "default");
    assert_eq!(default.resolved_conversation_id, "agent-1");
    assert_eq!(context("conv-1").resolved_conversation_id, "conv-1");
}
