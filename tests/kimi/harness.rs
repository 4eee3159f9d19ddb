//! The agent loop (`system = "agent-loop"`) under the harness: its scenarios pass and are
//! deterministic, one trace is pinned by a snapshot, each fault does what its docs say, both
//! agent-loop oracles fail on their planted defect with a full report, the schema is strict,
//! and swarm plans and shrinking work for this world.

use std::path::PathBuf;

use crate::common::{load, repo, scenarios_in, violations, with_faults};
use loopsim::harness::explore::{baseline, plan_of, with_swarm};
use loopsim::harness::faults::When;
use loopsim::harness::invariants::{
    BUDGET_RESPECTED, CLIENT_FAULTS_FIRE, DETERMINISTIC, ENDS_AS_DECLARED, HISTORY_VALID,
    LOCK_SAFETY, LOOP_ENVELOPE, RECOVERY_COMPLETES, TRANSCRIPT_RESUMES,
};
use loopsim::harness::report::{RunReport, Verdict, exit};
use loopsim::harness::run::run_scenario;
use loopsim::harness::scenario::{Fault, Planted, Scenario};
use loopsim::harness::shrink::{shrink, with_plan};
use loopsim::model::kimi::agent::inject::{AbortReason, Garbage, ListenerFault};

fn loop_scenarios() -> Vec<PathBuf> {
    scenarios_in("scenarios/kimi", "")
}

/// The agent's events only, without the harness's fault lines (to compare runs).
fn agent_lines(report: &RunReport) -> Vec<String> {
    report
        .trace_text
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("client"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_agent_loop_scenario_passes_and_checks_both_oracles() {
    let files = loop_scenarios();
    assert!(files.len() >= 10, "{files:?}");
    for file in files {
        let s = Scenario::load(&file).unwrap();
        assert!(s.is_agent_loop());
        let report = run_scenario(&s, 5, 1).unwrap();
        assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
        let ids: Vec<&str> = report.invariants.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            ids,
            [
                LOOP_ENVELOPE,
                LOCK_SAFETY,
                BUDGET_RESPECTED,
                CLIENT_FAULTS_FIRE,
                HISTORY_VALID,
                TRANSCRIPT_RESUMES,
                ENDS_AS_DECLARED,
                RECOVERY_COMPLETES,
                "turn-terminates"
            ],
            "{}",
            file.display()
        );
        assert!(!report.turn_outcomes.is_empty());
    }
}

/// The determinism standing test for this world: seeds run twice give identical traces, and
/// the seeds drive real variation (tool latencies, network latency, uuids).
#[test]
fn agent_loop_seeds_each_run_twice_give_identical_traces() {
    for (file, seeds) in [
        ("scenarios/kimi/overlapping_cassette.toml", 0..20),
        ("scenarios/kimi/provider_errors.toml", 0..6),
        ("scenarios/kimi/tool_hang.toml", 0..6),
        ("scenarios/kimi/user_abort.toml", 0..6),
    ] {
        let s = load(file);
        let mut hashes = std::collections::BTreeSet::new();
        let n = seeds.end - seeds.start;
        for seed in seeds {
            let report = run_scenario(&s, seed, 2).unwrap();
            assert!(
                violations(&report, DETERMINISTIC).is_empty(),
                "{file} seed {seed}:\n{}",
                report.render()
            );
            assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
            hashes.insert(report.trace_hash);
        }
        assert!(
            hashes.len() as u64 > n / 2,
            "{file}: {} distinct traces",
            hashes.len()
        );
    }
}

#[test]
fn agent_loop_trace_snapshot_of_seed_1() {
    let report = run_scenario(&load("scenarios/kimi/parallel_conflicts.toml"), 1, 1).unwrap();
    crate::common::snapshots()
        .bind(|| insta::assert_snapshot!("loop_parallel_conflicts_seed_1", report.trace_text));
}

#[test]
fn conflicting_calls_serialise_in_provider_order_and_the_rest_overlap() {
    let report = run_scenario(&load("scenarios/kimi/parallel_conflicts.toml"), 2, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    let lines = agent_lines(&report);
    let pos = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not in\n{}", report.trace_text))
    };
    // The Edit of config.rs waits for the Grep over src and the Read of config.rs ...
    let edit = pos("loop_tool_start tool_call_id=toolu_s1_3");
    assert!(pos("loop_tool_end tool_call_id=toolu_s1_1") < edit);
    assert!(pos("loop_tool_end tool_call_id=toolu_s1_2") < edit);
    // ... while the Read of README.md starts before either ended.
    let readme = pos("loop_tool_start tool_call_id=toolu_s1_4");
    assert!(readme < pos("loop_tool_end tool_call_id=toolu_s1_1"));
    // Results in provider order.
    let results: Vec<usize> = (1..=5)
        .map(|k| pos(&format!("loop_tool_result tool_call_id=toolu_s1_{k}")))
        .collect();
    assert!(results.windows(2).all(|w| w[0] < w[1]), "{results:?}");
    // The edit and the write landed.
    assert!(
        report
            .trace_text
            .contains("output=\"Edited /repo/src/config.rs\"")
    );
}

#[test]
fn provider_errors_are_retried_with_retry_after_and_a_stalled_stream_times_out() {
    let report = run_scenario(&load("scenarios/kimi/provider_errors.toml"), 1, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert_eq!(report.turn_outcomes, ["completed: end_turn (2 steps)"]);
    let t = &report.trace_text;
    assert!(
        t.contains("loop_retrying step=1 failed_attempt=1 next_attempt=2"),
        "{t}"
    );
    // Retry-After: 2 s is the delay, not the jittered backoff.
    assert!(
        t.contains(
            "failed_attempt=2 next_attempt=3 delay_ms=2000 error=\"APIProviderRateLimitError 429"
        ),
        "{t}"
    );
    assert!(t.contains("how=\"idle 5000 ms\""), "{t}");
    assert!(
        t.contains("error=\"APITimeoutError: Request timed out: no data for 5000 ms\""),
        "{t}"
    );
    assert!(t.contains("failed_attempt=3 next_attempt=4"), "{t}");
    // The stalled batch never ran; the replayed one did, once.
    assert_eq!(t.matches("loop_tool_start").count(), 2, "{t}");
    assert!(
        !t.contains("toolu_s1_"),
        "no tool of the stalled answer may run\n{t}"
    );
}

/// With one attempt per step the loop takes the single-attempt path (kimi-loop.md §6): each
/// step calls the model once, and a 529 the retry path would retry ends the turn.
#[test]
fn one_attempt_per_step_calls_the_model_once_and_a_529_ends_the_turn() {
    let report = run_scenario(
        &load("scenarios/kimi/provider_error_single_attempt.toml"),
        1,
        1,
    )
    .unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert_eq!(report.turn_outcomes, ["failed: APIStatusError: Overloaded"]);
    let t = &report.trace_text;
    assert_eq!(t.matches(" loop_provider_request ").count(), 2, "{t}");
    assert!(!t.contains("loop_retrying"), "{t}");
    // Step 1's batch ran on the model's answer before step 2's call failed.
    assert_eq!(t.matches("loop_tool_start").count(), 1, "{t}");
    assert!(
        t.contains("loop_model_error turn_step=- error=\"APIStatusError: Overloaded\""),
        "{t}"
    );
}

#[test]
fn a_non_retryable_error_fails_the_turn_after_one_interrupt() {
    let s = with_faults(
        load("scenarios/kimi/recorded_tool_use.toml"),
        vec![Fault::ProviderError {
            call: 0,
            status: 429,
            retry_after_s: Some(1),
            message: Some(
                "You exceeded your current quota, please check your plan and billing details"
                    .into(),
            ),
        }],
    );
    let report = run_scenario(&s, 1, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert!(
        report.turn_outcomes[0].starts_with("failed: APIProviderQuotaExhaustedError: You exceeded"),
        "{:?}",
        report.turn_outcomes
    );
    assert!(!report.trace_text.contains("loop_retrying"));
    assert_eq!(
        report
            .trace_text
            .matches("loop_interrupted reason=error")
            .count(),
        1
    );
}

#[test]
fn a_user_abort_mid_batch_still_records_every_result_and_counts_the_usage() {
    let report = run_scenario(&load("scenarios/kimi/user_abort.toml"), 1, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert_eq!(
        report.turn_outcomes,
        ["cancelled (1 step)", "completed: end_turn (1 step)"]
    );
    let t = &report.trace_text;
    assert!(t.contains("fault fault=\"user_abort on_event=loop_tool_start nth=2 reason=user\""));
    for k in 1..=3 {
        assert!(
            t.contains(&format!(
                "loop_tool_result tool_call_id=toolu_s1_{k} is_error=true output=\"The user manually interrupted"
            )),
            "call {k}\n{t}"
        );
    }
    // No step.end for the aborted step; the interrupt says the user did it.
    let turn1 = &t[..t.find("turn_start turn=2").unwrap()];
    assert!(!turn1.contains("loop_step_end"), "{turn1}");
    assert!(turn1.contains(
        "loop_interrupted reason=aborted cause=user_cancelled attempted_steps=1 active_step=1"
    ));
    // Contract 6: the aborted step's usage is in the turn's total.
    assert!(turn1.contains(
        "loop_turn_result turn=1 stop_reason=aborted steps=1 usage.inputOther=100 usage.output=20"
    ));
    // Nothing was written: the writes honoured the abort before touching the workspace.
    assert_eq!(t.matches("how=aborted").count(), 2, "{t}");
}

#[test]
fn a_tool_that_hangs_past_the_abort_is_cut_by_the_grace_timeout() {
    let report = run_scenario(&load("scenarios/kimi/tool_hang.toml"), 1, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert_eq!(report.turn_outcomes[0], "cancelled (1 step)");
    let time_of = |needle: &str| -> u64 {
        let line = report
            .trace_text
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle}\n{}", report.trace_text));
        line.split_whitespace().next().unwrap().parse().unwrap()
    };
    let aborted = time_of("loop_user_abort turn=1");
    assert_eq!(
        time_of("loop_tool_start tool_call_id=toolu_s1_1") + 300,
        aborted
    );
    assert_eq!(
        time_of("loop_tool_end tool_call_id=toolu_s1_1 how=dropped"),
        aborted + 2000
    );
    assert!(report.trace_text.contains(
        "loop_tool_result tool_call_id=toolu_s1_1 is_error=true output=\"Tool \\\"Bash\\\" aborted by grace timeout (2000ms)\""
    ));
    // The queued Read never ran: it gets the user-interrupt text without executing.
    assert!(
        !report
            .trace_text
            .contains("loop_tool_start tool_call_id=toolu_s1_2")
    );
    assert_eq!(report.turn_outcomes[1], "completed: end_turn (1 step)");
}

/// Without an abort a hanging tool hangs the turn: the loop has no per-tool timeout
/// (kimi-loop.md §4.5), so this is a liveness failure with a diagnosis naming the tool.
#[test]
fn a_hang_without_an_abort_is_a_liveness_failure_naming_the_tool() {
    let mut s = with_faults(
        load("scenarios/kimi/tool_hang.toml"),
        vec![Fault::ToolHang {
            execution: 1,
            abort_after_ms: None,
        }],
    );
    s.limits.heal_at_ms = 5_000;
    s.limits.liveness_ms = 5_000;
    let report = run_scenario(&s, 1, 1).unwrap();
    let Verdict::Liveness(d) = &report.verdict else {
        panic!("{}", report.render());
    };
    assert_eq!(report.verdict.exit_code(), exit::LIVENESS);
    assert!(
        d.starts_with("turn 1 stuck in step 1 waiting for tool Bash toolu_s1_1, running since "),
        "{d}"
    );
}

#[test]
fn garbage_tool_results_become_the_upstream_error_texts() {
    let report = run_scenario(&load("scenarios/kimi/tool_garbage.toml"), 1, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    let t = &report.trace_text;
    for (k, text) in [
        (1, "Tool \\\"Read\\\" returned no result."),
        (
            2,
            "Tool \\\"Read\\\" returned a number instead of a tool result.",
        ),
        (
            3,
            "Tool \\\"Read\\\" returned a result with a missing or malformed \\\"output\\\" field.",
        ),
    ] {
        let line = t
            .lines()
            .find(|l| l.contains(&format!("loop_tool_result tool_call_id=toolu_s1_{k}")))
            .unwrap();
        assert!(line.contains("is_error=true"), "{line}");
        // Output is cut at 60 characters in the trace.
        let shown: String = text.chars().take(40).collect();
        assert!(line.contains(&shown), "{line}");
    }
}

/// A throwing live listener (an error or an unwind) changes nothing the loop does: the agent's
/// trace equals the fault-free one, event for event.
#[test]
fn a_throwing_listener_never_affects_the_turn() {
    let faulty = load("scenarios/kimi/listener_throws.toml");
    let clean = with_faults(faulty.clone(), vec![]);
    for seed in 0..4 {
        let a = run_scenario(&faulty, seed, 1).unwrap();
        let b = run_scenario(&clean, seed, 1).unwrap();
        assert_eq!(a.verdict, Verdict::Pass, "{}", a.render());
        assert!(
            a.trace_text
                .contains("fault fault=\"listener_throws event=tool.result nth=1 how=panic\"")
        );
        assert_eq!(agent_lines(&a), agent_lines(&b), "seed {seed}");
    }
    // Every live event throwing, with an unwind, changes nothing either, and is not a crash.
    let all = with_faults(
        faulty,
        vec![Fault::ListenerThrows {
            event: None,
            nth: None,
            how: ListenerFault::Panic,
        }],
    );
    let a = run_scenario(&all, 1, 1).unwrap();
    let b = run_scenario(&clean, 1, 1).unwrap();
    assert_eq!(a.verdict, Verdict::Pass, "{}", a.render());
    assert_eq!(agent_lines(&a), agent_lines(&b));
}

#[test]
fn a_context_overflow_is_compacted_and_the_turn_rerun_from_step_1() {
    let report = run_scenario(&load("scenarios/kimi/context_overflow.toml"), 1, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert_eq!(
        report.turn_outcomes[1],
        "completed: end_turn (1 step) after 1 compaction(s)"
    );
    let t = &report.trace_text;
    let turn2 = &t[t.find("turn_start turn=2").unwrap()..];
    assert!(
        turn2.contains("loop_interrupted reason=error cause=error attempted_steps=2 active_step=2")
    );
    // The rerun starts at step 1 again, and its result counts only its own response.
    assert_eq!(
        turn2.matches("loop_step_begin turn_id=2 step=1 ").count(),
        2,
        "{turn2}"
    );
    assert!(turn2.contains("loop_compaction removed_count="));
    assert!(turn2.contains(
        "loop_turn_result turn=2 stop_reason=end_turn steps=1 usage.inputOther=100 usage.output=20"
    ));
}

#[test]
fn max_steps_fails_the_turn_after_exactly_max_steps_model_calls() {
    let report = run_scenario(&load("scenarios/kimi/max_steps.toml"), 1, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert!(
        report.turn_outcomes[0]
            .starts_with("failed: loop.max_steps_exceeded: Turn exceeded maxSteps=2.")
    );
    assert_eq!(
        report.trace_text.matches("loop_provider_request").count(),
        2
    );
    assert!(report.trace_text.contains(
        "loop_interrupted reason=max_steps cause=max_steps attempted_steps=2 active_step=-"
    ));
}

#[test]
fn the_hand_written_cassette_is_canonical_and_asks_for_five_overlapping_tools() {
    use loopsim::cassette::Cassette;
    use loopsim::wire::provider::{ProviderEvent, ToolCallAccumulator};
    let path = repo().join("cassettes/provider/anthropic_parallel_tools_overlapping_paths.jsonl");
    let c = Cassette::load(&path).unwrap();
    assert!(
        c.header()
            .note
            .as_deref()
            .unwrap()
            .starts_with("hand-written")
    );
    assert_eq!(c.to_jsonl(), std::fs::read_to_string(&path).unwrap());
    let events = c.provider_events().unwrap();
    let calls: Vec<(String, String)> = ToolCallAccumulator::from_events(&events)
        .into_calls()
        .into_iter()
        .map(|c| (c.name, c.arguments))
        .collect();
    assert_eq!(calls.len(), 5, "{calls:?}");
    assert_eq!(calls[0].0, "Grep");
    assert_eq!(calls[2], ("Edit".into(), r#"{"path": "/repo/src/lib.rs", "old": "// TODO: validate input", "new": "validate(input)?;"}"#.into()));
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::Done)));
}

// ---- the oracles, broken on purpose ------------------------------------------------------

/// `loop-envelope` broken on purpose: a loop that records tool results in completion order.
#[test]
fn loop_envelope_fails_on_results_recorded_in_completion_order() {
    let planted = load("scenarios/planted/loop_results_out_of_order.toml");
    assert_eq!(planted.planted.expected_failures(), [LOOP_ENVELOPE]);
    let mut faithful = planted.clone();
    faithful.planted.loop_results_in_completion_order = false;
    let ok = run_scenario(&faithful, 1, 1).unwrap();
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());

    let report = run_scenario(&planted, 1, 2).unwrap();
    assert_eq!(report.verdict, Verdict::Correctness);
    assert_eq!(report.verdict.exit_code(), exit::CORRECTNESS);
    let v = violations(&report, LOOP_ENVELOPE);
    assert_eq!(v.len(), 2, "{}", report.render());
    assert!(v[0].message.starts_with(
        "turn 1 step 1: tool.result for toolu_s1_3 out of provider order: the result of toolu_s1_1 comes first"
    ), "{}", v[0].message);
    assert!(violations(&report, LOCK_SAFETY).is_empty());
    let text = report.render();
    assert!(text.contains("loop-envelope          FAIL"), "{text}");
    assert!(text.contains("at event "), "{text}");
    assert!(
        text.contains("loop_tool_result tool_call_id=toolu_s1_3"),
        "{text}"
    );
    assert!(
        text.contains("reproduce cargo run --release -p sim -- run "),
        "{text}"
    );
    assert!(
        text.contains("loop_results_out_of_order.toml --seed 1"),
        "{text}"
    );
}

/// `lock-safety` broken on purpose: a scheduler that drains its queue ignoring the running
/// tasks lets an Edit of /a start while a Write of /a still runs.
#[test]
fn lock_safety_fails_on_a_scheduler_that_drains_ignoring_running_tasks() {
    let planted = load("scenarios/planted/loop_scheduler_overlap.toml");
    assert_eq!(planted.planted.expected_failures(), [LOCK_SAFETY]);
    let mut faithful = planted.clone();
    faithful.planted.loop_scheduler_drain_ignores_active = false;
    let ok = run_scenario(&faithful, 1, 1).unwrap();
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());

    for seed in 0..4 {
        let report = run_scenario(&planted, seed, 1).unwrap();
        assert_eq!(report.verdict, Verdict::Correctness, "{}", report.render());
        let v = violations(&report, LOCK_SAFETY);
        assert_eq!(v.len(), 1, "{}", report.render());
        assert!(v[0].message.starts_with(
            "Edit toolu_s1_3 (readwrite:/a) started while Write toolu_s1_1 (write:/a), which conflicts with it, was still running"
        ), "{}", v[0].message);
        assert!(violations(&report, LOOP_ENVELOPE).is_empty());
        let text = report.render();
        assert!(text.contains("lock-safety            FAIL"), "{text}");
        assert!(
            text.contains("loop_tool_start tool_call_id=toolu_s1_3 tool=Edit"),
            "{text}"
        );
    }
}

/// `recovery-completes` (agent loop) broken on purpose: a step that gives up after 3 attempts,
/// the default before it was raised to 10, fails a turn whose three 529s the faithful loop
/// retries through; its fault-free twin completes.
#[test]
fn recovery_completes_fails_on_a_loop_that_gives_up_after_three_attempts() {
    let planted = load("scenarios/planted/loop_retry_default_of_three.toml");
    assert_eq!(planted.planted.expected_failures(), [RECOVERY_COMPLETES]);
    let mut faithful = planted.clone();
    faithful.planted.loop_retry_default_of_three = false;
    let ok = run_scenario(&faithful, 1, 1).unwrap();
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert_eq!(
        ok.turn_outcomes,
        ["completed: end_turn (2 steps)"],
        "{}",
        ok.render()
    );

    for seed in 0..4 {
        let report = run_scenario(&planted, seed, 1).unwrap();
        assert_eq!(report.verdict, Verdict::Correctness, "{}", report.render());
        let v = violations(&report, RECOVERY_COMPLETES);
        assert_eq!(v.len(), 1, "{}", report.render());
        assert_eq!(
            v[0].message,
            "turn 1 ended `failed: APIStatusError: Overloaded`, but the fault-free run at this \
             seed ends it `completed: end_turn (2 steps)`, and every fault of the plan heals \
             within a budget"
        );
        assert!(violations(&report, BUDGET_RESPECTED).is_empty());
    }
}

/// `history-valid` (agent loop) broken on purpose: a host that appends a turn's prompt only
/// when the turn has ended sends its first model call with no message at all; the provider
/// refuses it with Anthropic's text and the turn fails. The faithful host's run passes.
#[test]
fn history_valid_fails_on_a_loop_that_records_the_prompt_after_its_turn() {
    assert_planted_breaks_once(
        "loop_prompt_after_turn.toml",
        HISTORY_VALID,
        |p| p.loop_prompt_appended_after_turn = false,
        "the provider refused model call #0 with 400: messages: at least one message is required",
        "failed: APIStatusError: messages: at least one message is required",
    );
}

/// `history-valid` (agent loop) broken on purpose where no provider looks: a projection that
/// drops a failed tool's error status tells the model the tool succeeded. Every request is
/// one the provider accepts and the turn completes, but the second model call shows the Read's
/// failure as a plain output. The faithful host's run passes.
#[test]
fn history_valid_fails_on_a_loop_that_shows_a_failed_tool_as_a_success() {
    assert_planted_breaks_once(
        "loop_errors_shown_as_success.toml",
        HISTORY_VALID,
        |p| p.loop_errors_shown_as_success = false,
        "model call #1 shows tool call toolu_s1_1's result as \"File does not exist: \
         /CHECKLIST.md\", but the loop recorded is_error=true \"File does not exist: \
         /CHECKLIST.md\", which the projection renders as \"<system>ERROR: Tool execution \
         failed.</system>\\nFile does not exist: /CHECKLIST.md\" (kimi-loop.md §8.3 step 2)",
        "completed: end_turn (2 steps)",
    );
}

/// A planted agent-loop defect caught where it happens: `scenarios/planted/<file>` names `id`
/// as its one expected failure; with the defect switched `off` the same scenario passes at
/// seed 1, completing its turn in two steps; with it on, each of seeds 0..4 breaks `id` once,
/// with `message`, and its one turn ends `outcome`.
fn assert_planted_breaks_once(
    file: &str,
    id: &str,
    off: fn(&mut Planted),
    message: &str,
    outcome: &str,
) {
    let planted = load(format!("scenarios/planted/{file}"));
    assert_eq!(planted.planted.expected_failures(), [id]);
    let mut faithful = planted.clone();
    off(&mut faithful.planted);
    let ok = run_scenario(&faithful, 1, 1).unwrap();
    assert_eq!(ok.verdict, Verdict::Pass, "{}", ok.render());
    assert_eq!(ok.turn_outcomes, ["completed: end_turn (2 steps)"]);

    for seed in 0..4 {
        let report = run_scenario(&planted, seed, 1).unwrap();
        assert_eq!(report.verdict, Verdict::Correctness, "{}", report.render());
        let v = violations(&report, id);
        assert_eq!(v.len(), 1, "{}", report.render());
        assert_eq!(v[0].message, message);
        assert_eq!(report.turn_outcomes, [outcome]);
    }
}

// ---- scenario schema ---------------------------------------------------------------------

const MINIMAL: &str = r#"[scenario]
name = "x"
system = "agent-loop"

[provider]
api = "anthropic"
responses = ["../../cassettes/provider/anthropic_text_end_turn.jsonl"]

[agent_loop]
turns = ["hi"]
"#;

fn parse(text: &str) -> Result<Scenario, String> {
    Scenario::parse(text, &repo().join("scenarios/kimi/inline.toml")).map_err(|e| e.to_string())
}

#[test]
fn minimal_agent_loop_scenario_parses_and_runs() {
    let s = parse(MINIMAL).unwrap();
    let report = run_scenario(&s, 1, 2).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    assert_eq!(report.turn_outcomes, ["completed: end_turn (1 step)"]);
}

#[test]
fn agent_loop_schema_errors_name_file_line_and_what_was_expected() {
    let cases: Vec<(String, &str)> = vec![
        (
            MINIMAL.replace("turns = [\"hi\"]", "turns = [\"hi\"]\ncolour = 1"),
            "inline.toml:11:1: unknown field `colour`",
        ),
        (
            MINIMAL.replace(
                "turns = [\"hi\"]",
                "turns = [\"hi\"]\ntools = [\"Read\", \"Rm\"]",
            ),
            "inline.toml:11:18: unknown tool \"Rm\": expected one of Read, Write, Edit, Grep, Bash, get_weather",
        ),
        (
            format!("{MINIMAL}\n[client]\nturns = [\"hi\"]\n"),
            "inline.toml:12:1: [client] is for system \"letta\"",
        ),
        (
            MINIMAL.replace("[agent_loop]\nturns = [\"hi\"]\n", ""),
            "inline.toml:3:10: missing section [agent_loop]",
        ),
        (
            format!(
                "{MINIMAL}\n[[faults]]\nkind = \"drop_connection\"\nresponse = 1\nafter_frame = 2\n"
            ),
            "inline.toml:12:1: system \"agent-loop\" has no server",
        ),
        (
            format!("{MINIMAL}\n[[faults]]\nkind = \"crash\"\nhost = \"server\"\nat_ms = 5\n"),
            "system \"agent-loop\" has no server",
        ),
        (
            format!(
                "{MINIMAL}\n[[faults]]\nkind = \"tool_garbage\"\nexecution = 1\nvalue = \"soup\"\n"
            ),
            "unknown variant `soup`, expected one of `undefined`, `number`, `boolean`, `string`, `array`, `no_output`",
        ),
        (
            format!("{MINIMAL}\n[[faults]]\nkind = \"tool_hang\"\nexecution = 0\n"),
            "inline.toml:12:1: execution numbers start at 1",
        ),
        (
            format!(
                "{MINIMAL}\n[[faults]]\nkind = \"listener_throws\"\nevent = \"tool.done\"\nhow = \"error\"\n"
            ),
            "unknown loop event \"tool.done\": expected one of step.begin, step.end",
        ),
        (
            format!(
                "{MINIMAL}\n[[faults]]\nkind = \"transcript_rejects\"\nevent = \"text.delta\"\n"
            ),
            "inline.toml:12:1: unknown recorded loop event \"text.delta\": expected one of step.begin, step.end, content.part, tool.call, tool.result",
        ),
        (
            format!("{MINIMAL}\n[[faults]]\nkind = \"transcript_rejects\"\nnth = 0\n"),
            "inline.toml:12:1: nth counts from 1",
        ),
        (
            format!("{MINIMAL}\n[[faults]]\nkind = \"user_abort\"\n"),
            "give a trigger: at_ms = <ms> or on_event = \"<event>\"",
        ),
        (
            MINIMAL.replace(
                "responses = [\"../../cassettes/provider/anthropic_text_end_turn.jsonl\"]",
                "",
            ),
            "no model answers: list cassettes in [provider] responses or steps in [[agent_loop.script]]",
        ),
        (
            format!(
                "{}\n[[agent_loop.script]]\nstop = \"end_turn\"\n",
                MINIMAL
                    .replace("anthropic\"", "openai_chat\"")
                    .replace("anthropic_text_end_turn", "openai_text_stop")
            ),
            "a script step needs text, thinking or tool_calls",
        ),
        (
            MINIMAL.replace("system = \"agent-loop\"", "system = \"kimi\""),
            "inline.toml:3:10: unknown system \"kimi\": expected \"letta\" or \"agent-loop\"",
        ),
    ];
    for (text, expected) in cases {
        let e = parse(&text).expect_err(expected);
        assert!(e.contains(expected), "expected {expected:?} in\n{e}");
    }
    // Agent-loop faults are refused in a letta scenario.
    let letta = std::fs::read_to_string(repo().join("scenarios/letta/approval_turn.toml")).unwrap();
    let e = parse(&format!(
        "{letta}\n[[faults]]\nkind = \"user_abort\"\nat_ms = 5\n"
    ))
    .unwrap_err();
    assert!(
        e.contains("fault `user_abort` is for system \"agent-loop\""),
        "{e}"
    );
    let e =
        parse(&letta.replace("[client]", "[agent_loop]\nturns = [\"x\"]\n\n[client]")).unwrap_err();
    assert!(
        e.contains("[agent_loop] is for system \"agent-loop\""),
        "{e}"
    );
}

/// The agent-loop example in docs/scenario.md is a valid scenario that passes.
#[test]
fn the_documented_agent_loop_example_parses_and_passes() {
    let doc = std::fs::read_to_string(repo().join("docs/scenario.md")).unwrap();
    let example = doc
        .split("```toml")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.contains("system = \"agent-loop\""))
        .expect("an agent-loop example in docs/scenario.md");
    let s = parse(example).unwrap_or_else(|e| panic!("{e}\n{example}"));
    let report = run_scenario(&s, 1, 1).unwrap();
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
}

#[test]
fn new_fault_kinds_round_trip_through_toml_and_display() {
    let faults = [
        Fault::UserAbort {
            when: When::AtMs(1500),
            reason: None,
        },
        Fault::UserAbort {
            when: When::OnEvent {
                event: "loop_tool_start".into(),
                nth: 2,
            },
            reason: Some(AbortReason::Signal),
        },
        Fault::ToolHang {
            execution: 2,
            abort_after_ms: Some(500),
        },
        Fault::ToolGarbage {
            execution: 1,
            value: Garbage::NoOutput,
        },
        Fault::ListenerThrows {
            event: Some("tool.result".into()),
            nth: None,
            how: ListenerFault::Panic,
        },
    ];
    let shown = [
        "user_abort at_ms=1500 reason=user",
        "user_abort on_event=loop_tool_start nth=2 reason=signal",
        "tool_hang execution=2 abort_after_ms=500",
        "tool_garbage execution=1 value=no_output",
        "listener_throws event=tool.result nth=every how=panic",
    ];
    for (f, text) in faults.iter().zip(shown) {
        assert_eq!(f.to_string(), text);
        assert_eq!(f.problem(), None);
        let doc = format!("{MINIMAL}\n[[faults]]\n{}\n", inline_to_table(&f.to_toml()));
        let s = parse(&doc).unwrap_or_else(|e| panic!("{}: {e}", f.to_toml()));
        assert_eq!(s.faults[0].get_ref(), f, "{}", f.to_toml());
    }
    // Shrinking makes times and counts smaller, never a count below 1.
    let hang = &faults[2];
    assert_eq!(
        hang.shrunk(|v| v / 2),
        Some(Fault::ToolHang {
            execution: 1,
            abort_after_ms: Some(250)
        })
    );
    let one = Fault::ToolGarbage {
        execution: 1,
        value: Garbage::Number,
    };
    assert_eq!(one.shrunk(|v| v / 2), None);
}

/// `{ kind = "x", a = 1 }` → `kind = "x"\na = 1` (a table body for `[[faults]]`).
fn inline_to_table(inline: &str) -> String {
    let body = inline.trim().trim_start_matches('{').trim_end_matches('}');
    let v: toml::Table = toml::from_str(&format!("x = {{{body}}}")).unwrap();
    toml::to_string(v["x"].as_table().unwrap()).unwrap()
}

// ---- swarm and shrink --------------------------------------------------------------------

/// Swarm plans for this world draw agent-loop faults and never a server fault, and the
/// reference loop stays clean under them.
#[test]
fn swarm_plans_for_agent_loop_scenarios_run_clean() {
    for file in [
        "scenarios/kimi/parallel_conflicts.toml",
        "scenarios/kimi/overlapping_cassette.toml",
    ] {
        let s = load(file);
        let base = baseline(&s).unwrap();
        assert!(matches!(base, loopsim::harness::system::Baseline::Kimi(_)));
        let mut kinds = std::collections::BTreeSet::new();
        for seed in 0..12 {
            let run = with_swarm(&s, seed, &base);
            for f in &run.faults {
                assert!(!f.get_ref().needs_server(), "{}", f.get_ref());
                kinds.insert(
                    f.get_ref()
                        .to_string()
                        .split(' ')
                        .next()
                        .unwrap()
                        .to_string(),
                );
            }
            let report = run_scenario(&run, seed, 1).unwrap();
            assert_eq!(
                report.verdict,
                Verdict::Pass,
                "seed {seed}\n{}",
                report.render()
            );
        }
        assert!(kinds.len() >= 5, "{kinds:?}");
    }
}

/// A sweep over an agent-loop scenario counts the loop's coverage goals, not the Letta ones.
#[test]
fn an_agent_loop_sweep_reports_loop_coverage_goals() {
    use loopsim::harness::explore::{ExploreOptions, explore};
    let s = vec![load("scenarios/kimi/overlapping_cassette.toml")];
    let report = explore(
        &s,
        &ExploreOptions {
            seeds: 0..16,
            jobs: 1,
            shard: None,
            swarm: true,
            determinism_every: 8,
            guided: false,
        },
        &|_, _| {},
    )
    .unwrap();
    assert!(report.failures.is_empty(), "{}", report.render());
    assert!(
        report.coverage.keys().all(|g| g.starts_with("loop-")),
        "{:?}",
        report.coverage
    );
    // (Not every seed: a stream fault on call 0 consumes the batch's cassette, so its retry
    // gets the text answer and no tool runs.)
    assert!(
        report.coverage["loop-tools-overlapped"] > 0,
        "{}",
        report.render()
    );
    assert!(
        report.coverage["loop-conflict-waited"] > 0,
        "{}",
        report.render()
    );
    let reached = report.coverage.values().filter(|n| **n > 0).count();
    assert!(reached >= 5, "{}", report.render());
}

#[test]
fn shrinking_an_agent_loop_failure_writes_a_standalone_scenario_that_reproduces_it() {
    let base = load("scenarios/planted/loop_scheduler_overlap.toml");
    // The first seed whose swarm plan still lets the planted bug show.
    let (seed, start) = (0..50)
        .map(|seed| (seed, with_plan(&base, plan_of(&base, seed, true).unwrap())))
        .find(|(seed, s)| {
            !s.faults.is_empty()
                && !violations(&run_scenario(s, *seed, 1).unwrap(), LOCK_SAFETY).is_empty()
        })
        .expect("some seed with faults fails");
    let shrunk = shrink(&start, seed, LOCK_SAFETY, 200).unwrap();
    assert!(shrunk.scenario.faults.is_empty(), "{:?}", shrunk.steps);
    let dir = std::env::temp_dir().join(format!("loopsim-loop-shrink-{}", std::process::id()));
    let file = shrunk.write(&dir).unwrap();
    let again = Scenario::load(&file).unwrap_or_else(|e| panic!("{e}"));
    assert!(again.is_agent_loop());
    let report = run_scenario(&again, seed, 1).unwrap();
    assert!(
        !violations(&report, LOCK_SAFETY).is_empty(),
        "{}",
        report.render()
    );
    std::fs::remove_dir_all(&dir).ok();
}
