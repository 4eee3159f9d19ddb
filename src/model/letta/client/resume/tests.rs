//! drainStreamWithResume and run discovery: the cases of letta-tests-and-real-client.md §A.2,
//! against a scripted backend on simulated time.
//!
//! The upstream fixtures put `seq_id` on stop_reason chunks; the wire types here follow the real
//! server (captures/letta_server: stop_reason frames carry no seq_id), so where a fixture's last
//! seq comes from its stop chunk, the scripted stream sends a ping with that seq first.

use crate::model::port::clock::Clock;
use serde_json::json;

use super::*;
use crate::model::letta::client::backend::mock::{MockBackend, StreamAnswer};
use crate::model::letta::client::sdk_stream::{
    ScriptEnd, ScriptedSource, SdkEvent, Thrown, ThrownKind,
};
use crate::model::letta::client::stream::tests::on_sim;
use crate::wire::letta::LettaChunk;

fn c(json: &str) -> SdkEvent {
    SdkEvent::Chunk(Box::new(LettaChunk::from_json(json).unwrap()))
}

fn ping(seq: u64) -> SdkEvent {
    c(&format!(
        r#"{{"id":"p{seq}","message_type":"ping","run_id":"run-1","seq_id":{seq}}}"#
    ))
}

fn stop(reason: &str) -> SdkEvent {
    c(&format!(
        r#"{{"message_type":"stop_reason","stop_reason":"{reason}"}}"#
    ))
}

fn throw(msg: &str) -> SdkEvent {
    SdkEvent::Thrown(Thrown {
        kind: ThrownKind::Transport,
        message: msg.into(),
        error: None,
    })
}

fn ok(events: Vec<SdkEvent>) -> StreamAnswer {
    Ok((events.into_iter().map(|e| (0, e)).collect(), ScriptEnd::Eof))
}

fn err500() -> StreamAnswer {
    Err(json!({"status": 500, "message": "500 resume failed"}))
}

fn ctx() -> RequestContext {
    RequestContext {
        conversation_id: "conv-1".into(),
        resolved_conversation_id: "conv-1".into(),
        agent_id: "agent-1".into(),
        stream_otid: None,
        request_started_at_ms: 0,
    }
}

fn policy3() -> Option<ResumePolicy> {
    Some(ResumePolicy {
        initial_delay_ms: 0,
        max_attempts: 3,
        max_delay_ms: 0,
    })
}

fn run(
    mock: &MockBackend,
    initial: Vec<SdkEvent>,
    policy: Option<ResumePolicy>,
    ctx: Option<RequestContext>,
) -> (DrainResult, ResumeInfo) {
    let mock = mock.clone();
    on_sim(async move {
        let mut src = ScriptedSource::new(
            initial.into_iter().map(|e| (0, e)).collect(),
            ScriptEnd::Eof,
        );
        let mut t = Transcript::default();
        let opts = ResumeOptions {
            policy,
            drain: DrainOptions::default(),
            planted_braces_args_fallback: false,
            planted_resume_from_zero: false,
            keep_unresumed_approvals: false,
        };
        drain_stream_with_resume::<MockBackend>(
            &mut src,
            ctx.as_ref(),
            &opts,
            ResumeEnv {
                backend: &mock,
                interrupt: &Interrupt::default(),
                transcript: &mut t,
                observe: &|_| {},
                hook: &mut |_, _| {},
            },
        )
        .await
    })
}

fn starting_afters(mock: &MockBackend) -> Vec<u64> {
    mock.calls()
        .iter()
        .filter(|c| c.starts_with("stream_run") || c.starts_with("stream_conversation"))
        .map(|c| {
            let body: Value = serde_json::from_str(&c[c.find('{').unwrap()..]).unwrap();
            body["starting_after"].as_u64().unwrap()
        })
        .collect()
}

fn count(mock: &MockBackend, prefix: &str) -> usize {
    mock.calls()
        .iter()
        .filter(|c| c.starts_with(prefix))
        .count()
}

#[test]
fn a21_retries_the_same_run_when_the_first_resume_request_fails() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.run_streams.push_back(err500());
        st.run_streams
            .push_back(ok(vec![ping(2), stop("end_turn")]));
    }
    let (r, info) = run(
        &mock,
        vec![ping(1), throw("initial stream disconnected")],
        policy3(),
        Some(ctx()),
    );
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.last_run_id.as_deref(), Some("run-1"));
    assert_eq!(r.last_seq_id, Some(2));
    assert_eq!(starting_afters(&mock), vec![1, 1]);
    assert_eq!(info.attempts, 2);
    // Every resume body has batch_size 1000 (letta-protocol.md §2.5).
    assert!(
        mock.calls()
            .iter()
            .filter(|c| c.starts_with("stream_run"))
            .all(|c| c.contains("\"batch_size\":1000"))
    );
}

#[test]
fn a21_advances_the_cursor_when_a_resumed_stream_also_disconnects() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.run_streams.push_back(ok(vec![ping(2), throw("again")]));
        st.run_streams
            .push_back(ok(vec![ping(3), stop("end_turn")]));
        st.run_default = Some(Ok(json!({"id": "run-1", "status": "running"})));
    }
    let (r, _) = run(&mock, vec![ping(1), throw("x")], policy3(), Some(ctx()));
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.last_seq_id, Some(3));
    assert_eq!(starting_afters(&mock), vec![1, 2]);
}

#[test]
fn a21_replays_a_generic_error_stop_when_the_run_is_still_active() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.runs
            .push_back(Ok(json!({"id": "run-1", "status": "running"})));
        st.run_streams
            .push_back(ok(vec![ping(3), stop("end_turn")]));
    }
    let (r, _) = run(
        &mock,
        vec![ping(1), ping(2), stop("error")],
        policy3(),
        Some(ctx()),
    );
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(count(&mock, "stream_run"), 1);
    assert_eq!(count(&mock, "retrieve_run"), 1);

    // Without a policy (TUI) a generic error stop with a stop chunk is never replayed.
    let mock = MockBackend::default();
    mock.state
        .lock()
        .unwrap()
        .runs
        .push_back(Ok(json!({"id": "run-1", "status": "running"})));
    let (r, info) = run(&mock, vec![ping(1), stop("error")], None, Some(ctx()));
    assert_eq!(r.stop_reason, StopReason::Error);
    assert_eq!(count(&mock, "stream_run"), 0);
    assert_eq!(count(&mock, "retrieve_run"), 0);
    assert_eq!(info.skip_reason, Some("terminal_stop_reason"));
}

#[test]
fn a21_keeps_a_generic_error_stop_when_the_run_has_failed() {
    let mock = MockBackend::default();
    mock.state.lock().unwrap().runs.push_back(Ok(json!({
        "id": "run-1", "status": "failed", "stop_reason": "error",
        "metadata": {"error": {"error_type": "internal_error", "detail": "x"}}})));
    let (r, _) = run(&mock, vec![ping(1), stop("error")], policy3(), Some(ctx()));
    assert_eq!(r.stop_reason, StopReason::Error);
    assert_eq!(count(&mock, "stream_run"), 0);
}

#[test]
fn a21_stops_retrying_when_polling_shows_the_run_failed() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        st.run_streams.push_back(err500());
        st.run_default = Some(Ok(json!({"id": "run-1", "status": "failed"})));
    }
    let (r, _) = run(&mock, vec![ping(1), throw("x")], policy3(), Some(ctx()));
    assert_eq!(r.stop_reason, StopReason::Error);
    assert_eq!(count(&mock, "stream_run"), 1);
    assert_eq!(count(&mock, "retrieve_run"), 1);
}

#[test]
fn a21_preserves_the_initial_stream_error_after_retries_are_exhausted() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        for _ in 0..3 {
            st.run_streams.push_back(err500());
        }
        // No retrieveRun: lookups fail and the loop keeps going.
    }
    let (r, info) = run(
        &mock,
        vec![ping(1), throw("initial stream disconnected")],
        policy3(),
        Some(ctx()),
    );
    assert_eq!(r.stop_reason, StopReason::Error);
    assert_eq!(
        r.fallback_error.as_deref(),
        Some("initial stream disconnected")
    );
    assert_eq!(count(&mock, "stream_run"), 3);
    assert_eq!(info.attempts, 3);
}

#[test]
fn headless_policy_waits_250_500_1000_2000_then_2000() {
    let mock = MockBackend::default();
    {
        let mut st = mock.state.lock().unwrap();
        for _ in 0..20 {
            st.run_streams.push_back(err500());
        }
        st.run_default = Some(Ok(json!({"id": "run-1", "status": "running"})));
    }
    let m2 = mock.clone();
    let (elapsed, attempts) = on_sim(async move {
        let start = Clock::tokio();
        let mut src = ScriptedSource::new(vec![(0, ping(1)), (0, throw("x"))], ScriptEnd::Eof);
        let mut t = Transcript::default();
        let (_, info) = drain_stream_with_resume::<MockBackend>(
            &mut src,
            Some(&ctx()),
            &ResumeOptions {
                policy: Some(ResumePolicy::HEADLESS),
                drain: DrainOptions::default(),
                planted_braces_args_fallback: false,
                planted_resume_from_zero: false,
                keep_unresumed_approvals: false,
            },
            ResumeEnv {
                backend: &m2,
                interrupt: &Interrupt::default(),
                transcript: &mut t,
                observe: &|_| {},
                hook: &mut |_, _| {},
            },
        )
        .await;
        (start.now_ms(), info.attempts)
    });
    assert_eq!(attempts, 20);
    assert_eq!(count(&mock, "stream_run"), 20);
    // 250 + 500 + 1000 + 16 × 2000 between 20 attempts.
    assert_eq!(elapsed, 250 + 500 + 1000 + 16 * 2000);
}

#[test]
fn otid_source_when_no_run_id_and_otid_known() {
    let mock = MockBackend::default();
    mock.state
        .lock()
        .unwrap()
        .conversation_streams
        .push_back(ok(vec![ping(1), stop("end_turn")]));
    let mut cx = ctx();
    cx.conversation_id = "default".into();
    cx.stream_otid = Some("otid-123".into());
    let (r, info) = run(
        &mock,
        vec![throw("dropped before any chunk")],
        None,
        Some(cx),
    );
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(info.source, Some(ResumeSource::Otid("otid-123".into())));
    let call = &mock.calls()[0];
    assert!(call.starts_with("stream_conversation default "), "{call}");
    let body: Value =
        serde_json::from_str(call.trim_start_matches("stream_conversation default ")).unwrap();
    assert_eq!(
        body,
        json!({"otid": "otid-123", "starting_after": 0, "batch_size": 1000, "agent_id": "agent-1"})
    );
    // Approval-pending conflicts are not resumable.
    let mock = MockBackend::default();
    let (r, info) = run(
        &mock,
        vec![
            ping(1),
            throw(
                "CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call.",
            ),
        ],
        None,
        Some(ctx()),
    );
    assert_eq!(r.stop_reason, StopReason::Error);
    assert_eq!(info.skip_reason, Some("approval_conflict"));
    assert!(mock.calls().is_empty());
}

// ---- A.2.2 discovery ---------------------------------------------------------------------------

fn ms(iso: &str) -> u64 {
    parse_iso8601_ms(iso).unwrap()
}

#[test]
fn a22_discovery() {
    let found = |lists: Vec<(&str, Vec<Value>)>, cx: RequestContext| {
        let mock = MockBackend::default();
        mock.state.lock().unwrap().run_lists =
            lists.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let m2 = mock.clone();
        let id = on_sim(async move { discover_fallback_run_id(&m2, &cx).await });
        (id, mock.calls())
    };
    let mut cx = ctx();
    cx.conversation_id = "conv-123".into();
    cx.resolved_conversation_id = "conv-123".into();
    cx.request_started_at_ms = ms("2026-01-01T10:01:00Z");
    let (id, calls) = found(
        vec![(
            "conversation_id=conv-123",
            vec![
                json!({"id": "run-new", "status": "running", "created_at": "2026-01-01T10:01:10Z"}),
            ],
        )],
        cx.clone(),
    );
    assert_eq!(id.as_deref(), Some("run-new"));
    assert_eq!(
        calls[0],
        "list_runs conversation_id=conv-123&statuses=running&order=desc&limit=1"
    );

    let mut d = ctx();
    d.conversation_id = "default".into();
    d.resolved_conversation_id = "default".into();
    d.agent_id = "agent-test".into();
    let (id, calls) = found(
        vec![(
            "agent_id=agent-test",
            vec![
                json!({"id": "run-agent", "status": "running", "created_at": "2026-01-01T10:01:10Z"}),
            ],
        )],
        d,
    );
    assert_eq!(id.as_deref(), Some("run-agent"));
    assert_eq!(
        calls,
        vec![
            "list_runs conversation_id=default&statuses=running&order=desc&limit=1",
            "list_runs agent_id=agent-test&statuses=running&order=desc&limit=1"
        ]
    );

    let mut old = cx.clone();
    old.request_started_at_ms = ms("2026-01-01T10:00:00Z");
    let (id, _) = found(
        vec![(
            "conversation_id=conv-123",
            vec![
                json!({"id": "run-old", "status": "running", "created_at": "2026-01-01T09:59:58Z"}),
            ],
        )],
        old.clone(),
    );
    assert_eq!(id, None);
    let (id, _) = found(
        vec![(
            "conversation_id=conv-123",
            vec![json!({"id": "run-c", "status": "created", "created_at": "2026-01-01T10:01:10Z"})],
        )],
        old,
    );
    assert_eq!(id, None);
    assert_eq!(
        ms("2026-01-01T10:01:10.500+01:00"),
        ms("2026-01-01T09:01:10.500Z")
    );
    // An offset with minutes (India's +05:30, Newfoundland's -03:30).
    assert_eq!(
        ms("2026-01-01T10:01:10.500+05:30"),
        ms("2026-01-01T04:31:10.500Z")
    );
    assert_eq!(
        ms("2026-01-01T10:01:10.500-03:30"),
        ms("2026-01-01T13:31:10.500Z")
    );
    assert_eq!(parse_iso8601_ms("nope"), None);
    // Absolute instants, and across a day and a leap day: milliseconds since the epoch.
    assert_eq!(ms("1970-01-02T00:00:00Z"), 86_400_000);
    assert_eq!(ms("2026-01-01T00:00:00Z"), 1_767_225_600_000);
    assert_eq!(ms("2000-02-29T12:34:56.789Z"), 951_827_696_789);
    assert_eq!(
        ms("2026-01-02T00:00:00Z") - ms("2026-01-01T23:59:59Z"),
        1_000
    );
}

// ---- approval merge (§4.4 steps 7-8) ------------------------------------------------------------

fn ap(id: &str, name: &str, args: &str) -> Approval {
    Approval {
        tool_call_id: id.into(),
        tool_name: name.into(),
        tool_args: args.into(),
        message_id: Some("m".into()),
    }
}

#[test]
fn approval_merge_across_the_resume_boundary() {
    let orig = vec![ap("t1", "Bash", "{\"comm"), ap("t2", "Read", "{}")];
    // Case 1: the resume collected none → originals unchanged.
    let (s, a) = merge_after_resume(&StopReason::RequiresApproval, &orig, &[], false, false);
    assert_eq!((s, a), (StopReason::RequiresApproval, orig.clone()));
    // Case 2: prefix + suffix by id; resumed without an original pass through; originals absent
    // from the resume are dropped.
    let (_, a) = merge_after_resume(
        &StopReason::RequiresApproval,
        &orig,
        &[ap("t1", "", "and\":1}"), ap("t3", "Grep", "{}")],
        false,
        false,
    );
    assert_eq!(
        a,
        vec![ap("t1", "Bash", "{\"command\":1}"), ap("t3", "Grep", "{}")]
    );
    // The reference keeps the original the resume did not mention (t2, complete before the
    // cut), in stream order, then the calls only the resume saw.
    let (_, a) = merge_after_resume(
        &StopReason::RequiresApproval,
        &orig,
        &[ap("t1", "", "and\":1}"), ap("t3", "Grep", "{}")],
        false,
        true,
    );
    assert_eq!(
        a,
        vec![
            ap("t1", "Bash", "{\"command\":1}"),
            ap("t2", "Read", "{}"),
            ap("t3", "Grep", "{}")
        ]
    );
    // end_turn with original approvals → requires_approval with the originals.
    let (s, a) = merge_after_resume(&StopReason::EndTurn, &orig, &[], false, false);
    assert_eq!((s, a), (StopReason::RequiresApproval, orig.clone()));
    // The empty-args fallback: "" keeps the merge intact; the planted "{}" corrupts it.
    let name_only = vec![ap("t1", "Bash", "")];
    let suffix = vec![ap("t1", "", "{\"command\":\"ls\"}")];
    let (_, a) = merge_after_resume(
        &StopReason::RequiresApproval,
        &name_only,
        &suffix,
        false,
        false,
    );
    assert_eq!(a[0].tool_args, "{\"command\":\"ls\"}");
    let (_, a) = merge_after_resume(
        &StopReason::RequiresApproval,
        &name_only,
        &suffix,
        true,
        false,
    );
    assert_eq!(a[0].tool_args, "{}{\"command\":\"ls\"}");
    // The failed-attempt merge fills an empty name.
    let m = merge_approvals(&[ap("t1", "", "{")], &[ap("t1", "Bash", "}")], false);
    assert_eq!(m, vec![ap("t1", "Bash", "{}")]);
}

#[test]
fn replayable_runs() {
    assert!(is_replayable_run(&json!({"status": "created"})));
    assert!(is_replayable_run(&json!({"status": "running"})));
    assert!(is_replayable_run(
        &json!({"status": "completed", "stop_reason": "end_turn"})
    ));
    assert!(!is_replayable_run(
        &json!({"status": "completed", "stop_reason": "error"})
    ));
    assert!(!is_replayable_run(
        &json!({"status": "completed", "stop_reason": "llm_api_error"})
    ));
    assert!(!is_replayable_run(
        &json!({"status": "running", "metadata": {"error": {"x": 1}}})
    ));
    assert!(!is_replayable_run(&json!({"status": "failed"})));
    assert!(!is_replayable_run(&json!({"status": "cancelled"})));
}
