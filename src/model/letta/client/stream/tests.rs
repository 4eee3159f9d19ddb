//! drainStream, the terminal-EOF guard and the stall reconciler: the cases of
//! letta-tests-and-real-client.md §A.1.1-A.1.4, on simulated time (a turmoil client host).

use crate::model::port::clock::Clock;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use super::*;
use crate::model::letta::client::sdk_stream::{ScriptEnd, ScriptedSource, ThrownKind};

/// Runs `f` on turmoil's simulated clock and returns its output.
pub(crate) fn on_sim<T: 'static, F: Future<Output = T> + 'static>(f: F) -> T {
    let out: Rc<RefCell<Option<T>>> = Rc::new(RefCell::new(None));
    let slot = out.clone();
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(7200))
        .build();
    sim.client("t", async move {
        *slot.borrow_mut() = Some(f.await);
        Ok(())
    });
    sim.run().expect("simulation finishes");
    out.borrow_mut().take().expect("client produced a value")
}

/// A run-status lookup with a scripted answer and a call counter.
#[derive(Clone)]
struct Lookup {
    answer: Result<Option<String>, ()>,
    delay_ms: u64,
    calls: Rc<RefCell<u32>>,
}

impl Lookup {
    fn new(answer: Result<Option<&str>, ()>) -> Self {
        Lookup {
            answer: answer.map(|s| s.map(str::to_string)),
            delay_ms: 0,
            calls: Rc::new(RefCell::new(0)),
        }
    }
}

impl RunStatusLookup for Lookup {
    async fn run_status(&self, _run_id: &str) -> Result<Option<String>, ()> {
        *self.calls.borrow_mut() += 1;
        Clock::tokio()
            .sleep(Duration::from_millis(self.delay_ms))
            .await;
        self.answer.clone()
    }
}

fn c(json: &str) -> SdkEvent {
    SdkEvent::Chunk(Box::new(LettaChunk::from_json(json).unwrap()))
}

fn throw(msg: &str) -> SdkEvent {
    SdkEvent::Thrown(Thrown {
        kind: ThrownKind::Transport,
        message: msg.into(),
        error: None,
    })
}

struct Drained {
    result: DrainResult,
    transcript: Transcript,
    aborts: u32,
    lookups: u32,
    elapsed_ms: u64,
}

fn run(
    events: Vec<(u64, SdkEvent)>,
    end: ScriptEnd,
    opts: DrainOptions,
    lookup: Lookup,
    interrupt: Interrupt,
) -> Drained {
    on_sim(async move {
        let mut src = ScriptedSource::new(events, end);
        let aborts = src.aborts.clone();
        let mut t = Transcript::default();
        let start = Clock::tokio();
        let result = drain(
            &mut src,
            &opts,
            &interrupt,
            &lookup,
            &mut t,
            &|_| {},
            &mut |_, _| {},
        )
        .await;
        Drained {
            result,
            transcript: t,
            aborts: aborts.load(Ordering::SeqCst),
            lookups: *lookup.calls.borrow(),
            elapsed_ms: start.now_ms(),
        }
    })
}

fn quick(events: Vec<(u64, SdkEvent)>, end: ScriptEnd, opts: DrainOptions) -> Drained {
    run(
        events,
        end,
        opts,
        Lookup::new(Ok(Some("running"))),
        Interrupt::default(),
    )
}

const STOP_LLM: &str = r#"{"message_type":"stop_reason","stop_reason":"llm_api_error"}"#;
const STOP_END: &str = r#"{"message_type":"stop_reason","stop_reason":"end_turn"}"#;
const STOP_RA: &str = r#"{"message_type":"stop_reason","stop_reason":"requires_approval"}"#;
/// An approval request of a run that then fails.
const FAILED_RUN_CALL: &str = r#"{"id":"m","message_type":"approval_request_message","tool_call":{"name":"exec_command","arguments":"{}","tool_call_id":"tc-failed-run"}}"#;
const USAGE: &str = r#"{"message_type":"usage_statistics","prompt_tokens":100,"completion_tokens":10,"total_tokens":110,"step_count":1}"#;

// ---- A.1.1 -----------------------------------------------------------------------------------

#[test]
fn a11_preserves_llm_api_error_when_stream_throws_after_stop_reason() {
    let d = quick(
        vec![(0, c(STOP_LLM)), (0, throw("peer closed connection"))],
        ScriptEnd::Eof,
        DrainOptions::default(),
    );
    assert_eq!(d.result.stop_reason, StopReason::LlmApiError);
    assert!(d.result.saw_stop_chunk);
    assert_eq!(
        d.result.fallback_error.as_deref(),
        Some("peer closed connection")
    );
}

#[test]
fn a11_removes_incomplete_tools_from_terminal_llm_api_error_streams() {
    let d = quick(
        vec![
            (0, c(FAILED_RUN_CALL)),
            (0, c(STOP_LLM)),
            (0, throw("boom")),
        ],
        ScriptEnd::Eof,
        DrainOptions {
            skip_cancel_tools_on_error: true,
            ..Default::default()
        },
    );
    assert_eq!(d.result.stop_reason, StopReason::LlmApiError);
    assert!(
        d.transcript
            .tools
            .values()
            .all(|l| l.phase == ToolPhase::Finished)
    );
    assert!(!d.transcript.interrupted);
}

/// A stream that ends on `llm_api_error` without an exception drops its incomplete tool lines
/// too (letta-protocol.md §4.2 "Cleanup by stop reason"), not only the thrown case above.
#[test]
fn a_clean_llm_api_error_end_removes_incomplete_tool_lines() {
    let d = quick(
        vec![(0, c(FAILED_RUN_CALL)), (0, c(STOP_LLM))],
        ScriptEnd::Eof,
        DrainOptions::default(),
    );
    assert_eq!(d.result.stop_reason, StopReason::LlmApiError);
    assert!(d.result.thrown.is_none());
    assert!(d.transcript.tools.is_empty(), "{:?}", d.transcript.tools);
}

#[test]
fn a11_coerces_end_turn_with_pending_approvals_into_requires_approval() {
    let d = quick(
        vec![
            (
                0,
                c(
                    r#"{"id":"message-approval-1","message_type":"approval_request_message","tool_call":{"name":"ShellCommand","arguments":"{\"command\":\"pwd\"}","tool_call_id":"tc-end-turn"}}"#,
                ),
            ),
            (0, c(STOP_END)),
        ],
        ScriptEnd::Eof,
        DrainOptions::default(),
    );
    assert_eq!(d.result.stop_reason, StopReason::RequiresApproval);
    assert!(d.result.saw_stop_chunk);
    assert_eq!(
        d.result.approvals,
        vec![Approval {
            tool_call_id: "tc-end-turn".into(),
            tool_name: "ShellCommand".into(),
            tool_args: "{\"command\":\"pwd\"}".into(),
            message_id: Some("message-approval-1".into()),
        }]
    );
    assert_eq!(d.transcript.tools["tc-end-turn"].phase, ToolPhase::Ready);
}

#[test]
fn a11_end_turn_removes_orphaned_tool_calls_entirely() {
    let d = quick(
        vec![
            (
                0,
                c(
                    r#"{"id":"m","message_type":"tool_call_message","tool_call":{"name":"Bash","arguments":"{\"comm","tool_call_id":"tc-orphan"}}"#,
                ),
            ),
            (0, c(STOP_END)),
        ],
        ScriptEnd::Eof,
        DrainOptions::default(),
    );
    assert_eq!(d.result.stop_reason, StopReason::EndTurn);
    assert!(d.transcript.tools.is_empty());
}

#[test]
fn a11_stream_error_cancels_in_progress_tool_calls_by_default() {
    let events = || {
        vec![
            (
                0,
                c(
                    r#"{"id":"m","message_type":"tool_call_message","tool_call":{"name":"Bash","arguments":"{}","tool_call_id":"tc-1"}}"#,
                ),
            ),
            (0, throw("socket hang up")),
        ]
    };
    let d = quick(events(), ScriptEnd::Eof, DrainOptions::default());
    assert_eq!(d.result.stop_reason, StopReason::Error);
    let l = &d.transcript.tools["tc-1"];
    assert_eq!(l.phase, ToolPhase::Finished);
    assert_eq!(l.result_ok, Some(false));
    assert_eq!(l.result_text.as_deref(), Some("Stream error"));

    // With skipCancelToolsOnError the tool stays running and the buffer is interrupted.
    let d = quick(
        events(),
        ScriptEnd::Eof,
        DrainOptions {
            skip_cancel_tools_on_error: true,
            ..Default::default()
        },
    );
    assert_ne!(d.transcript.tools["tc-1"].phase, ToolPhase::Finished);
    assert!(d.transcript.interrupted);
}

/// A `cancelled` the server streamed (another client cancelled the run) marks the turn's open
/// tool lines "Interrupted by user" (letta-protocol.md §4.2, cleanup by stop reason). A cancel
/// of this client's own is left to its interrupt handler, which already marked them.
#[test]
fn a_streamed_cancel_marks_open_tool_lines_interrupted() {
    let d = quick(
        vec![
            (
                0,
                c(
                    r#"{"id":"m","message_type":"tool_call_message","tool_call":{"name":"Bash","arguments":"{}","tool_call_id":"tc-1"}}"#,
                ),
            ),
            (
                0,
                c(r#"{"message_type":"stop_reason","stop_reason":"cancelled"}"#),
            ),
        ],
        ScriptEnd::Eof,
        DrainOptions::default(),
    );
    assert_eq!(d.result.stop_reason, StopReason::Cancelled);
    let l = &d.transcript.tools["tc-1"];
    assert_eq!(l.phase, ToolPhase::Finished);
    assert_eq!(l.result_ok, Some(false));
    assert_eq!(l.result_text.as_deref(), Some(INTERRUPTED_BY_USER));
}

/// The UI buffer's assistant lines: one per message id, its deltas joined in order
/// (letta-protocol.md §4.2 accumulation).
#[test]
fn assistant_deltas_accumulate_into_one_line_per_message() {
    let d = quick(
        vec![
            (
                0,
                c(r#"{"id":"a1","message_type":"assistant_message","content":"Hel"}"#),
            ),
            (
                0,
                c(r#"{"id":"a1","message_type":"assistant_message","content":"lo"}"#),
            ),
            (
                0,
                c(r#"{"id":"a2","message_type":"assistant_message","content":"Bye"}"#),
            ),
            (0, c(STOP_END)),
        ],
        ScriptEnd::Eof,
        DrainOptions::default(),
    );
    let lines: Vec<(&str, &str)> = d
        .transcript
        .assistant
        .iter()
        .map(|(id, text)| (id.as_str(), text.as_str()))
        .collect();
    assert_eq!(lines, [("a1", "Hello"), ("a2", "Bye")]);
}

/// A read the client ends itself, on a seq gap (the reference's own check) or after its
/// silence bound (the SDK's request timeout, which throws in the published client), is a stream
/// error as a thrown one is (§4.2): without skipCancelToolsOnError its open tool lines are
/// cancelled, with it the buffer is interrupted.
#[test]
fn a11_a_gap_or_a_silence_timeout_is_a_stream_error_as_a_throw_is() {
    let call = r#"{"id":"m","run_id":"run-1","seq_id":1,"message_type":"tool_call_message","tool_call":{"name":"Bash","arguments":"{}","tool_call_id":"tc-1"}}"#;
    let skipped = r#"{"id":"a","run_id":"run-1","seq_id":3,"message_type":"assistant_message","content":"hi"}"#;
    let gap = || vec![(0, c(call)), (0, c(skipped))];
    let silent = || vec![(0, c(call))];
    let timeout = DrainOptions {
        max_silence_ms: 1_000,
        ..Default::default()
    };
    for (what, events, end, opts) in [
        (
            "gap",
            gap(),
            ScriptEnd::Eof,
            DrainOptions {
                drop_repeated_seq: true,
                ..Default::default()
            },
        ),
        ("timeout", silent(), ScriptEnd::Hang, timeout.clone()),
    ] {
        let d = quick(events.clone(), end, opts.clone());
        assert_eq!(d.result.stop_reason, StopReason::Error, "{what}");
        let l = &d.transcript.tools["tc-1"];
        assert_eq!(d.result.how, what);
        assert_eq!(l.result_text.as_deref(), Some("Stream error"), "{what}");
        let skip = DrainOptions {
            skip_cancel_tools_on_error: true,
            ..opts
        };
        let d = quick(events, end, skip);
        assert!(d.transcript.interrupted, "{what}");
    }
}

#[test]
fn a11_already_aborted_signal_gives_cancelled() {
    let i = Interrupt::default();
    i.abort();
    let d = run(
        vec![(0, c(STOP_END))],
        ScriptEnd::Hang,
        DrainOptions::default(),
        Lookup::new(Ok(None)),
        i,
    );
    assert_eq!(d.result.stop_reason, StopReason::Cancelled);
}

#[test]
fn a14_no_stop_reason_is_error_and_approvals_survive() {
    let d = quick(
        vec![
            (
                0,
                c(r#"{"id":"p","message_type":"ping","run_id":"run-1","seq_id":1}"#),
            ),
            (
                0,
                c(
                    r#"{"id":"m","message_type":"approval_request_message","run_id":"run-1","seq_id":2,"tool_call":{"name":"Bash","arguments":"{\"a","tool_call_id":"t1"}}"#,
                ),
            ),
        ],
        ScriptEnd::Eof,
        DrainOptions::default(),
    );
    assert_eq!(d.result.stop_reason, StopReason::Error);
    assert!(!d.result.saw_stop_chunk);
    assert_eq!(
        d.result.approvals.len(),
        1,
        "approvals survive for a resume"
    );
    assert_eq!(d.result.last_run_id.as_deref(), Some("run-1"));
    assert_eq!(d.result.last_seq_id, Some(2));
}

#[test]
fn a14_thrown_error_event_gives_run_id_and_message() {
    let d = quick(
        vec![
            (0, c(STOP_LLM)),
            (
                0,
                SdkEvent::Thrown(Thrown {
                    kind: ThrownKind::ErrorEvent,
                    message: "An error occurred with the LLM request.".into(),
                    error: Some(
                        serde_json::json!({"run_id": "run-9", "message": "An error occurred with the LLM request.", "detail": "INTERNAL"}),
                    ),
                }),
            ),
        ],
        ScriptEnd::Eof,
        DrainOptions::default(),
    );
    assert_eq!(d.result.last_run_id.as_deref(), Some("run-9"));
    assert_eq!(
        d.result.fallback_error.as_deref(),
        Some("An error occurred with the LLM request.")
    );
    assert_eq!(d.result.stop_reason, StopReason::LlmApiError);
}

// ---- A.1.2 terminal-EOF guard ----------------------------------------------------------------

#[test]
fn a12_returns_requires_approval_when_body_never_ends_after_terminal_sequence() {
    let d = quick(
        vec![
            (
                0,
                c(
                    r#"{"id":"message-approval-1","message_type":"approval_request_message","tool_call":{"name":"UpdatePlan","arguments":"{\"plan\":\"[]\"}","tool_call_id":"tc-updateplan"}}"#,
                ),
            ),
            (0, c(STOP_RA)),
            (0, c(USAGE)),
        ],
        ScriptEnd::Hang,
        DrainOptions {
            eof_grace_ms: 50,
            ..Default::default()
        },
    );
    assert_eq!(d.aborts, 1, "controller aborted");
    assert_eq!(d.result.stop_reason, StopReason::RequiresApproval);
    assert_eq!(d.result.approvals[0].tool_call_id, "tc-updateplan");
    assert_eq!(d.result.approvals[0].tool_name, "UpdatePlan");
    assert_eq!(d.result.approvals[0].tool_args, "{\"plan\":\"[]\"}");
    assert_eq!(
        d.result.approvals[0].message_id.as_deref(),
        Some("message-approval-1")
    );
    assert_eq!(d.transcript.total_tokens, 110);
    assert!(d.result.terminal_eof_guard_fired);
    let lines: Vec<_> = d
        .transcript
        .status_lines
        .iter()
        .filter(|l| l.contains("Stream did not close"))
        .collect();
    assert_eq!(lines.len(), 1);
    assert!(d.elapsed_ms >= 50 && d.elapsed_ms < 100, "{}", d.elapsed_ms);
}

#[test]
fn a12_returns_end_turn_when_body_never_ends_and_default_grace_is_2s() {
    let d = quick(
        vec![
            (
                0,
                c(r#"{"id":"a","message_type":"assistant_message","content":"done"}"#),
            ),
            (0, c(STOP_END)),
            (0, c(USAGE)),
        ],
        ScriptEnd::Hang,
        DrainOptions::default(),
    );
    assert_eq!(d.aborts, 1);
    assert_eq!(d.result.stop_reason, StopReason::EndTurn);
    assert!(d.result.saw_stop_chunk);
    assert!(
        d.elapsed_ms >= 2000 && d.elapsed_ms < 2100,
        "{}",
        d.elapsed_ms
    );
}

#[test]
fn a12_does_not_abort_a_stream_that_ends_normally() {
    let d = quick(
        vec![(0, c(STOP_END)), (0, c(USAGE))],
        ScriptEnd::Eof,
        DrainOptions {
            eof_grace_ms: 5000,
            ..Default::default()
        },
    );
    assert_eq!(d.aborts, 0);
    assert!(!d.result.terminal_eof_guard_fired);
    assert!(d.transcript.status_lines.is_empty());
}

/// Torn arguments cost one replay, not more: a replay that delivers no numbered frame past
/// its `starting_after` accepts the arguments it has, though they are not whole JSON (a model
/// that really wrote broken JSON), and the turn goes on to decide that call.
#[test]
fn a_replay_that_brings_nothing_new_accepts_torn_arguments() {
    let broken = Approval {
        tool_call_id: "tc-torn".into(),
        tool_name: "Read".into(),
        tool_args: r#"{"file_path": "/a"#.into(),
        message_id: Some("message-approval-1".into()),
    };
    // The replay repeats the last frame it had (seq 3, the call with the torn arguments).
    let repeated = r#"{"id":"message-approval-1","message_type":"approval_request_message","run_id":"run-1","seq_id":3,"tool_call":{"name":"Read","arguments":"{\"file_path\": \"/a","tool_call_id":"tc-torn"}}"#;
    let d = quick(
        vec![(0, c(repeated)), (0, c(STOP_RA))],
        ScriptEnd::Eof,
        DrainOptions {
            is_resume: true,
            starting_after: Some(3),
            torn_args_end_the_read: true,
            prior_approvals: vec![broken.clone()],
            ..Default::default()
        },
    );
    assert_eq!(d.result.stop_reason, StopReason::RequiresApproval);
    assert_eq!(d.result.last_run_id.as_deref(), Some("run-1"));
    assert_eq!(d.result.fallback_error, None);
    assert!(!d.result.how.contains("Stream gap"), "{}", d.result.how);
    assert_eq!(d.result.approvals.len(), 1);
    assert_eq!(d.result.approvals[0].tool_args, broken.tool_args);
}

#[test]
fn a12_guard_does_not_fire_before_a_stop_reason() {
    let d = quick(
        vec![
            (
                0,
                c(r#"{"id":"a","message_type":"assistant_message","content":"x"}"#),
            ),
            (90, c(STOP_END)),
        ],
        ScriptEnd::Eof,
        DrainOptions {
            eof_grace_ms: 30,
            ..Default::default()
        },
    );
    assert_eq!(d.aborts, 0);
    assert_eq!(d.result.stop_reason, StopReason::EndTurn);
}

// ---- A.1.3 stall reconciler ------------------------------------------------------------------

const PING_RUN: &str = r#"{"id":"p","message_type":"ping","run_id":"run-1","seq_id":1}"#;

fn stall_opts(ms: u64) -> DrainOptions {
    DrainOptions {
        stall_ms: ms,
        max_silence_ms: 70,
        ..Default::default()
    }
}

#[test]
fn a13_aborts_the_dead_read_when_the_run_completed_server_side() {
    let d = run(
        vec![(0, c(PING_RUN))],
        ScriptEnd::Hang,
        stall_opts(20),
        Lookup::new(Ok(Some("completed"))),
        Interrupt::default(),
    );
    assert_eq!(d.aborts, 1);
    assert!(d.result.stall_reconciler_fired);
    assert_eq!(
        d.result.stop_reason,
        StopReason::Error,
        "the resume path replays the tail"
    );
    assert!(
        d.transcript
            .status_lines
            .iter()
            .any(|l| l == STALL_RECONCILER_STATUS)
    );
}

#[test]
fn a13_keeps_waiting_while_the_run_is_active_or_lookup_fails() {
    for lookup in [Lookup::new(Ok(Some("running"))), Lookup::new(Err(()))] {
        let d = run(
            vec![(0, c(PING_RUN))],
            ScriptEnd::Hang,
            stall_opts(20),
            lookup,
            Interrupt::default(),
        );
        assert!(!d.result.stall_reconciler_fired);
        assert!(d.lookups >= 2, "{}", d.lookups);
        // Only the absolute silence bound ends it.
        assert_eq!(d.result.how, "timeout");
        assert_eq!(d.aborts, 1);
    }
}

#[test]
fn a13_keeps_waiting_when_no_run_id_arrived_yet() {
    let d = run(
        vec![(0, c(r#"{"id":"p","message_type":"ping"}"#))],
        ScriptEnd::Hang,
        stall_opts(20),
        Lookup::new(Ok(Some("completed"))),
        Interrupt::default(),
    );
    assert_eq!(d.lookups, 0);
    assert!(!d.result.stall_reconciler_fired);
}

#[test]
fn a13_defers_to_the_terminal_eof_guard_once_stop_reason_arrived() {
    let d = run(
        vec![(0, c(PING_RUN)), (0, c(STOP_END))],
        ScriptEnd::Hang,
        DrainOptions {
            stall_ms: 20,
            eof_grace_ms: 60,
            ..Default::default()
        },
        Lookup::new(Ok(Some("completed"))),
        Interrupt::default(),
    );
    assert_eq!(d.lookups, 0);
    assert!(!d.result.stall_reconciler_fired);
    assert!(d.result.terminal_eof_guard_fired);
    assert_eq!(d.aborts, 1);
}

#[test]
fn a13_chunk_arrival_re_arms_instead_of_firing() {
    // 40 ms window; a chunk at 25 ms re-arms; the stop at 50 ms ends it before 65 ms.
    let d = run(
        vec![
            (0, c(PING_RUN)),
            (
                25,
                c(
                    r#"{"id":"a","message_type":"assistant_message","content":"x","run_id":"run-1","seq_id":2}"#,
                ),
            ),
            (25, c(STOP_END)),
        ],
        ScriptEnd::Eof,
        stall_opts(40),
        Lookup::new(Ok(Some("completed"))),
        Interrupt::default(),
    );
    assert_eq!(d.aborts, 0);
    assert_eq!(d.lookups, 0);
    assert_eq!(d.result.stop_reason, StopReason::EndTurn);
}

#[test]
fn a13_does_not_double_fire_after_aborting_once() {
    let d = run(
        vec![(0, c(PING_RUN))],
        ScriptEnd::Hang,
        stall_opts(20),
        Lookup::new(Ok(Some("failed"))),
        Interrupt::default(),
    );
    assert_eq!(d.aborts, 1);
    assert_eq!(d.lookups, 1);
}

#[test]
fn a13_status_resolved_after_stop_reason_arrival_does_not_abort() {
    // The lookup starts at 20 ms and answers `completed` at 40 ms; the stop reason lands at
    // 30 ms, while it is in flight; the body then ends normally.
    let mut lookup = Lookup::new(Ok(Some("completed")));
    lookup.delay_ms = 20;
    let d = run(
        vec![(0, c(PING_RUN)), (30, c(STOP_END)), (30, c(USAGE))],
        ScriptEnd::Eof,
        DrainOptions {
            stall_ms: 20,
            ..Default::default()
        },
        lookup,
        Interrupt::default(),
    );
    assert_eq!(d.lookups, 1);
    assert!(!d.result.stall_reconciler_fired);
    assert_eq!(d.aborts, 0);
    assert_eq!(d.result.stop_reason, StopReason::EndTurn);
}

// ---- abort generations -----------------------------------------------------------------------

#[test]
fn abort_generation_change_cancels_without_marking_tools() {
    let i = Interrupt::default();
    let d = on_sim({
        let i = i.clone();
        async move {
            let mut src = ScriptedSource::new(
                vec![
                    (
                        0,
                        c(
                            r#"{"id":"m","message_type":"approval_request_message","tool_call":{"name":"Bash","arguments":"{}","tool_call_id":"t"}}"#,
                        ),
                    ),
                    (10, c(STOP_RA)),
                ],
                ScriptEnd::Eof,
            );
            let bump = i.clone();
            let mut t = Transcript::default();
            let r = drain(
                &mut src,
                &DrainOptions::default(),
                &i,
                &Lookup::new(Ok(None)),
                &mut t,
                &|_| {},
                &mut |_, _| bump.bump_generation(),
            )
            .await;
            (r, t)
        }
    });
    assert_eq!(d.0.stop_reason, StopReason::Cancelled);
    assert_eq!(d.1.tools.len(), 0, "accumulation is skipped after the bump");

    // An aborted signal marks incomplete tools "Interrupted by user".
    let d2 = on_sim(async move {
        let i = Interrupt::default();
        let mut src = ScriptedSource::new(
            vec![
                (
                    0,
                    c(
                        r#"{"id":"m","message_type":"approval_request_message","tool_call":{"name":"Bash","arguments":"{}","tool_call_id":"t"}}"#,
                    ),
                ),
                (10, c(STOP_RA)),
            ],
            ScriptEnd::Eof,
        );
        let aborts = src.aborts.clone();
        let mut t = Transcript::default();
        let abort_in = i.clone();
        let opts = DrainOptions::default();
        let lookup = Lookup::new(Ok(None));
        let mut hook = |_: &LettaChunk, _: &Processed| {};
        let f = drain(&mut src, &opts, &i, &lookup, &mut t, &|_| {}, &mut hook);
        let (r, _) = tokio::join!(f, async move {
            Clock::tokio().sleep(Duration::from_millis(5)).await;
            abort_in.abort();
        });
        (r, t, aborts.load(Ordering::SeqCst))
    });
    assert_eq!(d2.0.stop_reason, StopReason::Cancelled);
    assert_eq!(
        d2.1.tools["t"].result_text.as_deref(),
        Some(INTERRUPTED_BY_USER)
    );
    assert_eq!(d2.2, 1);
}

/// A chunk lacks a name only where every Letta server gives one: an id on any chunk with an
/// envelope but the error frame (0.16.8's has none), an otid on assistant and reasoning text.
#[test]
fn a_chunk_is_unnamed_only_without_the_names_a_server_gives_it() {
    let chunk = |json: &str| LettaChunk::from_json(json).unwrap();
    let text = r#"{"message_type":"assistant_message","id":"message-1","otid":"o-1","date":"d","content":"hi"}"#;
    assert_eq!(unnamed(&chunk(text)), None);
    assert_eq!(
        unnamed(&chunk(&text.replace(r#""otid":"o-1","#, ""))),
        Some("otid")
    );
    assert_eq!(
        unnamed(&chunk(&text.replace(r#""o-1""#, r#""""#))),
        Some("otid")
    );
    assert_eq!(
        unnamed(&chunk(&text.replace(r#""message-1""#, r#""""#))),
        Some("id")
    );
    let ping = r#"{"message_type":"ping","id":"ping-1","date":"d"}"#;
    assert_eq!(unnamed(&chunk(ping)), None);
    assert_eq!(unnamed(&chunk(&ping.replace("ping-1", ""))), Some("id"));
    let error = r#"{"message_type":"error_message","run_id":"run-1","error_type":"internal_error","message":"m"}"#;
    assert_eq!(unnamed(&chunk(error)), None);
    let stop = r#"{"message_type":"stop_reason","stop_reason":"end_turn"}"#;
    assert_eq!(unnamed(&chunk(stop)), None);
}
