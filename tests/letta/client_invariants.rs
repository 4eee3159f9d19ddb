//! Each client invariant broken on purpose: a planted defect in the client
//! (`scenarios/planted/client_*.toml`) makes exactly that invariant fail, and the report names
//! it, quotes the violation and the event that broke it, and gives the command that
//! reproduces the run. The same scenario without the defect passes (tests/letta/client_scenarios.rs).

use crate::common::{load, repo, run, violations};
use loopsim::harness::invariants::{
    ABANDONED_RUN_CANCELLED, ANSWERS_TYPED, APPROVAL_ATTRIBUTION, APPROVAL_CONFLICT_RECOVERED,
    ARGS_INTACT, BACKFILL_FAITHFUL, BUDGET_RESPECTED, CHUNKS_NAMED, CLIENT_FAULTS_FIRE,
    ENDS_AS_DECLARED, LOCK_SAFETY, NO_DOUBLE_EXECUTION, OTIDS_FRESH, PENDING_DENIED_AT_START,
    RECOVERY_COMPLETES, REQUESTS_ROUTED, RESPONSE_STATE_REUSED, RESULT_STATUS_INTACT,
    RESULTS_ORDERED, STOP_REASON_CONSISTENT, STREAM_GAPLESS,
};
use loopsim::harness::report::{RunReport, Verdict, exit};
use loopsim::harness::scenario::{Planted, Scenario};

fn planted(name: &str) -> RunReport {
    let s = load(repo().join("scenarios/planted").join(name));
    run(&s, 1, 2)
}

/// The report fails `id` (and only `id` among the non-expected invariants), shows the violation
/// and where it happened, and says how to reproduce it.
fn assert_breaks(report: &RunReport, id: &str, message_part: &str) {
    assert_breaks_with(report, id, message_part, &[]);
}

/// [`assert_breaks`], where the defect also breaks the invariants `also`: a defect that ends the
/// turn early under faults that heal also fails `recovery-completes`.
fn assert_breaks_with(report: &RunReport, id: &str, message_part: &str, also: &[&str]) {
    let text = report.render();
    assert_eq!(report.verdict, Verdict::Correctness, "{text}");
    assert_eq!(report.verdict.exit_code(), exit::CORRECTNESS);
    let v = violations(report, id);
    assert!(!v.is_empty(), "{id} did not fail:\n{text}");
    assert!(
        v.iter().any(|x| x.message.contains(message_part)),
        "{id}: no violation mentions {message_part:?}:\n{text}"
    );
    assert!(
        text.lines().any(|l| l.split_whitespace().eq([id, "FAIL"])),
        "{text}"
    );
    assert!(text.contains("at event "), "{text}");
    assert!(
        text.contains("reproduce cargo run --release -p sim -- run "),
        "{text}"
    );
    for (other, vs) in &report.invariants {
        let expected = report.expected.iter().any(|(x, _, _)| x == other);
        if *other != id && !expected && !also.contains(other) {
            assert!(vs.is_empty(), "{other} failed too:\n{text}");
        }
    }
}

#[test]
fn no_double_execution_fails_when_a_restarted_client_reexecutes() {
    let r = planted("client_reexecute_after_restart.toml");
    assert_breaks(
        &r,
        NO_DOUBLE_EXECUTION,
        "tool call toolu_bash_1 took effect 2 times",
    );
    // Headless, the restarted process's start-up check runs before its turn's send instead.
    let s = crate::common::with_mode(
        load(repo().join("scenarios/planted/client_reexecute_after_restart.toml")),
        "headless",
    );
    assert_breaks(
        &run(&s, 1, 2),
        NO_DOUBLE_EXECUTION,
        "tool call toolu_bash_1 took effect 2 times",
    );
}

/// The planted re-execution is a restarted client's: a process that is the first to run (no
/// restart, no earlier turn) denies the call pending at its start (B.5.4) even with the defect
/// switched on, in both modes (the interactive check runs once before the first send, the
/// headless one before each turn's process sends), so the canary breaks only what it names.
#[test]
fn the_planted_reexecution_fires_only_in_a_restarted_process() {
    for mode in ["interactive", "headless"] {
        let mut s = crate::common::with_mode(
            load(crate::common::scenario_path("client_stale_at_start.toml")),
            mode,
        );
        s.planted.client_reexecute_pending_on_restart = true;
        let r = run(&s, 1, 1);
        assert_eq!(r.verdict, Verdict::Pass, "{mode}: {}", r.render());
        assert_eq!(
            crate::common::lines_with(&r, "client_recovery kind=stale_approvals").len(),
            1,
            "{mode}: {}",
            r.trace_text
        );
        assert!(
            crate::common::lines_with(&r, "reexecute_pending").is_empty(),
            "{mode}: {}",
            r.trace_text
        );
    }
}

/// A headless turn is a process of its own (letta-protocol.md B.5.4), so the planted defect
/// fires at the second turn's start as it does after a crash: the user interrupted turn 1's tool,
/// its call is still pending, and no crash came.
#[test]
fn the_planted_reexecution_fires_in_a_later_headless_process_without_a_crash() {
    let mut s = crate::common::with_mode(
        crate::common::with_faults(
            load(repo().join("scenarios/planted/client_reexecute_after_restart.toml")),
            vec![],
        ),
        "headless",
    );
    s = crate::common::with_plan(
        s,
        &[r#"{ kind = "interrupt", turn = 1, during = "tools", after_ms = 0 }"#],
    );
    let r = run(&s, 0, 1);
    let fired = crate::common::lines_with(&r, "client_recovery kind=reexecute_pending");
    assert_eq!(fired.len(), 1, "{}", r.trace_text);
    let turn_2 = crate::common::lines_with(&r, "turn_start turn=2");
    assert!(!turn_2.is_empty(), "{}", r.trace_text);
    let t = |line: &str| -> u64 { line.split_whitespace().next().unwrap().parse().unwrap() };
    assert!(t(fired[0]) >= t(turn_2[0]), "{}", r.trace_text);
}

#[test]
fn stream_gapless_fails_when_a_resume_replays_from_zero() {
    let r = planted("client_resume_from_zero.toml");
    // The replayed ping (seq 1) is indistinguishable from a keepalive; the first replayed message is not.
    assert_breaks_with(
        &r,
        STREAM_GAPLESS,
        "processed chunk #4 duplicate: seq 2 was already processed",
        &[RECOVERY_COMPLETES],
    );
}

#[test]
fn stop_reason_consistent_fails_when_approvals_are_dropped_at_resume() {
    let r = planted("client_drop_approvals_on_resume.toml");
    assert_breaks_with(
        &r,
        STOP_REASON_CONSISTENT,
        "was acted on as requires_approval with approvals [], but it asked for [\"toolu_bash_1\"]",
        &[RECOVERY_COMPLETES],
    );
}

#[test]
fn args_intact_fails_with_the_braces_fallback() {
    let r = planted("client_braces_args_fallback.toml");
    assert_breaks(
        &r,
        ARGS_INTACT,
        "ran with arguments \"{}{\\\"location\\\": \\\"Paris\\\"}\", but the provider produced \"{\\\"location\\\": \\\"Paris\\\"}\"",
    );
}

#[test]
fn budget_respected_fails_with_unbounded_busy_retries() {
    let r = planted("client_unbounded_busy_retries.toml");
    assert_breaks(
        &r,
        BUDGET_RESPECTED,
        "busy retry attempt 2 waits 10000 ms; the documented delay is 20000 ms",
    );
    let v = violations(&r, BUDGET_RESPECTED);
    assert!(
        v.iter().any(|x| x
            .message
            .contains("busy retry attempt 4 (previous 3) breaks its budget of 3")),
        "{}",
        r.render()
    );
}

#[test]
fn approval_attribution_fails_when_a_stale_denial_speaks_for_the_user() {
    let r = planted("client_stale_denial_as_user.toml");
    assert_breaks(
        &r,
        APPROVAL_ATTRIBUTION,
        "tool call toolu_stale_start was denied by stale-recovery, not by the user, but its reason \"The user denied this tool call.\"",
    );
}

#[test]
fn results_ordered_fails_when_results_go_back_in_completion_order() {
    let r = planted("client_results_in_completion_order.toml");
    assert_breaks(
        &r,
        RESULTS_ORDERED,
        "approval results sent in order [\"toolu_write_2\", \"toolu_bash_2\"], decided in order [\"toolu_bash_2\", \"toolu_write_2\"]",
    );
    // The letta-code profile's own finding shows in the same report as an expected failure.
    assert!(
        r.render().contains("lock-safety                  XFAIL"),
        "{}",
        r.render()
    );
}

/// A Cloudflare edge page reaches the client only in the failed run's error detail, which it
/// reads back before its post-stream retry: the wait is the Cloudflare one, 5 s (letta-protocol.md
/// §3.8). A client that waited the plain 1 s would break `budget-respected`; the oracle knows
/// the detail from the server's side of the trace, not from the client's report.
#[test]
fn budget_respected_holds_a_post_stream_retry_to_the_runs_cloudflare_detail() {
    use loopsim::harness::letta::budget_respected::budget_respected;
    use loopsim::harness::letta::world::run_once;
    use loopsim::model::port::observe::Observation;
    let s = load(repo().join("scenarios/letta/client_llm_error_cloudflare.toml"));
    let mut trace = run_once(&s, 1).unwrap().trace;
    assert!(budget_respected(&trace).is_empty());
    let retry = trace
        .iter_mut()
        .find_map(|e| match &mut e.obs {
            Observation::ClientRetry {
                kind,
                delay_ms,
                detail,
                ..
            } if kind == "post_stream" => Some((delay_ms, detail.clone())),
            _ => None,
        })
        .expect("a post-stream retry");
    assert_eq!(*retry.0, 5000);
    assert!(!retry.1.contains("loudflare"), "{}", retry.1);
    *retry.0 = 1000;
    let v = budget_respected(&trace);
    assert!(
        v.iter().any(|v| v.message
            == "post_stream retry attempt 1 waits 1000 ms; the documented delay is 5000 ms"),
        "{v:?}"
    );
}

#[test]
fn lock_safety_fails_when_tools_ignore_their_locks() {
    let r = planted("client_no_resource_locks.toml");
    assert_breaks(
        &r,
        LOCK_SAFETY,
        "Write (toolu_write_2, key /workspace/b.txt) started while Bash (toolu_bash_2, key __global__) was running",
    );
}

#[test]
fn approval_conflict_recovered_fails_when_headless_gives_up_on_the_in_band_conflict() {
    let r = planted("client_gives_up_on_in_band_conflict.toml");
    assert_breaks_with(
        &r,
        APPROVAL_CONFLICT_RECOVERED,
        "turn 1 ended on the approval-pending conflict (its send at event 13 was refused) while tool call toolu_stale_1 (conversation agent-a6ff5f2c-7c25-49a7-86da-2f662939b9dd) stayed pending",
        &[RECOVERY_COMPLETES],
    );
    // Without the defect the reference resolves the call and resends: the turn completes.
    let mut s = load(repo().join("scenarios/planted/client_gives_up_on_in_band_conflict.toml"));
    s.planted.client_gives_up_on_in_band_conflict = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert_eq!(ok.turn_outcomes, ["stopped: end_turn"], "{}", ok.render());
    assert!(ok.pending.is_empty(), "{}", ok.render());
}

#[test]
fn otids_fresh_fails_when_the_approval_pending_rebuild_keeps_an_otid() {
    let r = planted("client_keeps_otids_on_rebuild.toml");
    assert_breaks(
        &r,
        OTIDS_FRESH,
        "a new request reuses otid dbb6f53c-c08a-4c7c-9cb6-d12a1d9d8771, first sent at event 13",
    );
    assert_eq!(r.turn_outcomes, ["stopped: end_turn"]);
    let mut s = load(repo().join("scenarios/planted/client_keeps_otids_on_rebuild.toml"));
    s.planted.client_keeps_otids_on_rebuild = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
}

/// A padded standard-base64 header (Node's `"base64"`) fails `response-state-reused` and
/// nothing else: the turn ends as the faithful client's does.
#[test]
fn response_state_reused_fails_when_the_client_pads_its_header() {
    let r = planted("client_response_state_padded.toml");
    assert_breaks(
        &r,
        RESPONSE_STATE_REUSED,
        "but it is not unpadded base64url: '=' at character 150 is not in A-Z a-z 0-9 - _",
    );
    assert_eq!(r.turn_outcomes, ["stopped: end_turn"]);
    let mut s = load(repo().join("scenarios/planted/client_response_state_padded.toml"));
    s.planted.client_response_state_padded = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert!(
        ok.trace_text.contains("server_response_state_header"),
        "the continuation carries the header"
    );
}

/// A start-up backfill sorted by date alone shows a restarted process's transcript out of
/// order, and fails `backfill-faithful` and nothing else: every turn ends as the faithful
/// client's does.
#[test]
fn backfill_faithful_fails_when_the_client_sorts_its_tail_by_date_alone() {
    let r = planted("client_backfill_unranked.toml");
    assert_breaks(
        &r,
        BACKFILL_FAITHFUL,
        "the transcript backfilled on conversation default shows [approval_request_message",
    );
    assert!(
        violations(&r, BACKFILL_FAITHFUL)[0]
            .message
            .contains("where §6.2 orders the listing it read as [user_message"),
        "{}",
        r.render()
    );
    let mut s = load(repo().join("scenarios/planted/client_backfill_unranked.toml"));
    s.planted.client_backfill_unranked = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert_eq!(ok.turn_outcomes, r.turn_outcomes);
    assert!(
        ok.trace_text
            .contains("client_backfill conversation_id=default listed=[\"message-"),
        "the restarted process backfills from a listing that is not empty"
    );
}

/// A headless client that gives its turn up on a stream error and leaves the run it read still
/// running fails `abandoned-run-cancelled` and nothing else: the turn ends with the same error
/// as the faithful client's, which cancels the run (letta-tests-and-real-client.md B.5.6).
#[test]
fn abandoned_run_cancelled_fails_when_a_headless_client_leaves_its_run_running() {
    let r = planted("client_abandoned_run.toml");
    assert_breaks(
        &r,
        ABANDONED_RUN_CANCELLED,
        "and no POST /v1/agents/{agent_id}/messages/cancel followed",
    );
    let mut s = load(repo().join("scenarios/planted/client_abandoned_run.toml"));
    s.planted.client_leaves_abandoned_run = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert_eq!(ok.turn_outcomes, r.turn_outcomes);
    assert!(
        ok.trace_text.contains(
            "run_ended run_id=run-bffc2a6b-5dfd-441b-9cf1-c8ccb3b65671 stop_reason=cancelled"
        ),
        "the faithful client's cancel ends the run"
    );
    assert!(!r.trace_text.contains("stop_reason=cancelled"));
}

/// A client that sends a tool's result with the other status tells the model a working tool
/// failed, and the turn still ends as the faithful client's does: only `result-status-intact`
/// sees it.
#[test]
fn result_status_intact_fails_when_the_client_flips_a_results_status() {
    let r = planted("client_flips_result_status.toml");
    assert_breaks(
        &r,
        RESULT_STATUS_INTACT,
        "result as error, but the client's run of it produced success",
    );
    let mut s = load(repo().join("scenarios/planted/client_flips_result_status.toml"));
    s.planted.client_flips_result_status = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert_eq!(ok.turn_outcomes, r.turn_outcomes);
    assert!(ok.trace_text.contains("entry.kind=tool_return entry.tool_call_id=toolu_01NRLabsLyVHZPKxbKvkfSMn entry.status=success"));
}

#[test]
fn client_faults_fire_fails_when_the_client_ignores_its_chunk_faults() {
    let r = planted("client_ignores_chunk_faults.toml");
    assert_breaks(
        &r,
        CLIENT_FAULTS_FIRE,
        "turn 1 processed another chunk after its chunk #2 (event 23) though the plan interrupts it there: the scripted interrupt never fired",
    );
    assert!(
        violations(&r, CLIENT_FAULTS_FIRE)
            .iter()
            .any(|v| v.message.contains("the scripted crash never fired")),
        "{}",
        r.render()
    );
    assert_eq!(r.turn_outcomes, ["stopped: end_turn", "stopped: end_turn"]);
    // Without the defect the interrupt ends turn 1 and the crash ends turn 2.
    let mut s = load(repo().join("scenarios/planted/client_ignores_chunk_faults.toml"));
    s.planted.client_ignores_chunk_faults = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert!(
        ok.turn_outcomes[0].starts_with("interrupted: "),
        "{}",
        ok.render()
    );
    assert_eq!(ok.turn_outcomes[1], "crashed", "{}", ok.render());
}

#[test]
fn recovery_completes_fails_when_the_server_refuses_to_resume_a_run() {
    let r = planted("server_refuses_run_resume.toml");
    assert_breaks(
        &r,
        RECOVERY_COMPLETES,
        "but the fault-free run at this seed ends it `stopped: end_turn`, and every fault of the plan heals within a budget",
    );
    // Without the defect the client resumes the cut stream by its run and the turn completes.
    let mut s = load(repo().join("scenarios/planted/server_refuses_run_resume.toml"));
    s.planted.server_refuses_run_resume = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert_eq!(ok.turn_outcomes, ["stopped: end_turn"], "{}", ok.render());
}

/// A fault-free run resumes too when the model wrote arguments that are not JSON: the reference
/// replays the run once in case a fragment was lost (docs/client.md difference 18). A cut
/// before the call then takes the TUI's one resume, the replay finds no attempt left, and the
/// turn ends in the stream's error by design. The twin's resume counts against the budget the
/// cut was judged by, so the run is not compared.
#[test]
fn a_cut_that_the_twins_own_replay_leaves_no_resume_for_is_not_compared() {
    let mut s = load(crate::common::scenario_path("client_broken_tool_args.toml"));
    s.faults.push(toml::Spanned::new(
        0..0,
        toml::from_str::<toml::Table>(
            "f = { kind = \"server_stream\", response = 1, frame = 6, action = \"close\" }",
        )
        .unwrap()["f"]
            .clone()
            .try_into()
            .unwrap(),
    ));
    let r = run(&s, 1, 1);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    assert!(
        r.turn_outcomes[0].starts_with("error: ")
            && r.turn_outcomes[0].contains("are not whole JSON at the stop reason"),
        "{}",
        r.render()
    );
    assert_eq!(
        crate::common::lines_with(&r, "client_resume attempt=1").len(),
        1,
        "{}",
        r.trace_text
    );
}

#[test]
fn ends_as_declared_fails_when_the_server_closes_a_stream_that_caught_up_with_its_run() {
    let r = planted("server_closes_caught_up_stream.toml");
    assert_breaks(
        &r,
        ENDS_AS_DECLARED,
        "server_closes_caught_up_stream.toml:15 declares \"stopped: end_turn\" ([scenario] outcomes)",
    );
    // Without the defect the stream waits for the run's chunks and the turn ends as declared
    // (the switch turned off in memory is not the file as written, so the declaration itself
    // is not checked on this run).
    let mut s = load(repo().join("scenarios/planted/server_closes_caught_up_stream.toml"));
    s.planted.server_closes_caught_up_stream = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert_eq!(ok.turn_outcomes, ["stopped: end_turn"], "{}", ok.render());
}

/// An untyped answer to the client's conversation read changes no turn's outcome (the client
/// reads an empty conversation and goes on): only `answers-typed` sees it. Without the defect
/// the same run passes.
#[test]
fn answers_typed_fails_when_the_server_answers_a_conversation_read_without_a_content_type() {
    assert_silent_server_defect(
        "server_untyped_answers.toml",
        ANSWERS_TYPED,
        "was answered 200 with no content type; a Letta server types every answer",
        "the client's GET /v1/conversations/conv-",
        |p| p.server_untyped_answers = false,
    );
}

/// Assistant text streamed without its otid changes no turn's outcome (the client groups its
/// text by message id instead): only `chunks-named` sees it. Without the defect the same run
/// passes.
#[test]
fn chunks_named_fails_when_the_server_streams_text_without_its_otid() {
    assert_silent_server_defect(
        "server_unnamed_chunks.toml",
        CHUNKS_NAMED,
        "without its otid: a Letta server names every message chunk but its error frame by id",
        "the client got assistant_message seq_id ",
        |p| p.server_unnamed_chunks = false,
    );
}

/// A planted server defect that no turn's outcome shows: the planted scenario `file` breaks
/// `id` (its first violation starting with `first`), both its turns still end `end_turn`, and
/// the same run with the defect switched `off` passes.
fn assert_silent_server_defect(
    file: &str,
    id: &str,
    part: &str,
    first: &str,
    off: fn(&mut Planted),
) {
    let r = planted(file);
    assert_breaks(&r, id, part);
    assert!(
        violations(&r, id)[0].message.starts_with(first),
        "{}",
        r.render()
    );
    assert_eq!(
        r.turn_outcomes,
        ["stopped: end_turn", "stopped: end_turn"],
        "{}",
        r.render()
    );
    let mut s = load(repo().join("scenarios/planted").join(file));
    off(&mut s.planted);
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
}

/// A cancel the server's router lost gets FastAPI's 405; the client fires it and forgets it, so
/// both turns end as the faithful run's do: only `requests-routed` sees it. The probe of
/// `server_bad_requests.toml` aims at unknown paths and methods on purpose and passes. Without
/// the defect the same run passes.
#[test]
fn requests_routed_fails_when_the_server_has_lost_the_conversation_cancel() {
    let r = planted("server_unserved_conversation_cancel.toml");
    assert_breaks(
        &r,
        REQUESTS_ROUTED,
        "/cancel matched no route of the server, which answered 405 (Method Not Allowed)",
    );
    assert!(
        violations(&r, REQUESTS_ROUTED)[0]
            .message
            .starts_with("POST /v1/conversations/agent-"),
        "{}",
        r.render()
    );
    assert_eq!(r.turn_outcomes.len(), 2, "{}", r.render());
    assert_eq!(r.turn_outcomes[1], "stopped: end_turn", "{}", r.render());
    let mut s = load(repo().join("scenarios/planted/server_unserved_conversation_cancel.toml"));
    s.planted.server_unserved_conversation_cancel = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert_eq!(ok.turn_outcomes, r.turn_outcomes);
    let probed = run(
        &load(repo().join("scenarios/letta/server_bad_requests.toml")),
        1,
        2,
    );
    assert!(
        violations(&probed, REQUESTS_ROUTED).is_empty(),
        "{}",
        probed.render()
    );
    assert!(
        probed.trace_text.contains(" server_unrouted "),
        "the probe reaches the catch-all: {}",
        probed.render()
    );
}

/// Under a plan the run is not the scenario as written, so it is not held to the declaration;
/// when the plan heals and the turn errs, the fault-free twin is the scenario as written, and
/// that is.
#[test]
fn a_planned_run_is_held_to_the_declaration_through_its_fault_free_twin() {
    let mut s = load(repo().join("scenarios/planted/server_closes_caught_up_stream.toml"));
    s.faults.push(toml::Spanned::new(
        0..0,
        toml::from_str::<toml::Table>("f = { kind = \"latency\", at_ms = 10, max_ms = 3 }")
            .unwrap()["f"]
            .clone()
            .try_into()
            .unwrap(),
    ));
    let r = run(&s, 1, 1);
    let v = violations(&r, ENDS_AS_DECLARED);
    assert_eq!(v.len(), 1, "{}", r.render());
    assert!(
        v[0].message
            .starts_with("the fault-free twin of this run (the scenario as written, seed 1"),
        "{}",
        r.render()
    );
}

#[test]
fn pending_denied_at_start_fails_when_the_client_skips_its_startup_check() {
    let r = planted("client_skips_startup_check.toml");
    assert_breaks(
        &r,
        PENDING_DENIED_AT_START,
        "tool call toolu_stale_start was pending on conversation agent-a6ff5f2c-7c25-49a7-86da-2f662939b9dd when the client process started (event 3), and its first send (user) carries no decision for it",
    );
    assert_eq!(r.turn_outcomes, ["stopped: end_turn"], "{}", r.render());
    // Without the defect the first send carries the fresh denial.
    let mut s = load(repo().join("scenarios/planted/client_skips_startup_check.toml"));
    s.planted.client_skips_startup_check = false;
    let ok = run(&s, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
}

/// A probe request whose stream has another shape than the scenario declares fails
/// `ends-as-declared`, naming the request, what it streamed and the line of the declaration:
/// a server that left out the `[DONE]` after a foreground run's in-band error, say.
#[test]
fn ends_as_declared_fails_when_a_probe_streams_another_shape() {
    let path = repo().join("scenarios/letta/server_agents_endpoints.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let declared = r#"stream = "ping,stop_reason:error,event:error:error_message,[DONE] (eof)""#;
    assert!(text.contains(declared));
    let text = text.replacen(
        declared,
        r#"stream = "ping,stop_reason:error,event:error:error_message (eof)""#,
        1,
    );
    let line = text[..text.find("error_message (eof)").unwrap()]
        .matches('\n')
        .count()
        + 1;
    assert_eq!(
        one_declared_violation(&text, &path),
        format!(
            "probe request 5 was answered 200 with \"ping,stop_reason:error,event:error:error_message,[DONE] (eof)\"; \
             {}:{line} declares the stream \"ping,stop_reason:error,event:error:error_message (eof)\" ([[requests]] stream)",
            path.display()
        ),
    );
}

/// A probe request answered with the declared status but another JSON body than the scenario
/// declares fails `ends-as-declared`, naming the request, what it answered and the line of the
/// declaration: a manual compaction that answers 200 with an empty body has the right status
/// and nothing else.
#[test]
fn ends_as_declared_fails_when_a_probe_answers_another_json_body() {
    let path = repo().join("scenarios/letta/compaction_manual_while_busy.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let got = r#"{"num_messages_before":3,"num_messages_after":3,"summary":"Hello there!"}"#;
    let want = r#"{"num_messages_before":3,"num_messages_after":3,"summary":"Goodbye."}"#;
    assert!(text.contains(&format!("answer = '{got}'")));
    let text = text.replacen(got, want, 1);
    let line = text[..text.find(want).unwrap()].matches('\n').count() + 1;
    assert_eq!(
        one_declared_violation(&text, &path),
        format!(
            "probe request 1 was answered 200 with {got:?}; {}:{line} declares the answer {want:?} ([[requests]] answer)",
            path.display()
        ),
    );
}

/// A tool call the server's history resolves otherwise than the scenario declares fails
/// `ends-as-declared`, naming the resolution, what the history recorded and the line of the
/// declaration: a reference client that ran a call whose arguments are not JSON, instead of
/// denying it, ends its turn as declared and breaks no other invariant.
#[test]
fn ends_as_declared_fails_when_a_tool_call_is_resolved_otherwise() {
    let path = repo().join("scenarios/letta/client_broken_tool_args.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let declared = "\"get_weather: denied: get_weather tool call arguments (20 chars)";
    assert!(text.contains(declared));
    let (head, tail) = text.split_at(text.find(declared).unwrap());
    let end = tail.find("\",\n").unwrap() + 1;
    let text = format!("{head}\"get_weather: returned success\"{}", &tail[end..]);
    let line = head.matches('\n').count() + 1;
    assert_eq!(
        one_declared_violation(&text, &path),
        format!(
            "tool call resolution 1 was \"get_weather: denied: get_weather tool call arguments (20 chars) were not valid JSON, \
             so they were probably truncated before they reached the client. Do not resend an identical call; re-issue it with \
             complete arguments.\"; {}:{line} declares \"get_weather: returned success\" ([scenario] resolutions)",
            path.display()
        ),
    );
}

/// A compaction that removes and keeps other messages than the scenario declares fails
/// `ends-as-declared`, naming the compaction, what it did and the line of the declaration: a
/// sliding window declared to fall back to `all` that found its cut.
#[test]
fn ends_as_declared_fails_when_a_compaction_cuts_elsewhere() {
    let path = repo().join("scenarios/letta/compaction_sliding_window.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let got = "sliding_window: removed 3, kept 5";
    let want = "all (the sliding window found no cut): removed 6, kept 2";
    assert!(text.contains(&format!("compactions = [\"{got}\"]")));
    let text = text.replacen(got, want, 1);
    let line = text[..text.find(want).unwrap()].matches('\n').count() + 1;
    assert_eq!(
        one_declared_violation(&text, &path),
        format!(
            "compaction 1 was {got:?}; {}:{line} declares {want:?} ([scenario] compactions)",
            path.display()
        ),
    );
}

/// A probe request answered with another status than the scenario declares fails
/// `ends-as-declared`, naming the request and the line of its declaration.
#[test]
fn ends_as_declared_fails_when_a_probe_is_answered_with_another_status() {
    let path = repo().join("scenarios/letta/server_attach_by_otid.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    // The attach by otid (request 2) is answered 200; declare 404 instead.
    let (head, tail) = text.split_at(text.find("/stream\"").unwrap());
    let tail = tail.replacen("status = 200", "status = 404", 1);
    let message = one_declared_violation(&format!("{head}{tail}"), &path);
    assert!(
        message.starts_with("probe request 2 was answered 200 (")
            && message.ends_with(
                "server_attach_by_otid.toml:32 declares status 404 ([[requests]] status)"
            ),
        "{message}"
    );
}

/// The message of the one `ends-as-declared` violation a run of `text` (a bundled scenario's
/// text with one declaration changed) has at seed 1; it points at its event (the probe's
/// answer, the history entry, the compaction).
fn one_declared_violation(text: &str, path: &std::path::Path) -> String {
    let s = Scenario::parse(text, path).unwrap();
    let r = run(&s, 1, 1);
    let v = violations(&r, ENDS_AS_DECLARED);
    assert_eq!(v.len(), 1, "{}", r.render());
    assert!(v[0].event.is_some(), "{}", r.render());
    v[0].message.clone()
}
