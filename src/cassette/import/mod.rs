//! Turning other recordings into cassettes: raw SSE captures (which record no timing), vcrpy
//! YAML cassettes and Letta end-to-end exchange logs. Pure and deterministic: the same bytes
//! give the same cassette; what a cassette cannot represent is an error naming it, never
//! dropped. File reading is `store.rs`.

mod letta_e2e;
mod vcr;
mod yaml;

/// The ISO-8601 reader of the exchange-log importer, which the harness's oracles share so that
/// they read a date without the client model's parser.
pub(crate) use letta_e2e::iso_ms;

use super::format::{
    Answer, Body, BodyEnd, Cassette, CassetteError, CassetteErrorKind, CassetteHeader, EndKind,
    Exchange, Layer, RecordedRequest, RecordedResponse, Recording, RecordingHeader, ResponseBody,
    StreamEnd, TimedFrame, utf8_text,
};
use super::scrub::Scrubber;
use crate::wire::provider::{ProviderFormat, StreamFormat};
use crate::wire::sse::decode_all;

/// Time between frames when importing a raw capture, which records no timing.
pub const DEFAULT_IMPORT_SPACING_MS: u64 = 10;

impl Cassette {
    /// Turns a raw SSE body (a capture, which records no timing) into a cassette: frame `i`
    /// (0-based) gets `t = i * spacing_ms`, the end line `t = frames * spacing_ms`, and the
    /// stream ends `clean`. Status 200, `text/event-stream`, no note. Deterministic: the same
    /// bytes give the same cassette. Invalid UTF-8 is replaced, as [`decode_all`] does.
    pub fn import_sse(
        bytes: &[u8],
        format: ProviderFormat,
        source: &str,
        spacing_ms: u64,
    ) -> Cassette {
        let frames: Vec<TimedFrame> = decode_all(bytes)
            .into_iter()
            .enumerate()
            .map(|(i, frame)| TimedFrame {
                t_ms: (i as u64).saturating_mul(spacing_ms),
                frame,
            })
            .collect();
        let end = StreamEnd {
            t_ms: (frames.len() as u64).saturating_mul(spacing_ms),
            kind: EndKind::Clean,
        };
        Cassette {
            origin: source.to_string(),
            header: CassetteHeader {
                layer: Layer::Provider,
                format,
                source: source.to_string(),
                status: 200,
                content_type: "text/event-stream".to_string(),
                note: None,
            },
            frames,
            end,
        }
    }
}

/// The largest file `sim import` reads (32 MiB).
pub const MAX_IMPORT_BYTES: u64 = 32 << 20;

/// The kinds of recording `sim import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportKind {
    /// A raw SSE body (`*.sse`), which records no request and no timing.
    Sse,
    /// A vcrpy / pytest-recording cassette (`*.yaml`, `*.yml`).
    VcrYaml,
    /// A Letta end-to-end recording (`*.exchanges.jsonl`, captures/letta_e2e/PROVENANCE.md).
    LettaE2e,
}

impl ImportKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ImportKind::Sse => "sse",
            ImportKind::VcrYaml => "vcrpy",
            ImportKind::LettaE2e => "letta_e2e",
        }
    }

    /// The kind a file name says, and the name without its kind's suffix (the cassette's stem).
    pub fn of_name(name: &str) -> Option<(ImportKind, &str)> {
        for (suffix, kind) in [
            (".exchanges.jsonl", ImportKind::LettaE2e),
            (".cassette.yaml", ImportKind::VcrYaml),
            (".yaml", ImportKind::VcrYaml),
            (".yml", ImportKind::VcrYaml),
            (".sse", ImportKind::Sse),
        ] {
            if let Some(stem) = name.strip_suffix(suffix).filter(|s| !s.is_empty()) {
                return Some((kind, stem));
            }
        }
        None
    }
}

/// A problem with what an import reads, naming where in it.
pub(crate) fn unrepresentable(source: &str, line: Option<usize>, message: String) -> CassetteError {
    CassetteError {
        origin: source.to_string(),
        line,
        kind: CassetteErrorKind::Unrepresentable,
        message,
    }
}

/// Imports a recording of `kind` from its bytes. `source` names it in the header and in errors;
/// `format` overrides the provider format an import would read from paths or frames. Every
/// exchange is scrubbed with `scrubber`, as `sim record` scrubs.
pub fn import_bytes(
    kind: ImportKind,
    bytes: &[u8],
    source: &str,
    format: Option<StreamFormat>,
    scrubber: &Scrubber,
) -> Result<Recording, CassetteError> {
    let text = utf8_text(bytes, source)?;
    let r = match kind {
        ImportKind::Sse => import_sse_recording(text, source, format)?,
        ImportKind::VcrYaml => vcr::import(text, source, format)?,
        ImportKind::LettaE2e => letta_e2e::import(text, source)?,
    };
    scrub_recording(r, scrubber)
}

/// A raw SSE body as a one-exchange provider recording: `POST` to the format's API path, frame
/// `i` at `i × 10` ms, ended `clean` after the last (as [`Cassette::import_sse`] times it).
fn import_sse_recording(
    text: &str,
    source: &str,
    format: Option<StreamFormat>,
) -> Result<Recording, CassetteError> {
    let frames = spaced(decode_all(text.as_bytes()));
    let sse: Vec<_> = frames.iter().map(|f| f.frame.clone()).collect();
    let format = format
        .or_else(|| StreamFormat::detect(&sse))
        .ok_or_else(|| {
            unrepresentable(
                source,
                None,
                "cannot tell which provider format this stream is (pass --format)".into(),
            )
        })?;
    let end = frames.len() as u64 * DEFAULT_IMPORT_SPACING_MS;
    let x = Exchange::new(
        0,
        "POST",
        format.api_path(),
        RecordedRequest {
            headers: Vec::new(),
            body: Body::Empty,
        },
        RecordedResponse::Answered(Answer {
            t_ms: 0,
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: ResponseBody::Sse(frames),
            end: BodyEnd {
                t_ms: end,
                kind: EndKind::Clean,
                by_client: false,
            },
        }),
    );
    Recording::new(
        RecordingHeader {
            layer: Layer::Provider,
            recorder: "sim import (raw SSE)".into(),
            source: source.to_string(),
            format: Some(format),
            note: Some("a raw stream body: no request was recorded, frames 10 ms apart".into()),
        },
        vec![x],
        end,
        source,
    )
}

/// Frames `DEFAULT_IMPORT_SPACING_MS` apart from 0, for captures that record no timing.
pub(crate) fn spaced(frames: Vec<crate::wire::sse::SseFrame>) -> Vec<TimedFrame> {
    frames
        .into_iter()
        .enumerate()
        .map(|(i, frame)| TimedFrame {
            t_ms: (i as u64).saturating_mul(DEFAULT_IMPORT_SPACING_MS),
            frame,
        })
        .collect()
}

/// Headers a cassette keeps: names lower-case, without hop-by-hop headers, `host` and
/// `content-length` (docs/cassette.md).
pub(crate) fn kept_headers(
    pairs: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    const DROPPED: [&str; 11] = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    ];
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .filter(|(k, _)| !DROPPED.contains(&k.as_str()))
        .collect()
}

/// Checks an HTTP reason phrase is the standard one for its status (a cassette keeps only the
/// status); anything else is an error naming it.
pub(crate) fn check_reason(
    source: &str,
    line: Option<usize>,
    at: &str,
    status: u16,
    reason: &str,
) -> Result<(), CassetteError> {
    let standard = hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason());
    if reason.is_empty() || standard.is_some_and(|s| s.eq_ignore_ascii_case(reason)) {
        Ok(())
    } else {
        Err(unrepresentable(
            source,
            line,
            format!(
                "`{at}`: reason {reason:?} is not the standard one for {status} ({}); a cassette keeps only the status",
                standard.unwrap_or("none")
            ),
        ))
    }
}

/// Every exchange scrubbed (headers, path, bodies, SSE data) and re-keyed.
fn scrub_recording(r: Recording, s: &Scrubber) -> Result<Recording, CassetteError> {
    let exchanges = r
        .exchanges()
        .iter()
        .map(|x| {
            let response = match &x.response {
                RecordedResponse::Failed { .. } => x.response.clone(),
                RecordedResponse::Answered(a) => {
                    let body = match &a.body {
                        ResponseBody::Whole(b) => ResponseBody::Whole(s.body(b.clone())),
                        ResponseBody::Sse(frames) => ResponseBody::Sse(
                            frames
                                .iter()
                                .map(|f| TimedFrame {
                                    t_ms: f.t_ms,
                                    frame: match &f.frame {
                                        crate::wire::sse::SseFrame::Event(ev) => {
                                            let mut ev = ev.clone();
                                            ev.data = s.sse_data(&ev.data);
                                            crate::wire::sse::SseFrame::Event(ev)
                                        }
                                        crate::wire::sse::SseFrame::Comment(c) => {
                                            crate::wire::sse::SseFrame::Comment(s.sse_data(c))
                                        }
                                    },
                                })
                                .collect(),
                        ),
                    };
                    RecordedResponse::Answered(Answer {
                        headers: s.headers(&a.headers),
                        body,
                        ..a.clone()
                    })
                }
            };
            Exchange::new(
                x.t_ms,
                x.method.clone(),
                s.path(&x.path),
                RecordedRequest {
                    headers: s.headers(&x.request.headers),
                    body: s.body(x.request.body.clone()),
                },
                response,
            )
        })
        .collect();
    let origin = r.origin().to_string();
    Recording::new(r.header().clone(), exchanges, r.end_t_ms(), &origin)
}
