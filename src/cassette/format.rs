//! The cassette format, version 1: types, parsing, the canonical text and its checks. Pure:
//! no file I/O (that is `store.rs`) and no clock. docs/cassette.md is the specification.
//!
//! A cassette is JSON Lines so that a diff shows which frame changed: a header line, one line
//! per SSE frame with its time offset, and a last line saying how the stream ended. A file
//! without that last line was cut short and is rejected, so a truncated recording can never
//! pass for a stream that ended cleanly.
//!
//! Parsing never panics; every error names the file, the 1-based line and what was expected.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::wire::provider::{ProviderEvent, ProviderFormat, decode_stream};
use crate::wire::sse::{SseEvent, SseFrame, encode_frame};

/// The cassette version this build reads and writes.
pub const CASSETTE_VERSION: u64 = 1;

/// Which conversation the cassette recorded. Version 1 defines only the provider layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// What an LLM provider sent to the server.
    Provider,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Provider => "provider",
        }
    }
}

/// Line 1 of a cassette.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CassetteHeader {
    pub layer: Layer,
    pub format: ProviderFormat,
    /// Where the recording came from (a capture path, a `sim record` session).
    pub source: String,
    /// The HTTP status of the response.
    pub status: u16,
    /// The response's `Content-Type`.
    pub content_type: String,
    /// Free text for humans (provenance, why the cassette exists).
    pub note: Option<String>,
}

/// One SSE frame and when it was sent, in ms from the start of the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedFrame {
    pub t_ms: u64,
    pub frame: SseFrame,
}

/// How the response body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndKind {
    /// The server closed the body normally.
    Clean,
    /// The connection was reset after the last frame.
    Reset,
    /// The body stayed open and never closed.
    Stall,
}

impl EndKind {
    pub const ALL: [EndKind; 3] = [EndKind::Clean, EndKind::Reset, EndKind::Stall];

    pub fn as_str(self) -> &'static str {
        match self {
            EndKind::Clean => "clean",
            EndKind::Reset => "reset",
            EndKind::Stall => "stall",
        }
    }

    pub fn from_name(name: &str) -> Option<EndKind> {
        EndKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// The last line: when and how the stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamEnd {
    pub t_ms: u64,
    pub kind: EndKind,
}

/// A version 1 provider-layer cassette. Always valid: it can be built only by parsing, importing
/// or [`Cassette::new`], which check what the file format requires.
#[derive(Debug, Clone)]
pub struct Cassette {
    /// Where it was loaded from, for error messages; not part of the content.
    pub(super) origin: String,
    pub(super) header: CassetteHeader,
    pub(super) frames: Vec<TimedFrame>,
    pub(super) end: StreamEnd,
}

/// Equality is by content; where the cassette was loaded from does not matter.
impl PartialEq for Cassette {
    fn eq(&self, other: &Self) -> bool {
        self.header == other.header && self.frames == other.frames && self.end == other.end
    }
}

impl Eq for Cassette {}

/// What kind of problem a [`CassetteError`] reports, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CassetteErrorKind {
    /// Reading or writing the file failed.
    Io,
    /// The file is not UTF-8.
    Encoding,
    /// The header names a version this build does not read.
    Version,
    /// The header line is malformed or has an unknown layer, format or field.
    Header,
    /// A frame or end line is malformed.
    Line,
    /// A time is earlier than the one before it.
    Time,
    /// A line follows the end line.
    AfterEnd,
    /// No end line: the file was cut short.
    Truncated,
    /// The frames do not decode as the header's provider format.
    Provider,
}

/// A cassette problem, naming the file (origin), the 1-based line when there is one, and what
/// was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CassetteError {
    pub origin: String,
    pub line: Option<usize>,
    pub kind: CassetteErrorKind,
    pub message: String,
}

impl CassetteError {
    pub(super) fn at(
        origin: &str,
        line: usize,
        kind: CassetteErrorKind,
        message: impl Into<String>,
    ) -> Self {
        CassetteError {
            origin: origin.to_string(),
            line: Some(line),
            kind,
            message: message.into(),
        }
    }

    pub(super) fn whole(origin: &str, kind: CassetteErrorKind, message: impl Into<String>) -> Self {
        CassetteError {
            origin: origin.to_string(),
            line: None,
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for CassetteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.origin, line, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

impl std::error::Error for CassetteError {}

// --- the line shapes, as serde sees them -------------------------------------------------------

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderLine {
    loopsim_cassette: u64,
    layer: String,
    format: String,
    source: String,
    status: u16,
    content_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// A frame or end line. Field order here is the order written.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct BodyLine {
    t: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    comment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<String>,
}

const LINE_SHAPE: &str = r#"expected a JSON object with "t" and one of data/comment/end"#;
const FORMAT_NAMES: &str = r#""anthropic", "openai_chat""#;

fn to_json_line<T: Serialize>(v: &T) -> String {
    // Serialising these plain structs of strings and integers cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

/// Rejects what SSE cannot carry, so a cassette always re-encodes to the frames it lists.
fn check_frame(frame: &SseFrame) -> Result<(), String> {
    let breaks = |field: &str, s: &str| {
        if s.contains(['\n', '\r']) {
            Err(format!(
                "`{field}` contains a line break, which SSE cannot carry"
            ))
        } else {
            Ok(())
        }
    };
    match frame {
        SseFrame::Comment(c) => breaks("comment", c),
        SseFrame::Event(ev) => {
            if let Some(name) = &ev.event {
                breaks("event", name)?;
            }
            if let Some(id) = &ev.id {
                breaks("id", id)?;
                if id.contains('\0') {
                    return Err("`id` contains NUL, which SSE ignores".to_string());
                }
            }
            if ev.data.contains('\r') {
                return Err(
                    "`data` contains a carriage return, which SSE reads as a line end".to_string(),
                );
            }
            Ok(())
        }
    }
}

fn check_status(status: u16) -> Result<(), String> {
    if (100..=599).contains(&status) {
        Ok(())
    } else {
        Err(format!("`status` {status} is not an HTTP status (100-599)"))
    }
}

impl Cassette {
    /// Builds a cassette from parts, checking what a file would be checked for (times never
    /// decrease, the end is not before the last frame, frames are representable in SSE).
    /// Errors name the line the offending part would occupy in the file.
    pub fn new(
        header: CassetteHeader,
        frames: Vec<TimedFrame>,
        end: StreamEnd,
        origin: &str,
    ) -> Result<Cassette, CassetteError> {
        check_status(header.status)
            .map_err(|m| CassetteError::at(origin, 1, CassetteErrorKind::Header, m))?;
        let mut prev = 0;
        for (i, f) in frames.iter().enumerate() {
            let line = i + 2;
            check_frame(&f.frame)
                .map_err(|m| CassetteError::at(origin, line, CassetteErrorKind::Line, m))?;
            check_time(origin, line, prev, f.t_ms)?;
            prev = f.t_ms;
        }
        check_time(origin, frames.len() + 2, prev, end.t_ms)?;
        Ok(Cassette {
            origin: origin.to_string(),
            header,
            frames,
            end,
        })
    }

    /// Parses cassette text. `origin` names the text in error messages (usually its path).
    pub fn parse(text: &str, origin: &str) -> Result<Cassette, CassetteError> {
        // A final newline ends the last line; it does not start an empty one.
        let body = text.strip_suffix('\n').unwrap_or(text);
        let mut lines = body
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .enumerate()
            .map(|(i, l)| (i + 1, l));

        if text.is_empty() {
            return Err(CassetteError::at(
                origin,
                1,
                CassetteErrorKind::Header,
                r#"empty file: expected a cassette header {"loopsim_cassette":1,...}"#,
            ));
        }
        let (_, first) = lines.next().unwrap_or((1, ""));
        let header = parse_header(first, origin)?;

        let mut frames = Vec::new();
        let mut prev_t = 0;
        let mut last_line = 1;
        for (n, line) in lines.by_ref() {
            last_line = n;
            let parsed = parse_body_line(line, origin, n)?;
            check_time(origin, n, prev_t, parsed.t)?;
            prev_t = parsed.t;
            match parsed.item {
                BodyItem::Frame(frame) => frames.push(TimedFrame {
                    t_ms: parsed.t,
                    frame,
                }),
                BodyItem::End(kind) => {
                    if let Some((after, _)) = lines.next() {
                        return Err(CassetteError::at(
                            origin,
                            after,
                            CassetteErrorKind::AfterEnd,
                            format!("unexpected line after the end line (line {n})"),
                        ));
                    }
                    return Ok(Cassette {
                        origin: origin.to_string(),
                        header,
                        frames,
                        end: StreamEnd {
                            t_ms: parsed.t,
                            kind,
                        },
                    });
                }
            }
        }
        Err(CassetteError::whole(
            origin,
            CassetteErrorKind::Truncated,
            format!("truncated: no end line after line {last_line}"),
        ))
    }

    /// The canonical text: what [`save`](Self::save) writes, one `\n`-terminated line each.
    /// Parsing this text gives back an equal cassette.
    pub fn to_jsonl(&self) -> String {
        let h = &self.header;
        let mut out = to_json_line(&HeaderLine {
            loopsim_cassette: CASSETTE_VERSION,
            layer: h.layer.as_str().to_string(),
            format: h.format.as_str().to_string(),
            source: h.source.clone(),
            status: h.status,
            content_type: h.content_type.clone(),
            note: h.note.clone(),
        });
        out.push('\n');
        for f in &self.frames {
            let line = match &f.frame {
                SseFrame::Event(ev) => BodyLine {
                    t: f.t_ms,
                    event: ev.event.clone(),
                    id: ev.id.clone(),
                    retry: ev.retry,
                    data: Some(ev.data.clone()),
                    ..BodyLine::default()
                },
                SseFrame::Comment(c) => BodyLine {
                    t: f.t_ms,
                    comment: Some(c.clone()),
                    ..BodyLine::default()
                },
            };
            out.push_str(&to_json_line(&line));
            out.push('\n');
        }
        out.push_str(&to_json_line(&BodyLine {
            t: self.end.t_ms,
            end: Some(self.end.kind.as_str().to_string()),
            ..BodyLine::default()
        }));
        out.push('\n');
        out
    }

    /// The same cassette with a note in its header.
    pub fn with_note(mut self, note: impl Into<String>) -> Cassette {
        self.header.note = Some(note.into());
        self
    }

    /// Where this cassette came from (the path it was loaded from, or the import source).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn header(&self) -> &CassetteHeader {
        &self.header
    }

    pub fn frames(&self) -> &[TimedFrame] {
        &self.frames
    }

    pub fn end(&self) -> StreamEnd {
        self.end
    }

    /// The frames without their times.
    pub fn sse_frames(&self) -> Vec<SseFrame> {
        self.frames.iter().map(|f| f.frame.clone()).collect()
    }

    /// The response body as the fake provider sends it (LF framing, see [`encode_frame`]).
    pub fn body(&self) -> String {
        self.frames.iter().map(|f| encode_frame(&f.frame)).collect()
    }

    /// The frames decoded as the header's provider format. A frame that does not decode is an
    /// error at its cassette line.
    pub fn provider_events(&self) -> Result<Vec<ProviderEvent>, CassetteError> {
        decode_stream(self.header.format, &self.sse_frames()).map_err(|e| {
            let line = e.frame.map_or(1, |f| f + 1);
            let e = crate::wire::provider::ProviderDecodeError { frame: None, ..e };
            CassetteError::at(
                &self.origin,
                line,
                CassetteErrorKind::Provider,
                e.to_string(),
            )
        })
    }
}

/// The bytes as text, or an encoding error at the line of the first invalid byte.
pub(super) fn utf8_text<'a>(bytes: &'a [u8], origin: &str) -> Result<&'a str, CassetteError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        CassetteError::at(
            origin,
            line,
            CassetteErrorKind::Encoding,
            format!("not UTF-8 (invalid byte at offset {})", e.valid_up_to()),
        )
    })
}

fn check_time(origin: &str, line: usize, prev: u64, t: u64) -> Result<(), CassetteError> {
    if t < prev {
        Err(CassetteError::at(
            origin,
            line,
            CassetteErrorKind::Time,
            format!(
                "time {t} is earlier than the previous line's {prev} (times must not decrease)"
            ),
        ))
    } else {
        Ok(())
    }
}

fn parse_header(line: &str, origin: &str) -> Result<CassetteHeader, CassetteError> {
    let err = |kind, m: String| CassetteError::at(origin, 1, kind, m);
    let expected = r#"expected a cassette header {"loopsim_cassette":1,...}"#;
    let value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| err(CassetteErrorKind::Header, format!("{expected}: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(err(
            CassetteErrorKind::Header,
            format!("{expected}, found {}", json_kind(&value)),
        ));
    };
    let Some(version) = obj.get("loopsim_cassette") else {
        return Err(err(
            CassetteErrorKind::Header,
            format!("{expected}: no `loopsim_cassette` field"),
        ));
    };
    match version.as_u64() {
        Some(CASSETTE_VERSION) => {}
        Some(v) => {
            return Err(err(
                CassetteErrorKind::Version,
                format!(
                    "unknown cassette version {v} (this build reads version {CASSETTE_VERSION})"
                ),
            ));
        }
        None => {
            return Err(err(
                CassetteErrorKind::Version,
                format!(
                    "unknown cassette version {version} (this build reads version {CASSETTE_VERSION})"
                ),
            ));
        }
    }
    let h: HeaderLine = serde_json::from_value(value)
        .map_err(|e| err(CassetteErrorKind::Header, format!("invalid header: {e}")))?;
    if h.layer != Layer::Provider.as_str() {
        return Err(err(
            CassetteErrorKind::Header,
            format!(
                "unknown layer {:?} (this build reads \"provider\")",
                h.layer
            ),
        ));
    }
    let format = ProviderFormat::from_name(&h.format).ok_or_else(|| {
        err(
            CassetteErrorKind::Header,
            format!(
                "unknown provider format {:?} (this build reads {FORMAT_NAMES})",
                h.format
            ),
        )
    })?;
    check_status(h.status).map_err(|m| err(CassetteErrorKind::Header, m))?;
    Ok(CassetteHeader {
        layer: Layer::Provider,
        format,
        source: h.source,
        status: h.status,
        content_type: h.content_type,
        note: h.note,
    })
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

enum BodyItem {
    Frame(SseFrame),
    End(EndKind),
}

struct ParsedLine {
    t: u64,
    item: BodyItem,
}

fn parse_body_line(line: &str, origin: &str, n: usize) -> Result<ParsedLine, CassetteError> {
    let err = |m: String| CassetteError::at(origin, n, CassetteErrorKind::Line, m);
    if line.trim().is_empty() {
        return Err(err(format!("{LINE_SHAPE}, found an empty line")));
    }
    // Through `Value` first: serde would also accept an array as the struct's fields in order.
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| err(format!("{LINE_SHAPE}: {e}")))?;
    if !value.is_object() {
        return Err(err(format!("{LINE_SHAPE}, found {}", json_kind(&value))));
    }
    let raw: BodyLine =
        serde_json::from_value(value).map_err(|e| err(format!("{LINE_SHAPE}: {e}")))?;
    let present: Vec<&str> = [
        ("data", raw.data.is_some()),
        ("comment", raw.comment.is_some()),
        ("end", raw.end.is_some()),
    ]
    .into_iter()
    .filter(|(_, p)| *p)
    .map(|(k, _)| k)
    .collect();
    if present.len() != 1 {
        let found = if present.is_empty() {
            "none".to_string()
        } else {
            present.join(" and ")
        };
        return Err(err(format!("{LINE_SHAPE}: found {found}")));
    }
    let extras: Vec<&str> = [
        ("event", raw.event.is_some()),
        ("id", raw.id.is_some()),
        ("retry", raw.retry.is_some()),
    ]
    .into_iter()
    .filter(|(_, p)| *p)
    .map(|(k, _)| k)
    .collect();
    let item = if let Some(data) = raw.data {
        BodyItem::Frame(SseFrame::Event(SseEvent {
            event: raw.event,
            data,
            id: raw.id,
            retry: raw.retry,
        }))
    } else if !extras.is_empty() {
        return Err(err(format!(
            "`{}` is only allowed on a data line",
            extras.join("`, `")
        )));
    } else if let Some(c) = raw.comment {
        BodyItem::Frame(SseFrame::Comment(c))
    } else {
        let name = raw.end.unwrap_or_default();
        let kind = EndKind::from_name(&name).ok_or_else(|| {
            err(format!(
                "unknown end {name:?} (expected \"clean\", \"reset\" or \"stall\")"
            ))
        })?;
        BodyItem::End(kind)
    };
    if let BodyItem::Frame(f) = &item {
        check_frame(f).map_err(err)?;
    }
    Ok(ParsedLine { t: raw.t, item })
}
