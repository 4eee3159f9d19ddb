//! kosong's provider-error classification: which status errors are a context overflow or a
//! body-size rejection, which rejections are about an image's format, and which are about the
//! request's structure (kimi-loop.md §4.7, §6, whose facts leave the patterns open). The
//! patterns are kosong's (`packages/kosong/src/errors.ts` at the reference snapshot d723cc47e,
//! the same lists the published CLI 2.1.0 bundles), matched against the lowercased message as
//! kosong matches them. Deliberate differences: Rust's `.` stops only at `\n` (JavaScript's also
//! at `\r`, U+2028 and U+2029), and `\d` is written `[0-9]`, JavaScript's meaning.

use std::sync::LazyLock;

use regex::RegexSet;

fn set(patterns: &[&str]) -> RegexSet {
    RegexSet::new(patterns).expect("kosong's patterns compile")
}

/// `CONTEXT_OVERFLOW_MESSAGE_PATTERNS`: token-count wordings of a prompt too long.
static CONTEXT_OVERFLOW: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"context[ _-]?length",
        r"(?:context[ _-]?window.*exceed|exceed.*context[ _-]?window)",
        r"maximum context",
        r"exceed(?:ed|s|ing)?\s+(?:the\s+)?max(?:imum)?\s+tokens?",
        r"(?:too many tokens.*(?:prompt|input|context)|(?:prompt|input|context).*too many tokens)",
        r"prompt is too long.*maximum",
        r"input token count.*exceeds?.*maximum number of tokens",
        r"request.*exceed(?:ed|s|ing)?.*model token limit",
    ])
});

/// `REQUEST_TOO_LARGE_MESSAGE_PATTERNS`: byte-size wordings of a body too big. A 413 that
/// matches neither these nor the overflow patterns stays a plain status error.
static REQUEST_TOO_LARGE: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"request exceeds the maximum size",
        r"request entity too large",
        r"request_too_large",
        r"exceeds? the maximum allowed number of bytes",
        r"payload too large",
        r"content too large",
        r"request (?:body )?too large",
    ])
});

/// `IMAGE_FORMAT_PROVIDER_MESSAGE_PATTERNS`: kosong's own image refusals, thrown before a
/// request is sent (no status).
static IMAGE_FORMAT_PROVIDER: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"unsupported media type for base64 image",
        r"invalid data url for image",
    ])
});

/// `IMAGE_FORMAT_STATUS_MESSAGE_PATTERNS`: a provider's 400 about an image's format or data.
static IMAGE_FORMAT_STATUS: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"unsupported image (?:url|format|type)",
        r"does not represent a valid image",
        r"could not (?:process|decode) (?:the |input )?image",
        r"unable to process (?:the |input )?image",
        r"failed to decode (?:the )?image",
        r"invalid image(?: data| type| format)?",
    ])
});

/// `MEDIA_TYPE_FIELD_PATTERN`: a `media_type` or `mime_type` refusal, an image one only when
/// the message also says "image".
static MEDIA_TYPE_FIELD: LazyLock<RegexSet> = LazyLock::new(|| set(&[r"(?:media|mime)_?type"]));

/// `TOOL_EXCHANGE_ADJACENCY_MESSAGE_PATTERNS`: a tool call and its result not paired and
/// adjacent, in Anthropic's and the OpenAI-compatible providers' wordings.
static TOOL_EXCHANGE_ADJACENCY: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"tool_use[\s\S]*tool_result",
        r"tool_result[\s\S]*tool_use",
        r"unexpected\s+`?tool_result",
        r"tool_call_id[\s\S]*not found",
        r#"role\s+['"`]?tool['"`]?\s+must be a response to a preceding message"#,
        r#"assistant message with\s+['"`]?tool_calls['"`]?\s+must be followed by tool messages"#,
        r"tool_call_ids? did not have response messages",
        r"insufficient tool messages following",
    ])
});

/// `STRUCTURAL_REQUEST_MESSAGE_PATTERNS`: the message array itself malformed.
static STRUCTURAL_REQUEST: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"text content blocks must be non-empty",
        r"text content blocks must contain non-whitespace",
        r"first message must use the .*user.* role",
        r"roles must alternate",
        r"multiple .*(?:user|assistant).* roles in a row",
        r"tool_use[\s\S]*ids must be unique",
        r#"message at position [0-9]+ with role ['"`]?[a-z]+['"`]? must not be empty"#,
    ])
});

/// `THINKING_EFFORT_STATUS_MESSAGE_PATTERNS`: a 400/422 refusing the configured effort.
static THINKING_EFFORT: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"reasoning[_ .-]?effort",
        r"thinking[_ .-]?effort",
        r"output_config[\s\S]*effort",
        r"unsupported[\s\S]*effort",
        r"invalid[\s\S]*effort",
    ])
});

/// The page `appendThinkingEffortConfigHint` points at.
pub const THINKING_EFFORT_CONFIG_DOCS_URL: &str =
    "https://moonshotai.github.io/kimi-code/en/configuration/config-files.html#thinking";

/// `isContextOverflowStatusError`: a 400, 413 or 422 worded as a prompt too long.
pub fn is_context_overflow_status(status: u16, message: &str) -> bool {
    matches!(status, 400 | 413 | 422) && CONTEXT_OVERFLOW.is_match(&message.to_lowercase())
}

/// `isRequestTooLargeStatusError`: a 413 worded as a body too big.
pub fn is_request_too_large_status(status: u16, message: &str) -> bool {
    status == 413 && REQUEST_TOO_LARGE.is_match(&message.to_lowercase())
}

/// The status half of `isImageFormatError`: a 400 about an image's format or data.
pub fn is_image_format_status(status: u16, message: &str) -> bool {
    let lower = message.to_lowercase();
    status == 400
        && (IMAGE_FORMAT_STATUS.is_match(&lower)
            || (MEDIA_TYPE_FIELD.is_match(&lower) && lower.contains("image")))
}

/// The half of `isImageFormatError` for a provider error without a status.
pub fn is_image_format_provider_message(message: &str) -> bool {
    IMAGE_FORMAT_PROVIDER.is_match(&message.to_lowercase())
}

/// `isToolExchangeAdjacencyError` or the structural patterns of
/// `isRecoverableRequestStructureError`, for a 400 or 422 (the caller excludes overflows).
pub fn is_request_structure_status(status: u16, message: &str) -> bool {
    let lower = message.to_lowercase();
    matches!(status, 400 | 422)
        && (TOOL_EXCHANGE_ADJACENCY.is_match(&lower) || STRUCTURAL_REQUEST.is_match(&lower))
}

/// `appendThinkingEffortConfigHint`: a 400 or 422 refusing the thinking effort gets a paragraph
/// saying where to configure it, once.
pub fn with_thinking_effort_hint(status: u16, message: String) -> String {
    if !matches!(status, 400 | 422)
        || !THINKING_EFFORT.is_match(&message.to_lowercase())
        || message.contains(THINKING_EFFORT_CONFIG_DOCS_URL)
    {
        return message;
    }
    format!(
        "{message}\n\nThe provider rejected the configured thinking effort. Non-Kimi providers \
         receive effort strings without client-side mapping; choose an effort supported by the \
         selected model. For Kimi models, check support_efforts and default_effort. See \
         {THINKING_EFFORT_CONFIG_DOCS_URL}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wordings kosong's comments name for each family, and near misses that must not
    /// match.
    #[test]
    fn each_family_takes_its_providers_wordings_and_leaves_the_near_misses() {
        for message in [
            "prompt is too long: 210000 tokens > 200000 maximum",
            "This model's maximum context length is 128000 tokens",
            "Input token count (1200000) exceeds the maximum number of tokens allowed (1048576)",
            "context_length_exceeded",
            "the request exceeded the context window",
            "Requested tokens exceed the max tokens",
            "Your request exceeded model token limit: 262144",
            "too many tokens in the prompt",
        ] {
            assert!(is_context_overflow_status(400, message), "{message}");
            assert!(is_context_overflow_status(422, message), "{message}");
            assert!(is_context_overflow_status(413, message), "{message}");
            assert!(!is_context_overflow_status(500, message), "{message}");
        }
        for message in ["context window", "prompt is too long", "max tokens"] {
            assert!(!is_context_overflow_status(400, message), "{message}");
        }
        for message in [
            "Request exceeds the maximum size",
            "413 Request Entity Too Large",
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes",
            "Payload Too Large",
            "Content Too Large",
            "http: request body too large",
        ] {
            assert!(is_request_too_large_status(413, message), "{message}");
            assert!(!is_request_too_large_status(400, message), "{message}");
        }
        assert!(!is_request_too_large_status(413, "Bad request"));
        for message in [
            "Unsupported image format",
            "The image data you provided does not represent a valid image",
            "Could not process image",
            "Unable to process input image",
            "failed to decode the image",
            "Invalid image",
            "image.source.base64.media_type: Input should be 'image/jpeg'",
        ] {
            assert!(is_image_format_status(400, message), "{message}");
            assert!(!is_image_format_status(422, message), "{message}");
        }
        assert!(!is_image_format_status(400, "invalid media_type for audio"));
        assert!(!is_image_format_status(400, "too many images"));
        assert!(is_image_format_provider_message(
            "Unsupported media type for base64 image: image/bmp"
        ));
        assert!(is_image_format_provider_message(
            "Invalid data URL for image"
        ));
        assert!(!is_image_format_provider_message(
            "Unsupported image format"
        ));
        for message in [
            "messages.142: `tool_use` ids were found without `tool_result` blocks immediately after",
            "unexpected `tool_result` block",
            "tool_call_id  is not found",
            "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
            "An assistant message with 'tool_calls' must be followed by tool messages responding",
            "the following tool_call_ids did not have response messages: call_1",
            "(insufficient tool messages following tool_calls message)",
            "messages: text content blocks must be non-empty",
            "text content blocks must contain non-whitespace text",
            "The first message must use the \"user\" role",
            "roles must alternate between \"user\" and \"assistant\"",
            "multiple 'user' roles in a row",
            "messages: `tool_use` ids must be unique",
            "the message at position 3 with role 'assistant' must not be empty",
        ] {
            assert!(is_request_structure_status(400, message), "{message}");
            assert!(is_request_structure_status(422, message), "{message}");
            assert!(!is_request_structure_status(413, message), "{message}");
        }
        for message in [
            "not found",
            "Bad request",
            "first message",
            "must alternate",
        ] {
            assert!(!is_request_structure_status(400, message), "{message}");
        }
    }

    #[test]
    fn a_refused_thinking_effort_gets_the_hint_once() {
        let hinted = with_thinking_effort_hint(400, "Unsupported reasoning_effort: max".into());
        assert!(hinted.starts_with("Unsupported reasoning_effort: max\n\nThe provider rejected"));
        assert!(hinted.ends_with(THINKING_EFFORT_CONFIG_DOCS_URL));
        assert_eq!(with_thinking_effort_hint(400, hinted.clone()), hinted);
        let plain = "Unsupported reasoning_effort: max".to_owned();
        assert_eq!(with_thinking_effort_hint(500, plain.clone()), plain);
        assert_eq!(
            with_thinking_effort_hint(400, "Bad request".into()),
            "Bad request"
        );
    }
}
