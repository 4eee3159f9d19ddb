//! The published client's findings recognised in any scenario (`findings::OF_PROFILE`): a run
//! with the `letta-code` profile expects each where its trace shows the finding's signature, so
//! `sim explore --client-profile letta-code` can sweep every bundled scenario, and still fails
//! on a violation no signature explains.

use crate::common::{failed_invariants, load, run, scenario_path, with_plan, with_profile};
use loopsim::harness::invariants::{
    APPROVAL_CONFLICT_RECOVERED, NO_DOUBLE_EXECUTION, RECOVERY_COMPLETES, STOP_REASON_CONSISTENT,
    STREAM_GAPLESS, TURN_TERMINATES,
};
use loopsim::harness::letta::findings::{
    IN_BAND_CONFLICT_DEAD_END, LOST_AND_DUPLICATED_FRAMES, RESUME_DROPS_APPROVALS,
    SILENT_EMPTY_RETRY, STALE_DENIAL_DRAIN, THRESHOLD_NOT_RESET,
};
use loopsim::harness::report::{RunReport, Verdict};

/// The invariants a run expected, each with the finding that explained it.
fn explained(r: &RunReport) -> Vec<(&str, &str)> {
    r.expected
        .iter()
        .filter(|(_, _, failed)| *failed)
        .map(|(id, finding, _)| (*id, finding.as_str()))
        .collect()
}

/// A scenario, a seed, the plan's faults, and the (invariant, finding) pairs the run expects.
type Case = (
    &'static str,
    u64,
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

/// Plans a letta-code sweep met (guided, seeds 0..50, 5,000,000..5,001,000 for the stale
/// denial's drain, 0..2,000 of the local scenarios and 9,200,000..9,200,400 of all for the silent
/// empty retry, 0..300 for the in-band conflict the server raised by itself), in scenarios whose own `[[expect]]` entries do not name the finding: each
/// violation is the profile finding's, and the reference client passes the same run.
#[test]
fn each_profile_finding_is_expected_where_the_published_client_meets_it() {
    let cases: [Case; 7] = [
        (
            // The busy retry's new run starts at seq 1; the TUI still holds the first run's 1.
            "server_busy.toml",
            1,
            &[r#"{ kind = "busy_on_send", send = 1 }"#],
            &[(STREAM_GAPLESS, THRESHOLD_NOT_RESET)],
        ),
        (
            "approval_denied.toml",
            24,
            &[r#"{ kind = "server_stream", response = 1, frame = 3, action = "drop" }"#],
            &[(STREAM_GAPLESS, LOST_AND_DUPLICATED_FRAMES)],
        ),
        (
            // The cut after Bash is complete and Write has begun (the finding's own shape).
            "client_lock_safety.toml",
            23,
            &[r#"{ kind = "server_stream", response = 1, frame = 5, action = "close" }"#],
            &[
                (NO_DOUBLE_EXECUTION, RESUME_DROPS_APPROVALS),
                (STOP_REASON_CONSISTENT, RESUME_DROPS_APPROVALS),
            ],
        ),
        (
            // The stale call's denial stream stalls; the published drain has no abort signal
            // to end the stall with, so the model's silence bound ends it in an error.
            "client_headless_denial.toml",
            5000991,
            &[
                r#"{ kind = "latency", at_ms = 70, max_ms = 390 }"#,
                r#"{ kind = "server_stream", response = 2, frame = 5, action = "stall" }"#,
                r#"{ kind = "approval_pending_on_send", send = 1, tool_call_id = "toolu_stale_1", tool = "Bash", arguments = '{"command": "echo stale", "description": "left pending"}' }"#,
            ],
            &[(RECOVERY_COMPLETES, STALE_DENIAL_DRAIN)],
        ),
        (
            // The summariser's 529 fails the run; the local backend's retry sends
            // `messages: []`, and its stream stalls before the first chunk. Without an otid the
            // published stall reconciler waits for the SDK's ten-minute timeout.
            "compaction_crash.toml",
            1000,
            &[
                r#"{ kind = "crash", host = "server", at_ms = 203, restart_after_ms = 1592 }"#,
                r#"{ kind = "provider_error", call = 1, status = 529 }"#,
                r#"{ kind = "server_stream", response = 3, frame = 1, action = "stall" }"#,
            ],
            &[(TURN_TERMINATES, SILENT_EMPTY_RETRY)],
        ),
        (
            // The same empty retry's stream closes after two chunks, and the resume of its run
            // stalls before the first: the resume's read has no otid either.
            "compaction_sliding_window.toml",
            9200089,
            &[
                r#"{ kind = "crash", host = "server", at_ms = 12, restart_after_ms = 836 }"#,
                r#"{ kind = "interrupt", turn = 2, during = "approval" }"#,
                r#"{ kind = "server_stream", response = 3, frame = 3, action = "close" }"#,
                r#"{ kind = "hold", between = ["client", "server"], on_event = "client_retry", nth = 1, duration_ms = 561 }"#,
                r#"{ kind = "crash", host = "provider", on_event = "client_decision", nth = 1, restart_after_ms = 288 }"#,
                r#"{ kind = "server_stream", response = 4, frame = 1, action = "stall" }"#,
            ],
            &[(TURN_TERMINATES, SILENT_EMPTY_RETRY)],
        ),
        (
            // The stale call's denial is answered busy, so the call stays pending, and the
            // message sent next meets it: this server profile answers a streaming send in band,
            // with no fault note, and the published client gives the turn up on it.
            "client_llm_error_nonretryable_headless.toml",
            186,
            &[
                r#"{ kind = "approval_pending_on_send", send = 1 }"#,
                r#"{ kind = "busy_on_send", send = 2 }"#,
            ],
            &[
                (APPROVAL_CONFLICT_RECOVERED, IN_BAND_CONFLICT_DEAD_END),
                (RECOVERY_COMPLETES, IN_BAND_CONFLICT_DEAD_END),
            ],
        ),
    ];
    for (name, seed, plan, want) in cases {
        let s = with_plan(load(scenario_path(name)), plan);
        let published = run(&with_profile(s.clone(), "letta-code"), seed, 1);
        assert_eq!(published.verdict, Verdict::Pass, "{}", published.render());
        for w in want {
            assert!(
                explained(&published).contains(w),
                "{name}: {w:?} not in {:?}\n{}",
                explained(&published),
                published.render()
            );
        }
        let reference = run(&s, seed, 1);
        assert_eq!(reference.verdict, Verdict::Pass, "{}", reference.render());
        assert_eq!(explained(&reference), [], "{name}");
    }
}

/// A published-client run that breaks `stream-gapless` where no signature shows fails: the
/// planted resume from seq 0 processes the first chunks twice, with no frame lost or
/// duplicated in flight and no new run.
#[test]
fn a_violation_no_profile_finding_explains_still_fails_the_published_client() {
    let planted = load("scenarios/planted/client_resume_from_zero.toml");
    let r = run(&with_profile(planted, "letta-code"), 0, 1);
    assert_ne!(r.verdict, Verdict::Pass, "{}", r.render());
    assert!(
        failed_invariants(&r).contains(&STREAM_GAPLESS),
        "{}",
        r.render()
    );
    assert!(
        !explained(&r).iter().any(|(id, _)| *id == STREAM_GAPLESS),
        "{:?}",
        explained(&r)
    );
}
