//! A simulated host around the loop (kimi-loop.md §8): what the loop relies on but does not
//! own.
//!
//! - [`context`] — the fold of recorded events into a history (`appendLoopEvent`).
//! - [`projector`] — history → request messages: normal, strict and media projections.
//! - [`records`] — the JSONL record log (`wire.jsonl`).
//! - [`session`] — [`Host`]: prompts, the dispatcher wiring, compaction retry, turn-end
//!   backstop and status mapping.

pub mod context;
pub mod projector;
pub mod records;
pub mod session;

pub use context::{ContextMemory, ContextMessage, Origin};
pub use projector::{ProjectionMode, project, project_media};
pub use records::{CorruptLog, WireLog, WireRecord};
pub use session::{
    AcceptingStore, Compactor, Host, HostParts, HostTurnOutcome, RecordStore, TruncatingCompactor,
    TurnStatus,
};
