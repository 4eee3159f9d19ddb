//! The SDK's view of a stream (letta-protocol.md §1.1): what its async iterator yields or
//! throws ([`SdkEvent`]), the [`ChunkSource`] a drain reads, an SSE response body read the way
//! the SDK reads it ([`SseSource`]), and scripted streams for tests and mock backends
//! ([`ScriptedSource`]).

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use serde_json::Value;
// tokio's clock: simulated time under turmoil (and paused in tests), never the wall clock.

use crate::model::port::clock::Clock;
use crate::wire::letta::LettaChunk;
use crate::wire::sse::{SseDecoder, SseFrame};

/// What the SDK's async iterator yields or throws (letta-protocol.md §1.1).
#[derive(Debug, Clone, PartialEq)]
pub enum SdkEvent {
    Chunk(Box<LettaChunk>),
    /// The iterator threw: an `event: error` (with `error` = its parsed JSON), a malformed
    /// `data:` payload (SyntaxError), or a transport failure.
    Thrown(Thrown),
    /// The iterator ended: EOF (after `[DONE]` or not), or the consumer aborted it.
    End,
}

/// A thrown error: the JSON the SDK attaches (`e.error`) and its message.
#[derive(Debug, Clone, PartialEq)]
pub struct Thrown {
    pub kind: ThrownKind,
    pub message: String,
    pub error: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrownKind {
    ErrorEvent,
    Parse,
    Transport,
}

impl ThrownKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ThrownKind::ErrorEvent => "error-event",
            ThrownKind::Parse => "parse-error",
            ThrownKind::Transport => "transport-error",
        }
    }
}

/// A stream of SDK events. `next` must be cancel-safe: the drain races it against timers.
pub trait ChunkSource {
    fn next(&mut self) -> impl Future<Output = SdkEvent>;
    /// The clock of the host reading the stream (the drain's stall and silence bounds).
    fn clock(&self) -> Clock;
    /// Aborts the HTTP read: later `next` calls end the iteration without throwing.
    fn abort(&mut self);
}

/// SDK semantics over SSE frames (letta-protocol.md §1.1): data-only events are chunks;
/// `event: error` throws with the JSON's `message`; other named events are dropped; comments
/// are ignored; after `[DONE]` everything is ignored until EOF; malformed JSON throws.
#[derive(Debug, Default)]
pub struct SdkFrames {
    done_seen: bool,
    finished: bool,
}

impl SdkFrames {
    pub fn on_frame(&mut self, f: &SseFrame, out: &mut VecDeque<SdkEvent>) {
        if self.finished {
            return;
        }
        let Some(ev) = f.as_event() else { return };
        if self.done_seen {
            return;
        }
        if ev.is_done() {
            self.done_seen = true;
            return;
        }
        match ev.event.as_deref() {
            Some("error") => {
                let parsed: Value = serde_json::from_str(&ev.data)
                    .unwrap_or_else(|_| Value::String(ev.data.clone()));
                let message = parsed
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| ev.data.clone());
                self.finished = true;
                out.push_back(SdkEvent::Thrown(Thrown {
                    kind: ThrownKind::ErrorEvent,
                    message,
                    error: Some(parsed),
                }));
            }
            Some(_) => {}
            None => match sdk_chunk(&ev.data) {
                Ok(c) => out.push_back(SdkEvent::Chunk(Box::new(c))),
                Err(e) => {
                    self.finished = true;
                    out.push_back(SdkEvent::Thrown(Thrown {
                        kind: ThrownKind::Parse,
                        message: format!("Could not parse message into JSON: {e}"),
                        error: None,
                    }));
                }
            },
        }
    }

    pub fn finished(&self) -> bool {
        self.finished
    }
}

/// The SDK's `JSON.parse` of a data-only event (letta-protocol.md §1.1): only text that is not
/// JSON throws. The SDK validates nothing, so a JSON value our typed decoder rejects is still a
/// chunk: top-level `null` fields read as absent (a real keepalive ping carries `"date":null,
/// "seq_id":null`, captures/letta_server f3), and anything else undecodable is kept as
/// [`LettaChunk::Unknown`] for the processor's unknown-type rule.
fn sdk_chunk(data: &str) -> Result<LettaChunk, serde_json::Error> {
    let value: Value = serde_json::from_str(data)?;
    if let Ok(c) = serde_json::from_value::<LettaChunk>(value.clone()) {
        return Ok(c);
    }
    if let Value::Object(map) = &value {
        let stripped: serde_json::Map<String, Value> = map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Ok(c) = serde_json::from_value::<LettaChunk>(Value::Object(stripped)) {
            return Ok(c);
        }
    }
    Ok(LettaChunk::Unknown(value))
}

/// An SSE response body read the way the SDK reads it.
pub struct SseSource {
    body: Option<hyper::body::Incoming>,
    sse: SseDecoder,
    sdk: SdkFrames,
    queue: VecDeque<SdkEvent>,
    clock: Clock,
}

impl SseSource {
    /// `clock`: the reading host's.
    pub fn new(body: hyper::body::Incoming, clock: Clock) -> Self {
        SseSource {
            body: Some(body),
            sse: SseDecoder::new(),
            sdk: SdkFrames::default(),
            queue: VecDeque::new(),
            clock,
        }
    }
}

impl ChunkSource for SseSource {
    async fn next(&mut self) -> SdkEvent {
        use http_body_util::BodyExt;
        loop {
            if let Some(e) = self.queue.pop_front() {
                return e;
            }
            if self.sdk.finished() {
                self.body = None;
                return SdkEvent::End;
            }
            let Some(body) = self.body.as_mut() else {
                return SdkEvent::End;
            };
            match body.frame().await {
                None => {
                    self.body = None;
                    for f in std::mem::take(&mut self.sse).finish() {
                        self.sdk.on_frame(&f, &mut self.queue);
                    }
                    self.queue.push_back(SdkEvent::End);
                }
                Some(Err(e)) => {
                    self.body = None;
                    self.queue.push_back(SdkEvent::Thrown(Thrown {
                        kind: ThrownKind::Transport,
                        message: crate::model::port::http::error_chain(&e),
                        error: None,
                    }));
                }
                Some(Ok(frame)) => {
                    if let Ok(bytes) = frame.into_data() {
                        for f in self.sse.push(&bytes) {
                            self.sdk.on_frame(&f, &mut self.queue);
                        }
                    }
                }
            }
        }
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn abort(&mut self) {
        // Dropping the body closes the connection.
        self.body = None;
        self.queue.clear();
        self.sdk.finished = true;
    }
}

/// How a scripted stream ends after its last event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptEnd {
    /// The iterator ends (EOF).
    Eof,
    /// The body never ends (a wedged read) until aborted.
    Hang,
}

/// A stream of events at time offsets, for tests and mock backends (letta-tests-and-real-
/// client.md A.1: "fake streams are async iterables of chunk objects").
pub struct ScriptedSource {
    events: VecDeque<(u64, SdkEvent)>,
    end: ScriptEnd,
    next_at: Option<Duration>,
    aborted: bool,
    clock: Clock,
    /// Shared counter of `abort()` calls (tests count aborts).
    pub aborts: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl ScriptedSource {
    /// `events`: (delay in ms after the previous event, event), on tokio's clock (a paused
    /// test runtime's).
    pub fn new(events: Vec<(u64, SdkEvent)>, end: ScriptEnd) -> Self {
        ScriptedSource {
            events: events.into(),
            end,
            next_at: None,
            aborted: false,
            clock: Clock::tokio(),
            aborts: Default::default(),
        }
    }

    /// Chunks from JSON texts, all at once.
    pub fn chunks(json: &[&str], end: ScriptEnd) -> Self {
        Self::new(
            json.iter()
                .map(|j| {
                    (
                        0,
                        SdkEvent::Chunk(Box::new(
                            LettaChunk::from_json(j).expect("test chunk parses"),
                        )),
                    )
                })
                .collect(),
            end,
        )
    }
}

impl ChunkSource for ScriptedSource {
    async fn next(&mut self) -> SdkEvent {
        if self.aborted {
            return SdkEvent::End;
        }
        let Some((delay, _)) = self.events.front() else {
            return match self.end {
                ScriptEnd::Eof => SdkEvent::End,
                ScriptEnd::Hang => std::future::pending().await,
            };
        };
        let at = *self
            .next_at
            .get_or_insert_with(|| self.clock.now() + Duration::from_millis(*delay));
        self.clock.sleep_until(at).await;
        self.next_at = None;
        self.events.pop_front().map_or(SdkEvent::End, |(_, e)| e)
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn abort(&mut self) {
        self.aborted = true;
        self.aborts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests;
