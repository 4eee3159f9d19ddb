//! When a world's simulated time zero is on the wall clock: the fixed default epoch and a
//! scenario's `[network] start`. Its own module so that the scenario, which names a start, and
//! the world, which runs from it, both depend on it and not on each other.

/// Unix time of simulated time zero: 2026-01-01T00:00:00Z. Fixed so dates in bodies replay
/// (turmoil's default epoch is the wall clock, turmoil-hyper-probe.md §4).
pub const EPOCH_UNIX_MS: u64 = 1_767_225_600_000;

/// When simulated time zero is on the world's wall clock: a scenario's `[network] start`, an
/// RFC 3339 UTC instant such as `2026-03-09T09:41:07Z` (a fraction to the millisecond allowed).
/// Message dates, `Retry-After` dates and the time texts the server writes all count from it,
/// so a scenario can run at any hour or across a month's, a year's or a century's end. The
/// default is [`EPOCH_UNIX_MS`]. The calendar arithmetic here is the harness's own, a walk
/// over years and months, so a model's date code can be wrong without moving the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorldStart(pub u64);

impl Default for WorldStart {
    fn default() -> Self {
        WorldStart(EPOCH_UNIX_MS)
    }
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn month_days(year: u64, month: u64) -> u64 {
    match month {
        2 => 28 + u64::from(is_leap(year)),
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to `year-month-day`, or `None` for a day the calendar lacks (a 29
/// February of a century year not divisible by 400, a 31 April, a year before 1970): the
/// harness's own walk over years and months, which the oracles that read a date use too.
pub fn days_since_epoch(year: u64, month: u64, day: u64) -> Option<u64> {
    if year < 1970 || !(1..=12).contains(&month) || day == 0 || day > month_days(year, month) {
        return None;
    }
    Some(
        (1970..year)
            .map(|y| 365 + u64::from(is_leap(y)))
            .sum::<u64>()
            + (1..month).map(|m| month_days(year, m)).sum::<u64>()
            + day
            - 1,
    )
}

impl WorldStart {
    /// Unix milliseconds of simulated time zero.
    pub fn unix_ms(self) -> u64 {
        self.0
    }

    /// True for the default start (a scenario that names none writes none back).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.f]Z`, years 1970 to 9999, a date the calendar has.
    pub fn parse(text: &str) -> Result<WorldStart, String> {
        let bad = |why: &str| {
            format!(
                "{why}: expected a UTC instant such as \"2026-03-09T09:41:07Z\" (RFC 3339 with `Z`, an optional fraction to the millisecond), found {text:?}"
            )
        };
        let (main, fraction) = match text.strip_suffix('Z') {
            Some(rest) => rest.split_once('.').unwrap_or((rest, "")),
            None => return Err(bad("no `Z`")),
        };
        let shape = main.len() == 19
            && main.bytes().enumerate().all(|(i, b)| match i {
                4 | 7 => b == b'-',
                10 => b == b'T',
                13 | 16 => b == b':',
                _ => b.is_ascii_digit(),
            });
        let fraction_ok = fraction.len() <= 3 && fraction.bytes().all(|b| b.is_ascii_digit());
        if !shape || !fraction_ok || text.contains(".Z") {
            return Err(bad("not an instant"));
        }
        let num = |r: std::ops::Range<usize>| main[r].parse::<u64>().unwrap_or(0);
        let (year, month, day) = (num(0..4), num(5..7), num(8..10));
        let (hour, minute, second) = (num(11..13), num(14..16), num(17..19));
        if year < 1970 {
            return Err(bad("before 1970"));
        }
        let Some(days) = days_since_epoch(year, month, day) else {
            return Err(bad("no such date"));
        };
        if hour > 23 || minute > 59 || second > 59 {
            return Err(bad("no such time of day"));
        }
        let millis = format!("{fraction:0<3}").parse::<u64>().unwrap_or(0);
        Ok(WorldStart(
            ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis,
        ))
    }
}

impl std::fmt::Display for WorldStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (mut days, of_day) = (self.0 / 86_400_000, self.0 % 86_400_000);
        let mut year = 1970;
        while days >= 365 + u64::from(is_leap(year)) {
            days -= 365 + u64::from(is_leap(year));
            year += 1;
        }
        let mut month = 1;
        while days >= month_days(year, month) {
            days -= month_days(year, month);
            month += 1;
        }
        let (secs, millis) = (of_day / 1000, of_day % 1000);
        write!(
            f,
            "{year:04}-{month:02}-{:02}T{:02}:{:02}:{:02}",
            days + 1,
            secs / 3600,
            secs % 3600 / 60,
            secs % 60
        )?;
        if millis != 0 {
            write!(f, ".{millis:03}")?;
        }
        f.write_str("Z")
    }
}

impl serde::Serialize for WorldStart {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for WorldStart {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        WorldStart::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::WorldStart;
    use crate::model::letta::server::ids::iso_date;

    /// The default start is the fixed epoch, and every instant prints as it parses.
    #[test]
    fn a_start_prints_as_it_parses() {
        assert_eq!(WorldStart::default().to_string(), "2026-01-01T00:00:00Z");
        for text in [
            "1970-01-01T00:00:00Z",
            "2000-02-29T12:00:00Z",
            "2026-03-09T09:41:07.250Z",
            "2100-02-28T23:59:58Z",
            "2100-03-01T00:00:00Z",
            "9999-12-31T23:59:59.999Z",
        ] {
            assert_eq!(WorldStart::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            WorldStart::parse("2026-03-09T09:41:07.5Z")
                .unwrap()
                .to_string(),
            "2026-03-09T09:41:07.500Z"
        );
    }

    /// The harness's year-and-month walk and the server model's civil arithmetic agree on
    /// every 97th day from 1970 to 2500, across the century years that are not leap years.
    #[test]
    fn the_harness_calendar_agrees_with_the_server_model() {
        for day in (0..193_000u64).step_by(97) {
            let ms = day * 86_400_000 + 37_000;
            let text = WorldStart(ms).to_string();
            assert_eq!(WorldStart::parse(&text), Ok(WorldStart(ms)), "{text}");
            assert_eq!(
                format!("{}Z", &iso_date(ms)[..19]),
                text,
                "day {day} since 1970"
            );
        }
    }

    /// What a start may not be, each refusal saying why.
    #[test]
    fn a_start_that_is_no_instant_is_refused_with_the_reason() {
        for (text, why) in [
            ("2026-03-09 09:41:07", "no `Z`"),
            ("2026-03-09T09:41:07+00:00", "no `Z`"),
            ("2026-3-09T09:41:07Z", "not an instant"),
            ("2026-03-09T09:41:07.Z", "not an instant"),
            ("2026-03-09T09:41:07.1234Z", "not an instant"),
            ("2026-03-09T09:41:0éZ", "not an instant"),
            ("1969-12-31T23:59:59Z", "before 1970"),
            ("2100-02-29T00:00:00Z", "no such date"),
            ("2026-13-01T00:00:00Z", "no such date"),
            ("2026-04-31T00:00:00Z", "no such date"),
            ("2026-03-09T24:00:00Z", "no such time of day"),
            ("2026-03-09T23:59:60Z", "no such time of day"),
        ] {
            let e = WorldStart::parse(text).unwrap_err();
            assert!(e.starts_with(why), "{text}: {e}");
            assert!(e.contains("such as \"2026-03-09T09:41:07Z\""), "{e}");
        }
    }
}
