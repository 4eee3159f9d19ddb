//! The two compaction plans of the local backend (letta-protocol.md §8.3): the sliding window
//! with its floating-point eviction sequence and maximum cutoff rule, and `all`.

use super::estimate::{CtxMessage, Role, messages_tokens};

/// Default `sliding_window_percentage` (letta-protocol.md §8.2).
pub const DEFAULT_SLIDING_WINDOW_PERCENTAGE: f64 = 0.3;

/// A planning error: the sliding window found no place to cut (§8.3). The caller falls back to
/// the `all` plan (§8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanError {
    NotEnoughMessages,
    NoAssistantMessage,
}

impl PlanError {
    /// The error's text (§8.3).
    pub fn text(self) -> &'static str {
        match self {
            PlanError::NotEnoughMessages => "Not enough messages for sliding window compaction.",
            PlanError::NoAssistantMessage => {
                "No assistant message found for sliding window compaction."
            }
        }
    }
}

/// Percentage normalisation (§8.3): missing or non-finite → 0.3; ≤ 0 → 0.1; > 1 → 1.
pub fn normalise_percentage(p: Option<f64>) -> f64 {
    match p {
        Some(p) if p.is_finite() => {
            if p <= 0.0 {
                0.1
            } else if p > 1.0 {
                1.0
            } else {
                p
            }
        }
        _ => DEFAULT_SLIDING_WINDOW_PERCENTAGE,
    }
}

/// The highest index (exclusive) a cut may land on (§8.3): `len - 2` when the last message is
/// an assistant message with a tool call (its results are still to come), else `len - 1`.
pub fn maximum_cutoff_index(msgs: &[CtxMessage]) -> usize {
    match msgs.last() {
        Some(m) if m.calls_tools() => msgs.len().saturating_sub(2),
        _ => msgs.len().saturating_sub(1),
    }
}

/// The eviction fractions the sliding window tries from `pct`, in order: `pct + 0.1`, then
/// `+ 0.1` again, in floating point, while below 1.0 at the start of a step (§8.3). From 0.3:
/// 0.4, 0.5, 0.6, 0.7, 0.7999999999999999, 0.8999999999999999, 0.9999999999999999,
/// 1.0999999999999999.
pub fn eviction_sequence(pct: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut e = pct;
    while e < 1.0 {
        e += 0.1;
        out.push(e);
    }
    out
}

/// `planLocalSlidingWindowCompaction` (§8.3): the cutoff index; `messages[..cutoff]` are
/// summarised and `messages[cutoff..]` kept. `window` is the context window when known.
pub fn plan_sliding_window(
    msgs: &[CtxMessage],
    percentage: Option<f64>,
    window: Option<u64>,
) -> Result<usize, PlanError> {
    let len = msgs.len();
    if len < 4 {
        return Err(PlanError::NotEnoughMessages);
    }
    let pct = normalise_percentage(percentage);
    let max_cut = maximum_cutoff_index(msgs);
    let goal = window.map(|w| (1.0 - pct) * w as f64);
    let mut estimate = window.map_or(f64::INFINITY, |w| w as f64);
    let mut eviction = pct;
    let mut cutoff: Option<usize> = None;
    while goal.map_or(cutoff.is_none(), |g| estimate >= g) && eviction < 1.0 {
        eviction += 0.1;
        // JavaScript's Math.round of a positive number.
        let candidate = ((eviction * len as f64).round() as usize).min(len - 1);
        cutoff = (0..=candidate)
            .rev()
            .find(|&i| msgs[i].role == Role::Assistant && 0 < i && i < max_cut);
        if let Some(c) = cutoff {
            estimate = messages_tokens(&msgs[c..]) as f64;
        }
    }
    match cutoff {
        Some(c) if eviction < 1.0 => Ok(c),
        _ => Err(PlanError::NoAssistantMessage),
    }
}

/// `planLocalAllCompaction` (§8.3): the index from which messages are kept. When the last
/// message is an assistant message with a tool call it alone is kept; else nothing is.
pub fn plan_all(msgs: &[CtxMessage]) -> usize {
    match msgs.last() {
        Some(m) if m.calls_tools() => msgs.len() - 1,
        _ => msgs.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::estimate::CtxToolCall;
    use super::*;

    fn m(role: Role, chars: usize) -> CtxMessage {
        CtxMessage::new(role, &"x".repeat(chars))
    }

    fn calling(chars: usize) -> CtxMessage {
        CtxMessage {
            tool_calls: vec![CtxToolCall {
                id: "t".into(),
                name: "Read".into(),
                arguments: "{}".into(),
            }],
            ..m(Role::Assistant, chars)
        }
    }

    /// user, assistant, user, assistant, … of `n` messages, each `chars` long.
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

    #[test]
    fn rule_8_3_the_eviction_sequence_is_floating_point_from_0_3() {
        assert_eq!(
            eviction_sequence(0.3),
            vec![
                0.4,
                0.5,
                0.6,
                0.7,
                0.7999999999999999,
                0.8999999999999999,
                0.9999999999999999,
                1.0999999999999999
            ]
        );
    }

    #[test]
    fn rule_8_3_percentages_are_normalised() {
        assert_eq!(normalise_percentage(None), 0.3);
        assert_eq!(normalise_percentage(Some(f64::NAN)), 0.3);
        assert_eq!(normalise_percentage(Some(0.0)), 0.1);
        assert_eq!(normalise_percentage(Some(-2.0)), 0.1);
        assert_eq!(normalise_percentage(Some(7.0)), 1.0);
        assert_eq!(normalise_percentage(Some(0.5)), 0.5);
    }

    #[test]
    fn rule_8_3_fewer_than_four_messages_is_a_planning_error() {
        let e = plan_sliding_window(&alternating(3, 10), None, Some(100)).unwrap_err();
        assert_eq!(
            e.text(),
            "Not enough messages for sliding window compaction."
        );
    }

    #[test]
    fn rule_8_3_percentages_0_9_and_1_0_always_fall_back() {
        // A window so large that the first cut already meets the goal: the step that found it
        // took the eviction to 1.0 or past it, so the result is discarded (§10.3 item 11).
        let msgs = alternating(40, 400);
        for p in [0.9, 1.0, 5.0] {
            assert_eq!(
                plan_sliding_window(&msgs, Some(p), Some(100_000)),
                Err(PlanError::NoAssistantMessage),
                "percentage {p}"
            );
        }
        // 0.8 still plans: 0.8 + 0.1 < 1.0.
        assert!(plan_sliding_window(&msgs, Some(0.8), Some(100_000)).is_ok());
    }

    #[test]
    fn rule_8_3_a_goal_never_met_is_a_planning_error() {
        // window 2000 → goal 1400; only a cut at index 9 would meet it, and the last index is
        // never a cut (maximum cutoff len-1, exclusive).
        let mut msgs = alternating(10, 4000);
        msgs[9] = m(Role::Assistant, 4);
        let e = plan_sliding_window(&msgs, None, Some(2000)).unwrap_err();
        assert_eq!(
            e.text(),
            "No assistant message found for sliding window compaction."
        );
    }

    #[test]
    fn rule_8_3_the_cut_stops_at_the_first_candidate_meeting_the_goal() {
        // 10 messages of 1000 tokens; window 10000 → goal 7000. eviction 0.4 → candidate 4 →
        // largest assistant ≤ 4 is 3 → estimate 7000 (not below the goal); 0.5 → 5 → cut 5,
        // estimate 5000 < 7000: stop.
        let msgs = alternating(10, 4000);
        assert_eq!(plan_sliding_window(&msgs, None, Some(10_000)), Ok(5));
    }

    #[test]
    fn rule_8_3_the_cut_is_only_at_an_assistant_message_inside_the_bounds() {
        let msgs = alternating(12, 4000);
        for w in [100u64, 1000, 5000, 20_000, 100_000] {
            if let Ok(c) = plan_sliding_window(&msgs, None, Some(w)) {
                assert_eq!(msgs[c].role, Role::Assistant);
                assert!(c > 0 && c < maximum_cutoff_index(&msgs));
            }
        }
    }

    #[test]
    fn rule_8_3_the_cutoff_is_never_the_trailing_tool_call_assistant() {
        // The last message is an assistant calling a tool: the max cutoff is len-2, so neither
        // it nor the message before it can be the cut.
        let mut msgs = alternating(7, 4000);
        msgs.push(calling(4000));
        assert_eq!(maximum_cutoff_index(&msgs), 6);
        let c = plan_sliding_window(&msgs, None, Some(100_000)).unwrap();
        assert!(c < 6, "cut at {c}");
        assert_eq!(msgs[c].role, Role::Assistant);
    }

    #[test]
    fn rule_8_3_without_a_window_the_first_cutoff_found_wins() {
        let msgs = alternating(10, 40);
        // 0.4 * 10 = 4 → largest assistant ≤ 4 is 3.
        assert_eq!(plan_sliding_window(&msgs, None, None), Ok(3));
    }

    #[test]
    fn rule_8_3_all_keeps_only_a_trailing_tool_call() {
        let mut msgs = alternating(5, 10);
        assert_eq!(plan_all(&msgs), 5);
        msgs.push(calling(10));
        assert_eq!(plan_all(&msgs), 5);
        assert_eq!(plan_all(&[]), 0);
    }
}
