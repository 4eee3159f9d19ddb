//! The client's retry and recovery policy (`model::letta::client::policy`) against the policy the
//! published Letta Code CLI runs: its own functions, loaded from its bundle (letta.js of
//! `@letta-ai/letta-code` 0.32.18, installed by tests/interop/setup.sh) by
//! tests/letta/policy_oracle/oracle.cjs. Thousands of generated error details, built from every
//! pattern either side knows (retryable and non-retryable provider wordings, quota reasons, 4xx
//! and 429 codes, Cloudflare edge pages, Z.ai codes, busy and approval-pending texts, run ids)
//! in mixed case and order, with statuses, error types, stop reasons and budgets, are judged by
//! each of the CLI's policy functions and by its port; every answer must be the same.

use std::path::Path;

use loopsim::model::letta::client::policy;
use loopsim::wire::letta::StopReason;
use rand::{RngExt as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use crate::common::{installed_by, node_answers};

/// How many details one run generates (`LOOPSIM_POLICY_ORACLE_CASES`, default 3,000); each is
/// judged by every function, about 45,000 calls.
fn case_count() -> usize {
    std::env::var("LOOPSIM_POLICY_ORACLE_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3_000)
}

/// The generator's seed (`LOOPSIM_POLICY_ORACLE_SEED`).
fn seed() -> u64 {
    std::env::var("LOOPSIM_POLICY_ORACLE_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0x1e77a)
}

/// The CLI's answers to `calls` (`{"fn": name, "args": [...]}`), in order.
fn cli_answers(letta_js: &Path, calls: &[Value]) -> Vec<Value> {
    node_answers(
        "tests/letta/policy_oracle/oracle.cjs",
        &[letta_js.as_os_str()],
        &[],
        calls,
    )
    .into_iter()
    .map(|answer| answer["value"].clone())
    .collect()
}

/// Fragments no pattern list holds: the shapes of codes, pages and ids the policy parses.
const SHAPES: [&str; 35] = [
    "Error code: 4000",
    "error code:4510",
    "Error code:\t404",
    "Cloudflare   524",
    "{'code': 1001 , 'message': 'spaced'}",
    "{'code': 999, 'message': 'unknown'}",
    "{\"code\": 1305, \"message\": \"\"}",
    "{\"code\": 12345, \"message\": \"long\"}",
    "{'code': 999, 'message': 'unknown'} {\"code\": 1001, \"message\": \"bad key\"}",
    "{'code': 500, 'message': 'internal'} {\"code\": 1002, \"message\": \"k\"}",
    "x522 <!DOCTYPE html> cloudflare",
    "Error code: 429",
    "Error code: 404",
    "Error code: 400",
    "Error code:  451",
    "Error code: 452",
    "Error code: 500",
    "error code:413",
    "rate limit",
    "Too Many Requests",
    "Cloudflare 521",
    "cloudflare 530",
    "{\"cloudflare_error\": true, \"status\": 522}",
    "522 <!DOCTYPE html> cloudflare",
    "<html><title>example.com | 524: A timeout occurred</title> cloudflare",
    "error code 502 cloudflare <html>",
    "{\"code\": 1001, \"message\": \"bad key\"}",
    "{'code': 1302, 'message': 'slow down'}",
    "{\"code\": 1200, \"message\": \"api\"}",
    "run_id=run-7f_a",
    "xrun_id=run-b",
    "run_id=",
    "RUN_ID=Run-C9",
    "waiting for approval on a tool call",
    "Conversation is currently being processed",
];

const FILLERS: [&str; 8] = ["", " ", ": ", " (", ") ", "\n", "status=", "detail "];

/// A detail: one to three fragments in random case, joined by filler.
fn detail(rng: &mut ChaCha8Rng, fragments: &[String]) -> String {
    let mut text = String::new();
    for _ in 0..rng.random_range(0..4) {
        text.push_str(FILLERS[rng.random_range(0..FILLERS.len())]);
        let fragment = &fragments[rng.random_range(0..fragments.len())];
        text.push_str(&match rng.random_range(0..5u32) {
            0 => fragment.to_uppercase(),
            1 => fragment.to_lowercase(),
            _ => fragment.clone(),
        });
    }
    text
}

const STATUSES: [Option<u16>; 11] = [
    None,
    Some(200),
    Some(302),
    Some(400),
    Some(404),
    Some(409),
    Some(422),
    Some(429),
    Some(499),
    Some(500),
    Some(503),
];
const ERROR_TYPES: [Option<&str>; 7] = [
    None,
    Some("llm_error"),
    Some("llm_api_error"),
    Some("internal_error"),
    Some("llm_bad_request"),
    Some("llm_insufficient_credits"),
    Some("llm_rate_limit"),
];
const STOP_REASONS: [StopReason; 5] = [
    StopReason::LlmApiError,
    StopReason::Error,
    StopReason::EndTurn,
    StopReason::InvalidLlmResponse,
    StopReason::Cancelled,
];

fn pick<T: Clone>(rng: &mut ChaCha8Rng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())].clone()
}

include!("policy_oracle/dispatch.rs");

/// A `Retry-After` value: seconds as the server may write them, or an IMF-fixdate (the HTTP
/// date form) near the oracle's clock, on and off the calendar's edges.
fn retry_after_value(rng: &mut ChaCha8Rng) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    if rng.random_bool(0.4) {
        return pick(
            rng,
            &[
                "0", "1", "2.5", "120", "0.0004", "1.0005", "3600", "abc", "", " 7 ",
            ],
        )
        .to_owned();
    }
    // ORACLE_NOW_MS is Mon, 30 Nov 2026 00:53:20 GMT.
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        pick(rng, &DAYS),
        rng.random_range(1..29u32),
        pick(rng, &MONTHS),
        pick(rng, &[2025, 2026, 2027, 2100]),
        rng.random_range(0..24u32),
        rng.random_range(0..60u32),
        rng.random_range(0..60u32)
    )
}

/// Every policy question about one generated detail, as calls of the client's functions.
fn calls_of(rng: &mut ChaCha8Rng, text: &str) -> Vec<Value> {
    let as_value = if rng.random_bool(0.05) {
        pick(rng, &[json!(42), Value::Null, json!({"detail": text})])
    } else {
        json!(text)
    };
    let status = pick(rng, &STATUSES);
    let error_type = pick(rng, &ERROR_TYPES);
    let stop = pick(rng, &STOP_REASONS);
    let retryable = pick(rng, &[None, Some(true), Some(false)]);
    let (retries, max) = (rng.random_range(0..4u32), rng.random_range(0..4u32));
    let attempt = rng.random_range(1..5u32);
    let retry_after = pick(rng, &[None, Some(0u64), Some(2500)]);
    let busy_retries = rng.random_range(0..4u32);
    let transient = rng.random_bool(0.7).then(|| {
        json!({"status": status, "transientRetries": rng.random_range(0..4u32),
               "maxTransientRetries": rng.random_range(0..4u32)})
    });
    let call = |name: &str, args: Value| json!({"fn": name, "args": args});
    let mut calls = vec![
        call("isApprovalPendingError", json!([as_value])),
        call("isConversationBusyError", json!([as_value])),
        call("isInvalidToolCallIdsError", json!([as_value])),
        call("isEmptyResponseError", json!([as_value])),
        call("extractConversationBusyRunId", json!([text])),
        call("classifyPreStreamConflict", json!([text])),
        call("isCloudflareEdge52xErrorText", json!([text])),
        call("isZaiNonRetryableError", json!([text])),
        call("hasNonRetryableQuotaDetail", json!([text])),
        call("isRetryableProviderErrorDetail", json!([text])),
        call("isConversationBusyErrorText", json!([text])),
        call("parseRetryAfterHeaderMs", json!([retry_after_value(rng)])),
        call("isNonRetryableProviderErrorDetail", json!([text])),
        call(
            "shouldRetryPreStreamTransientError",
            json!([{"status": status, "detail": text}]),
        ),
        call("shouldRetryRunMetadataError", json!([error_type, text])),
        call(
            "shouldRetryPostStreamRunError",
            json!([{"stopReason": stop.as_str(), "errorType": error_type, "detail": text,
                    "retryable": retryable}]),
        ),
        call(
            "isEmptyResponseRetryable",
            json!([error_type, text, retries, max]),
        ),
        call(
            "shouldAttemptApprovalRecovery",
            json!([{"approvalPendingDetected": retryable == Some(true), "retries": retries,
                    "maxRetries": max}]),
        ),
        call(
            "getPreStreamErrorAction",
            match transient {
                Some(opts) => json!([text, busy_retries, max, opts]),
                None => json!([text, busy_retries, max]),
            },
        ),
    ];
    for category in ["transient_provider", "conversation_busy", "empty_response"] {
        calls.push(call(
            "getRetryDelayMs2",
            json!([{"category": category, "attempt": attempt, "detail": text,
                    "retryAfterMs": retry_after}]),
        ));
    }
    calls
}

#[test]
fn the_policy_answers_every_generated_question_as_the_published_cli_does() {
    let Some(letta_js) = installed_by("tests/interop/setup.sh") else {
        return;
    };
    // Every pattern the CLI's lists hold, read from the bundle, beside the shapes above.
    let lists = cli_answers(&letta_js, &[json!({"fn": "__patternLists", "args": []})]);
    let mut fragments: Vec<String> = SHAPES.iter().map(|s| (*s).to_owned()).collect();
    for list in lists[0].as_array().expect("the lists") {
        for pattern in list.as_array().expect("a list") {
            fragments.push(pattern.as_str().expect("a string pattern").to_owned());
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed());
    let calls: Vec<Value> = (0..case_count())
        .flat_map(|_| {
            let text = detail(&mut rng, &fragments);
            calls_of(&mut rng, &text)
        })
        .collect();
    let answers = cli_answers(&letta_js, &calls);
    if let Some(file) = std::env::var_os("LOOPSIM_POLICY_ORACLE_DUMP") {
        // Each call with the client's answer, one JSON line each: tests/mutants/policy.sh judges
        // mutants of the port against them without Node.
        let lines: String = calls
            .iter()
            .zip(&answers)
            .map(|(call, cli)| format!("{}\n", json!({"call": call, "cli": cli})))
            .collect();
        std::fs::write(&file, lines).expect("the dump file is writable");
    }
    let differences: Vec<String> = calls
        .iter()
        .zip(&answers)
        .filter_map(|(call, cli)| {
            let model = model_answer(call);
            (model != *cli).then(|| format!("{call}\n  model: {model}\n  cli:   {cli}"))
        })
        .collect();
    println!(
        "policy oracle: seed {}, {} calls over {} details and {} fragments, {} answered differently",
        seed(),
        calls.len(),
        case_count(),
        fragments.len(),
        differences.len()
    );
    assert!(
        differences.is_empty(),
        "{} of {} calls differ from Letta Code 0.32.18; the first:\n\n{}",
        differences.len(),
        calls.len(),
        differences[..differences.len().min(8)].join("\n\n")
    );
}
