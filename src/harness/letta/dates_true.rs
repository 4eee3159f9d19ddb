//! `dates-true` (docs/invariants.md): every HTTP date the Letta server writes names the instant
//! it means on the world's clock. Today that is a `Retry-After` written as a date (RFC 9110
//! §10.2.3): an IMF-fixdate (RFC 9110 §5.6.7) of a day the calendar has, under that day's own
//! weekday, saying the instant of its answer plus the wait the server asks for, cut to the
//! second. A client reads such a date as "the date less my clock" (letta-protocol.md §3.8), so
//! a date that is a day off, or a 29 February the year lacks read as 1 March, moves or hides
//! the wait without any turn's outcome showing it. The compaction summary's `time` text is held
//! to the world's clock by `compaction-safe`.
//!
//! The oracle reads the date with the harness's own calendar ([`days_since_epoch`]), not the
//! server model's formatter or the client model's parser, so a wrong calendar in either cannot
//! make the date look right.

use crate::harness::invariants::{DATES_TRUE, Violation};
use crate::harness::trace::TraceEvent;
use crate::harness::world_start::{WorldStart, days_since_epoch};
use crate::model::port::observe::Observation;

const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `dates-true` over a Letta trace whose simulated time zero is `start`.
pub fn dates_true(events: &[TraceEvent], start: WorldStart) -> Vec<Violation> {
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let Observation::ServerRetryAfter {
            status,
            header,
            wait_ms,
            dated: true,
            broken,
        } = &e.obs
        else {
            continue;
        };
        // A date broken on purpose must be one no reader takes for a date.
        if let Some(field) = broken {
            if let Ok(ms) = imf_fixdate_unix_ms(header) {
                out.push(Violation::at(
                    DATES_TRUE,
                    i,
                    format!(
                        "the server's {status} was to write its `Retry-After` date with the {field} out of range, but `{header}` reads as {}",
                        WorldStart(ms)
                    ),
                ));
            }
            continue;
        }
        let meant = start.unix_ms() + e.t_ms + wait_ms;
        let said = match imf_fixdate_unix_ms(header) {
            Ok(ms) => ms,
            Err(why) => {
                out.push(Violation::at(
                    DATES_TRUE,
                    i,
                    format!(
                        "the server's {status} says `Retry-After: {header}`, {why}; it meant {} (an HTTP date is an IMF-fixdate such as \"Sun, 06 Nov 1994 08:49:37 GMT\", RFC 9110 §5.6.7)",
                        WorldStart(meant)
                    ),
                ));
                continue;
            }
        };
        if said > meant || meant - said >= 1000 {
            out.push(Violation::at(
                DATES_TRUE,
                i,
                format!(
                    "the server's {status} says `Retry-After: {header}`, which is {}, but it was written at {} asking for a wait of {wait_ms} ms: {}, cut to the second",
                    WorldStart(said),
                    WorldStart(start.unix_ms() + e.t_ms),
                    WorldStart(meant)
                ),
            ));
        }
    }
    out
}

/// Unix milliseconds of an IMF-fixdate (`Mon, 01 Mar 2100 01:00:01 GMT`), or why it is none:
/// not of that form, a day the calendar lacks, a weekday that is not that day's, no such time.
pub(crate) fn imf_fixdate_unix_ms(text: &str) -> Result<u64, String> {
    let not_one = || "which is not an IMF-fixdate".to_string();
    let b = text.as_bytes();
    let shape = b.len() == 29
        && &b[3..5] == b", "
        && b[7] == b' '
        && b[11] == b' '
        && b[16] == b' '
        && b[19] == b':'
        && b[22] == b':'
        && &b[25..] == b" GMT";
    if !shape {
        return Err(not_one());
    }
    let digits = |r: std::ops::Range<usize>| {
        text.get(r)
            .filter(|d| d.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|d| d.parse::<u64>().ok())
    };
    let name = |r: std::ops::Range<usize>, names: &[&str]| {
        text.get(r).and_then(|n| names.iter().position(|m| *m == n))
    };
    let (Some(weekday), Some(day), Some(month), Some(year), Some(hour), Some(minute), Some(second)) = (
        name(0..3, &WEEKDAYS),
        digits(5..7),
        name(8..11, &MONTHS),
        digits(12..16),
        digits(17..19),
        digits(20..22),
        digits(23..25),
    ) else {
        return Err(not_one());
    };
    let month_name = MONTHS[month];
    if year < 1970 {
        return Err(format!(
            "a year before 1970 ({year}), which no clock in Unix time reads"
        ));
    }
    let Some(days) = days_since_epoch(year, month as u64 + 1, day) else {
        return Err(format!(
            "a day the calendar does not have ({day:02} {month_name} {year})"
        ));
    };
    // 1970-01-01 was a Thursday, index 3 counting from Monday.
    let true_weekday = ((days + 3) % 7) as usize;
    if weekday != true_weekday {
        return Err(format!(
            "whose weekday is wrong ({day:02} {month_name} {year} is a {})",
            WEEKDAYS[true_weekday]
        ));
    }
    // RFC 9110 §5.6.7 allows a leap second's 60; a server's clock in Unix time never reads it.
    if second == 60 {
        return Err("a leap second, which a clock in Unix time never reads".into());
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(format!(
            "a time of day there is not ({hour:02}:{minute:02}:{second:02})"
        ));
    }
    Ok(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry_after(t_ms: u64, header: &str, wait_ms: u64) -> TraceEvent {
        TraceEvent {
            t_ms,
            host: "server".into(),
            obs: Observation::ServerRetryAfter {
                status: 503,
                header: header.into(),
                wait_ms,
                dated: true,
                broken: None,
            },
        }
    }

    fn start(text: &str) -> WorldStart {
        WorldStart::parse(text).unwrap()
    }

    /// RFC 9110's own example, and a date after 2100's February, which has no 29th.
    #[test]
    fn an_imf_fixdate_reads_as_its_instant() {
        assert_eq!(
            imf_fixdate_unix_ms("Sun, 06 Nov 1994 08:49:37 GMT"),
            Ok(784_111_777_000)
        );
        assert_eq!(
            imf_fixdate_unix_ms("Mon, 01 Mar 2100 01:00:01 GMT").map(WorldStart),
            Ok(start("2100-03-01T01:00:01Z"))
        );
    }

    /// What is not an IMF-fixdate, or names a day or a time there is not, says so.
    #[test]
    fn a_date_that_is_no_day_says_why() {
        for (text, why) in [
            (
                "Mon, 29 Feb 2100 01:00:01 GMT",
                "a day the calendar does not have",
            ),
            ("Tue, 01 Mar 2100 01:00:01 GMT", "whose weekday is wrong"),
            (
                "Mon, 01 Mar 2100 24:00:01 GMT",
                "a time of day there is not",
            ),
            ("Mon, 01 Mar 2100 00:59:60 GMT", "a leap second"),
            ("Wed, 31 Dec 1969 23:59:59 GMT", "a year before 1970"),
            (
                "Mon, 01 Mar 2100 01:00:01 UTC",
                "which is not an IMF-fixdate",
            ),
            (
                "Monday, 01-Mar-00 01:00:01 GMT",
                "which is not an IMF-fixdate",
            ),
            (
                "Mon, 1 Mar 2100 01:00:01 GMT",
                "which is not an IMF-fixdate",
            ),
            (
                "Mon, 01 Mär 2100 01:00:0 GMT",
                "which is not an IMF-fixdate",
            ),
            (
                "Mon, 01 äx 2100 01:00:01 GMT",
                "which is not an IMF-fixdate",
            ),
            ("3", "which is not an IMF-fixdate"),
        ] {
            let e = imf_fixdate_unix_ms(text).unwrap_err();
            assert!(e.starts_with(why), "{text}: {e}");
        }
    }

    /// The date the server wrote is its answer's instant plus the wait, cut to the second; one
    /// a day off, or one that is no day, is a violation naming what it meant.
    #[test]
    fn a_retry_after_date_must_name_the_instant_the_server_meant() {
        let at = start("2100-03-01T00:59:58Z");
        let ok = retry_after(250, "Mon, 01 Mar 2100 01:00:01 GMT", 3000);
        assert!(dates_true(&[ok], at).is_empty());
        let leap = retry_after(250, "Mon, 29 Feb 2100 01:00:01 GMT", 3000);
        let v = dates_true(&[leap], at);
        assert_eq!(v.len(), 1);
        assert!(
            v[0].message.starts_with(
                "the server's 503 says `Retry-After: Mon, 29 Feb 2100 01:00:01 GMT`, a day the calendar does not have (29 Feb 2100); it meant 2100-03-01T01:00:01.250Z"
            ),
            "{}",
            v[0].message
        );
        let late = retry_after(250, "Mon, 01 Mar 2100 02:00:01 GMT", 3000);
        let v = dates_true(&[late], at);
        assert_eq!(
            v[0].message,
            "the server's 503 says `Retry-After: Mon, 01 Mar 2100 02:00:01 GMT`, which is 2100-03-01T02:00:01Z, but it was written at 2100-03-01T00:59:58.250Z asking for a wait of 3000 ms: 2100-03-01T01:00:01.250Z, cut to the second"
        );
        // A date a second early would let the client retry before the wait is over.
        let early = retry_after(0, "Mon, 01 Mar 2100 01:00:00 GMT", 3000);
        assert_eq!(dates_true(&[early], at).len(), 1);
        // A header in seconds is no date.
        let mut seconds = retry_after(0, "3", 3000);
        if let Observation::ServerRetryAfter { dated, .. } = &mut seconds.obs {
            *dated = false;
        }
        assert!(dates_true(&[seconds], at).is_empty());
        // A date broken on purpose must not read as one.
        let broken = |header: &str| {
            let mut e = retry_after(250, header, 3000);
            if let Observation::ServerRetryAfter { broken, .. } = &mut e.obs {
                *broken = Some("hour".into());
            }
            e
        };
        assert!(dates_true(&[broken("Mon, 01 Mar 2100 25:00:01 GMT")], at).is_empty());
        let v = dates_true(&[broken("Mon, 01 Mar 2100 01:00:01 GMT")], at);
        assert_eq!(
            v[0].message,
            "the server's 503 was to write its `Retry-After` date with the hour out of range, but `Mon, 01 Mar 2100 01:00:01 GMT` reads as 2100-03-01T01:00:01Z"
        );
    }
}
