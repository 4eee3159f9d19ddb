//! CLI conformance against recorded traffic of the real client.
//!
//! captures/letta_e2e holds real HTTP traffic between the published Letta Code CLI (0.32.18)
//! and a real Letta server (0.16.8). For the flows it recorded, the Rust client in the
//! `letta-code` profile (headless, one-shot, as the CLI ran) runs the same situation in
//! simulation, and the two request logs, normalised to the fields that matter
//! (`loopsim::harness::letta::conformance`), must be equal step by step: same requests in the
//! same order, same otid reuse and refresh, same `starting_after`, same approval items and
//! denial texts, same statuses.
//!
//! The comparison against `sim serve` driven by the real CLI uses the same code on the server's
//! request log: tests/interop/cli_conformance.rs (docs/client.md, "Conformance").

use crate::common::{load, repo, run, scenario_path, with_mode, with_profile};
use loopsim::cassette::Recording;
use loopsim::harness::letta::conformance::{RawRequest, Step, compare, normalise, render};
use loopsim::harness::replay::client::{compare_client, recorded_steps};
use loopsim::harness::report::Verdict;
use loopsim::harness::scenario::Scenario;

/// The CLI's protocol steps in a captured flow (its committed import under cassettes/letta/).
fn expected(flow: &str) -> Vec<Step> {
    let path = repo().join("cassettes/letta").join(format!("{flow}.jsonl"));
    recorded_steps(&Recording::load(&path).unwrap_or_else(|e| panic!("{e}")))
}

/// Our client run as the CLI ran (`letta-code`, headless, on a named conversation) against
/// the flow's steps: `sim replay --side client`'s comparison (harness::replay::client).
fn assert_conforms(flow: &str, s: Scenario) {
    let mut s = with_mode(with_profile(s, "letta-code"), "headless");
    s.client.conversation = s.agent.id.clone();
    let c = compare_client(&s, expected(flow)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.report.verdict, Verdict::Pass, "{}", c.report.render());
    if let Some(m) = &c.mismatch {
        panic!(
            "{flow}: the Rust client differs from the real CLI at {m}\n\n{}",
            c.explain()
        );
    }
}

#[test]
fn flow_a_fresh_start_bash_auto_run() {
    let mut s = load(scenario_path("client_busy_wait.toml"));
    s.faults.clear();
    assert_conforms("a_fresh_unrestricted", s);
}

#[test]
fn flow_b_standard_mode_denial() {
    assert_conforms(
        "b_fresh_standard_denied",
        load(scenario_path("client_headless_denial.toml")),
    );
}

#[test]
fn flow_d_stale_pending_approval_at_start_up() {
    assert_conforms(
        "d_pending_approval_stale_recovery",
        load(scenario_path("client_stale_at_start.toml")),
    );
}

#[test]
fn flow_d2_stale_pending_approval_without_backfill() {
    let mut s = load(scenario_path("client_stale_at_start.toml"));
    s.client.backfill = false;
    assert_conforms("d2_pending_approval_nobackfill", s);
}

#[test]
fn flow_e_busy_conversation_409() {
    assert_conforms(
        "e_busy_conversation_409",
        load(scenario_path("client_busy_wait.toml")),
    );
}

/// The reference profile differs from the CLI only where docs/client.md says so; on these
/// flows it makes the same requests, but for difference 21: before it answers an approval it
/// reads the approval message back (`GET /v1/messages/{id}` right after the stream that asked).
/// Those reads are counted and taken out before the comparison.
#[test]
fn the_reference_profile_makes_the_same_requests_on_these_flows() {
    let mut read_backs = 0;
    for (flow, file) in [
        ("b_fresh_standard_denied", "client_headless_denial.toml"),
        (
            "d_pending_approval_stale_recovery",
            "client_stale_at_start.toml",
        ),
        ("e_busy_conversation_409", "client_busy_wait.toml"),
    ] {
        let mut s = with_mode(load(scenario_path(file)), "headless");
        s.client.conversation = s.agent.id.clone();
        let report = run(&s, 1, 1);
        let log: Vec<RawRequest> = report.requests.iter().map(RawRequest::from).collect();
        let mut steps = normalise(&log);
        let before = steps.len();
        let mut previous_streamed = false;
        steps.retain(|st| {
            let read_back =
                previous_streamed && st.method == "GET" && st.path.starts_with("/v1/messages/");
            previous_streamed = st.method == "POST"
                && (st.path.ends_with("/messages") || st.path.ends_with("/stream"));
            !read_back
        });
        read_backs += before - steps.len();
        assert_eq!(compare(&expected(flow), &steps), Ok(()), "{flow}");
    }
    assert!(
        read_backs >= 1,
        "no read-back seen: difference 21 is not exercised"
    );
}

/// The comparison is not vacuous: the captured flows differ from each other, and a client that
/// refreshed the otid of a busy retry would be caught.
#[test]
fn the_comparison_catches_a_different_request_sequence() {
    let e = expected("e_busy_conversation_409");
    assert!(e.len() >= 8, "{}", render(&e));
    assert!(compare(&e, &expected("a_fresh_unrestricted")).is_err());
    let mut refreshed = e.clone();
    let i = refreshed
        .iter()
        .rposition(|s| s.fields.get("items").is_some_and(|v| v == "user(o1)"))
        .unwrap();
    refreshed[i]
        .fields
        .insert("items".into(), "user(o9)".into());
    let m = compare(&e, &refreshed).unwrap_err();
    assert_eq!(m.index, i);
}

/// What the busy flow looks like once normalised: the CLI's reading of its resume data at
/// start-up, then 409 → attach by otid (404) → the same otid again, twice, then success.
#[test]
fn flow_e_normalises_to_the_busy_sequence_of_reference_b52() {
    assert_eq!(
        render(&expected("e_busy_conversation_409")),
        "GET /v1/conversations/{conv}/messages query=limit=50 order=desc types=8 -> 200\n\
         GET /v1/messages/{m1} -> 200\n\
         POST /v1/conversations/{conv}/messages items=user(o1) -> 409\n\
         POST /v1/conversations/{conv}/stream batch_size=1000 otid=o1 starting_after=0 -> 404\n\
         POST /v1/conversations/{conv}/messages items=user(o1) -> 409\n\
         POST /v1/conversations/{conv}/stream batch_size=1000 otid=o1 starting_after=0 -> 404\n\
         POST /v1/conversations/{conv}/messages items=user(o1) -> 200\n\
         POST /v1/conversations/{conv}/messages items=approval(o2)[tool:c1:success] -> 200\n"
    );
}
