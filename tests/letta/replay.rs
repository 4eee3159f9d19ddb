//! `sim replay` (harness::replay): the bug cassettes under cassettes/bugs/ give their expected
//! verdicts, and the fidelity of both sides over the ten committed letta_e2e imports stays
//! where docs/record-replay.md "Fidelity" says it is.

use std::time::Instant;

use crate::common::{load, repo, run};
use loopsim::harness::invariants::APPROVAL_CONFLICT_RECOVERED;
use loopsim::harness::replay::{self, ReplayOptions, Side, bugs};
use loopsim::harness::report::Verdict;

/// Every bug cassette replays to the verdicts its sidecar states. Wall time per cassette is
/// printed (`-- --nocapture`), never asserted.
#[test]
fn bug_cassettes() {
    let dir = repo().join("cassettes/bugs");
    let mut sidecars: Vec<_> = std::fs::read_dir(&dir)
        .expect("cassettes/bugs")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    sidecars.sort();
    assert!(sidecars.len() >= 2, "{sidecars:?}");
    let mut failures = Vec::new();
    for s in &sidecars {
        let started = Instant::now();
        let results = bugs::check(s).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "{}: {} replays in {} ms",
            s.display(),
            results.len(),
            started.elapsed().as_millis()
        );
        for (report, wrong) in results {
            if !wrong.is_empty() {
                failures.push(format!(
                    "{}: {}\n{}",
                    s.display(),
                    wrong.join("; "),
                    report.render(false)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The end of the d3 walkthrough (docs/record-replay.md): the scenario `sim replay
/// --emit-scenario` derived from d3, shrunk by `sim shrink`, committed as a regression. The
/// published profile's turn ends on the in-band CONFLICT with the stale call pending on every
/// seed, and the report counts that as the documented finding (XFAIL), not as a failure.
#[test]
fn d3_regression_reproduces_the_in_band_conflict_finding() {
    let s = load(repo().join("tests/letta/regressions/d3_in_band_conflict/scenario.toml"));
    for seed in 0..3 {
        let r = run(&s, seed, 1);
        let text = r.render();
        assert_eq!(r.verdict, Verdict::Pass, "{text}");
        assert!(
            r.expected
                .iter()
                .any(|(i, f, failed)| *i == APPROVAL_CONFLICT_RECOVERED
                    && f == "in-band-approval-conflict-is-a-dead-end-headless"
                    && *failed),
            "{APPROVAL_CONFLICT_RECOVERED} not XFAIL:\n{text}"
        );
        assert!(r.turn_outcomes[0].contains("CONFLICT"), "{text}");
        assert_eq!(r.pending.len(), 1, "{text}");
    }
}

fn summary(flow: &str, side: Side) -> (bool, String) {
    let path = repo().join("cassettes/letta").join(format!("{flow}.jsonl"));
    let opts =
        ReplayOptions::from_names(side, "letta-oss-0.16", "letta-code", false).expect("options");
    let r = replay::replay_file(&path, &opts).unwrap_or_else(|e| panic!("{e}"));
    (r.divergence.is_none(), r.summary())
}

const FLOWS: [&str; 10] = [
    "a0_fresh_autotoolset_plaintext",
    "a_fresh_unrestricted",
    "b0_fresh_standard_echo_autoallowed",
    "b_fresh_standard_denied",
    "c_second_turn_same_conversation",
    "d2_pending_approval_nobackfill",
    "d3_pending_approval_after_startup_bidir",
    "d3x_duplicate_otid_replays_other_conversation_run",
    "d_pending_approval_stale_recovery",
    "e_busy_conversation_409",
];

/// Which flows match on each side today; a change in either direction must update
/// docs/record-replay.md "Fidelity".
#[test]
fn fidelity_over_the_letta_e2e_flows() {
    let mut server = Vec::new();
    let mut client = Vec::new();
    let mut lines = Vec::new();
    for flow in FLOWS {
        let (s, ls) = summary(flow, Side::Server);
        let (c, lc) = summary(flow, Side::Client);
        if s {
            server.push(flow);
        }
        if c {
            client.push(flow);
        }
        lines.push(ls);
        lines.push(lc);
    }
    let all = lines.join("\n");
    assert_eq!(
        server,
        [
            "d2_pending_approval_nobackfill",
            "d3_pending_approval_after_startup_bidir",
            "d3x_duplicate_otid_replays_other_conversation_run",
        ],
        "{all}"
    );
    assert_eq!(
        client,
        [
            "a0_fresh_autotoolset_plaintext",
            "a_fresh_unrestricted",
            "b0_fresh_standard_echo_autoallowed",
            "b_fresh_standard_denied",
            "d2_pending_approval_nobackfill",
            "d_pending_approval_stale_recovery",
            "e_busy_conversation_409",
        ],
        "{all}"
    );
}

/// A provider cassette is refused with its file and line.
#[test]
fn a_provider_recording_is_bad_input() {
    let path = repo().join("cassettes/provider/openai_plain_text.jsonl");
    let opts = ReplayOptions::from_names(Side::Server, "letta-oss-0.16", "letta-code", false)
        .expect("options");
    let e = replay::replay_file(&path, &opts).unwrap_err();
    assert_eq!(e.line, Some(1), "{e}");
    assert!(e.to_string().contains("key `layer`"), "{e}");
}
