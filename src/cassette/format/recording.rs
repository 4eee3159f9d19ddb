//! Cassette version 2: one recorded session per file.
//!
//! Line 1 is the header (version, layer, who recorded it, from where: no wall-clock value);
//! then one line per HTTP exchange, in the order the requests started, each with its request,
//! its response (a whole body, or SSE frames with their offsets and how the body ended) and its
//! matching key; then an end line. A file without the end line was cut short (a recorder that
//! crashed, a copy that stopped) and is rejected as truncated: it never passes for a complete
//! recording.
//!
//! Reading is strict: unknown keys, versions, layers and formats are errors naming the file,
//! the line and the key. Parsing never panics.

use serde_json::{Map, Value};

use super::body::{Body, base64_decode, base64_encode};
use super::stream::{CASSETTE_VERSION, Cassette, CassetteHeader};
use super::{
    CassetteError, CassetteErrorKind, EndKind, Layer, StreamEnd, TimedFrame, check_frame,
    check_status, json_kind, split_lines,
};
use crate::cassette::matching::key_of;
use crate::wire::provider::{ProviderEvent, StreamFormat, decode_stream};
use crate::wire::sse::{SseEvent, SseFrame};

mod read;
mod write;
use self::read::*;
pub use self::write::*;

/// The version [`Recording`] writes.
pub const RECORDING_VERSION: u64 = 2;

/// Line 1 of a version 2 cassette. No field holds a wall-clock time: every time in the file is
/// an offset from the start of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingHeader {
    pub layer: Layer,
    /// Who made the file (`sim record (mode all)`, `sim import (vcrpy YAML)`, …).
    pub recorder: String,
    /// Where the traffic came from: the upstream URL, or the imported file.
    pub source: String,
    /// The provider stream format of the session's streams, when known (provider layer only).
    pub format: Option<StreamFormat>,
    /// Free text for humans.
    pub note: Option<String>,
}

/// An exchange's request, after scrubbing.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `(name, value)` pairs in the order received, names lower-case. Hop-by-hop headers,
    /// `host` and `content-length` are not kept (a replay frames its own body).
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

/// A response body: whole, or the SSE frames as they arrived.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseBody {
    Whole(Body),
    /// Frame times are ms from the response head.
    Sse(Vec<TimedFrame>),
}

/// How and when (ms from the response head) a response body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyEnd {
    pub t_ms: u64,
    pub kind: EndKind,
    /// For `reset`: the client closed the connection before the body ended (the recorder then
    /// closed the upstream one), rather than the upstream resetting it.
    pub by_client: bool,
}

/// A response that arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// ms from the request's start to the response head.
    pub t_ms: u64,
    pub status: u16,
    /// As for requests: names lower-case, framing and hop-by-hop headers not kept.
    pub headers: Vec<(String, String)>,
    pub body: ResponseBody,
    pub end: BodyEnd,
}

/// What came back for a request.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordedResponse {
    Answered(Answer),
    /// No response head arrived: the upstream was unreachable, the request was refused by the
    /// recorder (a body over its size bound), or the recording stopped first. The client got
    /// the recorder's own 5xx. `t_ms` is from the request's start.
    Failed {
        t_ms: u64,
        error: String,
    },
}

/// The matching key: method, path and query with volatile ids masked, and the canonical body
/// hash (`cassette::matching`). Always derived from the request; the reader checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchKey {
    pub method: String,
    pub path: String,
    pub body: String,
}

/// One HTTP exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// ms from the start of the session to the request's arrival.
    pub t_ms: u64,
    pub method: String,
    /// Path and query as sent (after scrubbing).
    pub path: String,
    pub request: RecordedRequest,
    pub response: RecordedResponse,
    pub key: MatchKey,
}

impl Exchange {
    /// An exchange with its key derived from the request.
    pub fn new(
        t_ms: u64,
        method: impl Into<String>,
        path: impl Into<String>,
        request: RecordedRequest,
        response: RecordedResponse,
    ) -> Exchange {
        let method = method.into();
        let path = path.into();
        let key = key_of(&method, &path, &request.body);
        Exchange {
            t_ms,
            method,
            path,
            request,
            response,
            key,
        }
    }

    /// The answer, when one arrived.
    pub fn answer(&self) -> Option<&Answer> {
        match &self.response {
            RecordedResponse::Answered(a) => Some(a),
            RecordedResponse::Failed { .. } => None,
        }
    }

    /// The first value of a response header (name compared case-insensitively).
    pub fn response_header(&self, name: &str) -> Option<&str> {
        self.answer()?
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A version 2 cassette: one recorded session. Always valid: built only by parsing or
/// [`Recording::new`], which check what the file format requires.
#[derive(Debug, Clone)]
pub struct Recording {
    origin: String,
    header: RecordingHeader,
    exchanges: Vec<Exchange>,
    end_t_ms: u64,
}

/// Equality is by content; where the recording was loaded from does not matter.
impl PartialEq for Recording {
    fn eq(&self, other: &Self) -> bool {
        self.header == other.header
            && self.exchanges == other.exchanges
            && self.end_t_ms == other.end_t_ms
    }
}

/// Rejects an exchange that could not be written and read back as it is. `line` is the line
/// the exchange occupies.
fn check_exchange(x: &Exchange, origin: &str, line: usize) -> Result<(), CassetteError> {
    let err = |key: &str, m: String| {
        CassetteError::at(
            origin,
            line,
            CassetteErrorKind::Line,
            format!("key `{key}`: {m}"),
        )
    };
    if x.method.is_empty() || !x.method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(err(
            "method",
            format!("{:?} is not an HTTP method", x.method),
        ));
    }
    if !x.path.starts_with('/') && x.path != "*" {
        return Err(err(
            "path",
            format!("{:?} is not a path (it must start with /)", x.path),
        ));
    }
    let expected = key_of(&x.method, &x.path, &x.request.body);
    if x.key != expected {
        let which = if x.key.method != expected.method {
            "key.method"
        } else if x.key.path != expected.path {
            "key.path"
        } else {
            "key.body"
        };
        return Err(err(
            which,
            format!(
                "does not match the request: expected {} (the key is derived from method, path and body)",
                match which {
                    "key.method" => format!("{:?}", expected.method),
                    "key.path" => format!("{:?}", expected.path),
                    _ => format!("{:?}", expected.body),
                }
            ),
        ));
    }
    if let RecordedResponse::Answered(a) = &x.response {
        check_status(a.status).map_err(|m| err("response.status", m))?;
        let mut prev = 0;
        if let ResponseBody::Sse(frames) = &a.body {
            for (i, f) in frames.iter().enumerate() {
                let at = format!("response.sse[{i}]");
                check_frame(&f.frame).map_err(|m| err(&at, m))?;
                if f.t_ms < prev {
                    return Err(err(
                        &format!("{at}.t"),
                        format!(
                            "time {} is earlier than the previous frame's {prev} (times must not decrease)",
                            f.t_ms
                        ),
                    ));
                }
                prev = f.t_ms;
            }
        }
        if a.end.t_ms < prev {
            return Err(err(
                "response.end.t",
                format!(
                    "time {} is earlier than the last frame's {prev} (times must not decrease)",
                    a.end.t_ms
                ),
            ));
        }
        if a.end.by_client && a.end.kind != EndKind::Reset {
            return Err(err(
                "response.end.by",
                "\"client\" is only allowed with end \"reset\"".into(),
            ));
        }
    }
    Ok(())
}

impl Recording {
    /// Builds a recording from parts, checking what a file would be checked for. Errors name
    /// the line the offending part would occupy.
    pub fn new(
        header: RecordingHeader,
        exchanges: Vec<Exchange>,
        end_t_ms: u64,
        origin: &str,
    ) -> Result<Recording, CassetteError> {
        check_header(&header)
            .map_err(|m| CassetteError::at(origin, 1, CassetteErrorKind::Header, m))?;
        let mut prev = 0;
        for (i, x) in exchanges.iter().enumerate() {
            let line = i + 2;
            check_exchange(x, origin, line)?;
            check_start(origin, line, prev, x.t_ms, "t")?;
            prev = x.t_ms;
        }
        check_start(origin, exchanges.len() + 2, prev, end_t_ms, "t")?;
        Ok(Recording {
            origin: origin.to_string(),
            header,
            exchanges,
            end_t_ms,
        })
    }

    /// Parses cassette text of either version: version 2 as it is, version 1 lifted into a
    /// one-exchange recording ([`Recording::from_stream`]). `origin` names the text in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Recording, CassetteError> {
        if version_of(text) == Some(CASSETTE_VERSION) {
            return Ok(Recording::from_stream(&Cassette::parse(text, origin)?));
        }
        let mut lines = split_lines(text);
        let (_, first) = lines.next().unwrap_or((1, ""));
        if text.is_empty() {
            return Err(CassetteError::at(
                origin,
                1,
                CassetteErrorKind::Header,
                r#"empty file: expected a cassette header {"loopsim_cassette":2,...}"#,
            ));
        }
        let header = parse_header(first, origin)?;
        let mut exchanges = Vec::new();
        let mut prev = 0;
        let mut last_line = 1;
        while let Some((n, line)) = lines.next() {
            last_line = n;
            let obj = object_line(line, origin, n)?;
            if obj.contains_key("end") {
                let (t, count) = parse_end(obj, origin, n)?;
                check_start(origin, n, prev, t, "t")?;
                if count != exchanges.len() as u64 {
                    return Err(CassetteError::at(
                        origin,
                        n,
                        CassetteErrorKind::Line,
                        format!(
                            "key `exchanges`: the end line counts {count} exchanges, the file holds {}",
                            exchanges.len()
                        ),
                    ));
                }
                if let Some((after, _)) = lines.next() {
                    return Err(CassetteError::at(
                        origin,
                        after,
                        CassetteErrorKind::AfterEnd,
                        format!("unexpected line after the end line (line {n})"),
                    ));
                }
                return Ok(Recording {
                    origin: origin.to_string(),
                    header,
                    exchanges,
                    end_t_ms: t,
                });
            }
            let x = parse_exchange(obj, origin, n, exchanges.len() as u64 + 1)?;
            check_exchange(&x, origin, n)?;
            check_start(origin, n, prev, x.t_ms, "t")?;
            prev = x.t_ms;
            exchanges.push(x);
        }
        Err(CassetteError::whole(
            origin,
            CassetteErrorKind::Truncated,
            format!("truncated: no end line after line {last_line} (the recording did not finish)"),
        ))
    }

    /// A stream cassette as a one-exchange provider recording: `POST` to its format's API path,
    /// no request headers or body, the frames as recorded (the body of an error response is
    /// the frames' data, as the fake provider sends it).
    pub fn from_stream(c: &Cassette) -> Recording {
        let h = c.header();
        let format: StreamFormat = h.format.into();
        let path = format.api_path();
        let body = if (200..300).contains(&h.status) {
            ResponseBody::Sse(c.frames().to_vec())
        } else {
            let text: String = c
                .frames()
                .iter()
                .filter_map(|f| f.frame.as_event().map(|e| e.data.clone()))
                .collect();
            ResponseBody::Whole(Body::from_bytes(text.as_bytes()))
        };
        let request = RecordedRequest {
            headers: Vec::new(),
            body: Body::Empty,
        };
        let answer = Answer {
            t_ms: 0,
            status: h.status,
            headers: vec![("content-type".into(), h.content_type.clone())],
            body,
            end: BodyEnd {
                t_ms: c.end().t_ms,
                kind: c.end().kind,
                by_client: false,
            },
        };
        Recording {
            origin: c.origin().to_string(),
            header: RecordingHeader {
                layer: Layer::Provider,
                recorder: "loopsim cassette version 1".into(),
                source: h.source.clone(),
                format: Some(format),
                note: h.note.clone(),
            },
            exchanges: vec![Exchange::new(
                0,
                "POST",
                path,
                request,
                RecordedResponse::Answered(answer),
            )],
            end_t_ms: c.end().t_ms,
        }
    }

    /// Exchange `n` (1-based) as a version 1 stream cassette, for the fake provider: the SSE
    /// frames, or a whole body as one data frame (how error responses are replayed), in any
    /// provider format.
    pub fn stream(&self, n: usize) -> Result<Cassette, CassetteError> {
        let format = self.stream_format(n);
        let line = n + 1;
        let err = |m: String| CassetteError::at(&self.origin, line, CassetteErrorKind::Provider, m);
        let x = n
            .checked_sub(1)
            .and_then(|i| self.exchanges.get(i))
            .ok_or_else(|| {
                CassetteError::whole(
                    &self.origin,
                    CassetteErrorKind::Provider,
                    format!(
                        "no exchange {n}: the recording holds {}",
                        self.exchanges.len()
                    ),
                )
            })?;
        let Some(a) = x.answer() else {
            return Err(err(format!(
                "exchange {n} ({} {}) has no response",
                x.method, x.path
            )));
        };
        let frames = match &a.body {
            ResponseBody::Sse(f) => f.clone(),
            ResponseBody::Whole(b) => match b {
                Body::Empty => Vec::new(),
                Body::Binary(_) => {
                    return Err(err(format!(
                        "exchange {n} has a binary body, which a provider stream cannot carry"
                    )));
                }
                other => vec![TimedFrame {
                    t_ms: 0,
                    frame: SseFrame::Event(SseEvent::data(
                        String::from_utf8_lossy(&other.to_bytes()).into_owned(),
                    )),
                }],
            },
        };
        let format = format.ok_or_else(|| {
                err(format!(
                    "exchange {n}: cannot tell its provider format (no `format` in the header, and neither the path nor the frames name one)"
                ))
            })?;
        let content_type = x
            .response_header("content-type")
            .unwrap_or("text/event-stream")
            .to_string();
        Cassette::new(
            CassetteHeader {
                layer: Layer::Provider,
                format: format.model_format(),
                source: format!("{}#{n}", self.header.source),
                status: a.status,
                content_type,
                note: self.header.note.clone(),
            },
            frames,
            StreamEnd {
                t_ms: a.end.t_ms,
                kind: a.end.kind,
            },
            &self.origin,
        )
    }

    /// The provider format of exchange `n` (1-based): the header's, else its path's, else its
    /// frames'.
    pub fn stream_format(&self, n: usize) -> Option<StreamFormat> {
        let x = self.exchanges.get(n.checked_sub(1)?)?;
        let frames: Vec<SseFrame> = match x.answer().map(|a| &a.body) {
            Some(ResponseBody::Sse(f)) => f.iter().map(|f| f.frame.clone()).collect(),
            _ => Vec::new(),
        };
        self.header
            .format
            .or_else(|| StreamFormat::of_path(&x.path))
            .or_else(|| StreamFormat::detect(&frames))
    }

    /// Exchange `n`'s SSE frames decoded as its provider format ([`Recording::stream_format`]).
    /// A frame that does not decode is an error at the exchange's line, naming the frame.
    pub fn provider_events(&self, n: usize) -> Result<Vec<ProviderEvent>, CassetteError> {
        let line = n + 1;
        let err = |m: String| CassetteError::at(&self.origin, line, CassetteErrorKind::Provider, m);
        let x = n
            .checked_sub(1)
            .and_then(|i| self.exchanges.get(i))
            .ok_or_else(|| {
                err(format!(
                    "no exchange {n}: the recording holds {}",
                    self.exchanges.len()
                ))
            })?;
        let Some(ResponseBody::Sse(frames)) = x.answer().map(|a| &a.body) else {
            return Err(err(format!("exchange {n} has no SSE frames")));
        };
        let format = self
            .stream_format(n)
            .ok_or_else(|| err(format!("exchange {n}: cannot tell its provider format")))?;
        let sse: Vec<SseFrame> = frames.iter().map(|f| f.frame.clone()).collect();
        decode_stream(format, &sse).map_err(|e| {
            let at = e
                .frame
                .map(|f| format!("key `response.sse[{}]`: ", f - 1))
                .unwrap_or_default();
            let e = crate::wire::provider::ProviderDecodeError { frame: None, ..e };
            err(format!("{at}{e}"))
        })
    }

    /// The canonical text: one `\n`-terminated line each. Parsing it gives back an equal
    /// recording, and writing a parsed file gives back the same bytes.
    pub fn to_jsonl(&self) -> String {
        let mut out = header_line(&self.header);
        for (i, x) in self.exchanges.iter().enumerate() {
            out.push_str(&exchange_line(i as u64 + 1, x));
        }
        out.push_str(&end_line(self.end_t_ms, self.exchanges.len() as u64));
        out
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn header(&self) -> &RecordingHeader {
        &self.header
    }

    pub fn exchanges(&self) -> &[Exchange] {
        &self.exchanges
    }

    /// ms from the start of the session to its end.
    pub fn end_t_ms(&self) -> u64 {
        self.end_t_ms
    }

    /// The same recording with another header note.
    pub fn with_note(mut self, note: Option<String>) -> Recording {
        self.header.note = note;
        self
    }
}

/// The version number a cassette text's first line declares, if it declares one.
pub fn version_of(text: &str) -> Option<u64> {
    let first = text.split('\n').next()?;
    let v: Value = serde_json::from_str(first.strip_suffix('\r').unwrap_or(first)).ok()?;
    v.get("loopsim_cassette")?.as_u64()
}

fn check_header(h: &RecordingHeader) -> Result<(), String> {
    if h.format.is_some() && h.layer != Layer::Provider {
        return Err("key `format`: only a provider-layer recording has a stream format".into());
    }
    Ok(())
}

fn check_start(
    origin: &str,
    line: usize,
    prev: u64,
    t: u64,
    key: &str,
) -> Result<(), CassetteError> {
    if t < prev {
        Err(CassetteError::at(
            origin,
            line,
            CassetteErrorKind::Time,
            format!(
                "key `{key}`: time {t} is earlier than the previous line's {prev} (exchanges are in the order their requests started)"
            ),
        ))
    } else {
        Ok(())
    }
}
