//! The agent loop's `budget-respected` oracle (docs/invariants.md): which provider errors are
//! retried, how long each retry waits, and that a rejection with a fallback gets its resend,
//! read off a finished trace (kimi-loop.md §4.7, §6).

use crate::harness::invariants::{BUDGET_RESPECTED, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// kimi-loop.md §6 ("What counts as retryable"): the statuses `isRetryableGenerateError` retries.
pub const RETRYABLE_STATUSES: [u16; 8] = [408, 409, 429, 500, 502, 503, 504, 529];

/// The §7.13 strict cases' texts (verbatim, cases 1–3) and the §4.7 3 "roles that do not
/// alternate": a 400/422 carrying one is a request-structure rejection the host's strict
/// projection answers. Read off the reference, not off the loop's classifier, so a broken
/// classifier cannot hide its own mistake.
const STRICT_REJECTIONS: [&str; 4] = [
    "`tool_use` ids were found without `tool_result` blocks immediately after",
    "tool_call_id  is not found",
    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
    "roles must alternate",
];

/// Whether a 400/422 message is one of the request-structure rejections the loop answers with
/// its strict projection ([`STRICT_REJECTIONS`]).
pub fn is_request_structure_rejection(message: &str) -> bool {
    STRICT_REJECTIONS.iter().any(|m| message.contains(m))
}

/// kimi-loop.md §6 backoff: retry `failed_attempt` (1-based) waits `base + U[0,1)·0.25·base`,
/// `base = min(500·2^i, 32000)` for `i = failed_attempt − 1`. The window, both ends inclusive.
pub fn backoff_window(failed_attempt: u32) -> (u64, u64) {
    let i = failed_attempt.saturating_sub(1);
    let base = 2u64.saturating_pow(i).saturating_mul(500).min(32_000);
    (base, base + base / 4)
}

/// The fallback resend kimi-loop.md §4.7 prescribes for a rejection, if any: a 413 body-size
/// rejection (worded as bytes, as kosong's `REQUEST_TOO_LARGE_MESSAGE_PATTERNS` are: "maximum
/// size", "too large", "request_too_large", "maximum allowed number of bytes"; not one about
/// the context, which is an overflow, nor any other 413, which kosong leaves a plain status
/// error) gets the media-degraded projection, the §7.13 case 11 image-format 400 the media-stripped one, a request-structure
/// 400/422 the strict one.
fn fallback_for(status: u16, message: &str) -> Option<&'static str> {
    let lower = message.to_lowercase();
    match status {
        413 if !lower.contains("context")
            && [
                "maximum size",
                "too large",
                "request_too_large",
                "number of bytes",
            ]
            .iter()
            .any(|bytes| lower.contains(bytes)) =>
        {
            Some("media-degraded")
        }
        400 if lower.contains("unsupported image format") => Some("media-stripped"),
        400 | 422 if is_request_structure_rejection(message) => Some("strict"),
        _ => None,
    }
}

/// What the agent knows of the answer to its latest request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// No answer read yet, or one whose `Retry-After` the trace does not tell (a cassette's
    /// error answer): no delay rule is checked.
    Unknown,
    /// No `Retry-After` (no response head, a success head whose stream then broke, or a
    /// fault's error answer without one): the backoff table applies.
    NoRetryAfter,
    /// A fault's error answer with `Retry-After: s`, in milliseconds.
    RetryAfter(u64),
}

/// `error` of a `loop_retrying` or `loop_model_error`: `Name S: message` or `Name: message`.
fn split_error(error: &str) -> (&str, Option<u16>, &str) {
    let (head, message) = error.split_once(": ").unwrap_or((error, ""));
    let mut words = head.split(' ');
    let name = words.next().unwrap_or("");
    let status = words.next().and_then(|w| w.parse().ok());
    (name, status, message)
}

/// The `retry_after_s` of a reported `provider_error` fault (`provider_error call=0 status=429
/// retry_after_s=2`), `Some(None)` for one without.
fn fault_retry_after(fault: &str) -> Option<Option<u64>> {
    let rest = fault.strip_prefix("provider_error ")?;
    Some(
        rest.split(' ')
            .find_map(|w| w.strip_prefix("retry_after_s="))
            .and_then(|v| v.parse().ok()),
    )
}

#[derive(Default)]
struct RetryState {
    turn: u32,
    step: u32,
    /// The provider's latest answer: status and `Retry-After` (None when a cassette's).
    served: Option<(u16, Option<Option<u64>>)>,
    /// A reported `provider_error` fault not yet served: its `Retry-After`.
    fault: Option<Option<u64>>,
    /// The agent's latest answer, and its status.
    answer: Option<(Answer, Option<u16>)>,
    /// A retry's sleep: when `step.retrying` was heard, its delay.
    sleeping: Option<(u64, u64, u32)>,
    /// The oracle's own count of the step's current `chatWithRetry` call: the attempt its
    /// latest request was (1 for the first; a fallback resend is a new call).
    attempt: u32,
    /// A rejection with a fallback whose resend must come: its projection and error.
    owed: Option<(&'static str, String, u16)>,
    /// Media fallbacks the run was already owed (the first takes the degraded projection).
    media_rejections: u32,
    /// The latest request of the step failed and no retry has been announced for it yet: a
    /// request sent now is a fallback resend.
    failed: bool,
    /// The step has made a fallback resend: its rejections are rethrown, none is owed another
    /// (kimi-loop.md §4.7, "one resend each, never looped").
    resent: bool,
}

/// `budget-respected` (agent loop): the retry and fallback budgets of kimi-loop.md §6 and
/// §4.7, read off the trace.
/// - Only retryable errors are retried: never a status outside 408, 409, 429, 500, 502, 503,
///   504, 529, never a quota-exhausted 429.
/// - Each retry waits what §6 says: the failed answer's `Retry-After` when it is > 0 (no cap),
///   else the backoff table's delay for that retry (`min(500·2^i, 32000)` plus under 25 %
///   jitter); and the next attempt is not sent before that delay has passed.
/// - A provider rejection the loop has a fallback for is answered with its one resend: the
///   first 413 body-size rejection of a run (media-degraded), or image-format 400 (media-
///   stripped), and a request-structure 400/422 (strict), each of a step's own request (not of
///   a resend, whose failure is rethrown), never fail the run.
pub fn budget_respected(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut st = RetryState::default();
    for (i, e) in events.iter().enumerate() {
        let mut flag = |message: String| {
            out.push(Violation {
                invariant: BUDGET_RESPECTED,
                event: Some(i),
                message,
            })
        };
        match &e.obs {
            Observation::Fault { fault } => {
                if let Some(retry_after) = fault_retry_after(fault) {
                    st.fault = Some(retry_after);
                }
                continue;
            }
            Observation::ProviderServe {
                cassette, status, ..
            } => {
                let retry_after = if cassette == "<fault>" {
                    Some(st.fault.take().unwrap_or(None))
                } else {
                    None
                };
                st.served = Some((*status, retry_after));
                continue;
            }
            _ => {}
        }
        if e.host != "client" {
            continue;
        }
        let tn = st.turn;
        match &e.obs {
            Observation::TurnStart { turn, .. } => {
                st = RetryState {
                    turn: *turn,
                    served: st.served,
                    fault: st.fault,
                    ..RetryState::default()
                };
            }
            Observation::LoopStepBegin { step, .. } => {
                st.step = *step;
                st.attempt = 1;
                st.failed = false;
                st.resent = false;
                if *step == 1 {
                    // A new run (the first, or one after the host compacted).
                    st.media_rejections = 0;
                }
            }
            Observation::LoopProviderRequest { .. } => {
                if let Some((at, delay, attempt)) = st.sleeping.take()
                    && e.t_ms < at + delay
                {
                    flag(format!(
                        "turn {tn} step {}: attempt {} was sent {} ms after step.retrying, before its delay of {delay} ms had passed (kimi-loop.md §6: sleep delayMs, then retry)",
                        st.step,
                        attempt + 1,
                        e.t_ms - at
                    ));
                }
                if st.failed {
                    // A resend after a rejection, with no retry announced: a new call.
                    st.attempt = 1;
                }
                st.resent |= st.failed;
                st.failed = false;
                st.owed = None;
                st.answer = None;
            }
            Observation::LoopProviderResponse { status, .. } => {
                let answer = match (status, st.served) {
                    (None, _) => Answer::NoRetryAfter,
                    (Some(s), _) if *s < 400 => Answer::NoRetryAfter,
                    (Some(s), Some((served, Some(retry_after)))) if served == *s => {
                        match retry_after {
                            Some(secs) => Answer::RetryAfter(secs.saturating_mul(1000)),
                            None => Answer::NoRetryAfter,
                        }
                    }
                    _ => Answer::Unknown,
                };
                st.answer = Some((answer, *status));
            }
            Observation::LoopModelError { error, .. } => {
                st.failed = true;
                let status = st.answer.and_then(|(_, s)| s);
                let (_, _, message) = split_error(error);
                if let Some(projection) = status.and_then(|s| fallback_for(s, message)) {
                    let media = projection != "strict";
                    let first = if media {
                        st.media_rejections == 0
                    } else {
                        true
                    };
                    if first && !st.resent {
                        st.owed = Some((projection, error.clone(), status.unwrap_or(0)));
                    }
                    if media {
                        st.media_rejections += 1;
                    }
                }
            }
            Observation::LoopRetrying {
                step,
                failed_attempt,
                next_attempt,
                delay_ms,
                error,
            } => {
                let attempt = st.attempt;
                if (*failed_attempt, *next_attempt) != (attempt, attempt + 1) {
                    flag(format!(
                        "turn {tn} step {step}: step.retrying says failedAttempt {failed_attempt}, nextAttempt {next_attempt}, but the request that failed was attempt {attempt} of the step's call (kimi-loop.md §6: failedAttempt = attempt, nextAttempt = attempt + 1)"
                    ));
                }
                st.attempt += 1;
                let (name, status, _) = split_error(error);
                if name == "APIProviderQuotaExhaustedError" {
                    flag(format!(
                        "turn {tn} step {step}: retried {error} (kimi-loop.md §6: a quota-exhausted 429 is never retried, even with retry-after)"
                    ));
                } else if let Some(s) = status
                    && !RETRYABLE_STATUSES.contains(&s)
                {
                    flag(format!(
                        "turn {tn} step {step}: retried {error} (kimi-loop.md §6: only 408, 409, 429, 500, 502, 503, 504 and 529 are retried)"
                    ));
                }
                match st.answer.map(|(a, _)| a) {
                    Some(Answer::RetryAfter(ms)) if ms > 0 && *delay_ms != ms => flag(format!(
                        "turn {tn} step {step}: retry {attempt} waited {delay_ms} ms, but the failed answer said Retry-After {ms} ms (kimi-loop.md §6: delayMs = error.retryAfterMs when > 0, with no cap)"
                    )),
                    Some(Answer::RetryAfter(ms)) if ms > 0 => {}
                    Some(Answer::RetryAfter(_) | Answer::NoRetryAfter) => {
                        let (lo, hi) = backoff_window(attempt);
                        if !(lo..=hi).contains(delay_ms) {
                            flag(format!(
                                "turn {tn} step {step}: retry {attempt} waited {delay_ms} ms, outside the backoff table's {lo}–{hi} ms for it (kimi-loop.md §6: min(500·2^i, 32000) plus up to 25 % jitter; the answer had no Retry-After)"
                            ));
                        }
                    }
                    Some(Answer::Unknown) | None => {}
                }
                st.sleeping = Some((e.t_ms, *delay_ms, attempt));
                st.answer = None;
                st.failed = false;
            }
            Observation::LoopInterrupted {
                reason, message, ..
            } => {
                if let Some((projection, error, status)) = st.owed.take()
                    && reason == "error"
                {
                    let said = message.as_deref().unwrap_or(error.as_str());
                    flag(format!(
                        "turn {tn} step {}: the run failed on HTTP {status} ({error}) without the {projection} resend kimi-loop.md §4.7 prescribes for it (turn.interrupted: {said})",
                        st.step
                    ));
                }
                st.sleeping = None;
            }
            Observation::TurnEnd { .. } => {
                st.sleeping = None;
                st.owed = None;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::kimi::test_events::{at, begin, bundled, ev, messages, turn_start};

    /// A 429 answered by a fault with `Retry-After: 2`, then a retry that waited `delay` and
    /// was sent at `sent`.
    fn retried_429(delay: u64, sent: u64) -> Vec<TraceEvent> {
        vec![
            turn_start(),
            begin(1),
            at(
                0,
                "client",
                Observation::LoopProviderRequest {
                    call: 0,
                    path: "/v1/messages".into(),
                    messages: 1,
                    tools: 0,
                    results: Default::default(),
                },
            ),
            at(
                0,
                "harness",
                Observation::Fault {
                    fault: "provider_error call=0 status=429 retry_after_s=2".into(),
                },
            ),
            at(
                0,
                "provider",
                Observation::ProviderServe {
                    call: 0,
                    cassette: "<fault>".into(),
                    status: 429,
                    frames: 0,
                },
            ),
            at(
                1,
                "client",
                Observation::LoopProviderResponse {
                    call: 0,
                    status: Some(429),
                    error: None,
                },
            ),
            at(
                1,
                "client",
                Observation::LoopRetrying {
                    step: 1,
                    failed_attempt: 1,
                    next_attempt: 2,
                    delay_ms: delay,
                    error: "APIProviderRateLimitError 429: rate limited".into(),
                },
            ),
            at(
                sent,
                "client",
                Observation::LoopProviderRequest {
                    call: 1,
                    path: "/v1/messages".into(),
                    messages: 1,
                    tools: 0,
                    results: Default::default(),
                },
            ),
        ]
    }

    #[test]
    fn a_retry_waits_the_servers_retry_after_else_the_backoff_table() {
        assert_eq!(
            messages(budget_respected(&retried_429(2000, 2001))),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(budget_respected(&retried_429(612, 613))),
            [
                "turn 1 step 1: retry 1 waited 612 ms, but the failed answer said Retry-After 2000 ms (kimi-loop.md §6: delayMs = error.retryAfterMs when > 0, with no cap)"
            ]
        );
        assert_eq!(
            messages(budget_respected(&retried_429(2000, 1500))),
            [
                "turn 1 step 1: attempt 2 was sent 1499 ms after step.retrying, before its delay of 2000 ms had passed (kimi-loop.md §6: sleep delayMs, then retry)"
            ]
        );
        // Without a Retry-After the backoff table rules: retry 1 waits 500–625 ms.
        let mut no_header = retried_429(700, 701);
        no_header[3] = at(
            0,
            "harness",
            Observation::Fault {
                fault: "provider_error call=0 status=429".into(),
            },
        );
        assert_eq!(
            messages(budget_respected(&no_header)),
            [
                "turn 1 step 1: retry 1 waited 700 ms, outside the backoff table's 500–625 ms for it (kimi-loop.md §6: min(500·2^i, 32000) plus up to 25 % jitter; the answer had no Retry-After)"
            ]
        );
        assert_eq!(backoff_window(7), (32_000, 40_000));
        assert_eq!(backoff_window(9), (32_000, 40_000));
    }

    /// `step.retrying` numbers the attempts as the oracle counts them (kimi-loop.md §6): a
    /// loop that announces the retry it is about to make as the one that failed breaks it.
    #[test]
    fn a_retry_names_the_attempt_that_failed_and_the_next() {
        let mut misnumbered = retried_429(2000, 2001);
        let Observation::LoopRetrying { next_attempt, .. } = &mut misnumbered[6].obs else {
            panic!("event 6 is the retry: {:?}", misnumbered[6].obs);
        };
        *next_attempt = 1;
        assert_eq!(
            messages(budget_respected(&misnumbered)),
            [
                "turn 1 step 1: step.retrying says failedAttempt 1, nextAttempt 1, but the request that failed was attempt 1 of the step's call (kimi-loop.md §6: failedAttempt = attempt, nextAttempt = attempt + 1)"
            ]
        );
    }

    #[test]
    fn only_retryable_errors_are_retried() {
        let mut t = retried_429(2000, 2001);
        t[6] = at(
            1,
            "client",
            Observation::LoopRetrying {
                step: 1,
                failed_attempt: 1,
                next_attempt: 2,
                delay_ms: 2000,
                error: "APIRequestTooLargeError 413: Request exceeds the maximum size".into(),
            },
        );
        assert_eq!(
            messages(budget_respected(&t)),
            [
                "turn 1 step 1: retried APIRequestTooLargeError 413: Request exceeds the maximum size (kimi-loop.md §6: only 408, 409, 429, 500, 502, 503, 504 and 529 are retried)"
            ]
        );
    }

    #[test]
    fn a_rejection_with_a_fallback_never_fails_the_run_before_its_resend() {
        let mut t = retried_429(2000, 2001);
        t.truncate(4);
        t[3] = at(
            0,
            "harness",
            Observation::Fault {
                fault: "provider_error call=0 status=413".into(),
            },
        );
        t.extend([
            at(
                0,
                "provider",
                Observation::ProviderServe {
                    call: 0,
                    cassette: "<fault>".into(),
                    status: 413,
                    frames: 0,
                },
            ),
            at(
                1,
                "client",
                Observation::LoopProviderResponse {
                    call: 0,
                    status: Some(413),
                    error: None,
                },
            ),
            at(
                1,
                "client",
                Observation::LoopModelError {
                    turn_step: Some("1.1".into()),
                    error: "APIStatusError: Request exceeds the maximum size".into(),
                },
            ),
        ]);
        let mut failed = t.clone();
        failed.push(ev(Observation::LoopInterrupted {
            reason: "error".into(),
            cause: "error".into(),
            attempted_steps: 1,
            active_step: Some(1),
            message: Some("Request exceeds the maximum size".into()),
        }));
        assert_eq!(
            messages(budget_respected(&failed)),
            [
                "turn 1 step 1: the run failed on HTTP 413 (APIStatusError: Request exceeds the maximum size) without the media-degraded resend kimi-loop.md §4.7 prescribes for it (turn.interrupted: Request exceeds the maximum size)"
            ]
        );
        let mut resent = t;
        resent.push(at(
            1,
            "client",
            Observation::LoopProviderRequest {
                call: 1,
                path: "/v1/messages".into(),
                messages: 1,
                tools: 0,
                results: Default::default(),
            },
        ));
        assert_eq!(messages(budget_respected(&resent)), Vec::<String>::new());
        // A context overflow is the host's to compact, not a media fallback.
        assert_eq!(
            fallback_for(413, "prompt exceeds the maximum context length"),
            None
        );
        assert_eq!(fallback_for(400, "Bad request"), None);
        assert_eq!(fallback_for(413, "Bad request"), None);
        assert_eq!(
            fallback_for(413, "413 Request Entity Too Large"),
            Some("media-degraded")
        );
        assert_eq!(
            fallback_for(422, "messages: roles must alternate between"),
            Some("strict")
        );
    }

    /// recorded_tool_use.toml, seed 1, with its first model call rejected: HTTP `status`
    /// with `message`.
    fn rejected_first_call(
        status: u16,
        message: &str,
    ) -> crate::harness::kimi::world::LoopRunOutput {
        let mut s = bundled("recorded_tool_use.toml");
        let fault = crate::harness::faults::Fault::ProviderError {
            call: 0,
            status,
            retry_after_s: None,
            message: Some(message.into()),
        };
        s.faults.push(toml::Spanned::new(0..0, fault));
        crate::harness::kimi::world::run_once(&s, 1).unwrap()
    }

    /// The violations of `budget-respected` in one run, each shown with the event it points at.
    fn report(out: &crate::harness::kimi::world::LoopRunOutput) -> Vec<String> {
        budget_respected(&out.trace)
            .into_iter()
            .map(|v| {
                let at = v.event.map(|i| out.trace[i].render()).unwrap_or_default();
                format!("{}: {} @ {}", v.invariant, v.message, at.trim())
            })
            .collect()
    }

    /// The planted canary: a loop that ignores the server's `Retry-After` waits the backoff
    /// table's delay after provider_errors.toml's `429 + Retry-After: 2`, and
    /// `budget-respected` says so; the faithful loop passes.
    #[test]
    fn budget_respected_fails_on_a_loop_that_ignores_retry_after() {
        use crate::harness::kimi::world::{run_once, run_once_planted};
        let s = bundled("provider_errors.toml");
        let faithful = run_once(&s, 1).unwrap();
        assert_eq!(report(&faithful), Vec::<String>::new());
        let planted = run_once_planted(&s, 1, |b| b.retry_ignores_retry_after = true).unwrap();
        let found = report(&planted);
        println!("{}", found.join("\n"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("budget-respected: turn 1 step 1: retry 2 waited 1")
                && found[0].contains("but the failed answer said Retry-After 2000 ms"),
            "{found:?}"
        );
    }

    /// A 413 body-size rejection and a request-structure 400 (kimi-loop.md §7.13, verbatim)
    /// on the first model call: the loop resends on the degraded or strict projection and
    /// the turn completes, with `budget-respected` clean. A loop that misclassifies either
    /// fails the turn on it, and `budget-respected` names the resend it skipped.
    #[test]
    fn rejections_with_a_fallback_are_resent_and_the_turn_completes() {
        for (status, message) in [
            (413, "Request exceeds the maximum size"),
            (
                400,
                "messages.142: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01",
            ),
            (
                422,
                "messages: roles must alternate between \"user\" and \"assistant\"",
            ),
            (400, "unsupported image format"),
        ] {
            let out = rejected_first_call(status, message);
            assert_eq!(report(&out), Vec::<String>::new(), "{status} {message}");
            let outcomes: Vec<String> = out
                .outcomes
                .unwrap()
                .iter()
                .map(ToString::to_string)
                .collect();
            assert!(
                outcomes.iter().all(|o| o.starts_with("completed")),
                "{status} {message}: {outcomes:?}"
            );
        }
    }

    /// A resend's own rejection is rethrown (kimi-loop.md §4.7, "one resend each, never
    /// looped"): a 413 answering the strict resend of a request-structure 422 ends the turn,
    /// and no media-degraded resend is owed for it, whether or not the oracle knows the 422's
    /// wording. A guided sweep of `provider_rejections.toml` found the oracle owing one.
    #[test]
    fn a_rejection_of_a_resend_is_owed_no_further_resend() {
        for structure in [
            "messages: roles must alternate between \"user\" and \"assistant\"",
            "tool_call_id toolu_9 not found in the preceding assistant message",
        ] {
            let mut s = bundled("recorded_tool_use.toml");
            for (call, status, message) in [
                (0, 422, structure),
                (1, 413, "Request exceeds the maximum size"),
            ] {
                let fault = crate::harness::faults::Fault::ProviderError {
                    call,
                    status,
                    retry_after_s: None,
                    message: Some(message.into()),
                };
                s.faults.push(toml::Spanned::new(0..0, fault));
            }
            let out = crate::harness::kimi::world::run_once(&s, 1).unwrap();
            assert_eq!(report(&out), Vec::<String>::new(), "{structure}");
            let outcome = out.outcomes.unwrap()[0].to_string();
            assert_eq!(
                outcome, "failed: APIRequestTooLargeError: Request exceeds the maximum size",
                "{structure}"
            );
        }
    }

    /// The rejections the loop has no fallback for fail the turn at once, never retried.
    #[test]
    fn rejections_without_a_fallback_fail_the_turn_unretried() {
        for (status, message) in [
            (400, "Bad request"),
            (401, "invalid x-api-key"),
            (
                403,
                "Your API key does not have permission to use the specified resource",
            ),
            (404, "model: the requested model does not exist"),
        ] {
            let out = rejected_first_call(status, message);
            assert_eq!(report(&out), Vec::<String>::new(), "{status}");
            assert!(
                !out.trace
                    .iter()
                    .any(|e| matches!(e.obs, Observation::LoopRetrying { .. })),
                "{status}"
            );
            let outcomes = out.outcomes.unwrap();
            let outcome = outcomes[0].to_string();
            assert!(
                outcome.starts_with(&format!("failed: APIStatusError: {message}")),
                "{status}: {outcome}"
            );
        }
    }
}
