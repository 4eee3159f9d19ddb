//! The numbered rules of letta-protocol.md §8.1-8.2 over [`compact`] with a scripted summariser.

use futures::executor::block_on;

use super::estimate::{CtxMessage, CtxToolCall, Role};
use super::plan::PlanError;
use super::summary::{NO_PRIOR_MESSAGES, OVERFLOW_LADDER};
use super::*;

fn m(role: Role, chars: usize) -> CtxMessage {
    CtxMessage::new(role, &"x".repeat(chars))
}

fn alternating(n: usize, chars: usize) -> Vec<CtxMessage> {
    (0..n)
        .map(|i| {
            m(
                if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                chars,
            )
        })
        .collect()
}

/// The summary message as the server stores it: the packed summary (§8.6), its raw summary
/// beside it.
fn summary_msg(s: &str, stats: &CompactionStats) -> CtxMessage {
    CtxMessage {
        summary: Some(s.to_string()),
        ..CtxMessage::new(
            Role::User,
            &summary::package_summary(true, stats, s, "2026-01-01T00:00:00.000Z"),
        )
    }
}

/// A summariser answering from a script, in order.
struct Script(std::vec::IntoIter<Result<String, SummariserError>>);

impl Summariser for Script {
    fn summarise(
        &mut self,
        _req: SummaryRequest,
    ) -> futures::future::BoxFuture<'_, Result<String, SummariserError>> {
        let next = self.0.next().expect("a scripted answer");
        Box::pin(async move { next })
    }
}

/// Runs [`compact`] with a summariser answering from `answers` in order.
fn run(
    msgs: &[CtxMessage],
    settings: &Settings,
    window: Option<u64>,
    answers: Vec<Result<String, SummariserError>>,
) -> Result<Outcome, Failed> {
    let mut script = Script(answers.into_iter());
    block_on(compact(
        msgs,
        settings,
        window,
        Trigger::ContextWindowLimit,
        &summary_msg,
        &mut script,
    ))
}

#[test]
fn rule_8_1_reserve_is_a_fifth_of_the_window_capped_at_16384() {
    assert_eq!(reserve(1000), 200);
    assert_eq!(threshold(1000), 800);
    assert_eq!(reserve(100_000), 16_384);
    assert_eq!(threshold(100_000), 83_616);
    assert_eq!(reserve(1), 1);
    assert_eq!(threshold(1), 0);
    assert_eq!(reserve(4), 1);
}

#[test]
fn rule_8_1_compact_only_strictly_above_the_threshold_with_a_window() {
    assert!(!over_threshold(800, Some(1000)));
    assert!(over_threshold(801, Some(1000)));
    assert!(!over_threshold(10_000_000, None));
    assert!(!over_threshold(10, Some(0)));
    // A.9.5: a 100k window and 96,000 × 4 chars of user text compacts at preflight.
    assert!(should_compact(Some(96_000), Some(100_000)));
    assert!(!should_compact(None, Some(100_000)));
}

#[test]
fn rule_8_2_sliding_window_summarises_the_head_and_keeps_the_tail() {
    let msgs = alternating(10, 4000);
    let o = run(
        &msgs,
        &Settings::default(),
        Some(10_000),
        vec![Ok("  head summary ".into())],
    )
    .unwrap();
    assert_eq!(o.mode, Mode::SlidingWindow);
    assert_eq!(o.summary, "head summary");
    assert_eq!(o.kept, (5..10).collect::<Vec<_>>());
    assert_eq!(o.passes.len(), 1);
    assert_eq!(o.passes[0].requests[0].prompt, summary::SLIDING_PROMPT);
    assert_eq!(o.stats.messages_count_before, 10);
    assert_eq!(o.stats.messages_count_after, 6);
    assert_eq!(o.stats.context_tokens_before, 10_000);
    assert_eq!(o.stats.context_tokens_after, 3 + 5000);
    assert!(!o.fell_back_to_all && !o.laddered);
}

#[test]
fn rule_8_2_a_planning_error_falls_back_to_all() {
    let msgs = alternating(3, 40);
    let o = run(
        &msgs,
        &Settings::default(),
        Some(10),
        vec![Ok("all of it".into())],
    )
    .unwrap();
    assert_eq!(o.mode, Mode::All);
    assert!(o.fell_back_to_all);
    assert!(o.kept.is_empty());
    assert_eq!(
        o.passes[0].planning_error,
        Some(PlanError::NotEnoughMessages)
    );
    assert_eq!(o.passes[0].requests[0].prompt, summary::ALL_PROMPT);
}

#[test]
fn rule_8_2_after_at_or_above_the_window_falls_back_to_all_on_the_compacted_transcript() {
    let msgs = alternating(10, 4000);
    // The sliding summary is so long that the result is still over the window.
    let long = "s".repeat(80_000);
    let o = run(
        &msgs,
        &Settings::default(),
        Some(10_000),
        vec![Ok(long.clone()), Ok("short".into())],
    )
    .unwrap();
    assert_eq!(o.passes.len(), 2);
    assert!(o.fell_back_to_all);
    assert_eq!(o.mode, Mode::All);
    assert!(o.kept.is_empty());
    // The `all` pass sees the first summary as its first line.
    let t = &o.passes[1].requests[0].transcript;
    assert!(t.starts_with(" \n[user] sss"), "{}", &t[..20]);
    assert_fallback_stats_are_its_own(&msgs, &o, 10_000);
}

/// The `all` fallback's stats are its own: before is the stored sliding result,
/// `[summary, kept...]`, the summary message estimated by its packed text, whose note and
/// stats count the sliding pass's messages (the CLI's fallback lists the store, §8.2, §8.4).
fn assert_fallback_stats_are_its_own(msgs: &[CtxMessage], o: &Outcome, window: u64) {
    let n = msgs.len();
    let cutoff = o.passes[0].cutoff;
    let first = &o.passes[0].summary;
    let tail_tokens: u64 = msgs[cutoff..]
        .iter()
        .map(|m| m.text.encode_utf16().count().div_ceil(4) as u64)
        .sum();
    let sliding = CompactionStats {
        trigger: "context_window_limit".into(),
        context_window: Some(window),
        messages_count_before: n,
        messages_count_after: 1 + n - cutoff,
        context_tokens_before: msgs
            .iter()
            .map(|m| m.text.encode_utf16().count().div_ceil(4) as u64)
            .sum(),
        context_tokens_after: summary::summary_tokens(first) + tail_tokens,
    };
    let packed = summary_msg(first, &sliding);
    assert_eq!(
        o.stats.messages_count_before,
        1 + n - cutoff,
        "{n} messages"
    );
    assert_eq!(
        o.stats.context_tokens_before,
        packed.text.encode_utf16().count().div_ceil(4) as u64 + tail_tokens,
        "{n} messages, cut at {cutoff}"
    );
    assert_eq!(o.stats.messages_count_after, 1);
}

/// The sliding pass's own counts reach the fallback only through its packed summary's length,
/// so a wrong count shows in a few sizes only (where its digits differ): every size from 4 to
/// 160 messages is checked.
#[test]
fn rule_8_2_the_fallback_estimates_the_sliding_summary_with_its_own_counts() {
    let mut fell_back = 0;
    for n in 4..=160 {
        let msgs = alternating(n, 40_000 / n);
        let Ok(o) = run(
            &msgs,
            &Settings::default(),
            Some(10_000),
            vec![Ok("s".repeat(80_000)), Ok("short".into())],
        ) else {
            continue;
        };
        if o.passes.len() == 2 && o.passes[0].mode == Mode::SlidingWindow {
            fell_back += 1;
            assert_fallback_stats_are_its_own(&msgs, &o, 10_000);
        }
    }
    assert!(fell_back > 100, "{fell_back} sizes fell back");
}

#[test]
fn rule_8_2_a_custom_prompt_is_used_in_every_pass_as_the_cli_does() {
    let msgs = alternating(3, 40);
    let custom = Settings {
        prompt: Some("custom".into()),
        ..Settings::default()
    };
    // The sliding window cannot plan three messages; the `all` fallback keeps the prompt.
    let o = run(&msgs, &custom, Some(10), vec![Ok("x".into())]).unwrap();
    assert!(o.fell_back_to_all);
    assert_eq!(o.passes[0].requests[0].prompt, "custom");
    let all = Settings {
        mode: Mode::All,
        ..custom
    };
    let o = run(&msgs, &all, Some(10), vec![Ok("x".into())]).unwrap();
    assert_eq!(o.passes[0].requests[0].prompt, "custom");
    assert!(!o.fell_back_to_all);
}

#[test]
fn rule_8_2_summariser_overflow_walks_the_ladder() {
    let msgs = vec![m(Role::User, 200_000), m(Role::Assistant, 10)];
    let all = Settings {
        mode: Mode::All,
        ..Settings::default()
    };
    let overflow = || Err(SummariserError::Overflow("prompt is too long".into()));
    let o = run(
        &msgs,
        &all,
        Some(1000),
        vec![overflow(), overflow(), overflow(), Ok("fits".into())],
    )
    .unwrap();
    let budgets: Vec<Option<usize>> = o.passes[0].requests.iter().map(|r| r.budget).collect();
    assert_eq!(
        budgets,
        vec![None, Some(120_000), Some(90_000), Some(60_000)]
    );
    assert!(o.laddered);
    assert_eq!(o.summary, "fits");
}

#[test]
fn rule_8_2_when_every_rung_overflows_the_last_overflow_is_the_error() {
    let msgs = vec![m(Role::User, 200_000), m(Role::Assistant, 10)];
    let all = Settings {
        mode: Mode::All,
        ..Settings::default()
    };
    let answers: Vec<_> = (0..=OVERFLOW_LADDER.len())
        .map(|i| Err(SummariserError::Overflow(format!("too long {i}"))))
        .collect();
    let f = run(&msgs, &all, Some(1000), answers).unwrap_err();
    assert_eq!(f.error, SummariserError::Overflow("too long 10".into()));
    assert_eq!(f.requests.len(), 1 + OVERFLOW_LADDER.len());
}

#[test]
fn rule_8_2_other_summariser_failures_propagate_at_once() {
    let msgs = alternating(10, 4000);
    let f = run(
        &msgs,
        &Settings::default(),
        Some(10_000),
        vec![Err(SummariserError::Other("HTTP 500".into()))],
    )
    .unwrap_err();
    assert_eq!(f.error, SummariserError::Other("HTTP 500".into()));
    assert_eq!(f.requests.len(), 1);
}

#[test]
fn rule_8_5_nothing_to_summarise_needs_no_model_call() {
    // `all` over a transcript that is only a trailing tool call: it is kept, nothing summarised.
    let call = CtxMessage {
        tool_calls: vec![CtxToolCall {
            id: "t".into(),
            name: "Read".into(),
            arguments: "{}".into(),
        }],
        ..m(Role::Assistant, 4)
    };
    let all = Settings {
        mode: Mode::All,
        ..Settings::default()
    };
    let o = run(&[call], &all, Some(1000), vec![]).unwrap();
    assert_eq!(o.summary, NO_PRIOR_MESSAGES);
    assert_eq!(o.kept, vec![0]);
    assert!(o.passes[0].requests.is_empty());
}

#[test]
fn rule_8_3_all_with_a_pending_tool_call_keeps_it_and_its_cut_is_an_assistant() {
    let mut msgs = alternating(5, 40);
    msgs.push(CtxMessage {
        tool_calls: vec![CtxToolCall {
            id: "t".into(),
            name: "Read".into(),
            arguments: "{}".into(),
        }],
        ..m(Role::Assistant, 4)
    });
    let all = Settings {
        mode: Mode::All,
        ..Settings::default()
    };
    let o = run(&msgs, &all, Some(1000), vec![Ok("s".into())]).unwrap();
    assert_eq!(o.kept, vec![5]);
}

#[test]
fn rule_8_3_a_cut_next_to_parallel_tool_calls_keeps_each_call_with_its_results() {
    // user, assistant calling t1 and t2 in parallel, both results, assistant, user, assistant:
    // whatever the window, the cut lands on an assistant message, so the parallel calls and
    // their results are summarised together or kept together.
    let parallel = CtxMessage {
        tool_calls: vec![
            CtxToolCall {
                id: "t1".into(),
                name: "Read".into(),
                arguments: "{}".into(),
            },
            CtxToolCall {
                id: "t2".into(),
                name: "Grep".into(),
                arguments: "{}".into(),
            },
        ],
        ..m(Role::Assistant, 40)
    };
    let result = |id: &str| CtxMessage {
        tool_call_id: Some(id.into()),
        ..m(Role::ToolResult, 4000)
    };
    let msgs = vec![
        m(Role::User, 40),
        parallel,
        result("t1"),
        result("t2"),
        m(Role::Assistant, 40),
        m(Role::User, 40),
        m(Role::Assistant, 40),
        m(Role::User, 40),
    ];
    for window in [500u64, 2000, 2500, 4000, 10_000, 100_000] {
        let Ok(cut) = plan::plan_sliding_window(&msgs, None, Some(window)) else {
            continue;
        };
        assert_eq!(msgs[cut].role, Role::Assistant, "window {window}");
        assert!(!(2..=3).contains(&cut), "window {window}: cut {cut}");
        let kept_results: Vec<_> = msgs[cut..]
            .iter()
            .filter_map(|m| m.tool_call_id.clone())
            .collect();
        let kept_calls: Vec<_> = msgs[cut..]
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
            .collect();
        assert!(
            kept_results.iter().all(|r| kept_calls.contains(r)),
            "window {window}"
        );
    }
}
