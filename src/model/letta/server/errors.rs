//! The error answers of the HTTP surface, shaped as a FastAPI server answers: `{"detail": …}`
//! with the status, the deliberate 409, FastAPI's 422 validation list, and the not-found texts
//! of each kind of object.

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::RetryAfter;
use super::ServerConfig;
use super::ids;
use super::store::DEFAULT_USER;
use crate::model::port::env::Env;
use crate::model::port::http::{self, Body};
use crate::model::port::observe::Observation;

/// `{"detail": text}` with `status`.
pub(crate) fn detail(status: StatusCode, text: &str) -> Response<Body> {
    http::json_response(status, &json!({ "detail": text }))
}

/// A deliberate 409: `{"detail": …}` plus `x-should-retry: false`, so SDKs (which retry 409 by
/// default, reference B.6) hand it to the caller at once. Letta 0.16.8 sends no such header
/// (captures/letta_e2e flow e; captures/letta_server e1/d3 headers); this is a deliberate
/// difference of the cloud and local profiles, docs/server.md, and `letta-oss-0.16` omits it.
pub(crate) fn conflict(config: &ServerConfig, body: Value) -> Response<Body> {
    let mut resp = http::json_response(StatusCode::CONFLICT, &body);
    if config.profile.oss() {
        return resp;
    }
    resp.headers_mut().insert(
        "x-should-retry",
        hyper::header::HeaderValue::from_static("false"),
    );
    resp
}

/// 422 for a body that is not valid JSON or not the expected shape (FastAPI's validation
/// answer: `detail` is a list of errors).
pub(crate) fn unprocessable(msg: &str) -> Response<Body> {
    http::json_response(
        StatusCode::UNPROCESSABLE_ENTITY,
        &json!({"detail": [{"type": "json_invalid", "loc": ["body"], "msg": msg}]}),
    )
}

/// FastAPI's rule for a JSON body (fastapi/routing.py, `get_request_handler`): a body with no
/// `Content-Type` is parsed as JSON, one whose type is `application/json` or
/// `application/*+json` too; any other type leaves the body raw bytes, which fail validation as
/// a model with FastAPI's 422. Only methods that carry a body here (POST, PUT, PATCH) are
/// checked; the answer is FastAPI's validation error for a value that is not an object (the
/// Letta captures hold no such request: docs/server.md, "Deliberate differences").
pub(crate) fn not_json_content(
    parts: &hyper::http::request::Parts,
    body: &[u8],
) -> Option<Response<Body>> {
    use hyper::Method;
    if body.is_empty() || !matches!(parts.method, Method::POST | Method::PUT | Method::PATCH) {
        return None;
    }
    let value = parts.headers.get(hyper::header::CONTENT_TYPE)?;
    let media = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json = match media.split_once('/') {
        Some(("application", sub)) => sub == "json" || sub.ends_with("+json"),
        _ => false,
    };
    (!json).then(|| {
        http::json_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            &json!({"detail": [{
                "type": "model_attributes_type",
                "loc": ["body"],
                "msg": "Input should be a valid dictionary or object to extract fields from",
                "input": String::from_utf8_lossy(body),
            }]}),
        )
    })
}

/// Unknown conversation. Letta 0.16.8's text is not captured; this one names the id the way
/// its other not-found errors do (docs/server.md, "Deliberate differences").
pub(crate) fn not_found_conversation(id: &str) -> Response<Body> {
    detail(
        StatusCode::NOT_FOUND,
        &format!("Conversation not found with id='{id}'"),
    )
}

pub(crate) fn not_found_agent(id: &str) -> Response<Body> {
    detail(
        StatusCode::NOT_FOUND,
        &format!("Agent not found with id='{id}'"),
    )
}

/// Unknown run (capture f5). The actor's `updated_at` is a Python `datetime` repr there; the
/// `letta-oss-0.16` profile prints the server's time zero that way (the default user is made at
/// start-up), the other profiles print `None`.
pub(crate) fn not_found_run(config: &ServerConfig, epoch_ms: u64, id: &str) -> Response<Body> {
    let updated_at = if config.profile.oss() {
        ids::py_datetime(epoch_ms)
    } else {
        "None".to_string()
    };
    detail(
        StatusCode::NOT_FOUND,
        &format!(
            "Run not found with id='['{id}']', access level in ['read'] for actor='id='{DEFAULT_USER}' organization_id='org-00000000-0000-4000-8000-000000000000' name='default_user' created_at=None updated_at={updated_at} is_deleted=False'"
        ),
    )
}

pub(crate) fn not_found() -> Response<Body> {
    detail(StatusCode::NOT_FOUND, "Not Found")
}

pub(crate) fn method_not_allowed() -> Response<Body> {
    detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
}

/// Writes `Retry-After` on an error answer, in seconds or as an HTTP date that far after
/// `now_ms` (letta-protocol.md §3.8 reads both), and reports what it asked for
/// (`server_retry_after`), the oracle of the client's reading.
pub(crate) fn add_retry_after<E: Env>(
    env: &E,
    config: &ServerConfig,
    answer: &mut Response<Body>,
    retry_after: RetryAfter,
    now_ms: u64,
) {
    let header = match retry_after {
        RetryAfter::Seconds(s) => s.to_string(),
        RetryAfter::DateIn(_) | RetryAfter::BrokenDate(..) => {
            let at_ms = env.epoch_ms() + now_ms + retry_after.wait_ms();
            let mut date = ids::http_date(at_ms);
            if config.bugs.weekday_from_monday {
                // The planted defect indexes a Monday-first table by days since 1970-01-01,
                // which was a Thursday: every weekday it writes is three days early.
                const MONDAY_FIRST: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
                date.replace_range(0..3, MONDAY_FIRST[(at_ms / 86_400_000 % 7) as usize]);
            }
            match retry_after {
                RetryAfter::BrokenDate(_, field) => field.break_in(&date),
                _ => date,
            }
        }
    };
    env.observe(Observation::ServerRetryAfter {
        status: answer.status().as_u16(),
        header: header.clone(),
        wait_ms: retry_after.wait_ms(),
        dated: !matches!(retry_after, RetryAfter::Seconds(_)),
        broken: match retry_after {
            RetryAfter::BrokenDate(_, field) => Some(field.as_str().to_string()),
            _ => None,
        },
    });
    if let Ok(value) = hyper::header::HeaderValue::from_str(&header) {
        answer
            .headers_mut()
            .insert(hyper::header::RETRY_AFTER, value);
    }
}
