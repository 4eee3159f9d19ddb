//! The pattern tables of letta-protocol.md §3.5-3.6: which provider and run errors are
//! retryable, with the helpers that read them (4xx ranges, Z.ai codes, quota limits, 429
//! reasons, Cloudflare edge pages).

use std::sync::LazyLock;

use regex::Regex;

/// `RETRYABLE_PROVIDER_DETAIL_PATTERNS`: case-**sensitive** substrings (letta-protocol.md §3.5).
pub const RETRYABLE_PROVIDER_DETAIL_PATTERNS: [&str; 38] = [
    "Anthropic API error",
    "OpenAI API error",
    "Google Vertex API error",
    "ChatGPT API error",
    "ChatGPT server error",
    "Connection error during Anthropic streaming",
    "Connection error during OpenRouter streaming",
    "Connection error during streaming",
    "upstream connect error",
    "connection termination",
    "peer closed connection",
    "incomplete chunked read",
    "Network error",
    "Connection error",
    "Request timed out",
    "overloaded",
    "api_error",
    "server_error",
    "server error",
    "internal_error",
    "internal error",
    "service_unavailable",
    "service unavailable",
    "You can retry your request",
    "retry your request",
    "WebSocket closed",
    "websocket closed",
    "WebSocket error",
    "websocket error",
    "Connection ended",
    "connection ended",
    "connection lost",
    "other side closed",
    "fetch failed",
    "socket hang up",
    "ended without",
    "http2 request did not get a response",
    "terminated",
];

/// `NON_RETRYABLE_PROVIDER_DETAIL_PATTERNS`: lower-cased substrings (letta-protocol.md §3.6).
pub const NON_RETRYABLE_PROVIDER_DETAIL_PATTERNS: [&str; 12] = [
    "invalid api key",
    "incorrect api key",
    "authentication error",
    "authentication failed",
    "unauthorized",
    "permission denied",
    "forbidden",
    "invalid_request_error",
    "invalid model",
    "model_not_found",
    "context_length_exceeded",
    "invalid_encrypted_content",
];

/// `NON_RETRYABLE_RUN_ERROR_TYPES` (letta-protocol.md §3.6).
pub const NON_RETRYABLE_RUN_ERROR_TYPES: [&str; 6] = [
    "llm_authentication",
    "llm_bad_request",
    "llm_insufficient_credits",
    "llm_permission_denied",
    "llm_not_found",
    "llm_unprocessable_entity",
];

/// `NON_RETRYABLE_429_REASONS`: lower-cased substrings of the detail (letta-protocol.md §3.6).
pub const NON_RETRYABLE_429_REASONS: [&str; 7] = [
    "agents-limit-exceeded",
    "exceeded-quota",
    "free-usage-exceeded",
    "premium-usage-exceeded",
    "standard-usage-exceeded",
    "basic-usage-exceeded",
    "not-enough-credits",
];

/// `NON_RETRYABLE_QUOTA_DETAIL_PATTERNS` (letta-protocol.md §3.6).
pub const NON_RETRYABLE_QUOTA_DETAIL_PATTERNS: [&str; 3] = [
    "hosted model usage limit",
    "out of credits",
    "usage_limit_reached",
];

/// Z.ai codes that are non-retryable (letta-protocol.md §3.6): 1000–1004, 1100–1121, 1300–1310.
pub const ZAI_NON_RETRYABLE_CODE_RANGES: [(u32, u32); 3] =
    [(1000, 1004), (1100, 1121), (1300, 1310)];

/// Cloudflare edge codes (letta-protocol.md §3.6): 502 and 520–526.
pub const CLOUDFLARE_EDGE_CODES: [u32; 8] = [502, 520, 521, 522, 523, 524, 525, 526];

/// `isRetryableProviderErrorDetail`: a case-sensitive retryable pattern or a Cloudflare edge
/// 52x text (letta-protocol.md §3.5).
pub fn is_retryable_provider_detail(detail: &str) -> bool {
    RETRYABLE_PROVIDER_DETAIL_PATTERNS
        .iter()
        .any(|p| detail.contains(p))
        || is_cloudflare_edge_52x(detail)
}

/// The regular expressions of the published client's policy (Letta Code 0.32.18,
/// `src/agent/turn-recovery-policy.ts`, `src/cli/helpers/error-formatter.ts` and
/// `zai-errors.ts`; letta-protocol.md §3.6 describes them in prose), checked against the
/// client's own functions by `tests/letta/policy_oracle.rs`. JavaScript's `\d` and `\b` are
/// ASCII, so they are written `[0-9]` and `(?-u:\b)`.
fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the client's patterns compile")
}

/// `NON_RETRYABLE_4XX_PATTERN`.
static NON_RETRYABLE_4XX: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)Error code:\s*4(0[0-8]|1[0-9]|2[0-9]|3[0-9]|4[0-9]|51)"));

/// `RETRYABLE_429_PATTERN`.
static RETRYABLE_429: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)Error code:\s*429|rate limit|too many requests"));

/// `PYTHON_REPR_PATTERN` and `JSON_FORMAT_PATTERN` of the Z.ai error parser.
static ZAI_CODES: LazyLock<[Regex; 2]> = LazyLock::new(|| {
    [
        regex(r"'code':\s*([0-9]{3,4}),\s*'message':\s*'([^']+)'"),
        regex(r#""code":\s*([0-9]{3,4}),\s*"message":\s*"([^"]+)""#),
    ]
});

/// `CLOUDFLARE_EDGE_5XX_FORMATTED_PATTERN`, `CLOUDFLARE_JSON_5XX_PATTERN` (case-sensitive),
/// `CLOUDFLARE_EDGE_5XX_MARKER_PATTERN` and `CLOUDFLARE_EDGE_5XX_TITLE_PATTERN`.
static CLOUDFLARE: LazyLock<[Regex; 4]> = LazyLock::new(|| {
    [
        regex(r"(?i)(?-u:\b)Cloudflare\s+(502|52[0-6])(?-u:\b)"),
        regex(r#"(?s)"cloudflare_error"\s*:\s*true"#),
        regex(r"(?i)(^|\s)(502|52[0-6])\s*<!doctype html|error code\s*(502|52[0-6])"),
        regex(r"(?i)\|\s*(502|52[0-6])\s*:"),
    ]
});

/// `NON_RETRYABLE_4XX_PATTERN`: `Error code:`, optional whitespace, then 400–408, 410–449 or
/// 451 as the first three digits (letta-protocol.md §3.6). The prose of §3.6 says "429 is not
/// matched", but `2\d` matches it; every caller tests the retryable-429 pattern first or
/// exempts it (`shouldRetryRunMetadataError`), so a 429 text stays retryable.
pub fn matches_non_retryable_4xx(detail: &str) -> bool {
    NON_RETRYABLE_4XX.is_match(detail)
}

/// The Z.ai error code in a detail (`parseZaiError`, letta-protocol.md §3.6): the first
/// `'code': NNNN, 'message': '…'` (Python repr), else the first JSON equivalent, when its code
/// is one Z.ai documents (500, 1000–1004, 1100–1121, 1200–1234, 1300–1310).
pub fn zai_error_code(detail: &str) -> Option<u32> {
    let known = |c: u32| {
        c == 500
            || (1000..=1004).contains(&c)
            || (1100..=1121).contains(&c)
            || (1200..=1234).contains(&c)
            || (1300..=1310).contains(&c)
    };
    ZAI_CODES.iter().find_map(|pattern| {
        let code = pattern.captures(detail)?.get(1)?.as_str().parse().ok()?;
        known(code).then_some(code)
    })
}

/// Z.ai detail with a non-retryable code (letta-protocol.md §3.6; 1200–1234 and 500 are known
/// but retryable).
pub fn is_zai_non_retryable(detail: &str) -> bool {
    zai_error_code(detail).is_some_and(|c| {
        ZAI_NON_RETRYABLE_CODE_RANGES
            .iter()
            .any(|(lo, hi)| (*lo..=*hi).contains(&c))
    })
}

/// `isNonRetryableProviderErrorDetail`: the lower-cased table, the 4xx pattern, or a Z.ai code
/// (letta-protocol.md §3.6).
pub fn is_non_retryable_provider_detail(detail: &str) -> bool {
    let l = detail.to_lowercase();
    NON_RETRYABLE_PROVIDER_DETAIL_PATTERNS
        .iter()
        .any(|p| l.contains(p))
        || matches_non_retryable_4xx(detail)
        || is_zai_non_retryable(detail)
}

/// A quota limit detail: any non-retryable 429 reason or quota pattern (letta-protocol.md §3.6).
pub fn is_quota_limit_detail(detail: &str) -> bool {
    let l = detail.to_lowercase();
    NON_RETRYABLE_429_REASONS.iter().any(|p| l.contains(p))
        || NON_RETRYABLE_QUOTA_DETAIL_PATTERNS
            .iter()
            .any(|p| l.contains(p))
}

/// `RETRYABLE_429_PATTERN`: case-insensitive `Error code:\s*429|rate limit|too many requests`
/// (letta-protocol.md §3.6).
pub fn matches_retryable_429(detail: &str) -> bool {
    RETRYABLE_429.is_match(detail)
}

/// Cloudflare edge 52x text (letta-protocol.md §3.6, `isCloudflareEdge52xErrorText`): (a)
/// `Cloudflare 502`/`520`–`526` as words; (b) `"cloudflare_error": true`, case-sensitive; (c)
/// text mentioning "cloudflare" that looks like HTML or says "error code", with a 502/520–526
/// marker (`<code> <!doctype html` after a space or at the start, `error code <code>`, or a
/// title `| <code>:`).
pub fn is_cloudflare_edge_52x(detail: &str) -> bool {
    let [formatted, json, marker, title] = &*CLOUDFLARE;
    let l = detail.to_lowercase();
    formatted.is_match(detail)
        || json.is_match(detail)
        || (l.contains("cloudflare")
            && (l.contains("<!doctype html") || l.contains("<html") || l.contains("error code"))
            && (marker.is_match(detail) || title.is_match(detail)))
}
