//! Letta end-to-end recordings (`*.exchanges.jsonl`, captures/letta_e2e/PROVENANCE.md: the real
//! CLI and a real server through a recording proxy) as letta-layer recordings. Offsets come
//! from the records' own times: request starts relative to the first request, frame offsets
//! and durations as recorded (rounded to whole ms). Anything the record holds that a cassette
//! cannot keep is an error naming the line and key.

use serde_json::{Map, Value};

use super::{check_reason, kept_headers, unrepresentable};
use crate::cassette::format::{
    Answer, Body, BodyEnd, CassetteError, EndKind, Exchange, Layer, RecordedRequest,
    RecordedResponse, Recording, RecordingHeader, ResponseBody, TimedFrame,
};
use crate::wire::sse::decode_all;

const KEYS: [&str; 16] = [
    "seq",
    "t_start",
    "method",
    "path",
    "request_headers",
    "request_body",
    "status",
    "reason",
    "response_headers",
    "headers_ms",
    "response_body",
    "sse_frames",
    "sse_trailing",
    "body_end",
    "duration_ms",
    "synthesized",
];

/// Milliseconds since 1970 of an ISO-8601 time `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`.
pub(crate) fn iso_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, n: usize| -> Option<i64> {
        let part = s.get(from..from + n)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let mut at = 19;
    let mut ms = 0;
    if b.get(at) == Some(&b'.') {
        let start = at + 1;
        at = start;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        let frac = &s[start..at];
        let three: String = frac.chars().chain("000".chars()).take(3).collect();
        ms = three.parse().ok()?;
    }
    let offset_min = match b.get(at) {
        Some(b'Z') if at + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == at + 6 && b[at + 3] == b':' => {
            let m = num(at + 1, 2)? * 60 + num(at + 4, 2)?;
            if *sign == b'-' { -m } else { m }
        }
        _ => return None,
    };
    // Days from the civil date (proleptic Gregorian), Howard Hinnant's algorithm.
    let (y2, m2) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi - offset_min) * 60_000 + sec * 1000 + ms)
}

fn ms(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.round() as u64
    } else {
        0
    }
}

fn body(source: &str, line: usize, key: &str, v: Option<&Value>) -> Result<Body, CassetteError> {
    match v {
        None | Some(Value::Null) => Ok(Body::Empty),
        Some(Value::Object(m)) if m.contains_key("_raw") => match (m.len(), m.get("_raw")) {
            (1, Some(Value::String(s))) => Ok(Body::from_bytes(s.as_bytes())),
            _ => Err(unrepresentable(
                source,
                Some(line),
                format!("key `{key}`: a `_raw` body is one string and nothing else"),
            )),
        },
        Some(v) => Ok(Body::Json(v.clone())),
    }
}

fn pairs(
    source: &str,
    line: usize,
    key: &str,
    v: Option<&Value>,
) -> Result<Vec<(String, String)>, CassetteError> {
    let Some(Value::Array(items)) = v else {
        return Err(unrepresentable(
            source,
            Some(line),
            format!("key `{key}`: expected [name, value] pairs"),
        ));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.as_array().map(Vec::as_slice) {
            Some([Value::String(k), Value::String(v)]) => out.push((k.clone(), v.clone())),
            _ => {
                return Err(unrepresentable(
                    source,
                    Some(line),
                    format!("key `{key}[{i}]`: expected a [name, value] pair of strings"),
                ));
            }
        }
    }
    Ok(kept_headers(out))
}

fn exchange(
    source: &str,
    line: usize,
    o: &Map<String, Value>,
    prev_seq: &mut Option<u64>,
    t0: &mut Option<i64>,
) -> Result<(Exchange, u64), CassetteError> {
    let err =
        |key: &str, m: String| unrepresentable(source, Some(line), format!("key `{key}`: {m}"));
    if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(err(k, "unknown key; it cannot be kept".into()));
    }
    let num = |key: &str| o.get(key).and_then(Value::as_f64);
    let text = |key: &str| o.get(key).and_then(Value::as_str);
    let seq = o
        .get("seq")
        .and_then(Value::as_u64)
        .ok_or_else(|| err("seq", "expected a number".into()))?;
    if let Some(p) = *prev_seq
        && seq <= p
    {
        return Err(err(
            "seq",
            format!("{seq} after {p} (records are numbered in arrival order)"),
        ));
    }
    *prev_seq = Some(seq);
    let start = text("t_start")
        .and_then(iso_ms)
        .ok_or_else(|| err("t_start", "expected an ISO-8601 time".into()))?;
    let t0 = *t0.get_or_insert(start);
    let t_ms = u64::try_from(start - t0)
        .map_err(|_| err("t_start", "earlier than the first record's".into()))?;
    if o.get("synthesized")
        .is_some_and(|v| v != &Value::Bool(false))
    {
        return Err(err(
            "synthesized",
            "an answer the recording proxy made up, not the server's".into(),
        ));
    }
    if o.get("sse_trailing")
        .is_some_and(|v| !matches!(v, Value::Null) && v != "")
    {
        return Err(err(
            "sse_trailing",
            "bytes after the last complete frame cannot be kept".into(),
        ));
    }
    let method = text("method").ok_or_else(|| err("method", "missing".into()))?;
    let path = text("path").ok_or_else(|| err("path", "missing".into()))?;
    let status = o
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .ok_or_else(|| err("status", "expected an HTTP status".into()))?;
    check_reason(
        source,
        Some(line),
        "reason",
        status,
        text("reason").unwrap_or(""),
    )?;
    let headers_ms = num("headers_ms").ok_or_else(|| err("headers_ms", "missing".into()))?;
    let duration = num("duration_ms").ok_or_else(|| err("duration_ms", "missing".into()))?;
    match text("body_end") {
        Some("eof") => {}
        other => {
            return Err(err(
                "body_end",
                format!("{other:?}: only \"eof\" (the body closed) is known"),
            ));
        }
    }
    let request = RecordedRequest {
        headers: pairs(source, line, "request_headers", o.get("request_headers"))?,
        body: body(source, line, "request_body", o.get("request_body"))?,
    };
    let end_ms = ms(duration - headers_ms);
    let (rbody, last) = match (o.get("sse_frames"), o.get("response_body")) {
        (Some(_), Some(_)) => {
            return Err(err(
                "sse_frames",
                "both `sse_frames` and `response_body`".into(),
            ));
        }
        (Some(Value::Array(frames)), None) => {
            let mut out = Vec::new();
            let mut prev = 0;
            for (i, f) in frames.iter().enumerate() {
                let at = format!("sse_frames[{i}]");
                let Some(f) = f.as_object() else {
                    return Err(err(&at, "expected a frame object".into()));
                };
                if let Some(k) = f
                    .keys()
                    .find(|k| !["ms", "raw", "data", "event"].contains(&k.as_str()))
                {
                    return Err(err(
                        &format!("{at}.{k}"),
                        "unknown key; it cannot be kept".into(),
                    ));
                }
                let raw = f
                    .get("raw")
                    .and_then(Value::as_str)
                    .ok_or_else(|| err(&format!("{at}.raw"), "missing".into()))?;
                let mut parsed = decode_all(format!("{raw}\n\n").as_bytes());
                if parsed.len() != 1 {
                    return Err(err(
                        &format!("{at}.raw"),
                        format!("holds {} SSE frames, not one", parsed.len()),
                    ));
                }
                let t = ms(f.get("ms").and_then(Value::as_f64).unwrap_or(0.0)).max(prev);
                prev = t;
                out.push(TimedFrame {
                    t_ms: t,
                    frame: parsed.remove(0),
                });
            }
            (ResponseBody::Sse(out), prev)
        }
        (Some(_), None) => return Err(err("sse_frames", "expected a list".into())),
        (None, b) => (
            ResponseBody::Whole(body(source, line, "response_body", b)?),
            0,
        ),
    };
    let response = RecordedResponse::Answered(Answer {
        t_ms: ms(headers_ms),
        status,
        headers: pairs(source, line, "response_headers", o.get("response_headers"))?,
        body: rbody,
        end: BodyEnd {
            t_ms: end_ms.max(last),
            kind: EndKind::Clean,
            by_client: false,
        },
    });
    let ends = t_ms + ms(headers_ms) + end_ms.max(last);
    Ok((Exchange::new(t_ms, method, path, request, response), ends))
}

pub(super) fn import(text: &str, source: &str) -> Result<Recording, CassetteError> {
    let mut exchanges = Vec::new();
    let mut t0 = None;
    let mut end = 0;
    let mut seqs = Vec::new();
    let mut prev_seq = None;
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let n = i + 1;
        let o: Map<String, Value> = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => o,
            Ok(_) => {
                return Err(unrepresentable(
                    source,
                    Some(n),
                    "expected a JSON object".into(),
                ));
            }
            Err(e) => return Err(unrepresentable(source, Some(n), format!("not JSON: {e}"))),
        };
        let (x, ends) = exchange(source, n, &o, &mut prev_seq, &mut t0)?;
        seqs.extend(prev_seq);
        if let Some(prev) = exchanges.last().map(|p: &Exchange| p.t_ms)
            && x.t_ms < prev
        {
            return Err(unrepresentable(
                source,
                Some(n),
                "key `t_start`: earlier than the record before (records are in arrival order)"
                    .into(),
            ));
        }
        end = end.max(ends);
        exchanges.push(x);
    }
    let mut note = "the real Letta Code CLI and a real Letta server through a recording proxy; offsets from the records' own times".to_string();
    if let Some(gaps) = numbering_gaps(&seqs) {
        note.push_str(&format!("; the source holds no record numbered {gaps}"));
    }
    Recording::new(
        RecordingHeader {
            layer: Layer::Letta,
            recorder: "sim import (letta_e2e exchanges)".into(),
            source: source.to_string(),
            format: None,
            note: Some(note),
        },
        exchanges,
        end,
        source,
    )
}

#[cfg(test)]
mod tests {
    use super::iso_ms;

    #[test]
    fn iso_times() {
        assert_eq!(iso_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(iso_ms("1970-01-01T00:00:01.5+00:00"), Some(1500));
        assert_eq!(iso_ms("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(
            iso_ms("2026-11-30T00:45:57.045+00:00").unwrap()
                - iso_ms("2026-11-30T00:45:55.195+00:00").unwrap(),
            1850
        );
        assert_eq!(iso_ms("2000-03-01T00:00:00Z"), Some(951_868_800_000));
        assert_eq!(iso_ms("garbage"), None);
    }
}

/// The gaps in a strictly increasing record numbering that starts at 1, as numbers and ranges
/// (`3, 5-9`), the first [`MAX_GAPS_NAMED`] of them: records the source does not hold. Walks
/// the numbers, never the range they span, so a record numbered near `u64::MAX` costs nothing.
fn numbering_gaps(seqs: &[u64]) -> Option<String> {
    let mut gaps = Vec::new();
    let mut next = 1u64;
    for &s in seqs {
        if s > next {
            gaps.push(if s - 1 == next {
                next.to_string()
            } else {
                format!("{next}-{}", s - 1)
            });
        }
        next = s.saturating_add(1);
    }
    if gaps.is_empty() {
        return None;
    }
    let more = gaps.len().saturating_sub(MAX_GAPS_NAMED);
    gaps.truncate(MAX_GAPS_NAMED);
    let mut text = gaps.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more gaps"));
    }
    Some(text)
}

/// How many gaps of a numbering the import's note names.
const MAX_GAPS_NAMED: usize = 20;

#[cfg(test)]
mod gaps_tests {
    use super::numbering_gaps;

    #[test]
    fn gaps_are_named_as_numbers_and_ranges_without_walking_the_range() {
        assert_eq!(numbering_gaps(&[1, 2, 3]), None);
        assert_eq!(numbering_gaps(&[2, 3, 5]).as_deref(), Some("1, 4"));
        assert_eq!(numbering_gaps(&[1, 5, 6]).as_deref(), Some("2-4"));
        // A fuzzed record number near the top of u64 made the import count to it.
        let huge = 999_999_999_999_999_916;
        assert_eq!(
            numbering_gaps(&[1, 2, huge]).as_deref(),
            Some("3-999999999999999915")
        );
        assert_eq!(
            numbering_gaps(&[1, u64::MAX]).as_deref(),
            Some("2-18446744073709551614")
        );
        let many: Vec<u64> = (1..=60).map(|i| i * 2).collect();
        let text = numbering_gaps(&many).unwrap();
        assert!(text.ends_with("and 40 more gaps"), "{text}");
    }
}
