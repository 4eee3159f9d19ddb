//! Every entry of every table of letta-protocol.md §3.5-3.6.

use super::*;

#[test]
fn every_retryable_pattern_is_case_sensitive_and_retryable() {
    for p in RETRYABLE_PROVIDER_DETAIL_PATTERNS {
        assert!(is_retryable_provider_detail(&format!("xx {p} yy")), "{p}");
        assert!(should_retry_run_metadata_error(None, p), "{p}");
    }
    // Case-sensitive: an upper-cased pattern that is not itself in the table does not match.
    assert!(!is_retryable_provider_detail("ANTHROPIC API ERROR"));
    assert!(!is_retryable_provider_detail("SOCKET HANG UP"));
}

#[test]
fn every_non_retryable_pattern_is_lower_cased_substring() {
    for p in NON_RETRYABLE_PROVIDER_DETAIL_PATTERNS {
        assert!(is_non_retryable_provider_detail(p), "{p}");
        assert!(
            is_non_retryable_provider_detail(&p.to_uppercase()),
            "case-insensitive: {p}"
        );
        // Beats a retryable pattern in the run-metadata rule.
        assert!(
            !should_retry_run_metadata_error(Some("llm_error"), &format!("Connection error: {p}")),
            "{p}"
        );
    }
}

#[test]
fn non_retryable_4xx_pattern_ranges() {
    for code in (400..=408).chain(410..=449).chain([451]) {
        assert!(
            matches_non_retryable_4xx(&format!("Error code: {code} - x")),
            "{code}"
        );
        assert!(
            matches_non_retryable_4xx(&format!("error code:{code}")),
            "{code}"
        );
    }
    for code in [409, 450, 452, 499, 500, 399] {
        assert!(
            !matches_non_retryable_4xx(&format!("Error code: {code} - x")),
            "{code}"
        );
    }
    // The client's pattern has no end boundary: the first three digits decide.
    assert!(matches_non_retryable_4xx("Error code: 4000"));
    assert!(!matches_non_retryable_4xx("Error code: 4500"));
    // The regex matches 429, but a 429 text stays retryable everywhere it is used.
    assert!(matches_non_retryable_4xx("Error code: 429"));
    assert!(should_retry_pre_stream_transient_error(
        None,
        "Error code: 429"
    ));
    assert!(should_retry_run_metadata_error(None, "Error code: 429"));
}

#[test]
fn zai_codes() {
    for (lo, hi) in ZAI_NON_RETRYABLE_CODE_RANGES {
        for c in lo..=hi {
            assert!(
                is_zai_non_retryable(&format!("Z.ai error: {{'code': {c}, 'message': 'x'}}")),
                "{c}"
            );
            assert!(
                is_zai_non_retryable(&format!("{{\"code\": {c}, \"message\": \"x\"}}")),
                "{c}"
            );
        }
    }
    for c in [999, 1005, 1099, 1122, 1200, 1234, 1299, 1311, 500] {
        assert!(
            !is_zai_non_retryable(&format!("{{'code': {c}, 'message': 'x'}}")),
            "{c}"
        );
    }
    assert_eq!(zai_error_code("'code': 1113 but no message"), None);
}

#[test]
fn run_error_types_and_quota_tables() {
    for t in NON_RETRYABLE_RUN_ERROR_TYPES {
        assert!(
            !should_retry_run_metadata_error(Some(t), "Connection error"),
            "{t}"
        );
        assert!(
            !should_retry_post_stream_run_error(&StopReason::LlmApiError, Some(t), "x", None),
            "{t}"
        );
    }
    for r in NON_RETRYABLE_429_REASONS
        .iter()
        .chain(NON_RETRYABLE_QUOTA_DETAIL_PATTERNS.iter())
    {
        assert!(is_quota_limit_detail(&r.to_uppercase()), "{r}");
        assert!(
            !should_retry_pre_stream_transient_error(Some(429), r),
            "{r}"
        );
        assert!(
            !should_retry_pre_stream_transient_error(Some(503), r),
            "{r}"
        );
        assert!(
            !should_retry_run_metadata_error(Some("llm_error"), r),
            "{r}"
        );
    }
    for d in [
        "Error code: 429",
        "error code:429",
        "Rate Limit hit",
        "Too Many Requests",
    ] {
        assert!(matches_retryable_429(d), "{d}");
        assert!(should_retry_pre_stream_transient_error(None, d), "{d}");
    }
    assert!(!matches_retryable_429("Error code: 430"));
}

#[test]
fn cloudflare_edge_texts() {
    for code in CLOUDFLARE_EDGE_CODES {
        assert!(
            is_cloudflare_edge_52x(&format!("Cloudflare {code}")),
            "{code}"
        );
        assert!(
            is_cloudflare_edge_52x(&format!(
                "<!DOCTYPE html><title>x | {code}: down</title> cloudflare"
            )),
            "{code}"
        );
        assert!(
            is_cloudflare_edge_52x(&format!("cloudflare error code {code}")),
            "{code}"
        );
        assert!(
            is_cloudflare_edge_52x(&format!("{code} <!DOCTYPE html> cloudflare")),
            "{code}"
        );
        assert_eq!(
            get_transient_retry_delay_ms(1, &format!("Cloudflare {code}"), None),
            5000
        );
    }
    assert!(is_cloudflare_edge_52x(
        "{\"cloudflare_error\": true, \"status\": 521}"
    ));
    assert!(!is_cloudflare_edge_52x("Cloudflare 5210"));
    assert!(!is_cloudflare_edge_52x("Cloudflare 503"));
    assert!(!is_cloudflare_edge_52x("<html>error code 521</html>"));
}

#[test]
fn display_busy_patterns() {
    for p in DISPLAY_BUSY_PATTERNS {
        assert!(is_display_busy_error(&p.to_uppercase()), "{p}");
    }
    assert!(is_display_busy_error("another request is processed"));
    assert!(is_display_busy_error("Another request is being processed"));
}
