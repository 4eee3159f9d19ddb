//! Cassettes: recorded streams the harness replays, documented in docs/cassette.md.
//!
//! - `format`: the types, the parsers, the canonical text and its checks (pure: no I/O, no
//!   clock): version 1 ([`Cassette`], one provider stream) and version 2 ([`Recording`], one
//!   recorded session of HTTP exchanges at the `letta` or `provider` layer);
//! - `matching`: request keys, canonical body hashes, nearest recorded request (pure);
//! - `store`: the only file I/O (load, save), every error naming the path;
//! - `import`: raw captures into cassettes; `corpus`: the committed imports of shared captures.

mod corpus;
mod format;
pub mod import;
pub mod matching;
pub mod scrub;
mod store;

pub use corpus::{CaptureImport, PROVIDER_CAPTURE_IMPORTS, RECORDING_IMPORTS, RecordingImport};
pub use format::{
    Answer, Body, BodyEnd, CASSETTE_VERSION, Cassette, CassetteError, CassetteErrorKind,
    CassetteHeader, EndKind, Exchange, Layer, MatchKey, RECORDING_VERSION, RecordedRequest,
    RecordedResponse, Recording, RecordingHeader, ResponseBody, StreamEnd, TimedFrame,
    base64_decode, base64_encode, end_line, exchange_line, header_line, version_of,
};
pub use import::{DEFAULT_IMPORT_SPACING_MS, ImportKind, MAX_IMPORT_BYTES, import_bytes};
pub use store::{RecordingFile, import_file};
