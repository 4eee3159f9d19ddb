//! The vocabulary of injection points. Models consult hooks at the places a fault can happen
//! (before writing a stream frame, before answering a model call); the harness implements the
//! hooks from a fault plan. A model with no plan gets hooks that always answer "pass".

/// What happens to one SSE frame a model is about to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamFault {
    Pass,
    /// Abort the connection before this frame (the peer sees an unexpected EOF).
    Reset,
    /// Write the first half of this frame's bytes, then abort: a cut inside an event.
    CutInside,
    /// Write nothing more and never close the body (the peer's timers must notice).
    Stall,
    /// End the body cleanly before this frame (e.g. close without a terminal event).
    Close,
    /// Skip this frame and go on (a lost event).
    Drop,
    /// Write this frame twice (a duplicated event).
    Duplicate,
}

impl StreamFault {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamFault::Pass => "pass",
            StreamFault::Reset => "reset",
            StreamFault::CutInside => "cut_inside",
            StreamFault::Stall => "stall",
            StreamFault::Close => "close",
            StreamFault::Drop => "drop",
            StreamFault::Duplicate => "duplicate",
        }
    }

    pub fn from_name(s: &str) -> Option<StreamFault> {
        [
            StreamFault::Pass,
            StreamFault::Reset,
            StreamFault::CutInside,
            StreamFault::Stall,
            StreamFault::Close,
            StreamFault::Drop,
            StreamFault::Duplicate,
        ]
        .into_iter()
        .find(|f| f.as_str() == s)
    }
}

/// A `Retry-After` header a server puts on an error answer (RFC 9110 §10.2.3): a wait of whole
/// seconds, written either as the number or as the HTTP date that far ahead. A client reads both
/// (letta-protocol.md §3.8: "numeric → seconds × 1000; otherwise an HTTP date minus now").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// `Retry-After: 5`.
    Seconds(u64),
    /// `Retry-After: Fri, 04 Dec 2026 11:22:24 GMT`, that many seconds after the answer.
    DateIn(u64),
    /// The HTTP date that many seconds ahead with one field out of range
    /// (`Fri, 32 Dec 2026 11:22:24 GMT`), as a broken proxy might write it. No date parser
    /// reads it (§3.8: unparseable → none), so a client waits as if no header came.
    BrokenDate(u64, DateField),
}

impl RetryAfter {
    /// The wait the header means, in ms (a broken date's is the wait its writer meant).
    pub fn wait_ms(self) -> u64 {
        match self {
            RetryAfter::Seconds(s) | RetryAfter::DateIn(s) | RetryAfter::BrokenDate(s, _) => {
                s.saturating_mul(1000)
            }
        }
    }
}

/// The field of an HTTP date that [`RetryAfter::BrokenDate`] writes out of range. Each value
/// is one that the IMF-fixdate grammar (RFC 9110 §5.6.7) and JavaScript's `Date.parse` both
/// refuse: day 32, hour 25, minute 60 (`Date.parse` in Node 20 and 22 gives `NaN` for each).
/// Not the second: `Date.parse` reads `00:00:61` as `00:00:00`, so a real client would take
/// such a date for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DateField {
    Day,
    Hour,
    Minute,
}

impl DateField {
    pub const ALL: [DateField; 3] = [DateField::Day, DateField::Hour, DateField::Minute];

    pub fn as_str(self) -> &'static str {
        match self {
            DateField::Day => "day",
            DateField::Hour => "hour",
            DateField::Minute => "minute",
        }
    }

    pub fn parse(s: &str) -> Option<DateField> {
        DateField::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// `date` (`Sun, 06 Nov 1994 08:49:37 GMT`, a four-digit year) with this field out of range.
    pub fn break_in(self, date: &str) -> String {
        let (at, value) = match self {
            DateField::Day => (5, "32"),
            DateField::Hour => (17, "25"),
            DateField::Minute => (20, "60"),
        };
        let mut out = date.to_string();
        if out.get(at..at + 2).is_some() {
            out.replace_range(at..at + 2, value);
        }
        out
    }
}

/// How the fake provider answers one model call instead of replaying its cassette.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderOverride {
    pub status: u16,
    /// Extra response headers, e.g. `retry-after`.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Fault hooks of the fake provider.
pub trait ProviderHooks: Send + Sync + 'static {
    /// Called once per model call (0-based). `Some` answers the call with an error response
    /// instead of the cassette, and the cassette stays for the next call.
    fn override_call(&self, call: u32) -> Option<ProviderOverride>;
    /// Called before frame `frame` (1-based) of the streamed answer to call `call`.
    fn before_frame(&self, call: u32, frame: u64) -> StreamFault;
}

/// Hooks that never inject anything.
pub struct NoFaults;

impl ProviderHooks for NoFaults {
    fn override_call(&self, _: u32) -> Option<ProviderOverride> {
        None
    }
    fn before_frame(&self, _: u32, _: u64) -> StreamFault {
        StreamFault::Pass
    }
}
