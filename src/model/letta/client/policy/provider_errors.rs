//! The pattern tables of letta-protocol.md §3.5-3.6: which provider and run errors are
//! retryable, with the helpers that read them (4xx ranges, Z.ai codes, quota limits, 429
//! reasons, Cloudflare edge pages).

use super::classifiers::is_word_byte;

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

/// `NON_RETRYABLE_4XX_PATTERN`: case-insensitive `Error code:` + optional spaces +
/// `4(0[0-8]|1\d|2\d|3\d|4\d|51)`, not followed by another digit (letta-protocol.md §3.6).
/// The regex is followed exactly: it matches 400–408, 410–449 and 451. The prose of §3.6 says
/// "429 is not matched", but `2\d` matches it; every caller tests the retryable-429 pattern
/// first or exempts it (`shouldRetryRunMetadataError`), so a 429 text stays retryable.
pub fn matches_non_retryable_4xx(detail: &str) -> bool {
    let l = detail.to_lowercase();
    let mut from = 0;
    while let Some(pos) = l[from..].find("error code:") {
        let rest = &l[from + pos + "error code:".len()..];
        let digits_start = rest.trim_start();
        let code: String = digits_start
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if code.len() == 3
            && let Ok(n) = code.parse::<u32>()
            && ((400..=408).contains(&n) || (410..=449).contains(&n) || n == 451)
        {
            return true;
        }
        from += pos + 1;
    }
    false
}

/// The Z.ai error code in a detail: `'code': NNNN, 'message': '...'` (Python repr) or the JSON
/// equivalent `"code": NNNN, "message"` (letta-protocol.md §3.6).
pub fn zai_error_code(detail: &str) -> Option<u32> {
    for key in ["'code':", "\"code\":"] {
        let mut from = 0;
        while let Some(pos) = detail[from..].find(key) {
            let rest = detail[from + pos + key.len()..].trim_start();
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let after = rest[digits.len()..].trim_start();
            let msg_key = if key.starts_with('\'') {
                "'message'"
            } else {
                "\"message\""
            };
            if !digits.is_empty()
                && after.starts_with(',')
                && after[1..].trim_start().starts_with(msg_key)
                && let Ok(n) = digits.parse()
            {
                return Some(n);
            }
            from += pos + 1;
        }
    }
    None
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
    let l = detail.to_lowercase();
    if l.contains("rate limit") || l.contains("too many requests") {
        return true;
    }
    let mut from = 0;
    while let Some(pos) = l[from..].find("error code:") {
        let rest = l[from + pos + "error code:".len()..].trim_start();
        if rest.starts_with("429") {
            return true;
        }
        from += pos + 1;
    }
    false
}

/// Cloudflare edge 52x text (letta-protocol.md §3.6): (a) `Cloudflare 502`/`520`–`526` as
/// words; (b) JSON text with `"cloudflare_error": true`; (c) HTML mentioning "cloudflare" that
/// looks like HTML or says "error code", with a 502/520–526 marker (`<code> <!doctype html`,
/// `error code <code>`, or a title `| <code>:`).
pub fn is_cloudflare_edge_52x(detail: &str) -> bool {
    let l = detail.to_lowercase();
    // (a)
    for code in CLOUDFLARE_EDGE_CODES {
        let needle = format!("cloudflare {code}");
        let mut from = 0;
        while let Some(pos) = l[from..].find(&needle) {
            let at = from + pos;
            let end = at + needle.len();
            let before_ok = at == 0 || !is_word_byte(l.as_bytes()[at - 1]);
            let after_ok = end == l.len() || !is_word_byte(l.as_bytes()[end]);
            if before_ok && after_ok {
                return true;
            }
            from = at + 1;
        }
    }
    // (b)
    let compact: String = l.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.contains("\"cloudflare_error\":true") {
        return true;
    }
    // (c)
    if l.contains("cloudflare")
        && (l.contains("<html") || l.contains("<!doctype html") || l.contains("error code"))
    {
        for code in CLOUDFLARE_EDGE_CODES {
            if l.contains(&format!("{code} <!doctype html"))
                || l.contains(&format!("error code {code}"))
                || l.contains(&format!("| {code}:"))
            {
                return true;
            }
        }
    }
    false
}
