//! Compaction end to end (letta-protocol.md §8): the compaction scenarios in simulation, with
//! their chunks in the trace, and the four planted defects of `compaction-safe`, each caught.

use crate::common::{lines_with, load, run, scenario_path, violations, with_plan};
use loopsim::harness::invariants::COMPACTION_SAFE;
use loopsim::harness::report::{RunReport, Verdict};

fn passing(name: &str) -> RunReport {
    let r = run(&load(scenario_path(name)), 1, 2);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    r
}

/// The server's `chunk_recorded` message types of one run, in order.
fn recorded(r: &RunReport, run_id: &str) -> Vec<String> {
    lines_with(r, &format!("chunk_recorded run_id={run_id} "))
        .iter()
        .filter_map(|l| l.split("message_type=").nth(1))
        .map(str::to_string)
        .collect()
}

fn compaction_line(r: &RunReport) -> String {
    let lines = lines_with(r, " compaction conversation_id=");
    assert_eq!(lines.len(), 1, "{}", r.trace_text);
    lines[0].to_string()
}

#[test]
fn a_large_tool_result_compacts_at_preflight_with_the_all_fallback() {
    let r = passing("compaction_long_tool_results.toml");
    let c = compaction_line(&r);
    assert!(c.contains("trigger=context_window_limit mode=all"), "{c}");
    assert!(c.contains(r#"kept=["summary:"#), "{c}");
    assert!(c.contains("fell_back=true"), "{c}");
    let run_id = c
        .split("run_id=")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap();
    let types = recorded(&r, run_id);
    // The pair comes before the model's output, then the local order: usage, stop_reason.
    assert_eq!(
        types[..2],
        ["event_message", "summary_message"],
        "{types:?}"
    );
    assert_eq!(
        types[types.len() - 2..],
        ["usage_statistics", "stop_reason"],
        "{types:?}"
    );
    assert!(
        lines_with(&r, "client_chunk")
            .iter()
            .any(|l| l.contains("message_type=summary_message")),
        "the client processed the summary"
    );
}

#[test]
fn the_sliding_window_cuts_at_an_assistant_message_and_keeps_the_open_call_with_its_result() {
    let r = passing("compaction_sliding_window.toml");
    let c = compaction_line(&r);
    assert!(c.contains("mode=sliding_window"), "{c}");
    assert!(c.contains("fell_back=false"), "{c}");
    // Turn 1 (user, weather call, its result) summarised; turn 2 kept from its first assistant
    // message on, the Read call beside its result.
    let kept = c.split("kept=").nth(1).unwrap();
    assert!(kept.starts_with(r#"["summary:"#), "{kept}");
    assert!(kept.contains(r#","assistant:"#), "{kept}");
    assert!(
        kept.contains("[toolu_01SyntheticReadNotes01]\",\"tool:"),
        "{kept}"
    );
}

#[test]
fn the_summariser_overflow_walks_the_ladder_trying_its_first_budget_then_the_first_that_cuts() {
    let r = passing("compaction_summariser_overflow.toml");
    let calls = lines_with(&r, "summariser_call");
    assert_eq!(calls.len(), 3, "{}", r.trace_text);
    let chars = |line: &str| -> u64 {
        let at = line.find("transcript_chars=").unwrap() + "transcript_chars=".len();
        line[at..].split(' ').next().unwrap().parse().unwrap()
    };
    assert!(
        calls[0].contains("budget=- ") && calls[0].contains("outcome=\"overflow:"),
        "{}",
        calls[0]
    );
    // 120000 leaves the transcript whole and is tried anyway; 90000 … 4000 leave it as the
    // 120000 step did and are skipped; 2000 cuts it in the middle to 30 % + 30 % of 2000 and
    // the marker.
    assert!(
        calls[1].contains("budget=120000 ") && calls[1].contains("outcome=\"overflow:"),
        "{}",
        calls[1]
    );
    assert_eq!(chars(calls[1]), chars(calls[0]));
    assert!(
        calls[2].contains("budget=2000 ") && calls[2].contains("outcome=\"ok"),
        "{}",
        calls[2]
    );
    assert!(chars(calls[0]) > 2000, "{}", calls[0]);
    assert!((1200..1300).contains(&chars(calls[2])), "{}", calls[2]);
    assert!(compaction_line(&r).contains("laddered=true"));
}

#[test]
fn a_summariser_5xx_fails_the_run_retryably_and_the_retry_compacts() {
    let r = passing("compaction_summariser_5xx.toml");
    let calls = lines_with(&r, "summariser_call");
    assert_eq!(calls.len(), 2, "{}", r.trace_text);
    assert!(
        calls[0].contains("outcome=\"error: HTTP 500"),
        "{}",
        calls[0]
    );
    assert!(calls[1].contains("outcome=\"ok"), "{}", calls[1]);
    assert!(
        lines_with(&r, "run_ended")
            .iter()
            .any(|l| l.ends_with("stop_reason=llm_api_error")),
        "{}",
        r.trace_text
    );
    // The failed compaction wrote nothing: one compaction in the trace, the retry's.
    let c = compaction_line(&r);
    assert!(c.contains("trigger=context_window_limit mode=all"), "{c}");
    assert!(
        lines_with(&r, "turn_end turn=1 ")[0].contains("stopped: end_turn"),
        "{}",
        r.trace_text
    );
}

/// An `error` chunk after the finish reason and before `[DONE]` (a real OpenRouter capture)
/// fails the summary: the OpenAI SDK throws on it, so the empty text before it is never a summary.
#[test]
fn a_summariser_error_in_the_stream_fails_the_compaction_though_a_finish_reason_came() {
    let r = passing("compaction_summariser_error_midstream.toml");
    let calls = lines_with(&r, "summariser_call");
    assert_eq!(calls.len(), 3, "{}", r.trace_text);
    assert!(
        calls[0].contains("outcome=\"error: 400: Token limit reached\""),
        "{}",
        calls[0]
    );
    assert!(calls[1].contains("outcome=\"ok"), "{}", calls[1]);
    let ended = lines_with(&r, "run_ended");
    assert!(ended[0].ends_with("stop_reason=llm_api_error"), "{ended:?}");
    assert!(
        ended.last().unwrap().ends_with("stop_reason=end_turn"),
        "{ended:?}"
    );
    // The failed compaction wrote nothing: the two in the trace are the retry's.
    assert_eq!(
        lines_with(&r, " compaction conversation_id=").len(),
        2,
        "{}",
        r.trace_text
    );
}

#[test]
fn the_sliding_window_cuts_beside_parallel_calls_and_keeps_both_results_with_them() {
    let r = passing("compaction_parallel_calls.toml");
    let c = compaction_line(&r);
    assert!(c.contains("mode=sliding_window"), "{c}");
    assert!(c.contains("fell_back=false"), "{c}");
    assert!(c.contains(r#"removed=["user:"#), "{c}");
    let kept = c.split("kept=").nth(1).unwrap();
    let calls = "[toolu_01SyntheticReadTwo01,toolu_01SyntheticReadTwo02]\",\"tool:";
    assert!(kept.starts_with(r#"["summary:"#), "{kept}");
    assert!(kept.contains(calls), "{kept}");
    assert!(kept.contains("[toolu_01SyntheticReadTwo02]\"]"), "{kept}");
}

/// letta-protocol.md §7.7: at most 3 overflow compactions per turn; the fourth overflow is the
/// turn's error (the scenario declares it, so a fourth compaction fails `ends-as-declared`).
#[test]
fn a_turn_compacts_on_overflow_at_most_three_times_then_the_overflow_ends_it() {
    let r = passing("compaction_overflow_limit.toml");
    let compactions = lines_with(&r, " compaction ");
    assert_eq!(compactions.len(), 3, "{}", r.trace_text);
    assert!(
        compactions
            .iter()
            .all(|c| c.contains("trigger=context_window_overflow")),
        "{compactions:?}"
    );
    assert_eq!(lines_with(&r, "cassette=\"<fault>\" status=400").len(), 4);
}

#[test]
fn a_model_call_overflow_compacts_with_the_overflow_trigger_and_retries() {
    let r = passing("compaction_provider_overflow.toml");
    let c = compaction_line(&r);
    assert!(
        c.contains("trigger=context_window_overflow mode=sliding_window"),
        "{c}"
    );
    assert!(c.contains(r#"removed=["user:"#), "{c}");
    let run_id = c
        .split("run_id=")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap();
    let types = recorded(&r, run_id);
    assert_eq!(
        types[..2],
        ["event_message", "summary_message"],
        "{types:?}"
    );
    assert!(
        lines_with(&r, "turn_end turn=3 ")[0].contains("stopped: end_turn"),
        "{}",
        r.trace_text
    );
}

#[test]
fn a_pending_approval_at_the_boundary_is_kept_and_answered_after_compaction() {
    let r = passing("compaction_pending_approval.toml");
    let c = compaction_line(&r);
    assert!(c.contains(r#"removed=["user:"#), "{c}");
    assert!(c.contains("toolu_01NRLabsLyVHZPKxbKvkfSMn]\"]"), "{c}");
}

#[test]
fn every_planted_compaction_defect_is_caught() {
    for (file, clause) in [
        (
            "compaction_splits_tool_call.toml",
            "was kept but its call was removed",
        ),
        (
            "compaction_cuts_at_user.toml",
            "cut is not at an assistant message",
        ),
        (
            "compaction_loses_message.toml",
            "was removed from context without being summarised",
        ),
        (
            "compaction_ignores_threshold.toml",
            "above the threshold 80, and the run did not end with the error",
        ),
    ] {
        let r = run(&load(format!("scenarios/planted/{file}")), 1, 1);
        let v = violations(&r, COMPACTION_SAFE);
        assert!(
            v.iter().any(|v| v.message.contains(clause)),
            "{file}: {}",
            r.render()
        );
    }
}

/// The slow-network sweep's failure (`sim explore --swarm --latency-scale 10`, seed 84): the
/// resumed run's stream drops its `approval_request_message` (frame 3), then a crash and a
/// partition fail every read of the pending approval. When the local backend's
/// `usage_statistics` and `stop_reason` went out without the seq ids it records them with, the
/// client saw no gap, drained `requires_approval` with no approvals and gave up ("Unexpected
/// empty approvals", stop-reason-consistent). They carry their seq ids as the published CLI
/// streams them (letta-protocol.md §7.4), so the client sees the gap at the usage frame and
/// resumes; the run is answered.
#[test]
fn a_lost_approval_frame_on_a_slow_network_shows_as_a_gap_and_is_resumed() {
    use loopsim::harness::explore::{baseline, with_swarm};
    let seed = 84;
    let s = load(scenario_path("compaction_long_tool_results.toml")).with_latency_scale(Some(10));
    let s = with_swarm(&s, seed, &baseline(&s).unwrap());
    let r = run(&s, seed, 1);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    assert!(
        lines_with(
            &r,
            "client_acted_on run_id=local-run-2 stop_reason=requires_approval"
        )
        .iter()
        .all(|l| l.contains("toolu_01SyntheticReadNotes01")),
        "{}",
        r.trace_text
    );
    assert!(
        !r.trace_text.contains("Unexpected empty approvals"),
        "{}",
        r.trace_text
    );
}

/// The summariser's `max_completion_tokens` on an OpenAI-compatible endpoint, with the sizes of
/// two of the real CLI's summariser requests (window 40,000, tests/interop/compaction.rs): a
/// short transcript gets the model's ceiling, 32,000; a 136,397-character transcript under a
/// 3,019-character prompt gets 40,000 - 4,096 - 755 - 34,100 = 1,049. The body does not ask
/// the provider to store the call.
#[test]
fn the_summariser_body_clamps_its_output_ceiling_to_the_window_as_the_cli_does() {
    use loopsim::model::letta::server::compact::summariser_body;
    use loopsim::model::letta::server::compaction::{Mode, SummaryRequest};
    use loopsim::wire::provider::ProviderFormat;
    let req = |prompt: usize, transcript: usize| SummaryRequest {
        mode: Mode::All,
        prompt: "p".repeat(prompt),
        transcript: "t".repeat(transcript),
        budget: None,
    };
    let body = |w, r: &SummaryRequest| summariser_body(ProviderFormat::OpenAiChat, "m", w, r);
    assert_eq!(
        body(Some(40_000), &req(2182, 9430))["max_completion_tokens"],
        32_000
    );
    assert_eq!(
        body(Some(40_000), &req(3019, 136_397))["max_completion_tokens"],
        1049
    );
    assert_eq!(
        body(Some(1000), &req(10, 100_000))["max_completion_tokens"],
        1
    );
    assert_eq!(body(None, &req(10, 10))["max_completion_tokens"], 32_000);
    assert_eq!(body(Some(40_000), &req(10, 10))["store"], false);
}

/// The commit sweep's failure (`sim ci`, seed 709593278 of the manual-compact scenario): the
/// summariser call is held for 4.5 s, and meanwhile the client's retry starts a new run whose
/// user message lands after the compaction's snapshot. The compaction summarises what it saw
/// and keeps the new message after the summary; that message follows the cut, it is not where
/// the cut was made, so `compaction-safe` reads it from `appended` and passes.
#[test]
fn a_message_written_while_the_summariser_runs_follows_the_cut() {
    use loopsim::harness::explore::{baseline, with_swarm};
    let seed = 709_593_278;
    let s = load(scenario_path("compaction_manual_while_busy.toml"));
    let s = with_swarm(&s, seed, &baseline(&s).unwrap());
    let r = run(&s, seed, 1);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    let c = compaction_line(&r);
    assert!(c.contains(r#"appended=["user:"#), "{c}");
    assert!(c.contains(r#"kept=["summary:"#), "{c}");
}

/// The commit gate's failure (`sim ci`, seed 123 of the overflow-limit scenario's guided
/// sweep): turn 6 is interrupted while its run compacts on overflow; the cancelled run's
/// summariser call (no abort signal) goes on, and the next turn's run compacts from the same
/// transcript. The later swap replaces the cancelled run's summary with one of the same
/// messages, which loses nothing.
#[test]
fn a_cancelled_runs_compaction_replaced_by_the_next_runs_loses_nothing() {
    let plan = [
        r#"{ kind = "partition", between = ["client", "server"], at_ms = 478, duration_ms = 2210 }"#,
        r#"{ kind = "provider_error", call = 6, status = 529 }"#,
        r#"{ kind = "server_stream", response = 3, frame = 6, action = "drop" }"#,
        r#"{ kind = "interrupt", turn = 6, during = "stream", after_chunk = 2 }"#,
    ];
    let s = with_plan(load(scenario_path("compaction_overflow_limit.toml")), &plan);
    let r = run(&s, 123, 1);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    assert_eq!(
        lines_with(&r, " run_cancelled ").len(),
        1,
        "{}",
        r.trace_text
    );
    // The swap that removed nothing but the other run's summary.
    let replaced: Vec<&str> = lines_with(&r, " compaction conversation_id=")
        .into_iter()
        .filter(|l| {
            let removed = l
                .split(" removed=")
                .nth(1)
                .and_then(|rest| rest.split(" summarized=").next())
                .unwrap_or("");
            removed.starts_with(r#"["summary:"#) && !removed.contains(',')
        })
        .collect();
    assert_eq!(replaced.len(), 1, "{}", r.trace_text);
}

/// The ×10-latency swarm's seed 4617 of the pending-approval scenario: on the local backend the
/// client's resume by otid starts a second run while the first is compacting. The second run
/// compacts after the first one's swap: it removes the first's summary with the messages after
/// it and summarises the messages that summary stood for along with them. Nothing is lost, so
/// `compaction-safe` passes (docs/findings.md#local-turns-interleave).
#[test]
fn overlapping_compactions_of_the_same_messages_replace_a_summary_and_lose_nothing() {
    use loopsim::harness::explore::{baseline, with_swarm};
    let seed = 4617;
    let s = load(scenario_path("compaction_pending_approval.toml")).with_latency_scale(Some(10));
    let s = with_swarm(&s, seed, &baseline(&s).unwrap());
    let r = run(&s, seed, 1);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    assert!(violations(&r, COMPACTION_SAFE).is_empty(), "{}", r.render());
    let lines = lines_with(&r, " compaction conversation_id=");
    assert_eq!(lines.len(), 2, "{}", r.trace_text);
    let field = |l: &str, name: &str| -> Vec<String> {
        let rest = l.split(&format!(" {name}=")).nth(1).unwrap_or("");
        let list = rest.split(' ').next().unwrap_or("");
        serde_json::from_str(list).unwrap_or_default()
    };
    let t = |l: &str| -> u64 { l.split_whitespace().next().unwrap().parse().unwrap() };
    // Two runs compacted, and the second had started before the first compaction ended.
    fn run_of(l: &str) -> &str {
        l.split(" run_id=")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .unwrap_or("")
    }
    let (first_run, second_run) = (run_of(lines[0]), run_of(lines[1]));
    assert_ne!(first_run, second_run);
    let second_started = lines_with(&r, &format!(" run_started run_id={second_run} "));
    assert!(t(second_started[0]) < t(lines[0]), "{}", r.trace_text);
    // The second swap removed the first's summary and summarised everything it stood for.
    let summary = field(lines[0], "kept")
        .into_iter()
        .find(|k| k.starts_with("summary:"))
        .expect("the first compaction kept a summary");
    assert!(
        field(lines[1], "removed").contains(&summary),
        "{}",
        r.trace_text
    );
    let summarised_again = field(lines[1], "summarized");
    for m in field(lines[0], "summarized") {
        assert!(summarised_again.contains(&m), "{m} lost:\n{}", r.trace_text);
    }
}

/// The summary a compaction keeps is what the summariser answered: the text of the cassette the
/// provider served for the summariser call, every delta of it (letta-protocol.md §8.5), as the
/// `summariser_call` outcome counts it. Held on every bundled compaction scenario as written.
#[test]
fn every_summary_is_the_text_the_summariser_answered() {
    use loopsim::cassette::Cassette;
    use loopsim::wire::provider::ProviderEvent;
    let dir = scenario_path("");
    let mut checked = 0;
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("compaction_") && n.ends_with(".toml"))
        .collect();
    names.sort();
    for name in &names {
        let r = run(&load(scenario_path(name)), 1, 1);
        let mut served: Option<&str> = None;
        for line in r.trace_text.lines() {
            if line.contains(" provider_serve call=") {
                served = line
                    .split(" cassette=")
                    .nth(1)
                    .and_then(|s| s.split(' ').next());
            }
            let Some(chars) = line
                .split(" summariser_call ")
                .nth(1)
                .and_then(|s| s.split("outcome=\"ok chars=").nth(1))
                .and_then(|s| s.trim_end_matches('"').parse::<usize>().ok())
            else {
                continue;
            };
            let cassette =
                served.unwrap_or_else(|| panic!("{name}: no provider_serve before {line}"));
            let events = Cassette::load(dir.join(cassette))
                .unwrap()
                .provider_events()
                .unwrap();
            let text: String = events
                .iter()
                .filter_map(|e| match e {
                    ProviderEvent::TextDelta { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(
                chars,
                text.chars().count(),
                "{name}: {line}\n{cassette}: {text:?}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 12, "only {checked} summaries checked");
}

/// The summary message the server writes leads with the note of the mode that ran (A.9.3,
/// letta-protocol.md §8.6): a sliding window says how many messages it hid, the `all` fallback
/// says prior messages were hidden. The note reaches only the model's next prompt (listings
/// and the stream show the bare summary), so the test reads the message from the server's
/// store after each compaction scenario.
#[test]
fn each_summary_message_leads_with_the_note_of_the_mode_that_ran() {
    use loopsim::harness::letta::world::run_once;
    use loopsim::model::letta::server::store::MessageBody;
    let mut modes = std::collections::BTreeSet::new();
    for path in crate::common::scenarios_in("scenarios/letta", "compaction_") {
        let name = path.display().to_string();
        let out = run_once(&load(&path), 1).unwrap();
        let st = out.store.lock().unwrap();
        for (id, record) in &st.summaries {
            let MessageBody::User { content } = &st.messages[id].body else {
                panic!("{name}: summary {id} is not a user message");
            };
            let packed: serde_json::Value =
                serde_json::from_str(content.as_str().expect("a packed summary is text")).unwrap();
            let message = packed["message"].as_str().unwrap();
            let lead = match record.mode.as_str() {
                "sliding_window" => {
                    let stats = &record.stats;
                    let hidden = stats["messages_count_before"].as_u64().unwrap()
                        - stats["messages_count_after"].as_u64().unwrap();
                    format!(
                        "Note: {hidden} messages from the beginning of the conversation have \
                         been hidden from view due to memory constraints."
                    )
                }
                "all" => "Note: prior messages have been hidden from view due to conversation \
                          memory constraints."
                    .to_string(),
                other => panic!("{name}: unknown mode {other}"),
            };
            assert_eq!(
                message,
                format!(
                    "{lead}\nThe following is a summary of the previous messages:\n {}",
                    record.summary
                ),
                "{name}: {id}"
            );
            modes.insert(record.mode.clone());
        }
    }
    assert_eq!(
        modes.into_iter().collect::<Vec<_>>(),
        ["all", "sliding_window"]
    );
}

/// A window of 0 is no window (letta-protocol.md §8.1, "no decision when the window is
/// missing, non-finite or <= 0"): the large tool result that compacts under a window of 1,000
/// goes to the model as it is, and the compactions a window does not trigger (a provider
/// overflow, a manual compaction) run exactly as without one: the sliding window plans without
/// a goal, the stats leave the window out, the summariser's output ceiling is not clamped.
#[test]
fn a_context_window_of_zero_is_no_window() {
    let mut s = load(scenario_path("compaction_long_tool_results.toml"));
    s.agent.context_window_limit = Some(0);
    s.scenario.outcomes.clear();
    let r = run(&s, 1, 1);
    assert!(
        lines_with(&r, " compaction conversation_id=").is_empty(),
        "{}",
        r.trace_text
    );
    assert!(
        lines_with(&r, "summariser_call").is_empty(),
        "{}",
        r.trace_text
    );
    for name in [
        "compaction_provider_overflow.toml",
        "compaction_manual_while_busy.toml",
    ] {
        let none = load(scenario_path(name));
        assert_eq!(none.agent.context_window_limit, None, "{name}");
        let mut zero = none.clone();
        zero.agent.context_window_limit = Some(0);
        let (a, b) = (run(&none, 1, 1), run(&zero, 1, 1));
        assert!(!lines_with(&a, "summariser_call").is_empty(), "{name}");
        assert_eq!(a.trace_text, b.trace_text, "{name}");
    }
}

/// Guided seed 85 of `compaction_reported_usage`: turn 1 is interrupted after its answer, and
/// its post-turn compaction (whose summariser call takes no abort signal) applies while turn
/// 2's preflight compaction is summarising. The first swap evicts the message the second plan
/// keeps first; the second swap then keeps what its plan kept, as the CLI does, and drops the
/// first summary, which stood only for messages it summarises or keeps. Cutting the current
/// list at the plan's snapshot length had dropped turn 2's own user messages (compaction-safe).
#[test]
fn a_swap_whose_first_kept_message_another_compaction_evicted_keeps_its_plan() {
    let plan = [
        r#"{ kind = "server_stream", response = 2, frame = 2, action = "drop" }"#,
        r#"{ kind = "interrupt", turn = 1, during = "stream", after_chunk = 4 }"#,
        r#"{ kind = "interrupt", turn = 1, during = "stream", after_chunk = 7 }"#,
    ];
    let s = with_plan(load(scenario_path("compaction_reported_usage.toml")), &plan);
    let r = run(&s, 85, 1);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    let lines = lines_with(&r, " compaction conversation_id=");
    assert_eq!(lines.len(), 2, "{}", r.trace_text);
    let second = lines[1];
    assert!(
        second.contains(r#"removed=["summary:ui-msg-14"]"#),
        "{second}"
    );
    assert!(
        second.contains(
            r#"kept=["summary:ui-msg-15","assistant:ui-msg-5","user:ui-msg-12","user:ui-msg-13"]"#
        ),
        "{second}"
    );
}
