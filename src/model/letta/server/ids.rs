//! Identifiers and dates the server mints, deterministic from its seeded PRNG and the clock.

use rand::Rng as _;
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

/// A UUIDv4 string drawn from the server's PRNG (the real server uses random uuids; ours are
/// seeded so runs replay byte for byte).
pub fn uuid4(rng: &mut ChaCha8Rng) -> String {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The assistant `otid` a 0.16.8 server derives from a `message-<uuid>` id: the uuid without the
/// prefix, its last byte keeping only the top bit, plus the content index
/// (captures/letta_server/PROVENANCE.md, "Token streaming": `…8b28` → `…8b00`, `…b294` → `…b280`).
pub fn assistant_otid(message_id: &str, index: u8) -> String {
    let uuid = message_id.strip_prefix("message-").unwrap_or(message_id);
    if uuid.len() < 2 {
        return uuid.to_string();
    }
    let (head, last) = uuid.split_at(uuid.len() - 2);
    let byte = u8::from_str_radix(last, 16).unwrap_or(0);
    format!("{head}{:02x}", (byte & 0x80) | (index & 0x7f))
}

/// The request token of a send: SHA-256 of all otids joined with `|`, first 16 hex chars
/// (letta-protocol.md §2.4, legacy server). `None` when the request has no otids (the server
/// then uses a random token, i.e. no dedupe).
pub fn request_token(otids: &[&str]) -> Option<String> {
    if otids.is_empty() {
        return None;
    }
    let digest = Sha256::digest(otids.join("|").as_bytes());
    Some(digest.iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// A UTC instant broken into its calendar parts, whole seconds.
struct Civil {
    /// Days since 1970-01-01.
    days: u64,
    year: i64,
    month: u32,
    day: u32,
    hour: u64,
    minute: u64,
    second: u64,
}

fn civil(unix_ms: u64) -> Civil {
    let secs = unix_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    Civil {
        days,
        year,
        month,
        day,
        hour: rem / 3600,
        minute: (rem % 3600) / 60,
        second: rem % 60,
    }
}

/// `YYYY-MM-DDTHH:MM:SS+00:00`, whole seconds, as the real server stamps `date`.
pub fn iso_date(unix_ms: u64) -> String {
    let c = civil(unix_ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}+00:00",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// The IMF-fixdate of an HTTP `Date` or `Retry-After` header, whole seconds:
/// `Fri, 04 Dec 2026 11:22:24 GMT` (RFC 9110 §5.6.7).
pub fn http_date(unix_ms: u64) -> String {
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let c = civil(unix_ms);
    // 1970-01-01 was a Thursday.
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[(c.days % 7) as usize],
        c.day,
        MONTHS[(c.month as usize).saturating_sub(1).min(11)],
        c.year,
        c.hour,
        c.minute,
        c.second
    )
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, as the real server stamps `created_at` / `updated_at`
/// (captures/letta_e2e: `"2026-11-30T00:45:55.428681Z"`; ours has millisecond resolution).
pub fn iso_datetime(unix_ms: u64) -> String {
    let base = iso_date(unix_ms);
    format!("{}.{:03}000Z", &base[..19], unix_ms % 1000)
}

/// The `time` a Letta tool-result JSON carries: `2026-11-30 12:46:10 AM UTC+0000`
/// (captures/letta_e2e b, the denial the model saw).
pub fn letta_time(unix_ms: u64) -> String {
    let base = iso_date(unix_ms);
    let hour: u32 = base[11..13].parse().unwrap_or(0);
    let (h12, ampm) = match hour {
        0 => (12, "AM"),
        1..=11 => (hour, "AM"),
        12 => (12, "PM"),
        _ => (hour - 12, "PM"),
    };
    format!("{} {h12:02}:{} {ampm} UTC+0000", &base[..10], &base[14..19])
}

/// Python's `repr` of an aware UTC `datetime` as pydantic builds it:
/// `datetime.datetime(2026, 11, 30, 0, 13, 49, 370795, tzinfo=TzInfo(0))`, trailing zero
/// seconds and microseconds left out as Python does (capture f5's actor `updated_at`).
pub fn py_datetime(unix_ms: u64) -> String {
    let base = iso_date(unix_ms);
    let num = |r: std::ops::Range<usize>| base[r].parse::<u32>().unwrap_or(0);
    let (sec, micros) = (num(17..19), (unix_ms % 1000) as u32 * 1000);
    let mut parts = vec![
        num(0..4).to_string(),
        num(5..7).to_string(),
        num(8..10).to_string(),
        num(11..13).to_string(),
        num(14..16).to_string(),
    ];
    if sec != 0 || micros != 0 {
        parts.push(sec.to_string());
    }
    if micros != 0 {
        parts.push(micros.to_string());
    }
    format!("datetime.datetime({}, tzinfo=TzInfo(0))", parts.join(", "))
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn otid_matches_captured_derivation() {
        assert_eq!(
            assistant_otid("message-2dc54175-e0d8-4433-838b-5c87a66a8b28", 0),
            "2dc54175-e0d8-4433-838b-5c87a66a8b00"
        );
        assert!(assistant_otid("message-x-b294", 0).ends_with("b280"));
        // The last byte is rewritten however short the id: a two-character one is all byte;
        // shorter ones have no byte to rewrite and pass through.
        assert_eq!(assistant_otid("message-b2", 1), "81");
        assert_eq!(assistant_otid("message-b", 1), "b");
        assert_eq!(assistant_otid("message-", 1), "");
    }

    /// The closed form against a walk one day at a time from 1970-01-01 to 2498: its century
    /// terms are zero from 2000-03-01 to 2100-02-28, the century the simulated clock lives in,
    /// so a test of this decade's dates alone cannot hold them (the walk crosses 2000's leap day,
    /// and 2100's, 2200's and 2300's absent ones).
    #[test]
    fn civil_dates_match_a_day_by_day_walk_across_centuries() {
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let month_len = |y: i64, m: u32| match m {
            2 if leap(y) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        let (mut year, mut month, mut day) = (1970_i64, 1_u32, 1_u32);
        for days in 0..193_000_i64 {
            assert_eq!(civil_from_days(days), (year, month, day), "day {days}");
            day += 1;
            if day > month_len(year, month) {
                day = 1;
                month += 1;
                if month > 12 {
                    month = 1;
                    year += 1;
                }
            }
        }
        assert!(year >= 2498, "the walk reached {year}");
        assert_eq!(iso_date(4_107_542_400_000), "2100-03-01T00:00:00+00:00");
    }

    #[test]
    fn http_dates_are_imf_fixdates() {
        // RFC 9110 §5.6.7's example.
        assert_eq!(http_date(784_111_777_000), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(
            http_date(1_795_998_450_999),
            "Mon, 30 Nov 2026 00:27:30 GMT"
        );
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn dates_and_uuids() {
        assert_eq!(iso_date(1_795_998_450_000), "2026-11-30T00:27:30+00:00");
        assert_eq!(
            iso_datetime(1_795_998_450_123),
            "2026-11-30T00:27:30.123000Z"
        );
        // captures/letta_e2e b: "2026-11-30 12:46:10 AM UTC+0000".
        assert_eq!(
            letta_time(1_795_999_570_000),
            "2026-11-30 12:46:10 AM UTC+0000"
        );
        assert_eq!(
            letta_time(1_795_999_570_000 + 13 * 3_600_000),
            "2026-11-30 01:46:10 PM UTC+0000"
        );
        // Every hour on the 12-hour clock: 11 AM, noon, and 11 PM (23 - 12, not 23 / 12).
        for (hours, shown) in [
            (11, "11:46:10 AM"),
            (12, "12:46:10 PM"),
            (23, "11:46:10 PM"),
        ] {
            assert_eq!(
                letta_time(1_795_999_570_000 + hours * 3_600_000),
                format!("2026-11-30 {shown} UTC+0000")
            );
        }
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let u = uuid4(&mut rng);
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_eq!(request_token(&["a"]).unwrap().len(), 16);
        assert_eq!(request_token(&[]), None);
        assert_eq!(
            py_datetime(1_795_997_629_370),
            "datetime.datetime(2026, 11, 30, 0, 13, 49, 370000, tzinfo=TzInfo(0))"
        );
        assert_eq!(
            py_datetime(1_767_225_600_000),
            "datetime.datetime(2026, 1, 1, 0, 0, tzinfo=TzInfo(0))"
        );
        // Python writes the seconds when they or the microseconds are not zero.
        assert_eq!(
            py_datetime(1_795_997_629_000),
            "datetime.datetime(2026, 11, 30, 0, 13, 49, tzinfo=TzInfo(0))"
        );
        assert_eq!(
            py_datetime(1_767_225_600_005),
            "datetime.datetime(2026, 1, 1, 0, 0, 0, 5000, tzinfo=TzInfo(0))"
        );
    }
}
