//! Scrubbing secrets out of what a cassette keeps. Pure. docs/cassette.md ("Scrubbing") is the
//! specification; `sim record` applies it to everything before it is written, and to a live
//! request before it is matched, so a key never depends on a secret.
//!
//! By default: the values of `authorization`, `proxy-authorization`, `x-api-key`, `api-key`,
//! `x-goog-api-key`, `cookie`, `set-cookie` and any header whose name looks secret (below);
//! query parameters and JSON fields (anywhere, at any depth, in requests, responses and SSE
//! data) whose name looks secret, when their value is a string; and, in every string, bearer
//! tokens and well-known API key shapes. A name looks secret when, lower-cased with `-` read as
//! `_`, it is `key`, ends in `_key` or `apikey`, or contains `secret`, `token`, `password` or
//! `credential`. Numbers, booleans, objects and arrays under such a name are not secrets (usage
//! counts such as `max_tokens`, schemas such as `properties.api_key`): objects and arrays are
//! searched further.

use serde_json::Value;

use super::format::Body;

/// What a secret becomes.
pub const PLACEHOLDER: &str = "[scrubbed]";

const SECRET_HEADERS: [&str; 7] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
    "set-cookie",
];

/// True when a header, query parameter or JSON field name looks secret (module docs).
pub fn name_looks_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace('-', "_");
    n == "key"
        || n.ends_with("_key")
        || n.ends_with("apikey")
        || n.contains("secret")
        || n.contains("token")
        || n.contains("password")
        || n.contains("credential")
}

/// A JSON path to scrub: dot-separated keys, `[n]` or `.n` for an array index, `*` or `[*]`
/// for any key or index; an optional leading `$.`. `messages[*].content`, `metadata.email`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    segments: Vec<Segment>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
    Any,
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let body = text.strip_prefix("$.").unwrap_or(text);
        let body = body.strip_prefix('$').unwrap_or(body);
        let mut segments = Vec::new();
        for part in body.split('.') {
            let (name, mut rest) = match part.find('[') {
                Some(i) => (&part[..i], &part[i..]),
                None => (part, ""),
            };
            if !name.is_empty() {
                segments.push(match name {
                    "*" => Segment::Any,
                    n => match n.parse::<usize>() {
                        Ok(i) => Segment::Index(i),
                        Err(_) => Segment::Key(n.to_string()),
                    },
                });
            } else if rest.is_empty() {
                return Err(format!("JSON path {text:?}: empty segment"));
            }
            while !rest.is_empty() {
                let close = rest
                    .find(']')
                    .ok_or_else(|| format!("JSON path {text:?}: `[` without `]`"))?;
                let inner = &rest[1..close];
                segments.push(if inner == "*" {
                    Segment::Any
                } else {
                    Segment::Index(inner.parse().map_err(|_| {
                        format!("JSON path {text:?}: `[{inner}]` is not an index or `*`")
                    })?)
                });
                rest = &rest[close + 1..];
                if !rest.is_empty() && !rest.starts_with('[') {
                    return Err(format!("JSON path {text:?}: unexpected {rest:?}"));
                }
            }
        }
        if segments.is_empty() {
            return Err(format!("JSON path {text:?} names nothing"));
        }
        Ok(JsonPath {
            segments,
            text: text.to_string(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The scrubbing rules: the defaults and what the user added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scrubber {
    /// More header names to scrub (compared case-insensitively).
    pub headers: Vec<String>,
    /// JSON paths whose values (of any type) are scrubbed, in every JSON body and SSE data.
    pub json_paths: Vec<JsonPath>,
}

impl Scrubber {
    /// The defaults plus `headers` and `json_paths` (each parsed; a bad path is an error naming
    /// it).
    pub fn new(headers: &[String], json_paths: &[String]) -> Result<Scrubber, String> {
        Ok(Scrubber {
            headers: headers.iter().map(|h| h.to_ascii_lowercase()).collect(),
            json_paths: json_paths
                .iter()
                .map(|p| JsonPath::parse(p))
                .collect::<Result<_, _>>()?,
        })
    }

    fn header_is_secret(&self, name: &str) -> bool {
        let n = name.to_ascii_lowercase();
        SECRET_HEADERS.contains(&n.as_str()) || self.headers.contains(&n) || name_looks_secret(&n)
    }

    /// A header's value as kept: a secret header's value is replaced (an `authorization`
    /// value keeps its scheme word, `Bearer [scrubbed]`); any other value has its token shapes
    /// replaced.
    pub fn header(&self, name: &str, value: &str) -> String {
        if !self.header_is_secret(name) {
            return scrub_text(value);
        }
        let lower = name.to_ascii_lowercase();
        if lower.ends_with("authorization")
            && let Some((scheme, rest)) = value.split_once(' ')
            && !rest.is_empty()
            && scheme.chars().all(|c| c.is_ascii_alphabetic())
        {
            return format!("{scheme} {PLACEHOLDER}");
        }
        PLACEHOLDER.to_string()
    }

    /// Every header of a list, scrubbed.
    pub fn headers(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|(k, v)| (k.clone(), self.header(k, v)))
            .collect()
    }

    /// A path and query: query parameters whose name looks secret get the placeholder, and
    /// token shapes anywhere are replaced.
    pub fn path(&self, path_and_query: &str) -> String {
        let Some((path, query)) = path_and_query.split_once('?') else {
            return scrub_text(path_and_query);
        };
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, v)) if !v.is_empty() && name_looks_secret(&percent_decode(k)) => {
                    format!("{k}={PLACEHOLDER}")
                }
                _ => scrub_text(p),
            })
            .collect();
        format!("{}?{}", scrub_text(path), params.join("&"))
    }

    /// A body: JSON by field names, paths and token shapes; text and binary by token shapes.
    pub fn body(&self, body: Body) -> Body {
        match body {
            Body::Empty => Body::Empty,
            Body::Json(mut v) => {
                self.json(&mut v);
                Body::Json(v)
            }
            Body::Text(t) => Body::Text(scrub_text(&t)),
            Body::Binary(b) => Body::Binary(scrub_bytes(&b)),
        }
    }

    /// One SSE `data` (or comment) string. Token shapes are replaced in the text itself, so
    /// the data keeps its bytes; JSON data is then scrubbed by field names and paths and, only
    /// when that replaced something, written back compactly.
    pub fn sse_data(&self, data: &str) -> String {
        let text = scrub_text(data);
        if let Ok(mut v) = serde_json::from_str::<Value>(&text)
            && (v.is_object() || v.is_array())
            && self.json(&mut v)
        {
            return v.to_string();
        }
        text
    }

    /// Scrubs a JSON value in place; true when anything changed.
    pub fn json(&self, v: &mut Value) -> bool {
        let mut changed = false;
        for p in &self.json_paths {
            changed |= scrub_path(v, &p.segments);
        }
        changed | scrub_fields(v)
    }
}

fn scrub_path(v: &mut Value, segments: &[Segment]) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        if *v == Value::String(PLACEHOLDER.into()) {
            return false;
        }
        *v = Value::String(PLACEHOLDER.into());
        return true;
    };
    let mut changed = false;
    match (first, v) {
        (Segment::Key(k), Value::Object(m)) => {
            if let Some(x) = m.get_mut(k) {
                changed |= scrub_path(x, rest);
            }
        }
        (Segment::Index(i), Value::Array(a)) => {
            if let Some(x) = a.get_mut(*i) {
                changed |= scrub_path(x, rest);
            }
        }
        (Segment::Any, Value::Object(m)) => {
            for x in m.values_mut() {
                changed |= scrub_path(x, rest);
            }
        }
        (Segment::Any, Value::Array(a)) => {
            for x in a.iter_mut() {
                changed |= scrub_path(x, rest);
            }
        }
        _ => {}
    }
    changed
}

fn scrub_fields(v: &mut Value) -> bool {
    match v {
        Value::Object(m) => {
            let mut changed = false;
            for (k, x) in m.iter_mut() {
                if let Value::String(s) = x
                    && name_looks_secret(k)
                    && !s.is_empty()
                    && s != PLACEHOLDER
                {
                    *x = Value::String(PLACEHOLDER.into());
                    changed = true;
                } else {
                    changed |= scrub_fields(x);
                }
            }
            changed
        }
        Value::Array(a) => a.iter_mut().fold(false, |c, x| scrub_fields(x) | c),
        Value::String(s) => {
            let t = scrub_text(s);
            if t != *s {
                *s = t;
                true
            } else {
                false
            }
        }
        _ => false,
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len() + 1
            && let Some(h) = s.get(i + 1..i + 3)
            && let Ok(x) = u8::from_str_radix(h, 16)
        {
            out.push(x);
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'~' | b'+' | b'/' | b'=' | b'-')
}

fn key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-')
}

/// A known API key shape: a prefix, the characters allowed after it and the fewest of them.
type KeyShape = (&'static str, fn(u8) -> bool, usize);

const KEY_SHAPES: [KeyShape; 8] = [
    ("sk-", key_char, 16),
    ("AIza", key_char, 30),
    ("ghp_", key_char, 20),
    ("gho_", key_char, 20),
    ("github_pat_", key_char, 20),
    ("xoxb-", key_char, 10),
    ("xoxp-", key_char, 10),
    ("AKIA", |c| c.is_ascii_uppercase() || c.is_ascii_digit(), 16),
];

/// The length of a secret that starts at `i`, and what replaces it.
fn secret_at(b: &[u8], i: usize) -> Option<(usize, String)> {
    if i > 0 && b[i - 1].is_ascii_alphanumeric() {
        return None;
    }
    // `Bearer <token>` (any case), keeping the word.
    if b.len() >= i + 7 && b[i..i + 6].eq_ignore_ascii_case(b"bearer") && b[i + 6] == b' ' {
        let mut at = i + 7;
        while b.get(at) == Some(&b' ') {
            at += 1;
        }
        let start = at;
        while b.get(at).copied().is_some_and(token_char) {
            at += 1;
        }
        if at - start >= 8 {
            let word = String::from_utf8_lossy(&b[i..i + 6]).into_owned();
            return Some((at - i, format!("{word} {PLACEHOLDER}")));
        }
    }
    for (prefix, ok, min) in KEY_SHAPES {
        let p = prefix.as_bytes();
        if b.len() >= i + p.len() && &b[i..i + p.len()] == p {
            let mut at = i + p.len();
            while b.get(at).copied().is_some_and(ok) {
                at += 1;
            }
            if at - i - p.len() >= min {
                return Some((at - i, PLACEHOLDER.to_string()));
            }
        }
    }
    None
}

fn scrub_bytes(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if let Some((n, with)) = secret_at(b, i) {
            out.extend_from_slice(with.as_bytes());
            i += n;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Replaces bearer tokens and known API key shapes in free text.
pub fn scrub_text(s: &str) -> String {
    // Every pattern is ASCII and ends at an ASCII boundary, so the result stays UTF-8.
    let out = scrub_bytes(s.as_bytes());
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_that_look_secret() {
        for n in [
            "api_key",
            "x-api-key",
            "apiKey",
            "client_secret",
            "access_token",
            "refresh-token",
            "password",
            "key",
            "aws_credentials",
        ] {
            assert!(name_looks_secret(n), "{n}");
        }
        for n in ["model", "keys", "monkey", "message_type", "input"] {
            assert!(!name_looks_secret(n), "{n}");
        }
    }

    #[test]
    fn json_fields_strings_and_paths() {
        let s = Scrubber::new(&[], &["metadata.email".into(), "messages[*].name".into()]).unwrap();
        let mut v = json!({
            "api_key": "abc", "max_tokens": 1024,
            "usage": {"output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 1}},
            "tools": [{"properties": {"api_key": {"type": "string"}}}],
            "metadata": {"email": "a@b.c"},
            "messages": [{"name": "x", "content": "use Bearer abcdefgh12345678 and sk-ant-api03-aaaaaaaaaaaaaaaaaaaa"}],
        });
        assert!(s.json(&mut v));
        assert_eq!(v["api_key"], PLACEHOLDER);
        assert_eq!(v["max_tokens"], 1024);
        assert_eq!(v["usage"]["output_tokens_details"]["reasoning_tokens"], 1);
        assert_eq!(v["tools"][0]["properties"]["api_key"]["type"], "string");
        assert_eq!(v["metadata"]["email"], PLACEHOLDER);
        assert_eq!(v["messages"][0]["name"], PLACEHOLDER);
        assert_eq!(
            v["messages"][0]["content"],
            "use Bearer [scrubbed] and [scrubbed]"
        );
        assert!(!s.json(&mut v), "scrubbing twice changes nothing");
    }

    #[test]
    fn headers_query_and_text() {
        let s = Scrubber::new(&["X-Custom".into()], &[]).unwrap();
        assert_eq!(
            s.header("Authorization", "Bearer sk-123"),
            "Bearer [scrubbed]"
        );
        assert_eq!(s.header("x-api-key", "abc"), PLACEHOLDER);
        assert_eq!(s.header("x-custom", "v"), PLACEHOLDER);
        assert_eq!(s.header("accept", "application/json"), "application/json");
        assert_eq!(
            s.path("/v1beta/models/g:streamGenerateContent?alt=sse&key=AIzaSy0123"),
            "/v1beta/models/g:streamGenerateContent?alt=sse&key=[scrubbed]"
        );
        assert_eq!(s.path("/v1/x"), "/v1/x");
        assert_eq!(
            scrub_text("task-1234567890abcdefghij"),
            "task-1234567890abcdefghij"
        );
        assert_eq!(scrub_text("the bearer of news"), "the bearer of news");
        assert_eq!(s.sse_data(r#"{"a":1}   "#), r#"{"a":1}   "#);
        assert_eq!(
            s.sse_data(r#"{"token":"t0k3n"}"#),
            r#"{"token":"[scrubbed]"}"#
        );
        assert!(JsonPath::parse("a[").is_err());
        assert!(JsonPath::parse("").is_err());
    }
}
