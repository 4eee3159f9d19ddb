//! Turning raw captures, which record no timing, into cassettes. Deterministic: the same bytes
//! give the same cassette.

use super::format::{Cassette, CassetteHeader, EndKind, Layer, StreamEnd, TimedFrame};
use crate::wire::provider::ProviderFormat;
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
