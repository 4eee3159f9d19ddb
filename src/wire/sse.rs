//! Server-Sent Events codec: an incremental decoder that accepts bytes in any split and an
//! encoder that writes the framing Letta servers and LLM providers use.
//!
//! The decoder follows the WHATWG event-stream rules (LF, CRLF and CR line ends; `:` comments;
//! multi-line `data:`; `event:`/`id:`/`retry:`), plus two leniencies that real clients have and
//! real captures need: a final event with no trailing blank line is still delivered by
//! [`SseDecoder::finish`], and comments are surfaced (as [`SseFrame::Comment`]) so a cassette can
//! replay keepalives byte for byte.
//!
//! Pure: no I/O, no clock.

use std::fmt::Write as _;

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any (`None` means the default type, "message").
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field, if the event carried one.
    pub id: Option<String>,
    /// The `retry:` field, if the event carried a valid one.
    pub retry: Option<u64>,
}

impl SseEvent {
    /// A data-only event, the only kind a Letta server sends for chunks (letta-protocol.md §1.1).
    pub fn data(data: impl Into<String>) -> Self {
        SseEvent {
            data: data.into(),
            ..SseEvent::default()
        }
    }

    /// A named event, e.g. `event: error` or Anthropic's `event: content_block_delta`.
    pub fn named(event: impl Into<String>, data: impl Into<String>) -> Self {
        SseEvent {
            event: Some(event.into()),
            data: data.into(),
            ..SseEvent::default()
        }
    }

    /// The `[DONE]` sentinel that ends OpenAI and Letta streams (the SDK checks the prefix).
    pub fn is_done(&self) -> bool {
        self.data.starts_with("[DONE]")
    }
}

/// What the decoder yields: an event, or a comment line (`: keepalive`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseFrame {
    Event(SseEvent),
    /// The comment text after the leading colon, with one leading space stripped.
    Comment(String),
}

impl SseFrame {
    pub fn as_event(&self) -> Option<&SseEvent> {
        match self {
            SseFrame::Event(e) => Some(e),
            SseFrame::Comment(_) => None,
        }
    }
}

/// Incremental SSE decoder. Feed it bytes with [`push`](Self::push) in whatever pieces the
/// network delivers; call [`finish`](Self::finish) at end of body.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the current, not yet terminated line. Lines end at ASCII bytes, so a line never
    /// splits a multi-byte UTF-8 character: decoding whole lines handles UTF-8 split across reads.
    line: Vec<u8>,
    /// The previous byte was a CR: a following LF belongs to the same line end.
    after_cr: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    retry: Option<u64>,
    /// Any field line seen since the last dispatch (for the lenient end-of-body dispatch).
    dirty: bool,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the frames completed by them, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseFrame> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut out);
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    /// Ends the body: a last line with no line end is processed, and a pending event with no
    /// trailing blank line is dispatched (lenient; the WHATWG rules would drop it).
    pub fn finish(mut self) -> Vec<SseFrame> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out);
        }
        if self.dirty {
            self.dispatch(&mut out);
        }
        out
    }

    /// Bytes held that do not yet form a complete frame (for diagnostics of truncated bodies).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.dirty
    }

    fn end_line(&mut self, out: &mut Vec<SseFrame>) {
        let raw = std::mem::take(&mut self.line);
        let line = String::from_utf8_lossy(&raw);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if let Some(comment) = line.strip_prefix(':') {
            out.push(SseFrame::Comment(
                comment.strip_prefix(' ').unwrap_or(comment).to_string(),
            ));
            return;
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&line[..], ""),
        };
        match field {
            "event" => {
                self.event = Some(value.to_string());
                self.dirty = true;
            }
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
                self.dirty = true;
            }
            "id" if !value.contains('\0') => {
                self.id = Some(value.to_string());
                self.dirty = true;
            }
            "retry" if !value.is_empty() && value.bytes().all(|c| c.is_ascii_digit()) => {
                self.retry = value.parse().ok();
                self.dirty = true;
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseFrame>) {
        let event = SseEvent {
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            id: self.id.take(),
            retry: self.retry.take(),
        };
        let had_data = std::mem::take(&mut self.has_data);
        self.dirty = false;
        // WHATWG: an event with no data line is not dispatched. We keep `event:`-only blocks
        // (some providers send `event: ping` with empty data) as events with empty data.
        if had_data || event.event.is_some() {
            out.push(SseFrame::Event(event));
        }
    }
}

/// Decodes a whole body at once (tests, importing captures).
pub fn decode_all(bytes: &[u8]) -> Vec<SseFrame> {
    let mut d = SseDecoder::new();
    let mut frames = d.push(bytes);
    frames.extend(d.finish());
    frames
}

/// Encodes one event with LF line ends and a terminating blank line. Fields are written in the
/// order `event`, `id`, `retry`, `data` (the order Letta and Anthropic use).
pub fn encode_event(e: &SseEvent) -> String {
    let mut s = String::new();
    if let Some(ev) = &e.event {
        let _ = writeln!(s, "event: {ev}");
    }
    if let Some(id) = &e.id {
        let _ = writeln!(s, "id: {id}");
    }
    if let Some(r) = e.retry {
        let _ = writeln!(s, "retry: {r}");
    }
    for line in e.data.split('\n') {
        let _ = writeln!(s, "data: {line}");
    }
    s.push('\n');
    s
}

/// Encodes one frame (event or comment).
pub fn encode_frame(f: &SseFrame) -> String {
    match f {
        SseFrame::Event(e) => encode_event(e),
        SseFrame::Comment(c) => format!(": {c}\n\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(bytes: &[u8]) -> Vec<SseEvent> {
        decode_all(bytes)
            .into_iter()
            .filter_map(|f| match f {
                SseFrame::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn line_ends_lf_crlf_cr_are_equivalent() {
        let lf = events(b"event: a\ndata: 1\n\ndata: 2\n\n");
        let crlf = events(b"event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n");
        let cr = events(b"event: a\rdata: 1\r\rdata: 2\r\r");
        assert_eq!(lf, crlf);
        assert_eq!(lf, cr);
        assert_eq!(lf.len(), 2);
        assert_eq!(lf[0].event.as_deref(), Some("a"));
    }

    #[test]
    fn crlf_split_between_pushes() {
        let mut d = SseDecoder::new();
        let mut out = d.push(b"data: x\r");
        out.extend(d.push(b"\n\r"));
        out.extend(d.push(b"\ndata: y\n\n"));
        let got: Vec<_> = out.iter().filter_map(|f| f.as_event()).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].data, "x");
        assert_eq!(got[1].data, "y");
    }

    #[test]
    fn multi_line_data_comments_id_retry() {
        let frames = decode_all(b": keepalive\nid: 7\nretry: 1500\ndata: a\ndata:b\n\n");
        assert_eq!(frames[0], SseFrame::Comment("keepalive".into()));
        let e = frames[1].as_event().unwrap();
        assert_eq!(e.data, "a\nb");
        assert_eq!(e.id.as_deref(), Some("7"));
        assert_eq!(e.retry, Some(1500));
    }

    #[test]
    fn final_event_without_blank_line_and_done() {
        let ev = events(b"data: {\"x\":1}\n\ndata: [DONE]");
        assert_eq!(ev.len(), 2);
        assert!(ev[1].is_done());
    }

    #[test]
    fn utf8_split_across_reads() {
        let text = "data: héllo 世界\n\n".as_bytes();
        for cut in 0..text.len() {
            let mut d = SseDecoder::new();
            let mut out = d.push(&text[..cut]);
            out.extend(d.push(&text[cut..]));
            out.extend(d.finish());
            assert_eq!(out.len(), 1, "cut at {cut}");
            assert_eq!(out[0].as_event().unwrap().data, "héllo 世界");
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        let evs = vec![
            SseEvent::data("{\"a\":1}"),
            SseEvent::named("error", "{\"message\":\"x\"}"),
            SseEvent {
                event: Some("m".into()),
                data: "two\nlines".into(),
                id: Some("9".into()),
                retry: Some(3),
            },
            SseEvent::data("[DONE]"),
        ];
        let bytes: String = evs.iter().map(encode_event).collect();
        assert_eq!(events(bytes.as_bytes()), evs);
    }
}
