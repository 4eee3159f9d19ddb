//! Thrown values, shaped like the SDK's `APIError` (`{status?, error?, message, headers?}`):
//! `extractConflictDetail` (letta-protocol.md §3.1), the constructors and accessors, and the
//! 503 `cloud_api_shutting_down` rule (§3.3).

use serde_json::{Value, json};

fn non_empty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The detail string of a thrown pre-stream error (letta-protocol.md §3.1; order fixed by the
/// A.3.1 test: `e.error.error.detail`, `e.error.error.message`, `e.error.error` as a string,
/// `e.error` as a string, `e.error.detail`, `e.error.message`, `e.message`, else "").
/// Anything that is not an object (`null`, `42`, `"string"`) gives "".
pub fn extract_conflict_detail(thrown: &Value) -> String {
    let Some(obj) = thrown.as_object() else {
        return String::new();
    };
    let error = obj.get("error");
    if let Some(inner) = error.and_then(|e| e.get("error")) {
        if inner.is_object() {
            if let Some(d) = non_empty_str(inner.get("detail")) {
                return d.to_string();
            }
            if let Some(m) = non_empty_str(inner.get("message")) {
                return m.to_string();
            }
        } else if let Some(s) = inner.as_str().filter(|s| !s.is_empty()) {
            return s.to_string();
        }
    }
    if let Some(s) = error.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        return s.to_string();
    }
    if let Some(e) = error.filter(|e| e.is_object()) {
        // `detail` may itself be an object (capture d3: {code, message, pending_request_id}).
        match e.get("detail") {
            Some(Value::String(s)) if !s.is_empty() => return s.clone(),
            Some(Value::Object(d)) => {
                if let Some(m) = non_empty_str(d.get("message")) {
                    return m.to_string();
                }
            }
            _ => {}
        }
        if let Some(m) = non_empty_str(e.get("message")) {
            return m.to_string();
        }
    }
    non_empty_str(obj.get("message"))
        .map(str::to_string)
        .unwrap_or_default()
}

/// An SDK `APIError` for a non-2xx response (letta-protocol.md §1.1: `error` is the parsed JSON
/// body, or absent with the raw text in the message when the body is not JSON; the message is
/// `"<status> <json or text>"`).
pub fn api_error(status: u16, body: &str, headers: &[(String, String)]) -> Value {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = match &parsed {
        Some(v) => format!("{status} {v}"),
        None => format!("{status} {body}"),
    };
    let mut e = json!({
        "status": status,
        "message": message,
        "headers": headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
    });
    if let Some(p) = parsed {
        e["error"] = p;
    }
    e
}

/// A thrown error without an HTTP status (network failure, SDK parse error, `event: error`).
pub fn transport_error(message: &str) -> Value {
    json!({ "message": message })
}

/// A header of a thrown `APIError` (case-insensitive name).
pub fn error_header<'a>(thrown: &'a Value, name: &str) -> Option<&'a str> {
    thrown.get("headers")?.as_array()?.iter().find_map(|pair| {
        let k = pair.get(0)?.as_str()?;
        (k.eq_ignore_ascii_case(name))
            .then(|| pair.get(1)?.as_str())
            .flatten()
    })
}

pub fn error_status(thrown: &Value) -> Option<u16> {
    thrown
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
}

/// Retried inside the send only when all hold: HTTP 503, `e.error` an object with
/// `errorCode === "cloud_api_shutting_down"`, `admitted === false`, `retryable === true`
/// (letta-protocol.md §3.3).
pub fn is_cloud_shutdown_retryable(thrown: &Value) -> bool {
    if error_status(thrown) != Some(503) {
        return false;
    }
    let Some(e) = thrown.get("error").filter(|e| e.is_object()) else {
        return false;
    };
    e.get("errorCode").and_then(Value::as_str) == Some("cloud_api_shutting_down")
        && e.get("admitted") == Some(&Value::Bool(false))
        && e.get("retryable") == Some(&Value::Bool(true))
}
