//! The walking skeleton end to end: the bundled approval-turn scenario on turmoil, its
//! determinism, a snapshot of its trace, the connection-drop fault, and each invariant broken on
//! purpose to show its report.

use crate::common::{scenario_path, scenarios_in, violations, with_faults};
use loopsim::harness::invariants::{DETERMINISTIC, TOOL_CALL_RESOLVED};
use loopsim::harness::report::{Verdict, exit};
use loopsim::harness::run::run_scenario;
use loopsim::harness::scenario::{Fault, Scenario};

fn bundled() -> Scenario {
    Scenario::load(&scenario_path("approval_turn.toml")).expect("bundled scenario loads")
}

#[test]
fn bundled_scenario_passes_with_an_executed_tool_and_end_turn() {
    let report = run_scenario(&bundled(), 1, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert_eq!(report.turn_outcomes, vec!["stopped: end_turn".to_string()]);
    // The tool ran once, with the arguments the provider streamed in three fragments.
    assert!(report.trace_text.contains(
        "tool_executed tool_call_id=toolu_01NRLabsLyVHZPKxbKvkfSMn tool=get_weather arguments=\"{\\\"location\\\": \\\"Paris\\\"}\" executions=1 status=success"
    ), "{}", report.trace_text);
    assert!(report.pending.is_empty());
}

#[test]
fn seeds_0_to_50_each_run_twice_give_identical_traces() {
    let scenario = bundled();
    let mut hashes = std::collections::BTreeSet::new();
    for seed in 0..50 {
        let report = run_scenario(&scenario, seed, 2).unwrap();
        assert!(
            violations(&report, DETERMINISTIC).is_empty(),
            "seed {seed}:\n{}",
            report.render()
        );
        assert_eq!(
            report.verdict,
            Verdict::Pass,
            "seed {seed}:\n{}",
            report.render()
        );
        hashes.insert(report.trace_hash);
    }
    // Seeds drive latency and ids, so different seeds give different traces.
    assert!(hashes.len() > 40, "only {} distinct traces", hashes.len());
}

#[test]
fn full_trace_snapshot_of_seed_1() {
    let report = run_scenario(&bundled(), 1, 1).unwrap();
    crate::common::snapshots()
        .bind(|| insta::assert_snapshot!("approval_turn_seed_1", report.trace_text));
}

/// No placement of a dropped stream may panic, hang, or break an invariant, and every run ends
/// in bounded time (the client resumes the stream, letta-protocol.md §4.4).
#[test]
fn connection_drop_at_every_frame_ends_cleanly() {
    let base = bundled();
    for response in 1..=2 {
        for after_frame in 0..=12 {
            for seed in 0..3 {
                let s = with_faults(
                    base.clone(),
                    vec![Fault::DropConnection {
                        response,
                        after_frame,
                    }],
                );
                let report = run_scenario(&s, seed, 1).unwrap();
                assert_eq!(
                    report.verdict,
                    Verdict::Pass,
                    "response {response} after_frame {after_frame} seed {seed}:\n{}",
                    report.render()
                );
                assert_eq!(report.turn_outcomes.len(), 1);
                assert!(report.end_ms < base.limits.sim_time_ms);
            }
        }
    }
}

/// The stream cut inside the tool call's arguments is resumed from the last seq id; the
/// arguments merge across the boundary and the tool runs once with them intact.
#[test]
fn connection_drop_mid_tool_call_is_resumed() {
    let s = with_faults(
        bundled(),
        vec![Fault::DropConnection {
            response: 1,
            after_frame: 5,
        }],
    );
    let report = run_scenario(&s, 7, 2).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert_eq!(report.turn_outcomes, vec!["stopped: end_turn".to_string()]);
    assert!(
        report
            .trace_text
            .contains("harness  fault fault=\"drop_connection response=1 after_frame=5\"")
    );
    assert!(
        report
            .trace_text
            .contains("client_resume attempt=1 source=run"),
        "{}",
        report.trace_text
    );
    assert!(report.trace_text.contains(
        "tool_executed tool_call_id=toolu_01NRLabsLyVHZPKxbKvkfSMn tool=get_weather arguments=\"{\\\"location\\\": \\\"Paris\\\"}\" executions=1"
    ), "{}", report.trace_text);
}

/// `tool-call-resolved` broken on purpose: a server that accepts a new user message while a
/// tool call is pending leaves that call dangling. The pending call is left by "another
/// client" (fault `approval_pending_in_band`) just before the user's message arrives.
#[test]
fn tool_call_resolved_fails_on_a_server_that_accepts_messages_while_pending() {
    let s = with_faults(
        bundled(),
        vec![Fault::ApprovalPendingInBand {
            send: 1,
            tool_call_id: "toolu_stale_1".into(),
            tool: "Bash".into(),
            arguments: r#"{"command": "echo stale"}"#.into(),
        }],
    );

    // Faithful server: the message is refused in-band; the client closes the stale call with a
    // denial and resends; nothing dangles.
    let faithful = run_scenario(&s, 3, 1).unwrap();
    assert_eq!(faithful.verdict, Verdict::Pass, "{}", faithful.render());
    assert_eq!(
        faithful.turn_outcomes,
        vec!["stopped: end_turn".to_string()]
    );

    let mut s = s;
    s.planted.server_accepts_message_while_pending = true;
    let broken = run_scenario(&s, 3, 1).unwrap();
    assert_eq!(broken.verdict, Verdict::Correctness, "{}", broken.render());
    assert_eq!(broken.verdict.exit_code(), exit::CORRECTNESS);
    let v = violations(&broken, TOOL_CALL_RESOLVED);
    assert_eq!(v.len(), 1, "{}", broken.render());
    assert!(
        v[0].message
            .contains("a new user turn started while tool call toolu_stale_1 was unresolved"),
        "{}",
        v[0].message
    );
    let text = broken.render();
    assert!(text.contains("tool-call-resolved           FAIL"), "{text}");
    assert!(text.contains("at event "), "{text}");
    assert!(
        text.contains("reproduce cargo run --release -p sim -- run "),
        "{text}"
    );
}

/// `deterministic` broken on purpose: otids that depend on process state differ between two
/// runs of the same seed, and the report shows the first divergent event.
#[test]
fn deterministic_fails_on_process_dependent_otids() {
    let mut s = bundled();
    s.planted.client_nondeterministic_otids = true;
    let report = run_scenario(&s, 1, 2).unwrap();
    assert_eq!(report.verdict, Verdict::Correctness, "{}", report.render());
    let v = violations(&report, DETERMINISTIC);
    assert_eq!(v.len(), 1);
    // The first event that carries an otid is the first message send.
    assert!(
        v[0].message.contains("first divergence at line "),
        "{}",
        v[0].message
    );
    assert!(v[0].message.contains("client_send"), "{}", v[0].message);
}

#[test]
fn a_budget_too_small_is_a_liveness_failure_with_a_diagnosis() {
    let mut s = bundled();
    s.limits.sim_time_ms = 60;
    let report = run_scenario(&s, 1, 1).unwrap();
    let Verdict::Liveness(diagnosis) = &report.verdict else {
        panic!("expected liveness, got {}", report.render())
    };
    assert_eq!(report.verdict.exit_code(), exit::LIVENESS);
    assert!(
        diagnosis.starts_with("turn 1 stuck reading a stream (run "),
        "{diagnosis}"
    );
    assert!(diagnosis.contains("last client event: "), "{diagnosis}");
    let text = report.render();
    assert!(text.contains("turn-terminates              FAIL"), "{text}");
}

fn parse_err(text: &str) -> String {
    Scenario::parse(text, &scenario_path("inline.toml"))
        .expect_err("should be rejected")
        .to_string()
}

const MINIMAL: &str = r#"[scenario]
name = "x"
system = "letta"

[provider]
api = "anthropic"
responses = ["../../cassettes/provider/anthropic_text_end_turn.jsonl"]

[agent]
id = "agent-1"

[client]
turns = ["hi"]
"#;

#[test]
fn minimal_scenario_parses() {
    Scenario::parse(MINIMAL, &scenario_path("inline.toml")).unwrap();
}

#[test]
fn scenario_errors_name_file_line_and_what_was_expected() {
    let e = parse_err(&MINIMAL.replace("name = \"x\"", "name = \"x\"\nsytem = 1"));
    assert!(e.contains("inline.toml:3:"), "{e}");
    assert!(e.contains("unknown field `sytem`"), "{e}");

    let e = parse_err(&MINIMAL.replace("system = \"letta\"", "system = \"kimi\""));
    assert!(
        e.contains("inline.toml:3:10: unknown system \"kimi\": expected \"letta\""),
        "{e}"
    );

    let e = parse_err(&MINIMAL.replace("anthropic_text_end_turn", "missing"));
    assert!(e.contains("inline.toml:7:"), "{e}");
    assert!(e.contains("not found"), "{e}");

    let e = parse_err(&format!("{MINIMAL}\n[permissions]\nhuman = [\"maybe\"]\n"));
    assert!(e.contains("inline.toml:16:"), "{e}");
    assert!(e.contains("\"deny: <reason>\" or \"never\""), "{e}");

    let e = parse_err(&format!("{MINIMAL}\n[[faults]]\nkind = \"meteor\"\n"));
    assert!(e.contains("inline.toml:1"), "{e}");
    assert!(e.contains("meteor"), "{e}");

    let e = parse_err(&MINIMAL.replace("turns = [\"hi\"]", "turns = \"hi\""));
    assert!(e.contains("inline.toml:13:"), "{e}");

    let e = parse_err(&format!(
        "{MINIMAL}\n[network]\nstart = \"2100-02-29T08:00:00Z\"\n"
    ));
    assert!(e.contains("inline.toml:16:"), "{e}");
    assert!(
        e.contains("no such date: expected a UTC instant such as"),
        "{e}"
    );

    let expect = "\n[[expect]]\ninvariant = \"history-valid\"\nfinding = \"f\"\n";
    let e = parse_err(&format!("{MINIMAL}{expect}"));
    assert!(e.contains("inline.toml:15:"), "{e}");
    assert!(e.contains("names no profile: add `profile ="), "{e}");
    let e = parse_err(&format!("{MINIMAL}{expect}server = \"cloudy\"\n"));
    assert!(
        e.contains("unknown server profile \"cloudy\" in [[expect]]"),
        "{e}"
    );
    let e = parse_err(&format!(
        "{MINIMAL}{expect}server = \"local\"\nsometimes = true\n"
    ));
    assert!(
        e.contains("\"f\" has no signature (known: local-turns-interleave, threshold-not-reset-for-new-runs,"),
        "{e}"
    );
}

/// Every bundled scenario passes on a spread of seeds and declares how its turns end; every
/// planted one fails correctness.
#[test]
fn every_bundled_scenario_passes_and_every_planted_one_fails() {
    let mut checked = 0;
    for dir in ["scenarios/letta", "scenarios/kimi", "scenarios/planted"] {
        let planted = dir.ends_with("planted");
        for file in scenarios_in(dir, "") {
            let s = Scenario::load(&file).unwrap_or_else(|e| panic!("{e}"));
            for seed in 0..8 {
                let report = run_scenario(&s, seed, 2).unwrap();
                if planted {
                    let expected = s.planted.expected_failures();
                    assert!(!expected.is_empty(), "{} plants nothing", file.display());
                    for id in expected {
                        assert!(
                            !violations(&report, id).is_empty(),
                            "{}: {id} not caught\n{}",
                            file.display(),
                            report.render()
                        );
                    }
                    assert_ne!(report.verdict, Verdict::Pass);
                } else {
                    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
                    // A bundled scenario says how its turns end, so a build whose fault-free
                    // turns end otherwise fails `ends-as-declared` (docs/scenario.md).
                    assert!(
                        report.turn_outcomes.is_empty() || !s.scenario.outcomes.is_empty(),
                        "{} runs turns but declares no [scenario] outcomes; add `outcomes = {:?}`",
                        file.display(),
                        report.turn_outcomes
                    );
                    assert!(
                        s.requests.iter().all(|r| r.get_ref().status.is_some()),
                        "{}: every [[requests]] declares the status it is answered with",
                        file.display()
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 7, "only {checked} scenarios found");
}
