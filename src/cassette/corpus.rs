//! The committed provider cassettes that are imports of shared captures. Listing them here lets
//! a test re-import each capture and compare it with the committed file, so the two can never
//! drift apart (tests/cassette.rs; set `LOOPSIM_BLESS_CASSETTES=1` to rewrite them).

use std::path::Path;

use super::store::read_bytes;
use super::{Cassette, CassetteError, DEFAULT_IMPORT_SPACING_MS};
use crate::wire::provider::ProviderFormat;

/// One committed cassette and the capture it is imported from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureImport {
    /// Path of the cassette, relative to the repository root.
    pub cassette: &'static str,
    /// Path of the capture, relative to the shared `captures/` folder.
    pub capture: &'static str,
    pub format: ProviderFormat,
    /// The capture's upstream origin (from captures/PROVENANCE.md), kept in the header note.
    pub upstream: &'static str,
}

/// Every provider cassette imported from a capture.
pub const PROVIDER_CAPTURE_IMPORTS: &[CaptureImport] = &[
    CaptureImport {
        cassette: "cassettes/provider/anthropic_tool_use_split_args.jsonl",
        capture: "anthropic/sdkpy_tool_use_split_partial_json.sse",
        format: ProviderFormat::Anthropic,
        upstream: "anthropics/anthropic-sdk-python tests/lib/streaming/fixtures/tool_use_response.txt \
                   (real capture, claude-sonnet-4-20250514)",
    },
    CaptureImport {
        cassette: "cassettes/provider/anthropic_text_end_turn.jsonl",
        capture: "anthropic/sdkpy_basic_text_no_trailing_newline.sse",
        format: ProviderFormat::Anthropic,
        upstream: "anthropics/anthropic-sdk-python tests/lib/streaming/fixtures/basic_response.txt \
                   (semi-synthetic: hand-edited id and model)",
    },
    CaptureImport {
        cassette: "cassettes/provider/anthropic_max_tokens_truncated_tool_json.jsonl",
        capture: "anthropic/sdkpy_max_tokens_truncated_tool_json_no_block_stop.sse",
        format: ProviderFormat::Anthropic,
        upstream: "anthropics/anthropic-sdk-python \
                   tests/lib/streaming/fixtures/incomplete_partial_json_response.txt \
                   (real capture, claude-3-7-sonnet-20250219)",
    },
    CaptureImport {
        cassette: "cassettes/provider/openai_parallel_tool_calls.jsonl",
        capture: "openai_chat/parallel_tool_calls_split_args_usage_done.sse",
        format: ProviderFormat::OpenAiChat,
        upstream: "openai/openai-python .inline-snapshot/external/\
                   f82268f2fefd5cfbc7eeb59c297688be2f6ca0849a6e4f17851b517310841d9b.bin \
                   (real capture, gpt-4o-2024-08-06)",
    },
    CaptureImport {
        cassette: "cassettes/provider/openai_text_stop.jsonl",
        capture: "openai_chat/plain_text_stop_usage_done.sse",
        format: ProviderFormat::OpenAiChat,
        upstream: "openai/openai-python .inline-snapshot/external/\
                   e2aad469b71d1d4894ff833ea147020a9d875eb7ce644a0ff355581690a4cbfd.bin \
                   (real capture, gpt-4o-2024-08-06)",
    },
    CaptureImport {
        cassette: "cassettes/provider/openai_openrouter_error_midstream.jsonl",
        capture: "openai_chat/openrouter_comment_keepalives_error_chunk_midstream.sse",
        format: ProviderFormat::OpenAiChat,
        upstream: "pydantic/pydantic-ai \
                   tests/models/cassettes/test_openrouter/test_openrouter_stream_error.yaml \
                   interaction 0 (real capture, minimax/minimax-m2:free via OpenRouter)",
    },
];

impl CaptureImport {
    /// The `source` written in the cassette header.
    pub fn source(&self) -> String {
        format!("shared/captures/{}", self.capture)
    }

    /// Imports the capture from `captures_dir` (the shared `captures/` folder) with the default
    /// spacing, noting its upstream origin.
    pub fn import(&self, captures_dir: &Path) -> Result<Cassette, CassetteError> {
        let bytes = read_bytes(&captures_dir.join(self.capture))?;
        Ok(Cassette::import_sse(
            &bytes,
            self.format,
            &self.source(),
            DEFAULT_IMPORT_SPACING_MS,
        )
        .with_note(format!("imported from {}", self.upstream)))
    }
}
