//! One scenario per server mechanism (scenarios/server_*.toml), run in simulation: each test
//! asserts on what the server answered (the probe's summaries) and recorded (the trace). And the
//! server invariants broken on purpose (scenarios/planted/server_*.toml), with the report.

use std::path::Path;

use crate::common::{load, scenario_path, violations};
use loopsim::harness::invariants::{
    DATES_TRUE, DURABLE_ACK, HISTORY_VALID, ONE_RUN_PER_REQUEST, OTIDS_FRESH,
    PENDING_DENIED_AT_START, SEND_FAULTS_FIRE, STREAM_STAYS_IN_CONVERSATION,
};
use loopsim::harness::report::{RunReport, Verdict};
use loopsim::harness::run::run_scenario;

/// Runs a scenario (a path relative to the crate root) twice with `seed`.
fn run_at(path: &Path, seed: u64) -> RunReport {
    crate::common::run(&load(path), seed, 2)
}

/// Runs `scenarios/letta/<name>` twice with `seed`.
fn run(name: &str, seed: u64) -> RunReport {
    run_at(&scenario_path(name), seed)
}

fn passing(name: &str) -> RunReport {
    let r = run(name, 1);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    r
}

/// The probe's n-th answer: `status=… summary=…`.
fn probe(r: &RunReport, n: u32) -> String {
    let tag = format!("probe_response n={n} ");
    r.trace_text
        .lines()
        .find(|l| l.contains(&tag))
        .unwrap_or_else(|| panic!("no probe response {n}:\n{}", r.trace_text))
        .split_once(&tag)
        .unwrap()
        .1
        .to_string()
}

#[test]
fn replay_starting_after_follows_a_live_run_to_done() {
    let r = passing("server_replay_live.toml");
    assert_eq!(
        probe(&r, 1),
        "status=200 summary=\"ping#1,assistant_message#2 (hung up)\""
    );
    let replay = probe(&r, 2);
    assert!(
        replay.starts_with("status=200 summary=\"assistant_message#3,approval_request_message#4,"),
        "{replay}"
    );
    assert!(
        replay.ends_with("stop_reason:requires_approval,usage_statistics,[DONE] (eof)\""),
        "{replay}"
    );
    assert!(
        probe(&r, 3).contains(r#"\"status\":\"completed\",\"stop_reason\":\"requires_approval\""#)
    );
}

#[test]
fn attach_by_otid_streams_the_rest_and_an_unknown_otid_is_404_after_polling() {
    let r = passing("server_attach_by_otid.toml");
    assert!(r.trace_text.contains("how=conversation_stream"));
    assert!(probe(&r, 2).starts_with("status=200 summary=\"assistant_message#2,"));
    assert_eq!(
        probe(&r, 3),
        "status=404 summary=\"No run found for otid=nobody. The run may have expired or never existed.\""
    );
    // Polled 0.25 + 0.5 + 1 s before answering (captures/letta_e2e flow e: ≈1.76 s).
    let t = |tag: &str| -> u64 {
        let l = r.trace_text.lines().find(|l| l.contains(tag)).unwrap();
        l.split_whitespace().next().unwrap().parse().unwrap()
    };
    let waited = t("probe_response n=3") - t("probe_request n=3");
    assert!((1750..1800).contains(&waited), "{waited} ms");
}

#[test]
fn a_duplicate_request_token_reattaches_instead_of_starting_a_second_run() {
    let r = passing("server_dedupe.toml");
    assert_eq!(r.trace_text.matches(" run_started ").count(), 1);
    assert_eq!(r.trace_text.matches(" provider_call ").count(), 1);
    assert!(r.trace_text.contains("how=request_token"));
    assert_eq!(
        probe(&r, 1),
        probe(&r, 2),
        "the re-attach replays the same frames"
    );
    assert!(violations(&r, ONE_RUN_PER_REQUEST).is_empty());
}

#[test]
fn busy_409_names_the_lock_holder() {
    let r = passing("server_busy.toml");
    let run_id = r
        .trace_text
        .lines()
        .find_map(|l| l.split("run_started run_id=").nth(1))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        probe(&r, 1),
        format!(
            "status=409 summary=\"CONFLICT: Cannot send a new message: Another request (run_id={run_id}) is currently being processed for this conversation. Please wait for it to complete.\""
        )
    );
    assert_eq!(r.turn_outcomes, ["stopped: end_turn"]);
}

const PENDING: &str = "CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call. Please approve or deny the pending request before continuing.";

#[test]
fn approval_conflicts_in_band_409_invalid_ids_and_nothing_pending() {
    let r = passing("server_approval_conflicts.toml");
    // In-band (captures d8): 200, ping, stop_reason error, event: error, no [DONE].
    assert_eq!(
        probe(&r, 1),
        "status=200 summary=\"ping#1,stop_reason:error,event:error:error_message#3 (eof)\""
    );
    assert_eq!(probe(&r, 2), format!("status=409 summary=\"{PENDING}\""));
    assert_eq!(
        probe(&r, 3),
        "status=400 summary=\"Invalid tool call IDs. Expected '['toolu_01NRLabsLyVHZPKxbKvkfSMn']', but received '['toolu_wrong']'.\""
    );
    assert!(probe(&r, 4).ends_with("stop_reason:end_turn,usage_statistics,[DONE] (eof)\""));
    assert!(
        r.trace_text
            .contains("entry.kind=tool_return entry.tool_call_id=toolu_01NRLabsLyVHZPKxbKvkfSMn")
    );
    assert_eq!(
        probe(&r, 5),
        "status=200 summary=\"ping#1,stop_reason:error,event:error:error_message#3 (eof)\""
    );
    let r409 = passing("server_approval_conflicts_409.toml");
    assert_eq!(probe(&r409, 1), format!("status=409 summary=\"{PENDING}\""));
}

#[test]
fn cancel_ends_the_active_run_and_a_second_cancel_is_409() {
    let r = passing("server_cancel.toml");
    assert!(r.trace_text.contains(" run_cancelled "));
    assert!(
        r.trace_text.contains("message_type=stop_reason")
            && r.trace_text.contains("stop_reason=cancelled")
    );
    assert!(probe(&r, 1).contains(r#"\"status\":\"cancelled\""#));
    assert!(
        probe(&r, 2).starts_with("status=409 summary=\"No active runs to cancel for conversation")
    );
    assert!(probe(&r, 3).contains(r#"\"status\":\"cancelled\",\"stop_reason\":\"cancelled\""#));
    assert_eq!(r.turn_outcomes, ["stopped: cancelled"]);
    // The cancelled run's provider call left nothing in history.
    assert!(!r.trace_text.contains("entry.kind=assistant"));
}

#[test]
fn a_crash_and_restart_keeps_everything_acknowledged_and_ends_the_run_incomplete() {
    let r = passing("server_restart.toml");
    assert!(violations(&r, DURABLE_ACK).is_empty());
    assert!(r.trace_text.contains(" server_recovered "));
    assert!(r.trace_text.contains("message_type=error_message"));
    assert!(probe(&r, 1).contains(r#"\"status\":\"failed\",\"stop_reason\":\"error\""#));
    assert!(probe(&r, 1).contains("stream_incomplete"));
}

#[test]
fn local_profile_settles_orphans_with_turn_did_not_complete() {
    let r = passing("server_local_settle.toml");
    assert!(r.trace_text.contains("entry.kind=settled entry.tool_call_id=toolu_01NRLabsLyVHZPKxbKvkfSMn entry.reason=\"Turn did not complete\""));
    assert!(r.trace_text.contains("run_id=local-run-"));
    assert!(violations(&r, HISTORY_VALID).is_empty());
    // The second turn (the probe's plain message) is answered after the settlement.
    assert!(probe(&r, 1).starts_with("status=200"), "{}", probe(&r, 1));
}

/// The local backend's conversation cancel settles the calls left without a result even when
/// no run is going (letta-protocol.md §7.4): turn 1's orphaned call is closed "Interrupted by
/// user" and the cancel answers `{"status":"cancelled"}`. A cloud server answers 409 instead
/// and the call stays pending (§9.3).
#[test]
fn a_local_cancel_with_no_run_going_settles_the_orphaned_call() {
    let mut s = load(scenario_path("server_local_settle.toml"));
    let cancel = s.requests[0].get_mut();
    cancel.path = "/v1/conversations/agent-a6ff5f2c-7c25-49a7-86da-2f662939b9dd/cancel".into();
    cancel.body = None;
    cancel.status = Some(200);
    let r = crate::common::run(&s, 1, 2);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    assert!(
        probe(&r, 1).contains(r#"\"status\":\"cancelled\""#),
        "{}",
        probe(&r, 1)
    );
    assert!(
        r.trace_text.contains(
            "entry.kind=settled entry.tool_call_id=toolu_01NRLabsLyVHZPKxbKvkfSMn entry.reason=\"Interrupted by user\""
        ),
        "{}",
        r.trace_text
    );
}

/// A send with `streaming: false` is answered once its run has finished, with one JSON object
/// of the run's messages, stop reason and usage (`LettaResponse`). Here the provider has no
/// answer left, so the run ends `llm_api_error`, and the object says so.
#[test]
fn a_non_streaming_send_is_answered_with_the_finished_runs_json() {
    let mut s = load(scenario_path("approval_turn.toml"));
    s.requests.push(toml::Spanned::new(
        0..0,
        toml::from_str::<toml::Table>(
            r#"r = { at_ms = 2000, path = "/v1/conversations/agent-a6ff5f2c-7c25-49a7-86da-2f662939b9dd/messages", body = '{"messages":[{"type":"message","role":"user","content":"And tomorrow?","otid":"probe-otid-1"}],"streaming":false}' }"#,
        )
        .unwrap()["r"]
            .clone()
            .try_into()
            .unwrap(),
    ));
    let r = crate::common::run(&s, 1, 2);
    let answer = probe(&r, 1);
    assert!(answer.starts_with("status=200"), "{answer}");
    assert!(answer.contains("stop_reason"), "{answer}");
    assert!(answer.contains("llm_api_error"), "{answer}");
}

/// Finding docs/findings.md#local-turns-interleave: without swarm, every seed shows it (the
/// scenario's `[[expect]]` says `sometimes = true`, so an XPASS would not be noticed; this is
/// where it is).
#[test]
fn local_turns_interleave_on_a_resume_and_the_next_model_call_is_refused() {
    for seed in 0..8 {
        let r = run("server_local_turns_interleave.toml", seed);
        assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
        assert_eq!(
            r.expected,
            [(HISTORY_VALID, "local-turns-interleave".to_string(), true)],
            "seed {seed}:\n{}",
            r.render()
        );
        assert!(
            violations(&r, HISTORY_VALID)[0]
                .message
                .contains("ids were found without `tool_result` blocks immediately after"),
            "{}",
            r.render()
        );
    }
}

/// The same finding leaves a restarted client blind to a pending call: the resumed turn wrote
/// its answer after turn 1's tool call, the resume data reads the last message, and the first
/// send after the restart decides nothing. A guided sweep met it (`compaction_summariser_5xx`
/// seed 913000960); the local scenarios expect `pending-denied-at-start` where the trace shows
/// the interleaving.
#[test]
fn an_interleaved_turn_hides_a_pending_call_from_the_restarted_client() {
    let s = crate::common::with_plan(
        load(scenario_path("compaction_summariser_5xx.toml")),
        &[
            r#"{ kind = "server_stream", response = 1, frame = 1, action = "close" }"#,
            r#"{ kind = "client_crash", turn = 1, at = "after_chunk", after_chunk = 4 }"#,
        ],
    );
    let r = crate::common::run(&s, 913000960, 1);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    let expected: Vec<_> = r
        .expected
        .iter()
        .map(|(id, finding, failed)| (*id, finding.as_str(), *failed))
        .collect();
    assert_eq!(
        expected,
        [
            (HISTORY_VALID, "local-turns-interleave", true),
            (PENDING_DENIED_AT_START, "local-turns-interleave", true),
        ],
        "{}",
        r.render()
    );
}

/// The same finding met by swarm seeds of `server_local_settle`: XFAIL where the trace shows
/// two turns interleaved (2562: a held provider keeps turn 1 going past the probe's send;
/// 10032: a cut stream's resume starts the second turn); and a history-valid violation without
/// that signature still fails (the plain scenario with its orphan settling switched off).
#[test]
fn the_interleaving_finding_is_expected_only_where_the_trace_shows_it() {
    use loopsim::harness::explore::{baseline, with_swarm};
    let s = load(scenario_path("server_local_settle.toml")).with_tick(Some(10));
    for seed in [2562, 10032] {
        let r = run_scenario(&with_swarm(&s, seed, &baseline(&s).unwrap()), seed, 1).unwrap();
        assert_eq!(r.verdict, Verdict::Pass, "{seed}: {}", r.render());
        assert!(
            r.render().contains("history-valid                XFAIL"),
            "{}",
            r.render()
        );
    }
    let mut unfixed = load(scenario_path("server_local_settle.toml"));
    unfixed.planted.server_skips_orphan_settling = true;
    let r = run_scenario(&unfixed, 1, 1).unwrap();
    assert_eq!(r.verdict, Verdict::Correctness, "{}", r.render());
    assert!(r.expected.is_empty(), "{}", r.render());
}

#[test]
fn bad_requests_get_json_errors_never_a_panic_or_hang() {
    let r = passing("server_bad_requests.toml");
    assert!(probe(&r, 1).starts_with("status=422 "));
    assert_eq!(
        probe(&r, 2),
        "status=404 summary=\"Conversation not found with id='conv-nope'\""
    );
    assert!(probe(&r, 3).starts_with("status=404 summary=\"Run not found with id='['run-nope']'"));
    assert_eq!(probe(&r, 4), "status=405 summary=\"Method Not Allowed\"");
    assert_eq!(probe(&r, 5), "status=404 summary=\"Not Found\"");
    assert!(probe(&r, 6).starts_with("status=400 summary=\"Cannot process approval response"));
    // Foreground: seq_id null on every frame (captures PROVENANCE).
    assert!(probe(&r, 7).starts_with("status=200 summary=\"ping,assistant_message,"));
    assert_eq!(
        probe(&r, 8),
        "status=400 summary=\"INVALID_ARGUMENT: Run was not created in background mode, so it cannot be retrieved.\""
    );
    // The listing of a conversation's messages: refused for an unknown one, answered for the
    // agent's default conversation with what the foreground run wrote to it.
    assert_eq!(
        probe(&r, 9),
        "status=404 summary=\"Conversation not found with id='conv-nope'\""
    );
    let listed = probe(&r, 10);
    assert!(
        listed.starts_with("status=200 summary=\"[{") && listed.contains(r#"\"otid\":\"fg-1\""#),
        "{listed}"
    );
    // The same listing with the agent id's hyphen percent-encoded is read decoded.
    assert_eq!(probe(&r, 11), listed);
}

/// The agent endpoints of Letta 0.16.8 (captures a3, d3, e3, x1): JSON by default, a stream
/// when an SDK client asks for one, the deprecated stream endpoint, and the pending approval's
/// 409 with its detail as an object.
#[test]
fn the_agent_endpoints_answer_json_streams_and_the_pending_approval_409() {
    let r = passing("server_agents_endpoints.toml");
    assert!(
        probe(&r, 1).starts_with("status=200 summary=\"{\\\"messages\\\":[{"),
        "{}",
        probe(&r, 1)
    );
    assert_eq!(
        probe(&r, 2),
        "status=200 summary=\"ping,assistant_message,assistant_message,assistant_message,\
         stop_reason:end_turn,usage_statistics,[DONE] (eof)\""
    );
    assert!(
        probe(&r, 3).ends_with("stop_reason:requires_approval,usage_statistics,[DONE] (eof)\""),
        "{}",
        probe(&r, 3)
    );
    assert!(
        probe(&r, 4).starts_with("status=409 summary=\"{\\\"code\\\":\\\"PENDING_APPROVAL\\\","),
        "{}",
        probe(&r, 4)
    );
}

#[test]
fn shutting_down_503_starts_no_run() {
    let r = passing("server_shutting_down.toml");
    // The refused send starts no run; the client retries it after 1 s with the same otid
    // (letta-protocol.md §3.3) and only that send starts one.
    let refused = r
        .trace_text
        .find("shutting_down_503 send=1")
        .expect("the fault fired");
    let retry = r
        .trace_text
        .find("client_retry kind=shutdown_503 attempt=1 delay_ms=1000")
        .expect("the client retried");
    let started = r
        .trace_text
        .find(" run_started ")
        .expect("the retry started a run");
    assert!(refused < retry && retry < started, "{}", r.trace_text);
    assert_eq!(r.trace_text.matches(" run_started ").count(), 1);
}

// ---- planted defects: each server invariant can fail --------------------------------------

fn planted(name: &str, id: &str) -> RunReport {
    let r = run_at(&Path::new("scenarios/planted").join(name), 1);
    assert_eq!(r.verdict, Verdict::Correctness, "{}", r.render());
    assert!(!violations(&r, id).is_empty(), "{}", r.render());
    let text = r.render();
    assert!(
        text.lines().any(|l| l.split_whitespace().eq([id, "FAIL"])),
        "{text}"
    );
    assert!(
        text.contains("reproduce cargo run --release -p sim -- run"),
        "{text}"
    );
    println!("{text}");
    r
}

#[test]
fn one_run_per_request_fails_on_a_server_that_ignores_request_tokens() {
    let r = planted("server_dedupe.toml", ONE_RUN_PER_REQUEST);
    assert!(
        violations(&r, ONE_RUN_PER_REQUEST)[0]
            .message
            .contains("started a second run")
    );
}

#[test]
fn stream_stays_in_conversation_fails_when_a_new_process_repeats_an_otid() {
    let r = planted(
        "client_otids_repeat_per_process.toml",
        STREAM_STAYS_IN_CONVERSATION,
    );
    let m = &violations(&r, STREAM_STAYS_IN_CONVERSATION)[0].message;
    assert!(
        m.contains("re-attached by request token") && m.contains("of conversation conv-"),
        "{m}"
    );
    // One model call: turn 2's send got turn 1's run.
    assert_eq!(r.trace_text.matches(" run_started ").count(), 1);
    // The client's side of the same defect: turn 2's new request reused turn 1's otid.
    assert!(
        violations(&r, OTIDS_FRESH)[0]
            .message
            .contains("a new request reuses otid"),
        "{}",
        r.render()
    );
}

#[test]
fn durable_ack_fails_on_a_server_that_loses_unflushed_writes() {
    let r = planted("server_restart.toml", DURABLE_ACK);
    let m = &violations(&r, DURABLE_ACK)[0].message;
    assert!(
        m.contains("acknowledged before the crash")
            || m.contains("chunks recorded before the crash"),
        "{m}"
    );
}

#[test]
fn history_valid_fails_on_a_local_server_that_does_not_settle_orphans() {
    let r = planted("server_local_settle.toml", HISTORY_VALID);
    assert!(violations(&r, HISTORY_VALID)[0]
        .message
        .contains("`tool_use` ids were found without `tool_result` blocks immediately after: toolu_01NRLabsLyVHZPKxbKvkfSMn"));
}

/// A planted server defect that only `id` sees: the planted scenario `file` fails `id` and
/// nothing else, its first violation starts with `first`, its one turn still ends `end_turn`,
/// and the same run with the defect switched `off` passes. Returns the passing run.
fn assert_only_this_sees_it(
    file: &str,
    id: &str,
    first: &str,
    off: impl FnOnce(&mut loopsim::harness::scenario::Planted),
) -> RunReport {
    let r = planted(file, id);
    let failed: Vec<_> = r
        .invariants
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(failed, [id], "{}", r.render());
    let m = &violations(&r, id)[0].message;
    assert!(m.starts_with(first), "{m}");
    assert_eq!(r.turn_outcomes, ["stopped: end_turn"], "{}", r.render());
    let mut fixed = load(Path::new("scenarios/planted").join(file));
    off(&mut fixed.planted);
    let ok = crate::common::run(&fixed, 1, 2);
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    ok
}

/// A `Retry-After` date under the wrong weekday reads as the right wait, since the client's
/// parser skips the day name, and the turn ends as declared: only `dates-true` sees it. Without
/// the defect the same run passes.
#[test]
fn dates_true_fails_when_the_server_names_the_wrong_weekday() {
    assert_only_this_sees_it(
        "server_weekday_from_monday.toml",
        DATES_TRUE,
        "the server's 503 says `Retry-After: Mon, 01 Jan 2026 00:00:03 GMT`, whose weekday is wrong (01 Jan 2026 is a Thu); it meant 2026-01-01T00:00:03",
        |p| p.server_weekday_from_monday = false,
    );
}

/// A server that numbers no message send never asks the fault hooks about send 1 or 2, so the
/// plan's two busy answers never come and the turn ends as declared: only `send-faults-fire`
/// sees that the plan did not happen. Without the defect the same run passes, its first two
/// sends answered 409 busy.
#[test]
fn send_faults_fire_fails_when_the_server_numbers_no_send() {
    let ok = assert_only_this_sees_it(
        "server_uncounted_sends.toml",
        SEND_FAULTS_FIRE,
        "the server has answered 1 message send with a 200, but the plan's fault on send 1 never fired",
        |p| p.server_uncounted_sends = false,
    );
    assert!(
        ok.trace_text.contains("fault fault=\"busy_409 send=2\""),
        "{}",
        ok.trace_text
    );
}

#[test]
fn keepalive_pings_repeat_the_last_seq_and_a_replay_past_the_end_pings_with_null() {
    let r = passing("server_keepalive.toml");
    // Two keepalives (20 s and 40 s of silence) repeat seq 2; the idle timeout at 60 s fails
    // the run: stop_reason error then llm_api_error, then the error frame, no [DONE].
    assert_eq!(
        probe(&r, 1),
        "status=200 summary=\"ping#1,assistant_message#2,ping#2,ping#2,stop_reason:error,stop_reason:llm_api_error,event:error:error_message#5 (eof)\""
    );
    assert_eq!(probe(&r, 2), "status=200 summary=\"ping,ping (hung up)\"");
    // Keepalives are not recorded: the log has the ping, the delta and the three error frames.
    assert_eq!(r.trace_text.matches(" chunk_recorded ").count(), 5);
}

#[test]
fn stream_faults_fail_the_run_stream_lose_a_frame_and_stall() {
    let r = passing("server_stream_faults.toml");
    assert_eq!(probe(&r, 2), "status=500 summary=\"Internal Server Error\"");
    let lost = probe(&r, 3);
    assert!(
        lost.contains("approval_request_message#8,usage_statistics,[DONE]"),
        "{lost}"
    );
    assert!(!lost.contains("stop_reason"), "{lost}");
    assert_eq!(
        probe(&r, 4),
        "status=200 summary=\"assistant_message#3,approval_request_message#4 (timeout)\""
    );
}

/// A lost `content_block_stop` (frame 5 of the Bash + Write cassette) loses no call: the message
/// ends `tool_use` and both calls' arguments are whole JSON, so the run asks for both, as the
/// provider SDKs' final message would have them. Found by a swarm sweep: the server had shown
/// the client the Bash call and then asked only for Write (stop-reason-consistent).
#[test]
fn a_lost_block_close_keeps_the_call_when_the_message_ends_tool_use() {
    use loopsim::harness::faults::Fault;
    use loopsim::model::port::inject::StreamFault;
    let mut s = load(scenario_path("client_lock_safety.toml"));
    s.faults.push(toml::Spanned::new(
        0..0,
        Fault::ProviderStream {
            call: 0,
            frame: 5,
            action: StreamFault::Drop,
        },
    ));
    let r = run_scenario(&s, 1, 2).unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    assert!(
        r.trace_text
            .contains("entry.kind=tool_call entry.tool_call_id=toolu_bash_2"),
        "{}",
        r.trace_text
    );
    assert!(
        r.trace_text
            .contains("fault=\"provider_stream call=0 frame=5 action=drop\""),
        "{}",
        r.trace_text
    );
}

/// The slow-network sweep's failure (`sim explore --swarm --latency-scale 10`, seed 953 of the
/// 409 variant): a dropped provider frame truncates the call's arguments, so the client denies
/// it, but its denial meets a 409 because the probe's approval (request 4, "sunny") reached the
/// server first and started a run. The model sees the probe's result, a second party's answer
/// that `approval-attribution` reads from the probe's `approvals`, not a misattributed one.
#[test]
fn a_call_a_second_party_answered_first_is_not_misattributed_to_the_client() {
    use loopsim::harness::explore::{baseline, with_swarm};
    let seed = 953;
    let s = load(scenario_path("server_approval_conflicts_409.toml")).with_latency_scale(Some(10));
    let s = with_swarm(&s, seed, &baseline(&s).unwrap());
    let r = run_scenario(&s, seed, 1).unwrap();
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    assert!(
        r.trace_text
            .contains("probe_request n=4 method=POST path=/v1/conversations/agent-a6ff5f2c-7c25-49a7-86da-2f662939b9dd/messages approvals=[\"toolu_01NRLabsLyVHZPKxbKvkfSMn\"]"),
        "{}",
        r.trace_text
    );
    assert!(
        r.trace_text
            .contains("decision=\"deny: get_weather tool missing required parameter")
    );
}

/// The gate's guided sweep at 600 seeds (server_busy seeds 329, 358, 481 and 539): an
/// in-band stale approval planted on send 2, which is the probe's, sent while the client's run
/// holds the conversation. The server answers that send 409 busy, so no other client's run can
/// have left a call pending; the fault plants nothing there and says why. It had planted the
/// call beside the running run, which then asked for it too (`stop-reason-consistent`) and
/// sent the model a `tool_use` with no result (`history-valid`).
#[test]
fn a_stale_approval_is_not_planted_while_a_run_holds_the_conversation() {
    use loopsim::harness::faults::Fault;
    let mut s = load(scenario_path("server_busy.toml"));
    s.faults.push(toml::Spanned::new(
        0..0,
        Fault::ApprovalPendingInBand {
            send: 2,
            tool_call_id: "toolu_stale_1".into(),
            tool: "Bash".into(),
            arguments: "{}".into(),
        },
    ));
    for seed in [1, 329] {
        let r = run_scenario(&s, seed, 1).unwrap();
        assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
        assert!(
            r.trace_text.contains(
                "approval_pending send=2 tool_call_id=toolu_stale_1 not planted: run run-"
            ) && r.trace_text.contains("holds the conversation"),
            "{}",
            r.trace_text
        );
        assert!(probe(&r, 1).starts_with("status=409"), "{}", probe(&r, 1));
    }
}
