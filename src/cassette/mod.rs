//! Cassettes: recorded streams the harness replays, documented in docs/cassette.md.
//!
//! - `format`: the types, the parser, the canonical text and its checks (pure: no I/O, no clock);
//! - `store`: the only file I/O (load, save), every error naming the path;
//! - `import`: raw captures into cassettes; `corpus`: the committed imports of shared captures.

mod corpus;
mod format;
mod import;
mod store;

pub use corpus::{CaptureImport, PROVIDER_CAPTURE_IMPORTS};
pub use format::{
    CASSETTE_VERSION, Cassette, CassetteError, CassetteErrorKind, CassetteHeader, EndKind, Layer,
    StreamEnd, TimedFrame,
};
pub use import::DEFAULT_IMPORT_SPACING_MS;
