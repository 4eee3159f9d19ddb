//! The SDK's own retries of one request (letta-protocol.md §2.8), part of `budget-respected`
//! for the Letta client, and the `Retry-After` the server sent, which both the SDK's retries and
//! the client's own (budget_respected.rs) are held to.

use std::collections::BTreeMap;

use crate::harness::invariants::{BUDGET_RESPECTED, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// The SDK's own retries of one request (letta-protocol.md §2.8): `maxRetries = 2`, kept by
/// every call but the send in the published client; the reference keeps it for reads (`GET`)
/// only (docs/client.md). The oracle's own copy of that rule.
fn sdk_retry_budget(profile: &str, method: &str) -> u32 {
    match (profile, method) {
        ("letta-code", _) | (_, "GET") => 2,
        _ => 0,
    }
}

/// The SDK's retries of each request (`client_request`'s `retry`): retry `n` of a request is
/// within its budget, follows a failed attempt `n - 1` of the same request, and waits at least
/// what the SDK's delay allows after that failure. Requests are told apart by method and path,
/// and so are their answers: the published client's eager cancel runs beside its send, so the
/// latest answer need not be the latest request's. Whether the SDK gave up early is not
/// judged: a request can be dropped in flight (a stream's lookup when the stream ends), which
/// the trace does not tell from giving up.
pub(super) fn sdk_retries_break(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut profile = "reference";
    // Each request's latest attempt, by (method, path).
    let mut latest: BTreeMap<(&str, &str), Attempt<'_>> = BTreeMap::new();
    let mut promised: BTreeMap<&str, Promise> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        if let Some((header, promise)) = Promise::of(e) {
            promised.insert(header, promise);
        }
        if e.host != "client" {
            continue;
        }
        match &e.obs {
            Observation::ClientStarted { profile: p, .. } => {
                profile = p;
                latest.clear();
            }
            Observation::ClientResponse {
                method,
                path,
                status,
                retry_after,
            } => {
                if let Some(a) = latest.get_mut(&(method.as_str(), path.as_str())) {
                    a.ok = (200..300).contains(status);
                    a.failed = (!a.ok).then_some((e.t_ms, retry_after.as_deref()));
                }
            }
            Observation::ClientConnectError { method, path, .. } => {
                if let Some(a) = latest.get_mut(&(method.as_str(), path.as_str())) {
                    a.failed = Some((e.t_ms, None));
                }
            }
            Observation::ClientRequest {
                method,
                path,
                retry,
            } => {
                let budget = sdk_retry_budget(profile, method);
                let before = latest.get(&(method.as_str(), path.as_str()));
                let follows = before.is_some_and(|a| a.retry + 1 == *retry && !a.ok);
                if *retry > budget {
                    out.push(Violation::at(
                        BUDGET_RESPECTED,
                        i,
                        format!(
                            "the SDK's retry {retry} of {method} {path} exceeds its {budget} retries ({profile})"
                        ),
                    ));
                } else if *retry > 0 && !follows {
                    out.push(Violation::at(
                        BUDGET_RESPECTED,
                        i,
                        format!(
                            "the SDK's retry {retry} of {method} {path} does not follow a failed attempt {}",
                            retry - 1
                        ),
                    ));
                } else if *retry > 0
                    && let Some((t_failed, header)) = before.and_then(|a| a.failed)
                    && let Some((earliest, why)) =
                        sdk_earliest_retry(*retry, t_failed, header, &promised)
                    && e.t_ms < earliest
                {
                    out.push(Violation::at(
                        BUDGET_RESPECTED,
                        i,
                        format!(
                            "the SDK's retry {retry} of {method} {path} came {} ms after the failure at {t_failed} ms; {why}",
                            e.t_ms - t_failed
                        ),
                    ));
                }
                latest.insert(
                    (method, path),
                    Attempt {
                        retry: *retry,
                        ok: false,
                        failed: None,
                    },
                );
            }
            _ => {}
        }
    }
    out
}

/// A request's latest attempt: its number, whether a 2xx answered it, and when it failed with
/// the `Retry-After` its answer carried.
struct Attempt<'a> {
    retry: u32,
    ok: bool,
    failed: Option<(u64, Option<&'a str>)>,
}

/// The earliest time the SDK's retry `retry` may go out after the failure at `t_failed`
/// (letta-protocol.md §2.8), and why: a `Retry-After` in seconds that long after the failure;
/// an HTTP date at that date, less its cut to whole seconds; without one, or with a date no
/// parser reads, the backoff `min(0.5 s · 2^n, 8 s)` less its 25 % jitter. The SDK reads the
/// answer's body first, so the retry may come later, never earlier. `None` for a header the
/// server did not write.
fn sdk_earliest_retry(
    retry: u32,
    t_failed: u64,
    header: Option<&str>,
    promised: &BTreeMap<&str, Promise>,
) -> Option<(u64, String)> {
    let promise = match header {
        Some(h) => Some((h, promised.get(h)?)),
        None => None,
    };
    match promise.filter(|(_, p)| !p.broken) {
        Some((h, p)) => Some(if p.dated {
            let at = (p.t_ms + p.wait_ms).saturating_sub(1000);
            (
                at,
                format!("`Retry-After: {h}` asks for no retry before {at} ms"),
            )
        } else {
            (
                t_failed + p.wait_ms,
                format!("`Retry-After: {h}` asks for {} ms", p.wait_ms),
            )
        }),
        None => {
            let n = retry.saturating_sub(1).min(30);
            let base = (500u64 << n).min(8000);
            let least = base * 3 / 4;
            Some((
                t_failed + least,
                format!("its backoff is at least {least} ms (of {base} ms, less 25 % jitter)"),
            ))
        }
    }
}

/// A `Retry-After` the server sent at `t_ms`, asking for `wait_ms`; `broken` when it wrote the
/// date with a field out of range, which asks for nothing.
pub(super) struct Promise {
    pub(super) t_ms: u64,
    pub(super) wait_ms: u64,
    pub(super) dated: bool,
    pub(super) broken: bool,
}

impl Promise {
    /// The header and what it asked for, when `e` is the server's `server_retry_after`.
    pub(super) fn of(e: &TraceEvent) -> Option<(&str, Promise)> {
        match &e.obs {
            Observation::ServerRetryAfter {
                header,
                wait_ms,
                dated,
                broken,
                ..
            } => Some((
                header,
                Promise {
                    t_ms: e.t_ms,
                    wait_ms: *wait_ms,
                    dated: *dated,
                    broken: broken.is_some(),
                },
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::letta::test_trace::{client, started, started_as};

    /// The request every SDK case retries.
    const RUN: &str = "/v1/runs/run-1";

    /// The SDK rule fails `events` once, saying `want`.
    fn assert_one_violation(events: &[TraceEvent], want: &str) {
        let v = sdk_retries_break(events);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].message, want);
    }

    /// letta-protocol.md §2.8: the SDK retries a failed read twice, the reference nothing else.
    #[test]
    fn the_sdks_retries_stay_within_two_and_follow_a_failed_attempt() {
        let start = started("interactive");
        let request = |method: &str, retry: u32| sdk_request(0, method, retry);
        let answer = |method: &str, status: u16| sdk_answer(0, method, status, None);
        let refused = || sdk_refused(0, "GET");
        // The backoff: at least 375 ms before retry 1, 750 ms before retry 2.
        let ok = vec![
            start.clone(),
            sdk_request(0, "GET", 0),
            sdk_answer(10, "GET", 502, None),
            sdk_request(385, "GET", 1),
            sdk_refused(400, "GET"),
            sdk_request(1150, "GET", 2),
            sdk_answer(1160, "GET", 200, None),
        ];
        assert_eq!(sdk_retries_break(&ok), []);
        let cases = [
            (
                vec![
                    start.clone(),
                    request("GET", 0),
                    refused(),
                    request("GET", 4294967295),
                ],
                "the SDK's retry 4294967295 of GET /v1/runs/run-1 exceeds its 2 retries (reference)",
            ),
            (
                vec![
                    start.clone(),
                    request("GET", 0),
                    answer("GET", 200),
                    request("GET", 1),
                ],
                "the SDK's retry 1 of GET /v1/runs/run-1 does not follow a failed attempt 0",
            ),
            (
                vec![
                    start.clone(),
                    request("GET", 0),
                    refused(),
                    request("GET", 2),
                ],
                "the SDK's retry 2 of GET /v1/runs/run-1 does not follow a failed attempt 1",
            ),
            (
                vec![
                    start,
                    request("POST", 0),
                    answer("POST", 500),
                    request("POST", 1),
                ],
                "the SDK's retry 1 of POST /v1/runs/run-1 exceeds its 0 retries (reference)",
            ),
        ];
        for (events, want) in cases {
            assert_one_violation(&events, want);
        }
    }

    fn sdk_request(t_ms: u64, method: &str, retry: u32) -> TraceEvent {
        client(
            t_ms,
            Observation::ClientRequest {
                method: method.into(),
                path: RUN.into(),
                retry,
            },
        )
    }

    fn sdk_answer(t_ms: u64, method: &str, status: u16, retry_after: Option<&str>) -> TraceEvent {
        client(
            t_ms,
            Observation::ClientResponse {
                method: method.into(),
                path: RUN.into(),
                status,
                retry_after: retry_after.map(str::to_string),
            },
        )
    }

    fn sdk_refused(t_ms: u64, method: &str) -> TraceEvent {
        client(
            t_ms,
            Observation::ClientConnectError {
                method: method.into(),
                path: RUN.into(),
                error: "refused".into(),
            },
        )
    }

    /// letta-protocol.md §2.8: the SDK's retry waits what the failed answer's `Retry-After`
    /// asks for (seconds from the answer; a date, less its cut to whole seconds), else its
    /// backoff less the jitter. Earlier is a broken budget.
    #[test]
    fn an_sdk_retry_before_its_wait_breaks_the_budget() {
        let promise = |t_ms: u64, header: &str, wait_ms: u64, dated: bool| TraceEvent {
            t_ms,
            host: "server".into(),
            obs: Observation::ServerRetryAfter {
                status: 500,
                header: header.into(),
                wait_ms,
                dated,
                broken: None,
            },
        };
        let date = "Thu, 01 Jan 2026 00:00:03 GMT";
        let published = started_as("letta-code", "headless");
        let with = |header: &str, dated: bool, retry_at: u64| {
            vec![
                published.clone(),
                sdk_request(39, "POST", 0),
                promise(42, header, if dated { 3000 } else { 2000 }, dated),
                sdk_answer(44, "POST", 500, Some(header)),
                sdk_request(retry_at, "POST", 1),
            ]
        };
        assert_eq!(sdk_retries_break(&with("2", false, 2044)), []);
        assert_eq!(sdk_retries_break(&with(date, true, 2042)), []);
        assert_one_violation(
            &with("2", false, 2043),
            "the SDK's retry 1 of POST /v1/runs/run-1 came 1999 ms after the failure at 44 ms; `Retry-After: 2` asks for 2000 ms",
        );
        assert_one_violation(
            &with(date, true, 2041),
            "the SDK's retry 1 of POST /v1/runs/run-1 came 1997 ms after the failure at 44 ms; `Retry-After: Thu, 01 Jan 2026 00:00:03 GMT` asks for no retry before 2042 ms",
        );
        let backoff = vec![
            started("headless"),
            sdk_request(0, "GET", 0),
            sdk_refused(100, "GET"),
            sdk_request(849, "GET", 1),
        ];
        let mut early = backoff.clone();
        early[3].t_ms = 474;
        assert_eq!(sdk_retries_break(&backoff), []);
        assert_one_violation(
            &early,
            "the SDK's retry 1 of GET /v1/runs/run-1 came 374 ms after the failure at 100 ms; its backoff is at least 375 ms (of 500 ms, less 25 % jitter)",
        );
        // A date with a field out of range asks for nothing: the backoff bounds the retry.
        let broken = "Thu, 01 Jan 2026 25:00:03 GMT";
        let with_broken = |retry_at: u64| {
            let mut events = with(broken, true, retry_at);
            if let Observation::ServerRetryAfter { broken, .. } = &mut events[2].obs {
                *broken = Some("hour".into());
            }
            events
        };
        assert_eq!(sdk_retries_break(&with_broken(419)), []);
        assert_one_violation(
            &with_broken(418),
            "the SDK's retry 1 of POST /v1/runs/run-1 came 374 ms after the failure at 44 ms; its backoff is at least 375 ms (of 500 ms, less 25 % jitter)",
        );
    }

    /// The published client's eager cancel runs beside its resume stream (standard_fault.toml
    /// seed 3 in that profile): the cancel's 200 arrives after the stream's request went out,
    /// and the stream's own attempt then fails. Its retry follows that failure, not the
    /// cancel's answer.
    #[test]
    fn answers_of_two_requests_in_flight_are_each_their_own_requests() {
        let cancel = "/v1/conversations/agent-1/cancel";
        let stream = "/v1/conversations/default/stream";
        let request = |t_ms: u64, path: &str, retry: u32| {
            client(
                t_ms,
                Observation::ClientRequest {
                    method: "POST".into(),
                    path: path.into(),
                    retry,
                },
            )
        };
        let events = vec![
            started_as("letta-code", "interactive"),
            request(77, cancel, 0),
            request(81, stream, 0),
            client(
                81,
                Observation::ClientResponse {
                    method: "POST".into(),
                    path: cancel.into(),
                    status: 200,
                    retry_after: None,
                },
            ),
            client(
                30_081,
                Observation::ClientConnectError {
                    method: "POST".into(),
                    path: stream.into(),
                    error: "timed out waiting for the response head".into(),
                },
            ),
            request(30_526, stream, 1),
        ];
        assert_eq!(sdk_retries_break(&events), []);
        // The stream answered and the cancel failed: the cancel's failure does not make the
        // stream's retry 1 follow a failed attempt.
        let mut unfailed = events.clone();
        unfailed[3] = client(
            81,
            Observation::ClientResponse {
                method: "POST".into(),
                path: stream.into(),
                status: 200,
                retry_after: None,
            },
        );
        unfailed[4] = client(
            30_081,
            Observation::ClientConnectError {
                method: "POST".into(),
                path: cancel.into(),
                error: "refused".into(),
            },
        );
        assert_one_violation(
            &unfailed,
            "the SDK's retry 1 of POST /v1/conversations/default/stream does not follow a failed attempt 0",
        );
    }
}
