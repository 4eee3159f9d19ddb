//! Each client mechanism, observed on the wire: the protocol steps the client sends
//! (normalised: otids, runs and tool calls labelled in order of first appearance, see
//! `loopsim::harness::letta::conformance`), the retries and their delays, and where the two
//! profiles differ, both sides of the difference.

use crate::common::{
    failed_invariants, load, outcomes, run, scenario_path, with_faults, with_mode, with_plan,
    with_profile,
};
use loopsim::harness::invariants::{APPROVAL_CONFLICT_RECOVERED, RECOVERY_COMPLETES};
use loopsim::harness::letta::conformance::{RawRequest, normalise};
use loopsim::harness::report::{RunReport, Verdict};
use loopsim::harness::scenario::Scenario;
use loopsim::model::letta::client::policy::{
    INTERRUPT_REMINDER, KEEP_GOING, STALE_APPROVAL_RECOVERY_DENIAL_REASON,
};
use toml::Spanned;

fn scenario(name: &str) -> Scenario {
    load(scenario_path(&format!("{name}.toml")))
}

/// The normalised protocol steps of a run, with the stale-denial text shortened to `<stale>`.
fn steps(r: &RunReport) -> Vec<String> {
    let log: Vec<RawRequest> = r.requests.iter().map(RawRequest::from).collect();
    normalise(&log)
        .iter()
        .map(|s| {
            s.to_string().replace(
                &format!("{STALE_APPROVAL_RECOVERY_DENIAL_REASON:?}"),
                "<stale>",
            )
        })
        .collect()
}

fn pass(s: &Scenario, seed: u64) -> RunReport {
    let r = run(s, seed, 2);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    r
}

/// `(t_ms, kind, attempt, delay_ms)` of every retry event.
fn retries(r: &RunReport) -> Vec<(u64, String, u32, u64)> {
    r.trace_text
        .lines()
        .filter(|l| l.contains(" client_retry "))
        .map(|l| {
            let t: u64 = l.split_whitespace().next().unwrap().parse().unwrap();
            let field = |k: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{k}=")))
                    .unwrap()
                    .to_string()
            };
            (
                t,
                field("kind"),
                field("attempt").parse().unwrap(),
                field("delay_ms").parse().unwrap(),
            )
        })
        .collect()
}

/// `(attempt, delay_ms)` of every retry of `kind`.
/// Asserts the run's retries as `(kind, attempt, delay_ms)`, in order; `context` names the
/// case in the failure message.
fn assert_retries(r: &RunReport, want: &[(&str, u32, u64)], context: &str) {
    let all = retries(r);
    let got: Vec<(&str, u32, u64)> = all
        .iter()
        .map(|(_, k, a, d)| (k.as_str(), *a, *d))
        .collect();
    assert_eq!(got, want, "{context}");
}

fn retries_of(r: &RunReport, kind: &str) -> Vec<(u32, u64)> {
    retries(r)
        .into_iter()
        .filter(|(_, k, _, _)| k == kind)
        .map(|(_, _, attempt, delay)| (attempt, delay))
        .collect()
}

fn count(r: &RunReport, needle: &str) -> usize {
    r.trace_text.lines().filter(|l| l.contains(needle)).count()
}

const TAIL: &str = "GET /v1/agents/{agent}/messages query=limit=50 order=desc types=8 -> 200";
const SYSTEM: &str = "GET /v1/messages/{m1} -> 200";
/// (reference) The read-back of the approval message before its batch runs (difference 21).
const READ_BACK: &str = "GET /v1/messages/{m2} -> 200";

#[test]
fn busy_with_attach_drains_the_in_flight_run_without_waiting() {
    let r = pass(&scenario("client_busy_attach"), 1);
    assert_eq!(
        steps(&r),
        [
            TAIL,
            SYSTEM,
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 409",
            "POST /v1/conversations/{conv}/stream batch_size=1000 otid=o1 starting_after=0 -> 200",
            READ_BACK,
            "POST /v1/conversations/{conv}/messages items=approval(o2)[tool:c1:success] -> 200",
        ]
    );
    assert!(retries(&r).is_empty());
    assert_eq!(count(&r, "client_recovery kind=busy_attach"), 1);
}

/// A transient retry resets the busy counter (letta-protocol.md §3.9), so after it a busy
/// answer the client attaches through counts as the first again, and the next busy wait is the
/// second: 20 s. A guided plan found the checker still counting from before the transient retry
/// (`busy retry attempt 2 (previous 2)`): busy answers to sends 1, 3 and 4, a transient retry
/// between the first two.
#[test]
fn a_transient_retry_resets_the_busy_count_that_budget_respected_checks() {
    let plan = [
        r#"{ kind = "partition", between = ["server", "provider"], at_ms = 7123, duration_ms = 6004 }"#,
        r#"{ kind = "crash", host = "server", at_ms = 5376, restart_after_ms = 3184 }"#,
        r#"{ kind = "server_stream", response = 4, frame = 3, action = "stall" }"#,
        r#"{ kind = "partition", between = ["client", "server"], on_event = "run_ended", nth = 1, duration_ms = 3591 }"#,
        r#"{ kind = "busy_on_send", send = 1 }"#,
        r#"{ kind = "busy_on_send", send = 3 }"#,
        r#"{ kind = "busy_on_send", send = 4 }"#,
        r#"{ kind = "interrupt", turn = 2, during = "stream", after_chunk = 3 }"#,
    ];
    let r = pass(&with_plan(scenario("client_interrupt_tools"), &plan), 160);
    let busy = retries_of(&r, "busy");
    assert_eq!(busy, [(1, 10_000), (2, 20_000)], "{}", r.trace_text);
    assert_eq!(count(&r, "client_recovery kind=busy_attach"), 1);
    assert!(count(&r, "client_retry kind=transient") >= 1);
}

#[test]
fn busy_without_attach_waits_10_then_20_seconds_with_the_same_otid() {
    for mode in ["interactive", "headless"] {
        let r = pass(&with_mode(scenario("client_busy_wait"), mode), 2);
        assert_retries(&r, &[("busy", 1, 10_000), ("busy", 2, 20_000)], mode);
        let sends: Vec<String> = steps(&r)
            .into_iter()
            .filter(|s| s.contains("/messages items=user"))
            .collect();
        assert_eq!(
            sends,
            [
                "POST /v1/conversations/{conv}/messages items=user(o1) -> 409",
                "POST /v1/conversations/{conv}/messages items=user(o1) -> 409",
                "POST /v1/conversations/{conv}/messages items=user(o1) -> 200",
            ],
            "{mode}"
        );
        assert!(r.end_ms > 30_000, "{mode}: {}", r.end_ms);
    }
}

#[test]
fn approval_pending_409_interactive_denies_stale_and_resends_with_a_fresh_otid() {
    let r = pass(&scenario("client_approval_pending"), 1);
    assert_eq!(
        steps(&r),
        [
            TAIL,
            SYSTEM,
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 409",
            TAIL,
            "POST /v1/conversations/{conv}/messages items=approval(o2)[deny:c1:<stale>] + user(o3) -> 200",
            READ_BACK,
            "POST /v1/conversations/{conv}/messages items=approval(o4)[tool:c2:success] -> 200",
        ]
    );
    // One unit of the shared LLM budget, no delay.
    assert_retries(&r, &[("approval_pending", 1, 0)], "");
}

/// `s` headless, with the model's answers for a headless approval-pending recovery: the
/// denial-only request runs the model first (an end_turn), then the resent message gets the
/// Bash call and its result the final answer.
fn headless_denial_first(s: Scenario) -> Scenario {
    let mut s = with_mode(s, "headless");
    s.provider.responses = [
        "anthropic_text_end_turn",
        "client_anthropic_bash_tool",
        "anthropic_text_end_turn",
    ]
    .iter()
    .map(|c| Spanned::new(0..0, format!("../../cassettes/provider/{c}.jsonl")))
    .collect();
    s
}

#[test]
fn approval_pending_409_headless_resolves_with_a_denial_only_request_then_resends_the_same_otid() {
    // Reference B.5.3: the denial-only request, then the original message with the SAME otid.
    let s = headless_denial_first(scenario("client_approval_pending"));
    for profile in ["reference", "letta-code"] {
        let r = pass(&with_profile(s.clone(), profile), 1);
        let mut want = vec![
            TAIL,
            SYSTEM,
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 409",
            TAIL,
            "POST /v1/conversations/{conv}/messages items=approval(o2)[deny:c1:<stale>] -> 200",
            TAIL,
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 200",
            "POST /v1/conversations/{conv}/messages items=approval(o3)[tool:c2:success] -> 200",
        ];
        if profile == "reference" {
            want.insert(7, READ_BACK);
        }
        assert_eq!(steps(&r), want, "{profile}");
    }
}

#[test]
fn in_band_approval_conflict_in_headless_mode_is_a_dead_end_in_the_published_client() {
    // captures/letta_e2e flow d3: the published CLI does not recover from the in-band conflict
    // and the stale call stays pending; the reference resolves it and resends with fresh otids
    // (the conflicted request had started a run under its otids).
    let s = headless_denial_first(scenario("client_approval_pending_in_band"));
    // The turn ends on the conflict with the call pending: `approval-conflict-recovered` fails
    // (docs/findings.md#in-band-approval-conflict-is-a-dead-end-headless), and nothing else.
    let published = run(&with_profile(s.clone(), "letta-code"), 1, 2);
    assert_eq!(
        outcomes(&published),
        [
            "error: stop_reason=error (CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call. Please approve or deny the pending request before continuing.)"
        ]
    );
    assert_eq!(published.pending.len(), 1, "{}", published.render());
    let failed = failed_invariants(&published);
    // The conflict is a fault that heals, so `recovery-completes` names the same give-up: the
    // plan's fault-free twin ends `end_turn`.
    assert_eq!(
        failed,
        [APPROVAL_CONFLICT_RECOVERED, RECOVERY_COMPLETES],
        "{}",
        published.render()
    );
    let reference = pass(&with_profile(s, "reference"), 1);
    assert_eq!(outcomes(&reference), ["stopped: end_turn"]);
    assert!(reference.pending.is_empty());
    assert!(
        steps(&reference)
            .iter()
            .any(|s| s == "POST /v1/conversations/{conv}/messages items=user(o3) -> 200"),
        "{:?}",
        steps(&reference)
    );
}

/// The in-band conflict's error frame follows the stop reason (captures/letta_server d4), so a
/// stream closed between them leaves the client `stop_reason=error` and no text. The reference
/// reads the conflict from the run's error detail, as the TUI's post-stream order does, and
/// recovers as from the whole stream (difference 8 of docs/client.md). A commit-seeded gate
/// sweep found the headless reference ending such a turn in the error: `client_headless_denial`
/// seed 692911933, `recovery-completes`.
#[test]
fn an_in_band_conflict_whose_error_frame_was_cut_off_is_read_from_the_run() {
    let s = headless_denial_first(scenario("client_approval_pending_in_band"));
    let whole = pass(&s, 1);
    let cut = pass(
        &with_plan(
            s,
            &[r#"{ kind = "server_stream", response = 1, frame = 3, action = "close" }"#],
        ),
        1,
    );
    // The drain saw the stop reason alone, and the recovery ran once.
    let drained = count(&cut, "client_drained stop_reason=error approvals=[]");
    let recovered = count(&cut, "kind=approval_pending");
    assert_eq!((drained, recovered), (1, 1), "{}", cut.trace_text);
    assert_eq!(outcomes(&cut), ["stopped: end_turn"]);
    assert!(cut.pending.is_empty(), "{}", cut.render());
    assert_eq!(steps(&cut), steps(&whole));
}

#[test]
fn stale_approval_at_start_up_goes_out_with_the_first_message() {
    let r = pass(&scenario("client_stale_at_start"), 1);
    assert_eq!(
        steps(&r),
        [
            TAIL,
            "POST /v1/conversations/{conv}/messages items=approval(o1)[deny:c1:<stale>] + user(o2) -> 200",
            "GET /v1/messages/{m1} -> 200",
            "POST /v1/conversations/{conv}/messages items=approval(o3)[tool:c2:success] -> 200",
        ]
    );
    assert_eq!(count(&r, "origin=stale-recovery"), 1);
}

/// A conversation waits for one approval at a time: a second `stale_approval` on it (a plan
/// that drew the fault again) is refused and said so on the trace, and the run is the one with
/// the first alone. Planted twice, the call stood twice in the history, a state no server can
/// be in, and the checkers reported the client for it.
#[test]
fn a_second_stale_approval_on_one_conversation_is_not_planted() {
    let once = pass(&scenario("client_stale_at_start"), 1);
    let mut s = scenario("client_stale_at_start");
    let again = s.faults[0].get_ref().clone();
    s.faults.push(Spanned::new(0..0, again));
    let twice = pass(&s, 1);
    assert_eq!(steps(&twice), steps(&once));
    assert_eq!(
        count(
            &twice,
            "stale_approval conversation=agent-a6ff5f2c-7c25-49a7-86da-2f662939b9dd \
             tool_call_id=toolu_stale_start not planted: the conversation already waits for \
             toolu_stale_start"
        ),
        1,
        "{}",
        twice.trace_text
    );
}

/// A call id stands once in a conversation: a send-time stale approval whose call the
/// conversation's history already holds (planted and answered on an earlier send) is not
/// planted again. The gate's commit seeds drew one twice on `client_crash_after_tools` (sends 1
/// and 4): planted again, the provider refused the history (`tool_use` without its result).
#[test]
fn a_stale_call_already_in_the_history_is_not_planted_again() {
    let plan = [
        r#"{ kind = "crash", host = "provider", at_ms = 10072, restart_after_ms = 4951 }"#,
        r#"{ kind = "server_stream", response = 4, frame = 1, action = "cut_inside" }"#,
        r#"{ kind = "approval_pending_in_band", send = 1, tool_call_id = "toolu_stale_1", tool = "Bash", arguments = '{"command": "echo stale", "description": "left pending"}' }"#,
        r#"{ kind = "interrupt", turn = 2, during = "stream", after_chunk = 7 }"#,
        r#"{ kind = "hold", between = ["client", "server"], on_event = "client_send", nth = 3, duration_ms = 595 }"#,
        r#"{ kind = "hold", between = ["client", "server"], on_event = "client_send", nth = 3, duration_ms = 682 }"#,
        r#"{ kind = "crash", host = "provider", on_event = "client_send", nth = 3, restart_after_ms = 1851 }"#,
        r#"{ kind = "approval_pending_in_band", send = 4, tool_call_id = "toolu_stale_1", tool = "Bash", arguments = '{"command": "echo stale", "description": "left pending"}' }"#,
        r#"{ kind = "interrupt", turn = 2, during = "stream", after_chunk = 6 }"#,
    ];
    let r = pass(
        &with_plan(scenario("client_crash_after_tools"), &plan),
        647007500,
    );
    assert_eq!(
        count(
            &r,
            "approval_pending send=4 tool_call_id=toolu_stale_1 not planted: toolu_stale_1 \
             already stands in the conversation's history"
        ),
        1,
        "{}",
        r.trace_text
    );
}

/// The arguments a tool runs on are the ones the server confirmed (difference 21): a read-back
/// that fails is retried on the turn's shared transient budget. A guided plan found the client
/// running a torn call: the argument frame lost, a server crash and a partition made the
/// read-back fail three times, and `get_country` ran with `""` where the provider produced
/// `{}` (`args-intact`). Now it waits out the partition and runs on `{}`.
#[test]
fn a_failed_read_back_is_retried_and_the_tool_runs_on_the_confirmed_arguments() {
    let plan = [
        r#"{ kind = "partition", between = ["client", "server"], at_ms = 73, duration_ms = 6679 }"#,
        r#"{ kind = "crash", host = "server", at_ms = 47, restart_after_ms = 239 }"#,
        r#"{ kind = "server_stream", response = 1, frame = 3, action = "drop" }"#,
        r#"{ kind = "approval_pending_on_send", send = 1 }"#,
    ];
    let r = pass(&with_plan(scenario("gemini_tool_call"), &plan), 374466078);
    assert_eq!(outcomes(&r), ["stopped: end_turn"]);
    let transient = retries_of(&r, "transient");
    // The approval-pending recovery took the first retry of the shared budget.
    assert_eq!(transient, [(2, 2_000), (3, 4_000)], "{}", r.trace_text);
    assert_eq!(count(&r, "client_recovery kind=server_arguments"), 1);
    assert_eq!(count(&r, "tool=get_country arguments=\"{}\""), 2);
}

/// A read-back that never answers spends the shared budget, and the turn ends in the
/// connection error with nothing run: the call stays pending on the server for the next
/// start-up check, rather than running on arguments nobody confirmed.
#[test]
fn a_read_back_that_never_answers_ends_the_turn_and_runs_nothing() {
    let plan = [
        r#"{ kind = "partition", between = ["client", "server"], on_event = "client_drained", duration_ms = 60000 }"#,
        r#"{ kind = "server_stream", response = 1, frame = 3, action = "drop" }"#,
    ];
    let r = pass(&with_plan(scenario("gemini_tool_call"), &plan), 374466078);
    assert_eq!(
        outcomes(&r),
        ["error: Connection error: connect failed: ConnectionRefused"]
    );
    let transient: Vec<(u32, u64)> = retries(&r)
        .into_iter()
        .map(|(_, _, attempt, delay)| (attempt, delay))
        .collect();
    assert_eq!(transient, [(1, 1_000), (2, 2_000), (3, 4_000)]);
    assert_eq!(count(&r, "tool_started"), 0, "{}", r.trace_text);
}

#[test]
fn a_crash_between_execution_and_send_never_executes_twice() {
    for profile in ["reference", "letta-code"] {
        let r = pass(
            &with_profile(scenario("client_crash_after_tools"), profile),
            1,
        );
        assert_eq!(outcomes(&r), ["crashed", "stopped: end_turn"]);
        assert_eq!(count(&r, "tool_executed"), 1, "{profile}");
        assert_eq!(count(&r, "client_started restart=1"), 1, "{profile}");
        let mut want = vec![
            TAIL,
            SYSTEM,
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 200",
            TAIL,
            "POST /v1/conversations/{conv}/messages items=approval(o2)[deny:c1:<stale>] + user(o3) -> 200",
        ];
        if profile == "reference" {
            want.insert(3, READ_BACK);
        }
        assert_eq!(steps(&r), want, "{profile}");
    }
}

#[test]
fn a_stream_cut_inside_tool_arguments_resumes_after_the_last_seq() {
    for seed in 0..4 {
        let r = pass(&scenario("client_cut_stream_args"), seed);
        assert!(
            steps(&r)
                .iter()
                .any(|s| s == "POST /v1/runs/{r1}/stream batch_size=1000 starting_after=3 -> 200"),
            "{:?}",
            steps(&r)
        );
        assert_eq!(
            count(
                &r,
                r#"tool_executed tool_call_id=toolu_bash_1 tool=Bash arguments="{\"command\": \"echo e2e-ok\", \"description\": \"print a marker\"}" executions=1"#
            ),
            1,
            "{}",
            r.trace_text
        );
    }
}

#[test]
fn resume_failing_headless_spends_20_attempts_then_cancels_the_running_run() {
    for profile in ["reference", "letta-code"] {
        let r = pass(&with_profile(scenario("client_resume_failing"), profile), 1);
        let st = steps(&r);
        let resumes = st
            .iter()
            .filter(|s| *s == "POST /v1/runs/{r1}/stream batch_size=1000 starting_after=2 -> 500")
            .count();
        // letta-code: the SDK retries each resume POST twice (docs/client.md difference 6).
        let per_attempt = if profile == "letta-code" { 3 } else { 1 };
        assert_eq!(resumes, 20 * per_attempt, "{profile}: {st:?}");
        assert_eq!(
            st.last().map(String::as_str),
            Some("POST /v1/agents/{agent}/messages/cancel run_ids=r1 -> 200"),
            "{profile}"
        );
        let delays: Vec<u64> = retries(&r).iter().map(|x| x.3).collect();
        let mut want = vec![250, 500, 1000];
        want.extend(std::iter::repeat_n(2000, 16));
        assert_eq!(delays, want, "{profile}");
        assert!(outcomes(&r)[0].starts_with("error: stop_reason=error"));
    }
    // Interactive: one immediate attempt, no cancel.
    let r = pass(
        &with_mode(scenario("client_resume_failing"), "interactive"),
        1,
    );
    assert_eq!(count(&r, "client_resume attempt="), 1);
    assert!(!steps(&r).iter().any(|s| s.contains("/cancel")));
}

/// letta-protocol.md §2.8: the published client's SDK retries the resume stream twice and
/// waits what each 500's `Retry-After` says: until the HTTP date (3 s after the answer, cut to
/// whole seconds), then 2 s after the next answer; its third failure fails the attempt, and
/// headless tries again 250 ms after the run check. The reference does not retry the stream.
#[test]
fn the_sdk_waits_what_retry_after_says_before_retrying_a_resume_stream() {
    let stream_requests = |r: &RunReport| -> Vec<(u64, String)> {
        r.trace_text
            .lines()
            .filter(|l| l.contains(" client_request method=POST path=/v1/runs/"))
            .map(|l| {
                let t: u64 = l.split_whitespace().next().unwrap().parse().unwrap();
                (t, l.rsplit(' ').next().unwrap().to_string())
            })
            .collect()
    };
    let answers = |r: &RunReport| -> Vec<u64> {
        r.trace_text
            .lines()
            .filter(|l| l.contains(" client_response ") && l.contains(" status=500 retry_after="))
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect()
    };
    let published = pass(
        &with_profile(scenario("client_sdk_retry_after"), "letta-code"),
        1,
    );
    let posts = stream_requests(&published);
    let retry_numbers: Vec<&str> = posts.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(
        retry_numbers,
        ["retry=0", "retry=1", "retry=2", "retry=0"],
        "{}",
        published.trace_text
    );
    let failed = answers(&published);
    assert_eq!(failed.len(), 3, "{}", published.trace_text);
    // The date is 3 s after the first answer (the server wrote it a moment before), cut to
    // whole seconds.
    let date_due = (failed[0] + 3000) / 1000 * 1000;
    assert!(
        (date_due.saturating_sub(1000)..=date_due).contains(&posts[1].0),
        "retry 1 at {} ms, the date at {date_due} ms",
        posts[1].0
    );
    assert_eq!(posts[2].0, failed[1] + 2000, "{}", published.trace_text);
    assert_eq!(retries_of(&published, "resume"), [(1, 250)]);
    let reference = pass(&scenario("client_sdk_retry_after"), 1);
    assert!(
        stream_requests(&reference)
            .iter()
            .all(|(_, r)| r == "retry=0"),
        "{}",
        reference.trace_text
    );
    assert_eq!(
        retries_of(&reference, "resume"),
        [(1, 250), (2, 500), (3, 1000)]
    );
}

#[test]
fn interrupt_while_tools_run_queues_the_result_and_recovers_on_the_next_message() {
    let r = pass(&scenario("client_interrupt_tools"), 1);
    assert_eq!(
        steps(&r),
        [
            TAIL,
            SYSTEM,
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 200",
            READ_BACK,
            // The reference lets the cancel settle before the next submission.
            "POST /v1/conversations/{conv}/cancel -> 409",
            "POST /v1/conversations/{conv}/messages items=approval(o2)[tool:c1:error] + user(o3) + user(o4) -> 200",
        ]
    );
    assert_eq!(count(&r, "tool_aborted"), 1);
    assert_eq!(count(&r, "tool_executed"), 0);
    // The queued result is "Interrupted by user"; the new message starts with the reminder.
    let body = r
        .requests
        .iter()
        .filter_map(|q| q.body.as_ref())
        .find(|b| b["messages"][0]["type"] == "approval")
        .unwrap();
    assert_eq!(
        body["messages"][0]["approvals"][0]["tool_return"],
        "Interrupted by user"
    );
    assert_eq!(
        body["messages"][2]["content"][0]["text"],
        INTERRUPT_REMINDER
    );
    // Headless: SIGINT, no HTTP call; the next one-shot process closes the call as stale.
    let h = pass(
        &with_mode(scenario("client_interrupt_tools"), "headless"),
        1,
    );
    assert_eq!(outcomes(&h)[0], "interrupted: Interrupted by SIGINT");
    assert!(!steps(&h).iter().any(|s| s.contains("/cancel")));
    assert!(
        steps(&h)
            .iter()
            .any(|s| s.contains("items=approval(o2)[deny:c1:<stale>] + user(o3)"))
    );
}

#[test]
fn interrupt_reports_a_tool_that_already_ran_as_interrupted_in_the_published_client() {
    // Write (10 ms) finishes before the interrupt at 30 ms while Bash (50 ms) still runs. The
    // published client queues "Interrupted by user" for every tool of the batch, so the model
    // is told the file was not written although it was (docs/findings.md). The reference runs
    // Write after Bash (global lock), so Write never started: its "interrupted" is true.
    let mut s = scenario("client_lock_safety");
    s.scenario.name = "lock-interrupted".into();
    s.expect.clear();
    s.client.turns = vec!["Make two files.".into(), "Stop.".into()];
    s.faults = vec![Spanned::new(
        0..0,
        loopsim::harness::scenario::Fault::Interrupt {
            turn: 1,
            during: loopsim::harness::faults::During::Tools,
            after_chunk: None,
            after_ms: Some(30),
        },
    )];
    let published = run(&with_profile(s.clone(), "letta-code"), 1, 1);
    assert_eq!(
        count(&published, "tool_executed tool_call_id=toolu_write_2"),
        1
    );
    let q = published.requests.iter().rev().find(|q| {
        q.body
            .as_ref()
            .is_some_and(|b| b["messages"][0]["type"] == "approval")
    });
    let items = &q.unwrap().body.as_ref().unwrap()["messages"][0]["approvals"];
    assert_eq!(items[1]["tool_call_id"], "toolu_write_2");
    assert_eq!(items[1]["tool_return"], "Interrupted by user");
    let reference = run(&with_profile(s, "reference"), 1, 1);
    assert_eq!(count(&reference, "tool_executed"), 0);
    assert_eq!(count(&reference, "tool_aborted"), 1);
}

#[test]
fn interrupt_while_streaming_cancels_the_run_and_recovers() {
    let r = pass(&scenario("client_interrupt_stream"), 1);
    assert!(
        count(&r, "run_ended") >= 1 && count(&r, "stop_reason=cancelled") >= 1,
        "{}",
        r.trace_text
    );
    // The cancel settles first; the interrupted message is resent with a fresh otid, before
    // the new one with the reminder.
    assert_eq!(
        steps(&r)[2..],
        [
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 200",
            "POST /v1/conversations/{conv}/cancel -> 200",
            "POST /v1/conversations/{conv}/messages items=user(o2) + user(o3) -> 200",
        ]
    );
    let body = r
        .requests
        .iter()
        .filter_map(|q| q.body.as_ref())
        .rfind(|b| b.get("messages").is_some())
        .unwrap();
    assert_eq!(
        body["messages"][1]["content"][0]["text"],
        INTERRUPT_REMINDER
    );
}

#[test]
fn shutdown_503_is_retried_inside_the_send_with_the_same_otid_after_its_retry_after() {
    let r = pass(&scenario("client_shutdown_503"), 1);
    let rs = retries(&r);
    let kinds: Vec<(&str, u32)> = rs.iter().map(|(_, k, a, _)| (k.as_str(), *a)).collect();
    assert_eq!(
        kinds,
        vec![
            ("shutdown_503", 1),
            ("shutdown_503", 2),
            ("shutdown_503", 3),
            ("transient", 1)
        ]
    );
    let delays: Vec<u64> = rs.iter().map(|(_, _, _, d)| *d).collect();
    // No header: 1000 ms; `Retry-After: 2`: 2000 ms; an HTTP date 3 s ahead, cut to whole
    // seconds and read a few ms after it was written: between 2 s and 3 s.
    assert_eq!((delays[0], delays[1], delays[3]), (1000, 2000, 2000));
    assert!((2000..3000).contains(&delays[2]), "{delays:?}");
    assert_eq!(
        steps(&r)
            .iter()
            .filter(|s| s.contains("items=user(o1)"))
            .count(),
        5
    );
}

#[test]
fn llm_api_error_retryable_is_retried_with_fresh_otids() {
    let r = pass(&scenario("client_llm_error_retryable"), 1);
    assert_retries(&r, &[("post_stream", 1, 1000)], "");
    let st = steps(&r);
    assert!(st.contains(&"POST /v1/conversations/{conv}/messages items=user(o2) -> 200".into()));
}

/// The same failure behind a Cloudflare edge: the page is in the run's error detail, so the
/// retry waits the Cloudflare base, 5 s (letta-protocol.md §3.6, §3.8), in both profiles.
#[test]
fn a_cloudflare_edge_page_in_the_run_detail_waits_the_cloudflare_delay() {
    for profile in ["reference", "letta-code"] {
        let r = pass(
            &with_profile(scenario("client_llm_error_cloudflare"), profile),
            1,
        );
        assert_retries(&r, &[("post_stream", 1, 5000)], profile);
    }
}

#[test]
fn a_non_retryable_run_error_is_not_retried_except_by_headless_letta_code() {
    let s = scenario("client_llm_error_nonretryable");
    let sends = |r: &RunReport| {
        steps(r)
            .iter()
            .filter(|s| s.contains("/messages items="))
            .count()
    };
    for (profile, mode, want) in [
        ("reference", "interactive", 1),
        ("reference", "headless", 1),
        ("letta-code", "interactive", 1),
        // letta-protocol.md §10.3 item 9: headless retries llm_api_error without metadata.
        ("letta-code", "headless", 4),
    ] {
        let r = pass(&with_mode(with_profile(s.clone(), profile), mode), 1);
        assert_eq!(sends(&r), want, "{profile} {mode}");
    }
}

/// The same 401, but the client cannot read its run back: the TUI judges the error by the
/// stream's error line, the error's generic `message`, and the legacy rule retries an
/// `llm_api_error` (letta-protocol.md §3.7). With the lookups answered, the metadata's
/// non-retryable error type ends the turn at the first failure.
#[test]
fn a_run_error_whose_lookup_fails_is_judged_by_its_line_and_retried() {
    let s = scenario("client_llm_error_run_unread");
    for profile in ["reference", "letta-code"] {
        let r = pass(&with_profile(s.clone(), profile), 1);
        assert_eq!(outcomes(&r), ["stopped: end_turn"], "{profile}");
        assert_retries(
            &r,
            &[("post_stream", 1, 1000), ("post_stream", 2, 2000)],
            profile,
        );
        let read = with_faults(with_profile(s.clone(), profile), vec![]);
        let r = pass(&read, 1);
        assert_eq!(
            outcomes(&r),
            ["error: stop_reason=llm_api_error (An error occurred with the LLM request.)"],
            "{profile}"
        );
        assert!(retries(&r).is_empty(), "{profile}");
    }
}

#[test]
fn empty_response_is_retried_after_500_ms_with_fresh_otids() {
    for mode in ["interactive", "headless"] {
        let r = pass(&with_mode(scenario("client_empty_response"), mode), 1);
        assert_eq!(outcomes(&r), ["stopped: end_turn"], "{mode}");
        assert_retries(&r, &[("empty_response", 1, 500)], mode);
        assert!(
            steps(&r)
                .contains(&"POST /v1/conversations/{conv}/messages items=user(o2) -> 200".into())
        );
    }
}

#[test]
fn quota_swap_reuses_the_failed_request_token_in_the_published_client() {
    let s = scenario("client_quota_swap");
    let reference = pass(&s, 1);
    assert_eq!(outcomes(&reference), ["stopped: end_turn"]);
    assert!(
        steps(&reference).contains(
            &"POST /v1/conversations/{conv}/messages items=user(o2) + user(o3) override_model=letta/auto -> 200".into()
        ),
        "{:?}",
        steps(&reference)
    );
    assert_eq!(count(&reference, "server   run_started"), 2);
    let published = pass(&with_profile(s, "letta-code"), 1);
    assert!(
        steps(&published).contains(
            &"POST /v1/conversations/{conv}/messages items=user(o1) + user(no-otid) override_model=letta/auto -> 200".into()
        ),
        "{:?}",
        steps(&published)
    );
    // Same otids → same request token → the server re-attaches to the failed run.
    assert_eq!(count(&published, "server   run_started"), 1);
    assert!(outcomes(&published)[0].starts_with("error: stop_reason=llm_api_error"));
    let body = published
        .requests
        .iter()
        .rev()
        .find(|q| q.body.is_some())
        .unwrap();
    assert_eq!(
        body.body.as_ref().unwrap()["messages"][1]["content"],
        KEEP_GOING
    );
}

#[test]
fn global_lock_serialises_in_the_reference_and_results_keep_decision_order() {
    let r = pass(&scenario("client_lock_safety"), 1);
    let starts: Vec<&str> = r
        .trace_text
        .lines()
        .filter(|l| l.contains("tool_started") || l.contains("tool_executed"))
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(
        starts,
        [
            "tool_started",
            "tool_executed",
            "tool_started",
            "tool_executed"
        ]
    );
    assert!(steps(&r).contains(
        &"POST /v1/conversations/{conv}/messages items=approval(o2)[tool:c1:success,tool:c2:success] -> 200".into()
    ));
}

#[test]
fn headless_denies_an_ask_with_the_headless_reason() {
    let r = pass(&scenario("client_headless_denial"), 1);
    assert!(steps(&r).contains(&"POST /v1/conversations/{conv}/messages items=approval(o2)[deny:c1:\"Tool requires approval (headless mode)\"] -> 200".into()));
    assert_eq!(count(&r, "origin=headless-ask"), 1);
}

#[test]
fn stall_reconciler_polls_the_run_after_60_s_and_replays_the_tail() {
    let r = pass(&scenario("client_stall_reconciler"), 1);
    let poll = r
        .trace_text
        .lines()
        .find(|l| l.contains("client_request method=GET path=/v1/runs/"))
        .unwrap();
    let t: u64 = poll.split_whitespace().next().unwrap().parse().unwrap();
    assert!((60_000..61_000).contains(&t), "{poll}");
    assert_eq!(count(&r, "client_stream_end how=stall-reconciler"), 1);
    assert!(
        steps(&r)
            .contains(&"POST /v1/runs/{r1}/stream batch_size=1000 starting_after=3 -> 200".into())
    );
}

/// A send's body silent before its first chunk: no run id to poll, but the request carried an
/// otid, so the published CLI's stall reconciler ends the read after its 60 s window and the
/// resume finds the run by that otid (stream-stall-reconciler.ts `canResumeWithoutRunId`; the
/// real CLI did so in the real-client sweep, docs/findings.md). Both profiles complete the
/// turn a minute in, not after the 10-minute request timeout.
#[test]
fn a_send_that_stalls_before_its_first_chunk_is_resumed_by_otid_after_60_s() {
    use loopsim::harness::scenario::Fault;
    use loopsim::model::port::inject::StreamFault;
    for profile in ["reference", "letta-code"] {
        for mode in ["interactive", "headless"] {
            let s = with_faults(
                with_mode(
                    with_profile(scenario("client_cut_stream_args"), profile),
                    mode,
                ),
                vec![Fault::ServerStream {
                    response: 1,
                    frame: 1,
                    action: StreamFault::Stall,
                }],
            );
            let r = pass(&s, 1);
            let end = r
                .trace_text
                .lines()
                .find(|l| l.contains("client_stream_end how=stall-no-run-id"))
                .unwrap_or_else(|| panic!("{profile} {mode}:\n{}", r.trace_text));
            let t: u64 = end.split_whitespace().next().unwrap().parse().unwrap();
            assert!((60_000..61_000).contains(&t), "{profile} {mode}: {end}");
            assert!(
                steps(&r)
                    .iter()
                    .any(|x| x.starts_with("POST /v1/conversations/{conv}/stream")
                        && x.contains("otid=")),
                "{profile} {mode}: {:#?}",
                steps(&r)
            );
            assert!(
                outcomes(&r).iter().all(|o| *o == "stopped: end_turn"),
                "{profile} {mode}: {:?}",
                outcomes(&r)
            );
        }
    }
}

/// Headless approval-pending recovery whose denial stream is reset: the published CLI drains
/// that denial without the turn's abort signal, so it never resumes it, and the drain's `error`
/// ends the turn ("Approval drain ended with stop reason: error", the real CLI's words in the
/// real-client sweep); the reference resumes the drain and completes the turn.
#[test]
fn a_broken_stale_denial_drain_ends_the_published_clients_turn() {
    use loopsim::harness::scenario::Fault;
    use loopsim::model::port::inject::StreamFault;
    let faults = vec![
        Fault::ApprovalPendingOnSend {
            send: 1,
            tool_call_id: "toolu_stale_1".into(),
            tool: "Bash".into(),
            arguments: "{}".into(),
        },
        Fault::ServerStream {
            response: 1,
            frame: 2,
            action: StreamFault::Reset,
        },
    ];
    let base = load("scenarios/real-client/bash_effect.toml");
    // Both faults heal within a budget, so `recovery-completes` holds the published client to
    // the plan's fault-free twin, which ends `end_turn`; it is the only invariant that breaks,
    // and the trace shows the finding's signature, so the profile expects it
    // (docs/findings.md#stale-denial-drain-is-never-resumed-headless).
    let published = run(
        &with_faults(with_profile(base.clone(), "letta-code"), faults.clone()),
        1,
        2,
    );
    assert_eq!(
        failed_invariants(&published),
        [RECOVERY_COMPLETES],
        "{}",
        published.render()
    );
    assert_eq!(published.verdict, Verdict::Pass, "{}", published.render());
    let expected: Vec<_> = published
        .expected
        .iter()
        .filter(|(_, _, failed)| *failed)
        .map(|(id, finding, _)| (*id, finding.as_str()))
        .collect();
    assert_eq!(
        expected,
        [(
            RECOVERY_COMPLETES,
            "stale-denial-drain-is-never-resumed-headless"
        )],
        "{}",
        published.render()
    );
    assert_eq!(
        outcomes(&published),
        ["error: Approval drain ended with stop reason: error"],
        "{}",
        published.trace_text
    );
    assert!(
        !steps(&published).iter().any(|x| x.contains("/stream")),
        "no resume: {:#?}",
        steps(&published)
    );
    let reference = pass(&with_faults(with_profile(base, "reference"), faults), 1);
    assert_eq!(
        outcomes(&reference),
        ["stopped: end_turn"],
        "{}",
        reference.trace_text
    );
}

#[test]
fn terminal_eof_guard_ends_a_body_left_open_after_2_s() {
    let r = pass(&scenario("client_eof_guard"), 1);
    assert_eq!(outcomes(&r), ["stopped: end_turn"]);
    let line = r
        .trace_text
        .lines()
        .find(|l| l.contains("client_stream_end how=terminal-eof-guard"))
        .unwrap();
    let t: u64 = line.split_whitespace().next().unwrap().parse().unwrap();
    let usage = r
        .trace_text
        .lines()
        .find(|l| l.contains("client_chunk") && l.contains("usage_statistics"))
        .unwrap();
    let u: u64 = usage.split_whitespace().next().unwrap().parse().unwrap();
    assert_eq!(t - u, 2000, "{line}\n{usage}");
}

#[test]
fn interrupt_while_the_dialog_waits_queues_user_interrupted_the_stream_denials() {
    let r = pass(&scenario("client_interrupt_approval"), 1);
    assert_eq!(
        steps(&r)[2..],
        [
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 200",
            READ_BACK,
            "POST /v1/conversations/{conv}/cancel -> 409",
            "POST /v1/conversations/{conv}/messages items=approval(o2)[deny:c1:\"User interrupted the stream\"] + user(o3) + user(o4) -> 200",
        ]
    );
    assert_eq!(count(&r, "origin=interrupt"), 1);
    assert_eq!(outcomes(&r)[1], "stopped: end_turn");
}

/// An interrupt in the dialog of a batch the client has partly handled: the auto-allowed call's
/// result and the waiting call's "User interrupted the stream" denial are both queued, each for
/// its own call, in approval order (letta-protocol.md §9.1 branch B).
#[test]
fn interrupt_in_a_partly_handled_batch_queues_each_result_for_its_own_call() {
    let r = pass(&scenario("client_interrupt_mixed_batch"), 1);
    let steps = steps(&r);
    let resend = steps.last().expect("a resend");
    assert_eq!(
        resend,
        "POST /v1/conversations/{conv}/messages items=approval(o2)[tool:c1:error,deny:c2:\"User interrupted the stream\"] + user(o3) + user(o4) -> 200",
        "{steps:#?}"
    );
    assert_eq!(count(&r, "origin=interrupt"), 1);
    assert_eq!(outcomes(&r)[1], "stopped: end_turn");
}

/// The published TUI's eager cancel is fire-and-forget: the next submission can reach the
/// server first, and the cancel then kills the NEW run (docs/findings.md#eager-cancel-races-the-next-message).
/// The reference waits for the cancel to settle and never loses the next turn.
#[test]
fn eager_cancel_can_cancel_the_next_turns_run_in_the_published_client() {
    for name in ["client_interrupt_approval", "client_interrupt_tools"] {
        let lost = |profile: &str| {
            (0..10)
                .filter(|seed| {
                    let r = pass(&with_profile(scenario(name), profile), *seed);
                    outcomes(&r)[1] == "stopped: cancelled"
                })
                .count()
        };
        assert_eq!(lost("reference"), 0, "{name}");
        assert!(lost("letta-code") >= 2, "{name}");
    }
}

/// A lost and a duplicated SSE frame inside the tool call's arguments: the reference notices
/// (a seq id skipped or repeated within one drain), resumes or drops the copy, and runs the
/// tool once with the provider's arguments; the published client processes what it got, the
/// arguments do not parse and the call is denied (docs/findings.md).
#[test]
fn lost_and_duplicated_frames_are_noticed_by_the_reference_only() {
    const RAN: &str = r#"tool_executed tool_call_id=toolu_bash_1 tool=Bash arguments="{\"command\": \"echo e2e-ok\", \"description\": \"print a marker\"}" executions=1"#;
    for name in ["client_lost_frame", "client_duplicate_frame"] {
        let s = scenario(name);
        let reference = pass(&s, 1);
        assert_eq!(
            count(&reference, RAN),
            1,
            "{name}: {}",
            reference.trace_text
        );
        assert_eq!(
            count(&reference, "client_resume "),
            usize::from(name == "client_lost_frame"),
            "{name}"
        );
        let published = pass(&with_profile(s, "letta-code"), 1);
        assert_eq!(count(&published, "tool_executed"), 0, "{name}");
        assert_eq!(
            count(
                &published,
                "decision=\"deny: Bash tool missing required parameters"
            ),
            1,
            "{name}: {}",
            published.trace_text
        );
        assert!(
            published
                .render()
                .contains("stream-gapless               XFAIL"),
            "{}",
            published.render()
        );
    }
}

/// A stream cut between two tool calls: the reference answers both calls after the resume and
/// runs each once; the published client answers the second alone, meets "Invalid tool call
/// IDs" and runs the second again (docs/findings.md).
#[test]
fn a_resume_after_a_cut_between_two_calls_keeps_the_first_in_the_reference_only() {
    let s = scenario("client_resume_drops_approvals");
    let reference = pass(&s, 1);
    assert_eq!(
        count(&reference, "status=400"),
        0,
        "{}",
        reference.trace_text
    );
    assert_eq!(
        count(&reference, "executions=1 "),
        2,
        "{}",
        reference.trace_text
    );
    assert_eq!(count(&reference, "executions=2 "), 0);
    assert!(reference.trace_text.contains(
        "client_acted_on run_id=run-bffc2a6b-5dfd-441b-9cf1-c8ccb3b65671 stop_reason=requires_approval approvals=[\"toolu_bash_2\",\"toolu_write_2\"]"
    ), "{}", reference.trace_text);
    let published = pass(&with_profile(s, "letta-code"), 1);
    let refused = |r: &RunReport| {
        r.trace_text
            .lines()
            .filter(|l| l.contains(" client_response ") && l.contains(" status=400"))
            .count()
    };
    assert_eq!(refused(&published), 1);
    assert_eq!(
        count(
            &published,
            "tool_call_id=toolu_write_2 tool=Write arguments=\"{\\\"file_path\\\": \\\"/workspace/b.txt\\\", \\\"content\\\": \\\"hello\\\"}\" executions=2"
        ),
        1,
        "{}",
        published.trace_text
    );
}

/// A frame lost in a resumed stream where no later numbered frame shows the gap: the resume
/// after a cut replays seq 6 and 7, loses seq 8 (the last argument fragment), then the
/// stop_reason and usage frames arrive without seq ids. The reference sees the call's
/// arguments torn at the stop reason, treats it as a gap and replays from seq 7; the tool runs
/// once with whole arguments. Interactive (one resume attempt) ends the turn in error and runs
/// nothing. Found by `sim ci`'s swarm sweep (approval_turn_drop, seed 223820784: args-intact).
#[test]
fn a_lost_last_argument_fragment_is_replayed_not_executed_torn() {
    use loopsim::harness::faults::Fault;
    use loopsim::model::port::inject::StreamFault;
    let mut s = scenario("approval_turn_drop");
    s.faults.push(Spanned::new(
        0..0,
        Fault::ServerStream {
            response: 2,
            frame: 3,
            action: StreamFault::Drop,
        },
    ));
    let headless = pass(&with_mode(s.clone(), "headless"), 1);
    let st = steps(&headless);
    assert!(
        st.iter()
            .any(|s| s == "POST /v1/runs/{r1}/stream batch_size=1000 starting_after=7 -> 200"),
        "{st:?}"
    );
    assert_eq!(
        count(
            &headless,
            r#"tool_executed tool_call_id=toolu_01NRLabsLyVHZPKxbKvkfSMn tool=get_weather arguments="{\"location\": \"Paris\"}" executions=1"#
        ),
        1,
        "{}",
        headless.trace_text
    );
    assert_eq!(outcomes(&headless), ["stopped: end_turn"]);
    let interactive = pass(&s, 1);
    assert_eq!(
        count(&interactive, "tool_executed"),
        0,
        "{}",
        interactive.trace_text
    );
    assert!(outcomes(&interactive)[0].starts_with("error:"));
}

/// The local server sends one complete approval chunk per call, and its usage and stop frames
/// carry seq ids (letta-protocol.md §7.4), so a lost approval chunk shows as a gap when the
/// usage frame arrives: the reference resumes the run from the last contiguous seq id, gets
/// the approval and answers it. The published client checks no gaps and stops with
/// "Unexpected empty approvals" (difference 19).
#[test]
fn a_lost_approval_chunk_on_the_local_server_shows_as_a_gap_and_is_resumed() {
    use loopsim::harness::faults::Fault;
    use loopsim::model::port::inject::StreamFault;
    let mut s = scenario("approval_turn");
    s.server.profile = Spanned::new(0..0, "local".into());
    s.faults = vec![Spanned::new(
        0..0,
        Fault::ServerStream {
            response: 1,
            frame: 3,
            action: StreamFault::Drop,
        },
    )];
    let r = pass(&s, 1);
    assert_eq!(
        count(&r, "client_stream_end how=gap"),
        1,
        "{}",
        r.trace_text
    );
    assert_eq!(
        count(
            &r,
            "client_resume attempt=1 source=run id=local-run-2 starting_after=2"
        ),
        1,
        "{}",
        r.trace_text
    );
    assert_eq!(count(&r, "client_recovery kind=unseen_approvals"), 0);
    assert_eq!(count(&r, "tool_executed"), 1, "{}", r.trace_text);
    assert_eq!(outcomes(&r), ["stopped: end_turn"]);
    let published = run(&with_profile(s, "letta-code"), 1, 1);
    assert_eq!(count(&published, "tool_executed"), 0);
    assert!(
        outcomes(&published)[0].contains("Unexpected empty approvals"),
        "{:?}",
        outcomes(&published)
    );
}

/// Two seeds of the 10,000-seed sweep (`sim explore --tick-ms 10 --swarm`), kept as
/// regressions. standard_fault 2442: a resume lost the last argument fragment of a Read call and
/// brought no numbered frame, so the arguments stayed torn; the reference now denies a call whose
/// arguments are not valid JSON instead of running it with `{}` (args-intact).
/// max_tokens_truncated_tool 412: the model's `message_delta` was lost while its tool call was
/// still open; the server now fails the run instead of ending `end_turn` after showing the call
/// (stop-reason-consistent).
/// server_local_settle 10486: the probe's new turn settled the pending call while turn 1's
/// stream was held, so the client found nothing to answer; the checker now accepts leaving out
/// a call the server had already closed (stop-reason-consistent).
/// approval_turn_drop 8507, client_approval_pending_in_band 5530: a duplicated provider fragment
/// gave the server broken arguments and a drop on the resumed stream removed exactly that
/// fragment, the last numbered frame, so the client held whole JSON the server did not have; the
/// reference now reads the approval message back before running it (args-intact, difference 21).
#[test]
fn sweep_regressions_torn_arguments_and_an_open_call_without_a_stop_reason() {
    use loopsim::harness::explore::{baseline, with_swarm};
    for (name, seed) in [
        ("standard_fault", 2442),
        ("max_tokens_truncated_tool", 412),
        ("server_local_settle", 10486),
        ("approval_turn_drop", 8507),
        ("client_approval_pending_in_band", 5530),
    ] {
        let s = scenario(name).with_tick(Some(10));
        let s = with_swarm(&s, seed, &baseline(&s).unwrap());
        let r = run(&s, seed, 1);
        assert_eq!(r.verdict, Verdict::Pass, "{name} {seed}:\n{}", r.render());
    }
}

/// The TUI's transient retry on the local backend resends `messages: []` (letta-protocol.md
/// §3.10 step 7): the backend already holds what the failed request carried, and its new turn
/// settles whatever stayed open (§7.1 step 2). Resending the approval instead makes an approval
/// turn, which settles nothing: guided seed 31000281 of `compaction_sliding_window` cut the run
/// that asked for a Read, and the second retry's resent approval left that call open before the
/// model, which refused the history (history-valid).
#[test]
fn a_transient_retry_on_the_local_backend_resends_no_messages() {
    let s = with_plan(
        scenario("compaction_sliding_window"),
        &[r#"{ kind = "provider_stream", call = 1, frame = 8, action = "reset" }"#],
    );
    let r = pass(&s, 1);
    let lines: Vec<&str> = r.trace_text.lines().collect();
    let retry = lines
        .iter()
        .position(|l| l.contains("client_retry kind=post_stream"))
        .expect("the reset run is retried");
    let resend = lines[retry..]
        .iter()
        .find(|l| l.contains(" client_send "))
        .expect("the retry sends");
    assert!(resend.ends_with(r#"items="" otids=[]"#), "{resend}");
    let s = with_plan(
        scenario("compaction_sliding_window"),
        &[
            r#"{ kind = "latency", at_ms = 329, max_ms = 487 }"#,
            r#"{ kind = "provider_stream", call = 1, frame = 8, action = "reset" }"#,
            r#"{ kind = "partition", between = ["client", "server"], on_event = "run_ended", nth = 3, duration_ms = 4835 }"#,
            r#"{ kind = "interrupt", turn = 1, during = "tools", after_ms = 133 }"#,
            r#"{ kind = "crash", host = "server", on_event = "client_resume", nth = 1, restart_after_ms = 790 }"#,
            r#"{ kind = "server_stream", response = 3, frame = 3, action = "cut_inside" }"#,
        ],
    );
    let r = pass(&s, 31000281);
    assert_eq!(
        count(&r, "entry.reason=\"Turn did not complete\""),
        1,
        "{}",
        r.trace_text
    );
}

/// A tool whose whole output is the client's own interrupt text is a success like any other: a
/// result is sent as `error` for being interrupted only when the client lists its call as
/// interrupted (letta-protocol.md §2.3; the legacy fallback that judges by the text is off). Both
/// clients send Bash's note as `success`, and the server records it so.
#[test]
fn a_tool_whose_output_is_the_interrupt_text_is_sent_as_a_success() {
    let s = scenario("client_tool_prints_interrupt_text");
    for profile in ["reference", "letta-code"] {
        let r = pass(&with_profile(s.clone(), profile), 1);
        assert_eq!(outcomes(&r), ["stopped: end_turn"], "{profile}");
        assert!(
            steps(&r).contains(
                &"POST /v1/conversations/{conv}/messages items=approval(o2)[tool:c1:success] -> 200"
                    .to_string()
            ),
            "{profile}: {:?}",
            steps(&r)
        );
        assert_eq!(
            count(
                &r,
                "entry.kind=tool_return entry.tool_call_id=toolu_bash_note_1 entry.status=success"
            ),
            1,
            "{profile}: {}",
            r.trace_text
        );
    }
}

/// The next message meets the run the client gave up on: the server's own lock answers 409 busy
/// naming that run, the attach by the new message's otid finds nothing, and the client waits
/// 10 s and sends the same body again (letta-protocol.md §3.4, §11). The approval fault on that
/// send is not planted while the run holds the conversation (docs/faults.md).
#[test]
fn a_message_that_meets_the_run_the_client_lost_waits_for_it() {
    let r = pass(&scenario("client_send_meets_held_run"), 1);
    assert_eq!(
        outcomes(&r),
        [
            "error: stop_reason=error (500 Internal Server Error)",
            "stopped: end_turn"
        ]
    );
    assert_eq!(
        steps(&r),
        [
            TAIL,
            SYSTEM,
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 200",
            "POST /v1/runs/{r1}/stream batch_size=1000 starting_after=3 -> 500",
            "GET /v1/runs/{r1} -> 200",
            "GET /v1/runs/{r1} -> 200",
            "POST /v1/conversations/{conv}/messages items=user(o2) -> 409",
            "POST /v1/conversations/{conv}/stream batch_size=1000 otid=o2 starting_after=0 -> 404",
            "POST /v1/conversations/{conv}/messages items=user(o2) -> 200",
            "GET /v1/runs/{r2} -> 200",
            TAIL,
            "POST /v1/conversations/{conv}/messages items=approval(o3)[deny:c1:<stale>] + user(o4) -> 200",
        ]
    );
    assert_eq!(retries_of(&r, "busy"), [(1, 10_000)]);
    let held = r
        .trace_text
        .lines()
        .filter(|l| l.contains(" fault fault=\"approval_pending send=2 "))
        .collect::<Vec<_>>();
    assert_eq!(held.len(), 1, "{}", r.trace_text);
    assert!(
        held[0].contains("not planted: run run-") && held[0].ends_with("holds the conversation\""),
        "{}",
        held[0]
    );
}

/// A call id stands once in a conversation, and the model's context is one conversation's. A
/// guided plan of the CI gate planted `toolu_stale_1` in a named conversation and again in the
/// new conversation the restarted client made; each was denied once, and `approval-attribution`
/// counted the two denials as the model seeing a second decision.
#[test]
fn a_call_id_planted_in_two_conversations_is_decided_once_in_each() {
    let stale = r#"tool_call_id = "toolu_stale_1", tool = "Bash", arguments = '{"command": "echo stale", "description": "left pending"}'"#;
    let plan = [
        r#"{ kind = "crash", host = "server", at_ms = 50, restart_after_ms = 3538 }"#.to_string(),
        r#"{ kind = "provider_error", call = 2, status = 529 }"#.to_string(),
        format!(r#"{{ kind = "approval_pending_on_send", send = 1, {stale} }}"#),
        format!(r#"{{ kind = "approval_pending_in_band", send = 3, {stale} }}"#),
        r#"{ kind = "provider_error", call = 2, status = 503 }"#.to_string(),
        r#"{ kind = "client_crash", turn = 1, at = "after_chunk", after_chunk = 1 }"#.to_string(),
    ];
    let plan: Vec<&str> = plan.iter().map(String::as_str).collect();
    let r = pass(
        &with_plan(scenario("client_named_conversation"), &plan),
        512_473_064,
    );
    let denials = count(&r, "entry.kind=denial entry.tool_call_id=toolu_stale_1");
    assert_eq!(denials, 2, "{}", r.trace_text);
}

/// A stale call the client denied stands in the history, so a plan that names it again on a
/// later send is refused: the server does not leave one call id pending twice in a
/// conversation, and turn 2 runs as if fault-free. A server that planted it again recorded the
/// call twice, and the provider refused the history (a `tool_use` without its result).
#[test]
fn a_stale_call_named_again_after_its_denial_is_not_planted_twice() {
    let r = pass(&scenario("client_approval_pending_twice"), 1);
    assert_eq!(outcomes(&r), ["stopped: end_turn", "stopped: end_turn"]);
    let notes: Vec<&str> = r
        .trace_text
        .lines()
        .filter(|l| l.contains(" fault fault=\"approval_pending"))
        .collect();
    assert_eq!(notes.len(), 2, "{}", r.trace_text);
    assert!(
        notes[0].ends_with("fault=\"approval_pending_on_send send=1 tool_call_id=toolu_stale_1\""),
        "{}",
        notes[0]
    );
    assert!(
        notes[1]
            .ends_with("not planted: toolu_stale_1 already stands in the conversation's history\""),
        "{}",
        notes[1]
    );
    let denials = count(&r, "entry.kind=denial entry.tool_call_id=toolu_stale_1");
    assert_eq!(denials, 1, "{}", r.trace_text);
}
