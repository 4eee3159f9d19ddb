//! Writing a version 2 cassette: one JSON line per header, exchange and end.

use super::*;

// --- writing ------------------------------------------------------------------------------------

pub(crate) fn push_line(out: &mut String, v: &Value) {
    out.push_str(&v.to_string());
    out.push('\n');
}

/// The header line, `\n`-terminated.
pub fn header_line(h: &RecordingHeader) -> String {
    let mut m = Map::new();
    m.insert("loopsim_cassette".into(), RECORDING_VERSION.into());
    m.insert("layer".into(), h.layer.as_str().into());
    m.insert("recorder".into(), h.recorder.clone().into());
    m.insert("source".into(), h.source.clone().into());
    if let Some(f) = h.format {
        m.insert("format".into(), f.as_str().into());
    }
    if let Some(n) = &h.note {
        m.insert("note".into(), n.clone().into());
    }
    let mut out = String::new();
    push_line(&mut out, &Value::Object(m));
    out
}

/// Exchange `n` (1-based) as its line, `\n`-terminated.
pub fn exchange_line(n: u64, x: &Exchange) -> String {
    let mut m = Map::new();
    m.insert("n".into(), n.into());
    m.insert("t".into(), x.t_ms.into());
    m.insert("method".into(), x.method.clone().into());
    m.insert("path".into(), x.path.clone().into());
    let mut req = Map::new();
    req.insert("headers".into(), headers_value(&x.request.headers));
    if let Some(b) = body_value(&x.request.body) {
        req.insert("body".into(), b);
    }
    m.insert("request".into(), Value::Object(req));
    let mut resp = Map::new();
    match &x.response {
        RecordedResponse::Answered(a) => {
            resp.insert("t".into(), a.t_ms.into());
            resp.insert("status".into(), a.status.into());
            resp.insert("headers".into(), headers_value(&a.headers));
            match &a.body {
                ResponseBody::Whole(b) => {
                    if let Some(b) = body_value(b) {
                        resp.insert("body".into(), b);
                    }
                }
                ResponseBody::Sse(frames) => {
                    resp.insert(
                        "sse".into(),
                        Value::Array(frames.iter().map(frame_value).collect()),
                    );
                }
            }
            let mut end = Map::new();
            end.insert("t".into(), a.end.t_ms.into());
            end.insert("end".into(), a.end.kind.as_str().into());
            if a.end.by_client {
                end.insert("by".into(), "client".into());
            }
            resp.insert("end".into(), Value::Object(end));
        }
        RecordedResponse::Failed { t_ms, error } => {
            resp.insert("t".into(), (*t_ms).into());
            resp.insert("failed".into(), error.clone().into());
        }
    }
    m.insert("response".into(), Value::Object(resp));
    let mut key = Map::new();
    key.insert("method".into(), x.key.method.clone().into());
    key.insert("path".into(), x.key.path.clone().into());
    key.insert("body".into(), x.key.body.clone().into());
    m.insert("key".into(), Value::Object(key));
    let mut out = String::new();
    push_line(&mut out, &Value::Object(m));
    out
}

/// The end line, `\n`-terminated: the session's length and how many exchanges it holds.
pub fn end_line(t_ms: u64, exchanges: u64) -> String {
    let mut m = Map::new();
    m.insert("t".into(), t_ms.into());
    m.insert("end".into(), "complete".into());
    m.insert("exchanges".into(), exchanges.into());
    let mut out = String::new();
    push_line(&mut out, &Value::Object(m));
    out
}

pub(crate) fn headers_value(h: &[(String, String)]) -> Value {
    Value::Array(
        h.iter()
            .map(|(k, v)| Value::Array(vec![k.clone().into(), v.clone().into()]))
            .collect(),
    )
}

pub(crate) fn body_value(b: &Body) -> Option<Value> {
    let (k, v) = match b {
        Body::Empty => return None,
        Body::Json(v) => ("json", v.clone()),
        Body::Text(t) => ("text", Value::String(t.clone())),
        Body::Binary(bytes) => ("base64", Value::String(base64_encode(bytes))),
    };
    let mut m = Map::new();
    m.insert(k.into(), v);
    Some(Value::Object(m))
}

pub(crate) fn frame_value(f: &TimedFrame) -> Value {
    let mut m = Map::new();
    m.insert("t".into(), f.t_ms.into());
    match &f.frame {
        SseFrame::Event(ev) => {
            if let Some(e) = &ev.event {
                m.insert("event".into(), e.clone().into());
            }
            if let Some(id) = &ev.id {
                m.insert("id".into(), id.clone().into());
            }
            if let Some(r) = ev.retry {
                m.insert("retry".into(), r.into());
            }
            m.insert("data".into(), ev.data.clone().into());
        }
        SseFrame::Comment(c) => {
            m.insert("comment".into(), c.clone().into());
        }
    }
    Value::Object(m)
}
