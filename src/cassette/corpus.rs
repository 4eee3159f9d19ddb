//! The committed cassettes that are imports of shared captures. Listing them here lets a test
//! re-import each capture and compare it with the committed file, so the two can never drift
//! apart (tests/cassette.rs for version 1, tests/import.rs for version 2; set
//! `LOOPSIM_BLESS_CASSETTES=1` to rewrite them).

use std::path::Path;

use super::import::{ImportKind, MAX_IMPORT_BYTES, import_bytes};
use super::scrub::Scrubber;
use super::store::{read_bounded, read_bytes};
use super::{Cassette, CassetteError, DEFAULT_IMPORT_SPACING_MS, Recording};
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

/// One committed version 2 cassette and the shared capture it is imported from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordingImport {
    /// Path of the cassette, relative to the repository root.
    pub cassette: &'static str,
    /// Path of the capture, relative to the shared `captures/` folder.
    pub capture: &'static str,
    pub kind: ImportKind,
}

/// Every version 2 cassette imported from a shared capture: the letta_e2e recordings, the
/// vcrpy cassettes and the raw Gemini and OpenAI Responses streams.
pub const RECORDING_IMPORTS: &[RecordingImport] = &[
    RecordingImport {
        cassette: "cassettes/letta/a0_fresh_autotoolset_plaintext.jsonl",
        capture: "letta_e2e/a0_fresh_autotoolset_plaintext.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/letta/a_fresh_unrestricted.jsonl",
        capture: "letta_e2e/a_fresh_unrestricted.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/letta/b0_fresh_standard_echo_autoallowed.jsonl",
        capture: "letta_e2e/b0_fresh_standard_echo_autoallowed.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/letta/b_fresh_standard_denied.jsonl",
        capture: "letta_e2e/b_fresh_standard_denied.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/letta/c_second_turn_same_conversation.jsonl",
        capture: "letta_e2e/c_second_turn_same_conversation.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/letta/d2_pending_approval_nobackfill.jsonl",
        capture: "letta_e2e/d2_pending_approval_nobackfill.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/letta/d3_pending_approval_after_startup_bidir.jsonl",
        capture: "letta_e2e/d3_pending_approval_after_startup_bidir.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/letta/d3x_duplicate_otid_replays_other_conversation_run.jsonl",
        capture: "letta_e2e/d3x_duplicate_otid_replays_other_conversation_run.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/letta/d_pending_approval_stale_recovery.jsonl",
        capture: "letta_e2e/d_pending_approval_stale_recovery.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/letta/e_busy_conversation_409.jsonl",
        capture: "letta_e2e/e_busy_conversation_409.exchanges.jsonl",
        kind: ImportKind::LettaE2e,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/anthropic/pydanticai_mcp_tool_use_thinking.jsonl",
        capture: "anthropic/pydanticai_mcp_tool_use_thinking.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/anthropic/pydanticai_redacted_thinking.jsonl",
        capture: "anthropic/pydanticai_redacted_thinking.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/anthropic/pydanticai_server_tool_code_execution_thinking.jsonl",
        capture: "anthropic/pydanticai_server_tool_code_execution_thinking.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/anthropic/pydanticai_thinking_signature_text.jsonl",
        capture: "anthropic/pydanticai_thinking_signature_text.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/anthropic/pydanticai_web_search_citations_no_ping.jsonl",
        capture: "anthropic/pydanticai_web_search_citations_no_ping.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/gemini/pydanticai_function_call_thought_signature.jsonl",
        capture: "gemini/pydanticai_function_call_thought_signature.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/gemini/pydanticai_plain_text_crlf.jsonl",
        capture: "gemini/pydanticai_plain_text_crlf.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/gemini/pydanticai_thinking_parts.jsonl",
        capture: "gemini/pydanticai_thinking_parts.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/openai_chat/openrouter_comment_keepalives_error_chunk_midstream.jsonl",
        capture: "openai_chat/openrouter_comment_keepalives_error_chunk_midstream.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/openai_chat/pydanticai_gpt5_obfuscation_field_moderation.jsonl",
        capture: "openai_chat/pydanticai_gpt5_obfuscation_field_moderation.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/openai_responses/pydanticai_background_mode_queued.jsonl",
        capture: "openai_responses/pydanticai_background_mode_queued.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/openai_responses/pydanticai_function_call_args_delta__and__output_text_after_tool.jsonl",
        capture: "openai_responses/pydanticai_function_call_args_delta__and__output_text_after_tool.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/vcr/openai_responses/pydanticai_reasoning_encrypted_then_function_call_usage.jsonl",
        capture: "openai_responses/pydanticai_reasoning_encrypted_then_function_call_usage.cassette.yaml",
        kind: ImportKind::VcrYaml,
    },
    RecordingImport {
        cassette: "cassettes/provider/sse/gemini/pydanticai_function_call_thought_signature.jsonl",
        capture: "gemini/pydanticai_function_call_thought_signature.sse",
        kind: ImportKind::Sse,
    },
    RecordingImport {
        cassette: "cassettes/provider/sse/gemini/pydanticai_plain_text_crlf.jsonl",
        capture: "gemini/pydanticai_plain_text_crlf.sse",
        kind: ImportKind::Sse,
    },
    RecordingImport {
        cassette: "cassettes/provider/sse/gemini/pydanticai_thinking_parts.jsonl",
        capture: "gemini/pydanticai_thinking_parts.sse",
        kind: ImportKind::Sse,
    },
    RecordingImport {
        cassette: "cassettes/provider/sse/openai_responses/pydanticai_background_mode_queued.jsonl",
        capture: "openai_responses/pydanticai_background_mode_queued.sse",
        kind: ImportKind::Sse,
    },
    RecordingImport {
        cassette: "cassettes/provider/sse/openai_responses/pydanticai_function_call_args_delta.jsonl",
        capture: "openai_responses/pydanticai_function_call_args_delta.sse",
        kind: ImportKind::Sse,
    },
    RecordingImport {
        cassette: "cassettes/provider/sse/openai_responses/pydanticai_output_text_after_tool.jsonl",
        capture: "openai_responses/pydanticai_output_text_after_tool.sse",
        kind: ImportKind::Sse,
    },
    RecordingImport {
        cassette: "cassettes/provider/sse/openai_responses/pydanticai_reasoning_encrypted_then_function_call_usage.jsonl",
        capture: "openai_responses/pydanticai_reasoning_encrypted_then_function_call_usage.sse",
        kind: ImportKind::Sse,
    },
    RecordingImport {
        cassette: "cassettes/provider/sse/openai_responses/pydanticai_reasoning_summary_text.jsonl",
        capture: "openai_responses/pydanticai_reasoning_summary_text.sse",
        kind: ImportKind::Sse,
    },
];

impl RecordingImport {
    /// The `source` written in the cassette header.
    pub fn source(&self) -> String {
        format!("shared/captures/{}", self.capture)
    }

    /// Imports the capture from `captures_dir` (the shared `captures/` folder), scrubbed with
    /// the default rules.
    pub fn import(&self, captures_dir: &Path) -> Result<Recording, CassetteError> {
        let bytes = read_bounded(&captures_dir.join(self.capture), MAX_IMPORT_BYTES)?;
        import_bytes(
            self.kind,
            &bytes,
            &self.source(),
            None,
            &Scrubber::default(),
        )
    }
}
