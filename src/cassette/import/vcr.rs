//! vcrpy / pytest-recording YAML cassettes (version 1, as pydantic-ai and others write them) as
//! provider-layer recordings. Each interaction becomes an exchange; the YAML records no timing,
//! so exchanges follow one another and SSE frames are 10 ms apart. Unknown keys, tags, anchors
//! and reason phrases a cassette cannot keep are errors naming them.

use serde_json::{Map, Value};

use super::{check_reason, kept_headers, spaced, unrepresentable, yaml};
use crate::cassette::format::{
    Answer, Body, BodyEnd, CassetteError, EndKind, Exchange, Layer, RecordedRequest,
    RecordedResponse, Recording, RecordingHeader, ResponseBody,
};
use crate::wire::provider::StreamFormat;
use crate::wire::sse::{SseFrame, decode_all};

fn bad(source: &str, at: &str, message: impl std::fmt::Display) -> CassetteError {
    unrepresentable(source, None, format!("`{at}`: {message}"))
}

/// Takes the keys of a mapping one by one; the rest are errors naming them.
fn fields<'a>(
    source: &str,
    at: &str,
    v: &'a Value,
    allowed: &[&str],
) -> Result<&'a Map<String, Value>, CassetteError> {
    let m = v
        .as_object()
        .ok_or_else(|| bad(source, at, "expected a mapping"))?;
    if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(
            source,
            &format!("{at}.{k}"),
            format!(
                "unknown key (a vcrpy cassette here has {}); it cannot be kept",
                allowed.join(", ")
            ),
        ));
    }
    Ok(m)
}

fn headers(
    source: &str,
    at: &str,
    v: Option<&Value>,
) -> Result<Vec<(String, String)>, CassetteError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let m = v
        .as_object()
        .ok_or_else(|| bad(source, at, "expected a mapping of header names"))?;
    let mut out = Vec::new();
    for (k, vals) in m {
        let list: Vec<&Value> = match vals {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        for v in list {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => {
                    return Err(bad(
                        source,
                        &format!("{at}.{k}"),
                        "a header value that is not text",
                    ));
                }
            };
            out.push((k.clone(), s));
        }
    }
    Ok(kept_headers(out))
}

/// A body: `null`, a string, or `{string: …}`.
fn body_bytes(source: &str, at: &str, v: Option<&Value>) -> Result<Vec<u8>, CassetteError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Object(m)) => {
            let m = fields(source, at, &Value::Object(m.clone()), &["string"])?.clone();
            match m.get("string") {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
                Some(_) => Err(bad(source, &format!("{at}.string"), "expected a string")),
            }
        }
        Some(_) => Err(bad(source, at, "expected a string or {string: …}")),
    }
}

/// Splits `scheme://host[:port]/path?query` into the origin and the path and query.
fn split_uri<'a>(
    source: &str,
    at: &str,
    uri: &'a str,
) -> Result<(&'a str, &'a str), CassetteError> {
    let after = uri
        .find("://")
        .map(|i| i + 3)
        .ok_or_else(|| bad(source, at, format!("{uri:?} is not an absolute URI")))?;
    match uri[after..].find('/') {
        Some(i) => Ok((&uri[..after + i], &uri[after + i..])),
        None => Ok((uri, "/")),
    }
}

pub(super) fn import(
    text: &str,
    source: &str,
    format: Option<StreamFormat>,
) -> Result<Recording, CassetteError> {
    let doc = yaml::to_json(text).map_err(|e| unrepresentable(source, Some(e.line), e.message))?;
    let top = fields(source, "(top)", &doc, &["interactions", "version"])?;
    match top.get("version") {
        Some(v) if v.as_u64() == Some(1) => {}
        Some(v) => {
            return Err(bad(
                source,
                "version",
                format!("vcrpy cassette version {v} (this import reads version 1)"),
            ));
        }
        None => return Err(bad(source, "version", "missing")),
    }
    let interactions = top
        .get("interactions")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(source, "interactions", "expected a list"))?;
    let mut exchanges = Vec::new();
    let mut origins: Vec<String> = Vec::new();
    let mut t = 0u64;
    for (i, it) in interactions.iter().enumerate() {
        let at = format!("interactions[{i}]");
        let it = fields(source, &at, it, &["request", "response"])?;
        let rq_at = format!("{at}.request");
        let rq = fields(
            source,
            &rq_at,
            it.get("request").unwrap_or(&Value::Null),
            &["method", "uri", "headers", "body", "parsed_body"],
        )?;
        let method = rq
            .get("method")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(source, &format!("{rq_at}.method"), "missing"))?
            .to_ascii_uppercase();
        let uri = rq
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(source, &format!("{rq_at}.uri"), "missing"))?;
        let (origin, path) = split_uri(source, &format!("{rq_at}.uri"), uri)?;
        if !origins.iter().any(|o| o == origin) {
            origins.push(origin.to_string());
        }
        let request_body = match (rq.get("parsed_body"), rq.get("body")) {
            (Some(p), None | Some(Value::Null)) => Body::Json(p.clone()),
            (Some(_), Some(_)) => {
                return Err(bad(source, &rq_at, "both `body` and `parsed_body`"));
            }
            (None, b) => Body::from_bytes(&body_bytes(source, &format!("{rq_at}.body"), b)?),
        };
        let request = RecordedRequest {
            headers: headers(source, &format!("{rq_at}.headers"), rq.get("headers"))?,
            body: request_body,
        };

        let rs_at = format!("{at}.response");
        let rs = fields(
            source,
            &rs_at,
            it.get("response").unwrap_or(&Value::Null),
            &["status", "headers", "body"],
        )?;
        let st_at = format!("{rs_at}.status");
        let st = fields(
            source,
            &st_at,
            rs.get("status").unwrap_or(&Value::Null),
            &["code", "message"],
        )?;
        let status = st
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| (100..=599).contains(c))
            .ok_or_else(|| bad(source, &format!("{st_at}.code"), "expected an HTTP status"))?;
        let reason = st.get("message").and_then(Value::as_str).unwrap_or("");
        check_reason(source, None, &format!("{st_at}.message"), status, reason)?;
        let rheaders = headers(source, &format!("{rs_at}.headers"), rs.get("headers"))?;
        let bytes = body_bytes(source, &format!("{rs_at}.body"), rs.get("body"))?;
        let sse = rheaders.iter().any(|(k, v)| {
            k == "content-type"
                && v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
        });
        let (body, end_t) = if sse {
            let frames = spaced(decode_all(&bytes));
            let end = frames.len() as u64 * super::DEFAULT_IMPORT_SPACING_MS;
            (ResponseBody::Sse(frames), end)
        } else {
            (ResponseBody::Whole(Body::from_bytes(&bytes)), 0)
        };
        exchanges.push(Exchange::new(
            t,
            method,
            path,
            request,
            RecordedResponse::Answered(Answer {
                t_ms: 0,
                status,
                headers: rheaders,
                body,
                end: BodyEnd {
                    t_ms: end_t,
                    kind: EndKind::Clean,
                    by_client: false,
                },
            }),
        ));
        t += end_t;
    }
    let format = format.or_else(|| session_format(&exchanges));
    Recording::new(
        RecordingHeader {
            layer: Layer::Provider,
            recorder: "sim import (vcrpy YAML)".into(),
            source: source.to_string(),
            format,
            note: Some(format!(
                "a vcrpy cassette: requests to {}; no timing was recorded, so exchanges follow one another and frames are 10 ms apart",
                origins.join(", ")
            )),
        },
        exchanges,
        t,
        source,
    )
}

/// The one stream format every exchange's path (or, failing that, its frames) names, if they
/// agree.
fn session_format(xs: &[Exchange]) -> Option<StreamFormat> {
    let mut found = None;
    for x in xs {
        let frames: Vec<SseFrame> = match x.answer().map(|a| &a.body) {
            Some(ResponseBody::Sse(f)) => f.iter().map(|f| f.frame.clone()).collect(),
            _ => Vec::new(),
        };
        let f = StreamFormat::of_path(&x.path).or_else(|| StreamFormat::detect(&frames));
        match (found, f) {
            (_, None) => {}
            (None, Some(f)) => found = Some(f),
            (Some(a), Some(b)) if a != b => return None,
            _ => {}
        }
    }
    found
}
