//! Cassette version 1: one provider stream per file.
//!
//! A cassette is JSON Lines so that a diff shows which frame changed: a header line, one line
//! per SSE frame with its time offset, and a last line saying how the stream ended. A file
//! without that last line was cut short and is rejected, so a truncated recording can never
//! pass for a stream that ended cleanly.
//!
//! Parsing never panics; every error names the file, the 1-based line and what was expected.

use serde::{Deserialize, Serialize};

use super::{
    CassetteError, CassetteErrorKind, EndKind, Layer, StreamEnd, TimedFrame, check_frame,
    check_status, check_time, json_kind, split_lines, to_json_line,
};
use crate::wire::provider::{ProviderEvent, ProviderFormat, decode_stream};
use crate::wire::sse::{SseEvent, SseFrame, encode_frame};

/// The cassette version this build reads and writes.
pub const CASSETTE_VERSION: u64 = 1;

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

/// A version 1 provider-layer cassette. Always valid: it can be built only by parsing, importing
/// or [`Cassette::new`], which check what the file format requires.
#[derive(Debug, Clone)]
pub struct Cassette {
    /// Where it was loaded from, for error messages; not part of the content.
    pub(crate) origin: String,
    pub(crate) header: CassetteHeader,
    pub(crate) frames: Vec<TimedFrame>,
    pub(crate) end: StreamEnd,
}

/// Equality is by content; where the cassette was loaded from does not matter.
impl PartialEq for Cassette {
    fn eq(&self, other: &Self) -> bool {
        self.header == other.header && self.frames == other.frames && self.end == other.end
    }
}

impl Eq for Cassette {}

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
        let mut lines = split_lines(text);

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
    /// Parsing this text gives back an equal cassette. A stream in a format version 1 cannot
    /// name (OpenAI Responses, Gemini) is written as a one-exchange version 2 recording
    /// ([`Recording::from_stream`](super::Recording::from_stream)), which
    /// [`Cassette::load`] reads back.
    pub fn to_jsonl(&self) -> String {
        let h = &self.header;
        if !ProviderFormat::V1.contains(&h.format) {
            return super::Recording::from_stream(self).to_jsonl();
        }
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
    let format = ProviderFormat::from_name(&h.format)
        .filter(|f| ProviderFormat::V1.contains(f))
        .ok_or_else(|| {
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
