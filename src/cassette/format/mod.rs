//! The cassette formats: types, parsing, the canonical text and their checks. Pure: no file
//! I/O (that is `store.rs`) and no clock. docs/cassette.md is the specification.
//!
//! - `stream`: version 1, one provider stream per file ([`Cassette`]);
//! - `recording`: version 2, one recorded session of HTTP exchanges per file ([`Recording`]).
//!
//! Parsing never panics; every error names the file, the 1-based line and what was expected.

mod body;
mod recording;
mod stream;

use std::fmt;

use serde::Serialize;

use crate::wire::sse::SseFrame;

pub use body::{Body, base64_decode, base64_encode};
pub use recording::{
    Answer, BodyEnd, Exchange, MatchKey, RECORDING_VERSION, RecordedRequest, RecordedResponse,
    Recording, RecordingHeader, ResponseBody, end_line, exchange_line, header_line, version_of,
};
pub use stream::{CASSETTE_VERSION, Cassette, CassetteHeader};

/// Which conversation a cassette recorded. Version 1 holds only the provider layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// What an LLM provider sent to the server (or to a client's local backend).
    Provider,
    /// What a Letta server sent to a client (version 2 only).
    Letta,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Provider => "provider",
            Layer::Letta => "letta",
        }
    }

    pub fn from_name(name: &str) -> Option<Layer> {
        [Layer::Provider, Layer::Letta]
            .into_iter()
            .find(|l| l.as_str() == name)
    }
}

/// The lines of a cassette text, numbered from 1. A final newline ends the last line; it does
/// not start an empty one. `\r\n` is read as `\n`.
pub(super) fn split_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .enumerate()
        .map(|(i, l)| (i + 1, l))
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
    /// The frames do not decode as the header's provider format, or a recording's exchange is
    /// not the stream asked for.
    Provider,
    /// A file is over the size bound for its kind.
    Size,
    /// An import meets something a cassette cannot represent.
    Unrepresentable,
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
    pub(crate) fn at(
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

    pub(crate) fn whole(origin: &str, kind: CassetteErrorKind, message: impl Into<String>) -> Self {
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

pub(super) fn to_json_line<T: Serialize>(v: &T) -> String {
    // Serialising these plain structs of strings and integers cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

/// Rejects what SSE cannot carry, so a cassette always re-encodes to the frames it lists.
pub(super) fn check_frame(frame: &SseFrame) -> Result<(), String> {
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

pub(super) fn check_status(status: u16) -> Result<(), String> {
    if (100..=599).contains(&status) {
        Ok(())
    } else {
        Err(format!("`status` {status} is not an HTTP status (100-599)"))
    }
}

/// The bytes as text, or an encoding error at the line of the first invalid byte.
pub(crate) fn utf8_text<'a>(bytes: &'a [u8], origin: &str) -> Result<&'a str, CassetteError> {
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

pub(super) fn check_time(
    origin: &str,
    line: usize,
    prev: u64,
    t: u64,
) -> Result<(), CassetteError> {
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

pub(super) fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
