//! Matching a live request to a recorded exchange. Pure.
//!
//! Each exchange of a version 2 cassette records a key: its method, its path with volatile ids
//! masked, and a hash of its canonical body. The canonical body is the (scrubbed) body with its
//! object keys sorted and every UUID and ISO-8601 timestamp masked, so a client that sends the
//! same request with a fresh `otid` or a new local time still matches. docs/cassette.md
//! ("Matching") is the specification.

use std::fmt::Write as _;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::format::{Body, Exchange, MatchKey};

/// What volatile values become in the canonical form.
pub const UUID_MASK: &str = "<uuid>";
pub const TIME_MASK: &str = "<time>";

/// The key of a request: method, masked path and query, canonical body hash.
pub fn key_of(method: &str, path: &str, body: &Body) -> MatchKey {
    MatchKey {
        method: method.to_ascii_uppercase(),
        path: mask_volatile(path),
        body: body_hash(body),
    }
}

/// `sha256:` and the hex digest of the canonical body.
pub fn body_hash(body: &Body) -> String {
    let canonical: Vec<u8> = match body {
        Body::Empty => Vec::new(),
        Body::Json(v) => canonical_json(v).into_bytes(),
        Body::Text(t) => mask_volatile(t).into_bytes(),
        Body::Binary(b) => b.clone(),
    };
    let digest = Sha256::digest(&canonical);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Compact JSON with object keys sorted and volatile values masked inside every string
/// (keys included).
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, &Value)> =
                map.iter().map(|(k, v)| (mask_volatile(k), v)).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::String(s) => out.push_str(&Value::String(mask_volatile(s)).to_string()),
        other => out.push_str(&other.to_string()),
    }
}

/// Replaces every UUID (8-4-4-4-12 hex digits) with [`UUID_MASK`] and every ISO-8601 date-time
/// (`YYYY-MM-DDTHH:MM`, with any seconds, fraction and zone that follow) with [`TIME_MASK`],
/// and the local-time line Letta Code puts in its reminders (`**Local time**: …`) with
/// [`TIME_MASK`] up to the end of the line.
pub fn mask_volatile(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        let found = if let Some(n) = uuid_at(b, i) {
            Some((n, UUID_MASK))
        } else if let Some(n) = iso_time_at(b, i) {
            Some((n, TIME_MASK))
        } else {
            local_time_at(s, i).map(|n| (n, TIME_MASK))
        };
        if let Some((n, mask)) = found {
            out.push_str(&s[copied..i]);
            out.push_str(mask);
            i += n;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&s[copied..]);
    out
}

fn hex_run(b: &[u8], at: usize, n: usize) -> bool {
    b.len() >= at + n && b[at..at + n].iter().all(u8::is_ascii_hexdigit)
}

fn uuid_at(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && b[i - 1].is_ascii_hexdigit() {
        return None;
    }
    let mut at = i;
    for (k, n) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if !hex_run(b, at, n) {
            return None;
        }
        at += n;
        if k < 4 {
            if b.get(at) != Some(&b'-') {
                return None;
            }
            at += 1;
        }
    }
    if b.get(at).is_some_and(u8::is_ascii_hexdigit) {
        return None;
    }
    Some(at - i)
}

fn digits(b: &[u8], at: usize, n: usize) -> bool {
    b.len() >= at + n && b[at..at + n].iter().all(u8::is_ascii_digit)
}

fn iso_time_at(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && b[i - 1].is_ascii_digit() {
        return None;
    }
    let shape = digits(b, i, 4)
        && b.get(i + 4) == Some(&b'-')
        && digits(b, i + 5, 2)
        && b.get(i + 7) == Some(&b'-')
        && digits(b, i + 8, 2)
        && matches!(b.get(i + 10), Some(b'T' | b' '))
        && digits(b, i + 11, 2)
        && b.get(i + 13) == Some(&b':')
        && digits(b, i + 14, 2);
    if !shape {
        return None;
    }
    let mut at = i + 16;
    if b.get(at) == Some(&b':') && digits(b, at + 1, 2) {
        at += 3;
    }
    if b.get(at) == Some(&b'.') {
        at += 1;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
    }
    if b.get(at) == Some(&b'Z') {
        at += 1;
    } else if matches!(b.get(at), Some(b'+' | b'-'))
        && digits(b, at + 1, 2)
        && b.get(at + 3) == Some(&b':')
        && digits(b, at + 4, 2)
    {
        at += 6;
    }
    Some(at - i)
}

const LOCAL_TIME: &str = "**Local time**: ";

/// At the time that follows a `**Local time**: ` label (the label itself stays), its length up
/// to the end of the line.
fn local_time_at(s: &str, i: usize) -> Option<usize> {
    if !s.get(..i)?.ends_with(LOCAL_TIME) {
        return None;
    }
    let rest = s.get(i..)?;
    let n = rest.find('\n').unwrap_or(rest.len());
    (n > 0 && !rest.starts_with(TIME_MASK)).then_some(n)
}

/// How close a recorded exchange is to a request, best first: the same key; the same method
/// and masked path; the same masked path with another method; the same method; anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Closeness {
    SameKey,
    SamePath,
    SamePathOtherMethod,
    SameMethod,
    Other,
}

/// How a request relates to one recorded exchange.
pub fn closeness(request: &MatchKey, recorded: &MatchKey) -> Closeness {
    let same_method = request.method == recorded.method;
    if request == recorded {
        Closeness::SameKey
    } else if request.path == recorded.path {
        if same_method {
            Closeness::SamePath
        } else {
            Closeness::SamePathOtherMethod
        }
    } else if same_method {
        Closeness::SameMethod
    } else {
        Closeness::Other
    }
}

/// What to match on. vcrpy matches on method and URI by default; the body is an extra matcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatchOn {
    /// Method and exact path and query; among several unplayed candidates the one whose body
    /// hash also matches is preferred, then recorded order.
    #[default]
    MethodPath,
    /// Method, exact path and query, and the canonical body hash.
    MethodPathBody,
}

/// The recorded exchange (0-based index) that answers a request: the first not yet played, in
/// recorded order, that matches by `on`, preferring one whose body hash matches too.
pub fn find(
    exchanges: &[Exchange],
    played: &[bool],
    method: &str,
    path: &str,
    body: &Body,
    on: MatchOn,
) -> Option<usize> {
    let key = key_of(method, path, body);
    let candidates = exchanges.iter().enumerate().filter(|(i, x)| {
        !played.get(*i).copied().unwrap_or(false)
            && x.method.eq_ignore_ascii_case(method)
            && x.path == path
    });
    let mut fallback = None;
    for (i, x) in candidates {
        if x.key.body == key.body {
            return Some(i);
        }
        if on == MatchOn::MethodPath && fallback.is_none() {
            fallback = Some(i);
        }
    }
    fallback
}

/// The recorded exchange nearest a request that nothing answers (0-based index), for the
/// error message: the closest by [`Closeness`]; among equals, the exact path, then the longest
/// common path prefix, then unplayed before played, then the earliest.
pub fn nearest(
    exchanges: &[Exchange],
    played: &[bool],
    method: &str,
    path: &str,
    body: &Body,
) -> Option<usize> {
    let key = key_of(method, path, body);
    exchanges
        .iter()
        .enumerate()
        .min_by_key(|(i, x)| {
            let common = x
                .path
                .bytes()
                .zip(path.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            (
                closeness(&key, &x.key),
                x.path != path,
                std::cmp::Reverse(common),
                played.get(*i).copied().unwrap_or(false),
                *i,
            )
        })
        .map(|(i, _)| i)
}

/// The first place two JSON values differ, as a path (`messages[0].content`), or `None` when
/// they are equal after canonicalisation.
pub fn first_difference(a: &Value, b: &Value) -> Option<String> {
    fn walk(a: &Value, b: &Value, at: &str) -> Option<String> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let here = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    match (x.get(k), y.get(k)) {
                        (Some(p), Some(q)) => {
                            if let Some(d) = walk(p, q, &here) {
                                return Some(d);
                            }
                        }
                        _ => return Some(here),
                    }
                }
                None
            }
            (Value::Array(x), Value::Array(y)) => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    if let Some(d) = walk(p, q, &format!("{at}[{i}]")) {
                        return Some(d);
                    }
                }
                (x.len() != y.len()).then(|| format!("{at}[{}]", x.len().min(y.len())))
            }
            (Value::String(x), Value::String(y)) => {
                (mask_volatile(x) != mask_volatile(y)).then(|| at.to_string())
            }
            (x, y) => (x != y).then(|| at.to_string()),
        }
    }
    walk(a, b, "").map(|p| {
        if p.is_empty() {
            "(the whole body)".into()
        } else {
            p
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volatile_values_are_masked() {
        assert_eq!(
            mask_volatile("conv-44abc869-75b9-4867-9d99-8eaa68d6d4ee/messages"),
            "conv-<uuid>/messages"
        );
        assert_eq!(
            mask_volatile("at 2026-11-30T00:45:57.045+00:00 and 2026-11-30 00:45"),
            "at <time> and <time>"
        );
        assert_eq!(
            mask_volatile("x12345678-1234-1234-1234-1234567890ab"),
            "x<uuid>"
        );
        assert_eq!(
            mask_volatile("112345678-1234-1234-1234-1234567890ab"),
            "112345678-1234-1234-1234-1234567890ab"
        );
        assert_eq!(
            mask_volatile("- **Local time**: Monday, November 30, 2026 at 12:45 AM UTC\n- next"),
            "- **Local time**: <time>\n- next"
        );
        assert_eq!(mask_volatile("plain"), "plain");
    }

    #[test]
    fn canonical_json_sorts_keys_and_masks() {
        let a: Value = serde_json::from_str(
            r#"{"b":1,"a":{"otid":"45e8bd2b-7c1e-410c-9994-dc3ea6da61a5","z":[true,null]}}"#,
        )
        .unwrap();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"otid":"<uuid>","z":[true,null]},"b":1}"#
        );
        let b: Value = serde_json::from_str(
            r#"{"a":{"z":[true,null],"otid":"00000000-0000-4000-8000-000000000000"},"b":1}"#,
        )
        .unwrap();
        assert_eq!(
            body_hash(&Body::Json(a.clone())),
            body_hash(&Body::Json(b.clone()))
        );
        assert_eq!(first_difference(&a, &b), None);
        let c: Value = serde_json::from_str(r#"{"a":{"z":[false,null]},"b":1}"#).unwrap();
        assert_eq!(first_difference(&a, &c).as_deref(), Some("a.otid"));
    }
}
