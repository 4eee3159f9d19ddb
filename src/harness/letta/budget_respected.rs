//! `budget-respected` for the Letta client (docs/invariants.md): each retry against its budget
//! and its documented delay, each wait against the next request, and each `Retry-After` the
//! client read against what the server asked for.

use std::collections::{BTreeMap, BTreeSet};

use super::sdk_retries::{Promise, sdk_retries_break};
use crate::harness::invariants::{BUDGET_RESPECTED, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// The documented delay of a retry (letta-protocol.md §3.3, §3.8, §4.4), independent of the
/// client's code: the oracle's own copy of the formulas.
fn documented_delay(
    kind: &str,
    attempt: u32,
    detail: &str,
    retry_after: Option<u64>,
    headless: bool,
) -> Option<u64> {
    let exp = |base: u64| base.saturating_mul(1u64 << attempt.saturating_sub(1).min(40));
    Some(match kind {
        "transient" | "post_stream" => match retry_after {
            Some(ms) => ms,
            None if cloudflare_edge_text(detail) => exp(5000),
            None => exp(1000),
        },
        "busy" => exp(10_000),
        "empty_response" => 500 * u64::from(attempt),
        "shutdown_503" => retry_after.unwrap_or(1000),
        "approval_pending" | "quota_swap" => 0,
        "resume" if headless => exp(250).min(2000),
        "resume" => 0,
        _ => return None,
    })
}

/// A Cloudflare edge 52x text, read from letta-protocol.md §3.6's prose rather than taken from
/// the client: (a) `Cloudflare` and an edge code as words; (b) JSON saying
/// `"cloudflare_error": true`; (c) a text that mentions cloudflare, looks like HTML or says
/// "error code", and carries a code as `<code> <!doctype html`, `error code <code>` or a title's
/// `| <code>:`. The edge codes are 502 and 520 to 526.
fn cloudflare_edge_text(detail: &str) -> bool {
    static RULES: std::sync::LazyLock<[regex::Regex; 3]> = std::sync::LazyLock::new(|| {
        let code = "(?:502|52[0-6])";
        [
            format!(r"(?i)(?-u:\b)cloudflare\s+{code}(?-u:\b)"),
            r#""cloudflare_error"\s*:\s*true"#.to_string(),
            format!(r"(?i)(?:^|\s){code}\s*<!doctype html|error code\s*{code}|\|\s*{code}\s*:"),
        ]
        .map(|r| regex::Regex::new(&r).expect("a valid pattern"))
    });
    let [words, json, marker] = &*RULES;
    let lower = detail.to_lowercase();
    let page = lower.contains("cloudflare")
        && ["<!doctype html", "<html", "error code"]
            .iter()
            .any(|s| lower.contains(s));
    words.is_match(detail) || json.is_match(detail) || (page && marker.is_match(detail))
}

/// `budget-respected`: retries stay within their budgets and their delays follow the
/// documented formulas (letta-protocol.md §3.3, §3.8, §3.9, §4.4), and the client really waits
/// that long before its next request.
pub fn budget_respected(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut headless = false;
    // Per turn: the shared LLM counter, the last attempt per kind.
    let mut shared = 0u32;
    let mut last: BTreeMap<String, u32> = BTreeMap::new();
    let mut pending_wait: Option<(usize, u64, u64)> = None; // (event, t, delay)
    // Each `Retry-After` the server sent, by its text; the one on the client's latest answer.
    let mut promised: BTreeMap<&str, Promise> = BTreeMap::new();
    let mut answered_retry_after: Option<&str> = None;
    // The error detail each run failed with, as the server stored it; the run the client last
    // acted on, and that detail once the client read the run back (`GET /v1/runs/{id}`, 200).
    let mut run_details: BTreeMap<&str, &str> = BTreeMap::new();
    let mut acted_on: Option<&str> = None;
    let mut read_detail: Option<&str> = None;
    for (i, e) in events.iter().enumerate() {
        if let Some((header, promise)) = Promise::of(e) {
            promised.insert(header, promise);
        }
        if let Observation::ProviderResult { run_id, outcome } = &e.obs
            && let Some(detail) = outcome.strip_prefix("error: ")
        {
            run_details.insert(run_id, detail);
        }
        if e.host != "client" {
            continue;
        }
        match &e.obs {
            Observation::ClientActedOn { run_id, .. } => {
                acted_on = run_id.as_deref();
                read_detail = None;
            }
            Observation::ClientResponse {
                method,
                path,
                status,
                retry_after,
            } => {
                answered_retry_after = retry_after.as_deref();
                if let Some(run) = acted_on
                    && *status == 200
                    && method == "GET"
                    && path.strip_prefix("/v1/runs/") == Some(run)
                {
                    read_detail = run_details.get(run).copied();
                }
            }
            Observation::ClientConnectError { .. } => answered_retry_after = None,
            Observation::ClientStarted { mode, .. } => {
                headless = mode == "headless";
                pending_wait = None;
            }
            Observation::TurnStart { .. } => {
                shared = 0;
                last.clear();
                pending_wait = None;
            }
            // Not the retried request: a cancel, which the published client sends beside its
            // send when the user interrupts (its eager cancel), and the SDK's retry of a request
            // already in flight when the client announced its wait (the SDK retries within one
            // exchange; the client's own retry begins a new one, at attempt 0).
            Observation::ClientRequest { retry, path, .. }
                if *retry > 0 || path.ends_with("/cancel") => {}
            Observation::ClientSend { .. } | Observation::ClientRequest { .. } => {
                answered_retry_after = None;
                if let Some((at, t, delay)) = pending_wait.take()
                    && e.t_ms < t + delay
                {
                    out.push(Violation::at(
                        BUDGET_RESPECTED,
                        i,
                        format!(
                            "the retry at event {} announced a {delay} ms wait, but the next request came after {} ms",
                            at + 1,
                            e.t_ms - t
                        ),
                    ));
                }
            }
            // A busy answer the client recovered from by attaching to its run: the TUI counted
            // it (`busyRetries += 1` before the attach) and keeps the count across the turn's
            // continuations; headless resets it on success (letta-protocol.md §3.4).
            Observation::ClientRecovery { kind, .. } if kind == "busy_attach" => {
                if headless {
                    last.remove("busy");
                } else {
                    *last.entry("busy".to_string()).or_insert(0) += 1;
                }
            }
            Observation::ClientResume { attempt, .. } => {
                let max = if headless { 20 } else { 1 };
                if *attempt > max {
                    out.push(Violation::at(
                        BUDGET_RESPECTED,
                        i,
                        format!(
                            "resume attempt {attempt} exceeds the {} budget of {max}",
                            if headless { "headless" } else { "interactive" }
                        ),
                    ));
                }
            }
            Observation::ClientRetry {
                kind,
                attempt,
                delay_ms,
                detail,
                retry_after_ms,
            } => {
                // A post-stream retry waits by the run's error detail when the client read
                // it, else by the stream's error line (letta-protocol.md §3.10 step 7), which
                // is what the client reports: a Cloudflare page reaches it only in the run.
                let detail = match read_detail {
                    Some(d) if kind == "post_stream" && !d.is_empty() => d,
                    _ => detail.as_str(),
                };
                let retry = Retry {
                    kind,
                    attempt: *attempt,
                    delay_ms: *delay_ms,
                    detail,
                    retry_after_ms: *retry_after_ms,
                };
                let broken = retry_breaks(&retry, headless, &mut shared, &mut last);
                out.extend(
                    broken
                        .into_iter()
                        .map(|m| Violation::at(BUDGET_RESPECTED, i, m)),
                );
                // The two retries that read the answer's `Retry-After` (letta-protocol.md
                // §3.3, §3.4 retry_transient).
                if matches!(kind.as_str(), "shutdown_503" | "transient")
                    && let Some(header) = answered_retry_after.take()
                    && let Some(promise) = promised.get(header)
                    && let Some(m) = retry_after_misread(header, promise, *retry_after_ms, e.t_ms)
                {
                    out.push(Violation::at(BUDGET_RESPECTED, i, m));
                }
                pending_wait = Some((i, e.t_ms, *delay_ms));
            }
            _ => {}
        }
    }
    out.extend(sdk_retries_break(events));
    out.extend(resumes_given_up_early(events));
    out
}

/// Where a headless resume attempt stands (letta-protocol.md §4.4 step 7).
enum ResumeStep<'a> {
    Idle,
    /// Attempt `k` began; its request has not failed (yet).
    Attempted(u32),
    /// Attempt `k`'s request failed.
    Failed(u32),
    /// After the failure, the client asked for run `run`; `dead` is how it had already ended,
    /// unreplayable, before the client asked (so before the server answered).
    Checking(u32, &'a str, Option<&'a str>),
    /// ... and the server answered 200 while the run was still going.
    Checked(u32, &'a str),
    /// ... and the server answered 200 after the run had ended in `how`: not replayable.
    CheckedDead(u32, &'a str, &'a str),
}

/// How a run ended that `isReplayableRun` (§4.4 step 6) refuses whatever the profile: a stop
/// reason whose run is `failed` or `cancelled`.
fn unreplayable_end(stop_reason: &str) -> bool {
    matches!(stop_reason, "error" | "llm_api_error" | "cancelled")
}

/// The resume budget (§4.4 step 7): a failed attempt, a failed request or a replay that ended
/// in an `error` stop, is followed by a check of the run, and the loop goes on or gives up as
/// `isReplayableRun` (step 6) says. Judged in two places. Where the trace says the run was
/// still going when the server answered the check (not ended, no restart since, so `running`),
/// a headless client must try again. Where the run had ended failed or cancelled before the
/// client asked, it is not replayable, and no client tries again. A run that ended otherwise is
/// left unjudged, its replayability depending on its metadata.
fn resumes_given_up_early(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut headless = false;
    let mut step = ResumeStep::Idle;
    // Runs the server ended, and whether it restarted: both make a run's status unknown here.
    let mut ended: BTreeSet<&str> = BTreeSet::new();
    // Runs that ended unreplayable, and how.
    let mut dead: BTreeMap<&str, &str> = BTreeMap::new();
    let mut restarted = false;
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::RunEnded {
                run_id,
                stop_reason,
            } => {
                ended.insert(run_id);
                if unreplayable_end(stop_reason) {
                    dead.insert(run_id, stop_reason);
                }
            }
            Observation::RunCancelled { run_id } => {
                ended.insert(run_id);
                dead.insert(run_id, "cancelled");
            }
            Observation::ServerRecovered { .. } => restarted = true,
            _ => {}
        }
        if e.host != "client" {
            continue;
        }
        step = match (&e.obs, step) {
            (Observation::ClientStarted { mode, .. }, _) => {
                headless = mode == "headless";
                ResumeStep::Idle
            }
            (
                Observation::ClientRetry { .. } | Observation::ClientResume { .. },
                ResumeStep::CheckedDead(k, run, how),
            ) => {
                out.push(Violation::at(
                    BUDGET_RESPECTED,
                    i,
                    format!(
                        "resume went on after attempt {k}, though run {run} had ended ({how}) before the client checked it: a failed or cancelled run is not replayable (letta-protocol.md §4.4 step 6)"
                    ),
                ));
                ResumeStep::Idle
            }
            (Observation::ClientResume { attempt, .. }, _) => ResumeStep::Attempted(*attempt),
            (Observation::ClientResponse { status, .. }, ResumeStep::Attempted(k))
                if !(200..300).contains(status) =>
            {
                ResumeStep::Failed(k)
            }
            // The replay's request and its 2xx head: the attempt goes on to its drain.
            (
                Observation::ClientRequest { .. } | Observation::ClientResponse { .. },
                s @ ResumeStep::Attempted(_),
            ) => s,
            (Observation::ClientConnectError { .. }, ResumeStep::Attempted(k)) => {
                ResumeStep::Failed(k)
            }
            (Observation::ClientDrained { stop_reason, .. }, ResumeStep::Attempted(k))
                if stop_reason == "error" =>
            {
                ResumeStep::Failed(k)
            }
            (Observation::ClientRequest { method, path, .. }, ResumeStep::Failed(k))
                if method == "GET" =>
            {
                match path.strip_prefix("/v1/runs/") {
                    Some(run) if !run.contains(['/', '?']) => {
                        ResumeStep::Checking(k, run, dead.get(run).copied())
                    }
                    _ => ResumeStep::Idle,
                }
            }
            (Observation::ClientResponse { status: 200, .. }, ResumeStep::Checking(k, run, _))
                if !ended.contains(run) && !restarted =>
            {
                ResumeStep::Checked(k, run)
            }
            (
                Observation::ClientResponse { status: 200, .. },
                ResumeStep::Checking(k, run, Some(how)),
            ) if !restarted => ResumeStep::CheckedDead(k, run, how),
            (Observation::ClientRetry { kind, .. }, s @ ResumeStep::Checked(..))
                if kind == "resume" =>
            {
                s
            }
            (Observation::ClientInterrupt { .. }, _) => ResumeStep::Idle,
            // Anything else the client does next gives the loop up.
            (_, ResumeStep::Checked(k, run)) if headless && k < HEADLESS_RESUME_ATTEMPTS => {
                out.push(Violation::at(
                    BUDGET_RESPECTED,
                    i,
                    format!(
                        "headless resume stopped after attempt {k} of {HEADLESS_RESUME_ATTEMPTS}, though run {run} was still going when the client checked it"
                    ),
                ));
                ResumeStep::Idle
            }
            (
                Observation::ClientChunk { .. }
                | Observation::ClientStreamEnd { .. }
                | Observation::ClientDrained { .. },
                s,
            ) => s,
            _ => ResumeStep::Idle,
        };
    }
    out
}

/// Resume attempts of a headless client (letta-protocol.md §4.4 step 7).
const HEADLESS_RESUME_ATTEMPTS: u32 = 20;

/// Whether the client read the server's `Retry-After` as the wait it asked for
/// (letta-protocol.md §3.8): a number of seconds exactly; an HTTP date less the time since the
/// server wrote it and less its cut to whole seconds (under 1 s), never below 0; a date with a
/// field out of range as no wait at all (unparseable → none).
fn retry_after_misread(
    header: &str,
    promise: &Promise,
    read_ms: Option<u64>,
    now_ms: u64,
) -> Option<String> {
    if promise.broken {
        return read_ms.map(|ms| {
            format!(
                "the answer said `Retry-After: {header}`, a date out of range that no parser reads, but the client read {ms} ms; an unreadable header leaves the retry's own delay"
            )
        });
    }
    let latest = promise
        .wait_ms
        .saturating_sub(now_ms.saturating_sub(promise.t_ms));
    let earliest = if promise.dated {
        latest.saturating_sub(1000)
    } else {
        latest
    };
    let ok = match read_ms {
        Some(ms) if promise.dated => (earliest..=latest).contains(&ms),
        Some(ms) => ms == promise.wait_ms,
        None => false,
    };
    (!ok).then(|| {
        let want = if promise.dated {
            format!("{earliest}-{latest} ms")
        } else {
            format!("{} ms", promise.wait_ms)
        };
        let read = read_ms.map_or("no wait".to_string(), |ms| format!("{ms} ms"));
        format!("the answer said `Retry-After: {header}` ({want}), but the client read {read}")
    })
}

/// One retry the client announced.
struct Retry<'a> {
    kind: &'a str,
    attempt: u32,
    delay_ms: u64,
    detail: &'a str,
    retry_after_ms: Option<u64>,
}

/// What a retry broke: its attempt against its budget (the turn's shared LLM budget, or its
/// kind's own), its delay against the documented formula. `shared` and `last` are the turn's
/// counters.
fn retry_breaks(
    retry: &Retry<'_>,
    headless: bool,
    shared: &mut u32,
    last: &mut BTreeMap<String, u32>,
) -> Vec<String> {
    let Retry {
        kind,
        attempt,
        delay_ms,
        detail,
        retry_after_ms,
    } = *retry;
    let mut out = Vec::new();
    // The busy counter resets on a transient retry (letta-protocol.md §3.4, §3.9), so a busy
    // answer the client then attaches through counts from zero again.
    if kind == "transient" {
        last.remove("busy");
    }
    let (budget, shared_kind) = match kind {
        "transient" | "post_stream" => (3, true),
        "approval_pending" => (3, true),
        "busy" => (3, false),
        "empty_response" => (2, false),
        "shutdown_503" => (3, false),
        "quota_swap" => (1, false),
        // A resume retry is the wait *between* attempts (letta-protocol.md §4.4 step 7), so
        // the last of the 20 headless attempts (the one interactive attempt) has none.
        "resume" => (if headless { 19 } else { 0 }, false),
        _ => (u32::MAX, false),
    };
    if shared_kind {
        *shared += 1;
        if attempt != *shared || *shared > 3 {
            out.push(format!(
                "{kind} retry is attempt {attempt}, but it is retry {shared} of the turn's shared LLM budget of 3"
            ));
        }
    } else {
        let prev = last.get(kind).copied().unwrap_or(0);
        // Counters may restart at 1 (busy resets on other pre-stream errors; 503 retries count
        // per send), never skip or exceed their budget.
        if attempt > budget || !(attempt == 1 || attempt == prev + 1) {
            out.push(format!(
                "{kind} retry attempt {attempt} (previous {prev}) breaks its budget of {budget}"
            ));
        }
        last.insert(kind.to_string(), attempt);
    }
    if let Some(want) = documented_delay(kind, attempt, detail, retry_after_ms, headless)
        && want != delay_ms
    {
        out.push(format!(
            "{kind} retry attempt {attempt} waits {delay_ms} ms; the documented delay is {want} ms"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::letta::test_trace::{client, started, started_as};

    /// The oracle's reading of §3.6 and the client's agree on each clause and its near misses.
    #[test]
    fn the_oracle_reads_cloudflare_texts_as_the_client_does() {
        use crate::model::letta::client::policy::is_cloudflare_edge_52x;
        let page = "INTERNAL_SERVER_ERROR: Anthropic API error: Error code: 502 - <!DOCTYPE html>\n<title>api.anthropic.com | 502: Bad gateway</title><span>Error code 502</span> cloudflare.com";
        let cases = [
            (page, true),
            ("upstream said Cloudflare 524", true),
            ("cloudflare 520: origin down", true),
            ("Cloudflare 5240", false),
            ("Cloudflare 503", false),
            (r#"{"cloudflare_error": true}"#, true),
            (r#"{"Cloudflare_error": true}"#, false),
            ("<html>cloudflare</html> error code 523", true),
            ("<html>cloudflare</html> error code 503", false),
            ("error code 502 from cloudflare", true),
            ("<html>nginx</html> error code 502", false),
            ("x 521 <!doctype html> cloudflare", true),
            ("cloudflare | 526: Invalid SSL certificate <html>", true),
            ("Internal server error", false),
        ];
        for (text, want) in cases {
            assert_eq!(cloudflare_edge_text(text), want, "{text}");
            assert_eq!(is_cloudflare_edge_52x(text), want, "{text}");
        }
    }

    /// `budget-respected` fails `events` once, saying `want`.
    fn assert_one_violation(events: &[TraceEvent], want: &str) {
        let v = budget_respected(events);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].message, want);
    }

    /// Resume attempt 1 of run `run-1`: its replay request, answered `status`.
    fn first_resume_attempt(status: u16) -> [TraceEvent; 3] {
        let stream = "/v1/runs/run-1/stream";
        [
            client(
                0,
                Observation::ClientResume {
                    attempt: 1,
                    source: "run".into(),
                    id: "run-1".into(),
                    starting_after: 2,
                },
            ),
            client(
                0,
                Observation::ClientRequest {
                    method: "POST".into(),
                    path: stream.into(),
                    retry: 0,
                },
            ),
            client(
                5,
                Observation::ClientResponse {
                    method: "POST".into(),
                    path: stream.into(),
                    status,
                    retry_after: None,
                },
            ),
        ]
    }

    /// Headless resume waits after attempts 1 to `last`, the documented delays apart.
    fn resume_waits(last: u32) -> Vec<TraceEvent> {
        let mut events = vec![
            started("headless"),
            client(
                0,
                Observation::TurnStart {
                    turn: 1,
                    text: "go".into(),
                },
            ),
        ];
        for attempt in 1..=last {
            let delay_ms = (250u64 << (attempt - 1).min(10)).min(2000);
            events.push(client(
                u64::from(attempt) * 10_000,
                Observation::ClientRetry {
                    kind: "resume".into(),
                    attempt,
                    delay_ms,
                    detail: String::new(),
                    retry_after_ms: None,
                },
            ));
        }
        events
    }

    /// A 503 with `Retry-After: header` written at 1,000 ms, asking for `wait_ms`, and the
    /// client's shutdown retry 25 ms later having read `read_ms` from it.
    fn retry_after_read(
        header: &str,
        wait_ms: u64,
        dated: bool,
        read_ms: Option<u64>,
    ) -> Vec<TraceEvent> {
        vec![
            TraceEvent {
                t_ms: 1_000,
                host: "server".into(),
                obs: Observation::ServerRetryAfter {
                    status: 503,
                    header: header.into(),
                    wait_ms,
                    dated,
                    broken: None,
                },
            },
            client(
                1_025,
                Observation::ClientResponse {
                    method: "POST".into(),
                    path: "/v1/conversations/default/messages".into(),
                    status: 503,
                    retry_after: Some(header.into()),
                },
            ),
            client(
                1_025,
                Observation::ClientRetry {
                    kind: "shutdown_503".into(),
                    attempt: 1,
                    delay_ms: read_ms.unwrap_or(1000),
                    detail: String::new(),
                    retry_after_ms: read_ms,
                },
            ),
        ]
    }

    /// letta-protocol.md §3.8: a number is seconds, a date is that instant less now. The
    /// checker holds the client's reading to what the server asked for.
    #[test]
    fn a_misread_retry_after_breaks_the_budget() {
        let date = "Thu, 01 Jan 2026 00:00:04 GMT";
        assert_eq!(
            budget_respected(&retry_after_read("3", 3000, false, Some(3000))),
            []
        );
        assert_eq!(
            budget_respected(&retry_after_read(date, 3000, true, Some(2975))),
            []
        );
        assert_eq!(
            budget_respected(&retry_after_read(date, 3000, true, Some(1975))),
            []
        );
        let cases = [
            (
                retry_after_read("3", 3000, false, Some(3)),
                "the answer said `Retry-After: 3` (3000 ms), but the client read 3 ms",
            ),
            (
                retry_after_read(date, 3000, true, None),
                "the answer said `Retry-After: Thu, 01 Jan 2026 00:00:04 GMT` (1975-2975 ms), but the client read no wait",
            ),
            (
                retry_after_read(date, 3000, true, Some(86_402_975)),
                "the answer said `Retry-After: Thu, 01 Jan 2026 00:00:04 GMT` (1975-2975 ms), but the client read 86402975 ms",
            ),
        ];
        for (events, want) in cases {
            assert_one_violation(&events, want);
        }
        // A date with a field out of range asks for nothing: read as none, the retry keeps its
        // own delay; read as anything, the budget breaks.
        let broken = "Thu, 01 Jan 2026 00:60:04 GMT";
        let with_broken = |read_ms: Option<u64>| {
            let mut events = retry_after_read(broken, 3000, true, read_ms);
            if let Observation::ServerRetryAfter { broken, .. } = &mut events[0].obs {
                *broken = Some("minute".into());
            }
            events
        };
        assert_eq!(budget_respected(&with_broken(None)), []);
        assert_one_violation(
            &with_broken(Some(3_601_975)),
            "the answer said `Retry-After: Thu, 01 Jan 2026 00:60:04 GMT`, a date out of range that no parser reads, but the client read 3601975 ms; an unreadable header leaves the retry's own delay",
        );
    }

    /// letta-protocol.md §4.4 steps 6-7: a failed headless resume attempt is followed by a
    /// check of the run, and by the next attempt while the run is still going.
    #[test]
    fn a_headless_resume_given_up_on_a_running_run_breaks_the_budget() {
        let run = "/v1/runs/run-1";
        let tail = |then: Vec<TraceEvent>, ended: bool| {
            let mut events = vec![started("headless")];
            events.extend(first_resume_attempt(500));
            events.push(client(
                5,
                Observation::ClientRequest {
                    method: "GET".into(),
                    path: run.into(),
                    retry: 0,
                },
            ));
            if ended {
                events.push(TraceEvent {
                    t_ms: 7,
                    host: "server".into(),
                    obs: Observation::RunEnded {
                        run_id: "run-1".into(),
                        stop_reason: "error".into(),
                    },
                });
            }
            events.push(client(
                9,
                Observation::ClientResponse {
                    method: "GET".into(),
                    path: run.into(),
                    status: 200,
                    retry_after: None,
                },
            ));
            events.extend(then);
            events
        };
        let retry = client(
            9,
            Observation::ClientRetry {
                kind: "resume".into(),
                attempt: 1,
                delay_ms: 250,
                detail: String::new(),
                retry_after_ms: None,
            },
        );
        let give_up = client(
            9,
            Observation::TurnEnd {
                turn: 1,
                outcome: "error: stop_reason=error".into(),
            },
        );
        assert_eq!(budget_respected(&tail(vec![retry], false)), []);
        // A run that ended is not judged: its replayability is the run object's.
        assert_eq!(budget_respected(&tail(vec![give_up.clone()], true)), []);
        assert_one_violation(
            &tail(vec![give_up], false),
            "headless resume stopped after attempt 1 of 20, though run run-1 was still going when the client checked it",
        );
    }

    /// letta-protocol.md §4.4 steps 6-7: a replay that ends in an `error` stop is checked, and
    /// a run that had ended failed or cancelled before the check is not resumed again; a run
    /// still going is, headless.
    #[test]
    fn a_resume_that_goes_on_after_its_run_failed_breaks_the_budget() {
        let run = "/v1/runs/run-1";
        let attempt = |mode: &str, ended: Option<&str>, then: Observation| {
            let mut events = vec![started(mode)];
            events.extend(first_resume_attempt(200));
            events.push(client(
                5,
                Observation::ClientDrained {
                    stop_reason: "error".into(),
                    approvals: Vec::new(),
                    last_seq_id: Some(4),
                },
            ));
            if let Some(stop_reason) = ended {
                events.push(TraceEvent {
                    t_ms: 6,
                    host: "server".into(),
                    obs: Observation::RunEnded {
                        run_id: "run-1".into(),
                        stop_reason: stop_reason.into(),
                    },
                });
            }
            for obs in [
                Observation::ClientRequest {
                    method: "GET".into(),
                    path: run.into(),
                    retry: 0,
                },
                Observation::ClientResponse {
                    method: "GET".into(),
                    path: run.into(),
                    status: 200,
                    retry_after: None,
                },
                then,
            ] {
                events.push(client(9, obs));
            }
            events
        };
        let again = || Observation::ClientResume {
            attempt: 2,
            source: "run".into(),
            id: "run-1".into(),
            starting_after: 4,
        };
        let give_up = || Observation::TurnEnd {
            turn: 1,
            outcome: "error: stop_reason=error".into(),
        };
        for mode in ["headless", "interactive"] {
            assert_eq!(
                budget_respected(&attempt(mode, Some("error"), give_up())),
                []
            );
        }
        // The TUI has one attempt anyway; headless has 20, which a failed run does not get.
        assert_one_violation(
            &attempt("headless", Some("llm_api_error"), again()),
            "resume went on after attempt 1, though run run-1 had ended (llm_api_error) before the client checked it: a failed or cancelled run is not replayable (letta-protocol.md §4.4 step 6)",
        );
        // A run that ended with a replayable stop reason is not judged either way.
        assert_eq!(
            budget_respected(&attempt("headless", Some("end_turn"), again())),
            []
        );
        assert_eq!(
            budget_respected(&attempt("headless", Some("end_turn"), give_up())),
            []
        );
        // A run still going is resumed again, headless.
        assert_eq!(budget_respected(&attempt("headless", None, again())), []);
        assert_one_violation(
            &attempt("headless", None, give_up()),
            "headless resume stopped after attempt 1 of 20, though run run-1 was still going when the client checked it",
        );
    }

    /// letta-protocol.md §4.4 step 7: headless makes 20 resume attempts and waits only between
    /// them, so a wait after the 20th is one the budget does not have.
    #[test]
    fn a_resume_wait_after_the_last_headless_attempt_breaks_the_budget() {
        assert_eq!(budget_respected(&resume_waits(19)), []);
        assert_one_violation(
            &resume_waits(20),
            "resume retry attempt 20 (previous 19) breaks its budget of 19",
        );
    }

    /// letta-protocol.md §3.3: a transient retry waits its delay before the client's next
    /// request. The SDK's retry of the published client's eager cancel, in flight beside the
    /// send, may come within that wait (client_interrupt_approval.toml seed 2 in that
    /// profile); the retried send may not.
    #[test]
    fn the_next_request_after_a_retry_waits_its_delay_and_an_sdk_retry_in_flight_is_not_it() {
        let cancel = |t_ms: u64, retry: u32| {
            client(
                t_ms,
                Observation::ClientRequest {
                    method: "POST".into(),
                    path: "/v1/conversations/agent-1/cancel".into(),
                    retry,
                },
            )
        };
        let send = |t_ms: u64| {
            client(
                t_ms,
                Observation::ClientSend {
                    turn: 2,
                    method: "POST".into(),
                    path: "/v1/conversations/default/messages".into(),
                    items: "user".into(),
                    otids: vec!["otid-1".into()],
                    response_state: false,
                },
            )
        };
        let events = |send_at: u64| {
            vec![
                started_as("letta-code", "interactive"),
                send(90),
                cancel(90, 0),
                client(
                    1_909,
                    Observation::ClientRetry {
                        kind: "transient".into(),
                        attempt: 1,
                        delay_ms: 1000,
                        detail: "Connection error: connect failed: ConnectionRefused".into(),
                        retry_after_ms: None,
                    },
                ),
                cancel(2_389, 1),
                // The cancel's own attempt 0 may come within the wait too (its send failed at
                // once, client_interrupt_tools.toml seed 20).
                cancel(2_400, 0),
                send(send_at),
            ]
        };
        assert_eq!(budget_respected(&events(2_909)), []);
        assert_one_violation(
            &events(2_500),
            "the retry at event 4 announced a 1000 ms wait, but the next request came after 591 ms",
        );
    }
}
