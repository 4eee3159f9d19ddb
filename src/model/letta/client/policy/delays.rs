//! The delays of letta-protocol.md §3.8: the retry delay of each category, `Retry-After`, and
//! the SDK's own retry layer (§3.9).

use super::budgets::{
    CLOUDFLARE_BASE_DELAY_MS, CONVERSATION_BUSY_BASE_DELAY_MS, EMPTY_RESPONSE_STEP_MS,
    TRANSIENT_BASE_DELAY_MS,
};
use super::provider_errors::is_cloudflare_edge_52x;

/// Categories of `getRetryDelayMs` (letta-protocol.md §3.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayCategory {
    TransientProvider,
    ConversationBusy,
    EmptyResponse,
}

/// `getRetryDelayMs({category, attempt, detail, retryAfterMs})` (letta-protocol.md §3.8):
/// transient uses a parsed Retry-After verbatim, else `base · 2^(attempt-1)` with base 1000 ms
/// (5000 ms for a Cloudflare edge 52x detail), no cap; busy `10000 · 2^(attempt-1)`; empty
/// `500 · attempt`.
pub fn get_retry_delay_ms(
    category: DelayCategory,
    attempt: u32,
    detail: &str,
    retry_after_ms: Option<u64>,
) -> u64 {
    let exp = |base: u64| base.saturating_mul(1u64 << attempt.saturating_sub(1).min(40));
    match category {
        DelayCategory::TransientProvider => match retry_after_ms {
            Some(ms) => ms,
            None if is_cloudflare_edge_52x(detail) => exp(CLOUDFLARE_BASE_DELAY_MS),
            None => exp(TRANSIENT_BASE_DELAY_MS),
        },
        DelayCategory::ConversationBusy => exp(CONVERSATION_BUSY_BASE_DELAY_MS),
        DelayCategory::EmptyResponse => EMPTY_RESPONSE_STEP_MS.saturating_mul(attempt as u64),
    }
}

/// `getTransientRetryDelayMs`: the transient category (A.3.1).
pub fn get_transient_retry_delay_ms(
    attempt: u32,
    detail: &str,
    retry_after_ms: Option<u64>,
) -> u64 {
    get_retry_delay_ms(
        DelayCategory::TransientProvider,
        attempt,
        detail,
        retry_after_ms,
    )
}

/// `parseRetryAfterHeaderMs(value)` (letta-protocol.md §3.8): numeric → seconds × 1000
/// (rounded); otherwise an HTTP date minus `now_epoch_ms` (never negative); unparseable →
/// `None`. HTTP dates are read in the IMF-fixdate form (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn parse_retry_after_header_ms(value: &str, now_epoch_ms: u64) -> Option<u64> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if let Ok(secs) = v.parse::<f64>() {
        if !secs.is_finite() {
            return None;
        }
        return Some((secs * 1000.0).round().max(0.0) as u64);
    }
    let at = parse_imf_fixdate_ms(v)?;
    Some(at.saturating_sub(now_epoch_ms))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` → Unix epoch ms.
pub fn parse_imf_fixdate_ms(v: &str) -> Option<u64> {
    let rest = v.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split_whitespace().collect();
    if parts.len() != 5 || parts[4] != "GMT" {
        return None;
    }
    let day: u32 = parts[0].parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[1])? as u32
        + 1;
    let year: i64 = parts[2].parse().ok()?;
    let hms: Vec<u64> = parts[3]
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if hms.len() != 3 || hms[0] > 23 || hms[1] > 59 || hms[2] > 60 || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if days < 0 {
        return None;
    }
    Some(((days as u64 * 86_400) + hms[0] * 3600 + hms[1] * 60 + hms[2]) * 1000)
}

/// Proleptic Gregorian date → days since 1970-01-01 (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The SDK's own retry delay for calls that keep `maxRetries = 2` (letta-protocol.md §2.8):
/// `retry-after-ms`, else `retry-after`, else `min(0.5 s · 2^n, 8 s)` with up to 25 % negative
/// jitter. `jitter` is a number in `[0, 1)` from the caller's seeded PRNG; `retries_done` is `n`.
pub fn sdk_retry_delay_ms(
    retries_done: u32,
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now_epoch_ms: u64,
    jitter: f64,
) -> u64 {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return ms.round() as u64;
    }
    if let Some(ms) = retry_after.and_then(|v| parse_retry_after_header_ms(v, now_epoch_ms)) {
        return ms;
    }
    let base = (500.0 * 2f64.powi(retries_done.min(30) as i32)).min(8000.0);
    (base * (1.0 - 0.25 * jitter.clamp(0.0, 1.0))).round() as u64
}

/// The SDK retries a status when `x-should-retry: true`, or 408, 409, 429, >= 500, and never
/// when `x-should-retry: false` (letta-protocol.md §2.8).
pub fn sdk_should_retry(status: Option<u16>, x_should_retry: Option<&str>) -> bool {
    match x_should_retry {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    match status {
        None => true, // connection errors are retried
        Some(s) => matches!(s, 408 | 409 | 429) || s >= 500,
    }
}

/// The SDK's default `maxRetries` (letta-protocol.md §2.8).
pub const SDK_MAX_RETRIES: u32 = 2;
