//! When a rollout's waves may start (`spec.rollout.window`) and how long it rests between them
//! (`spec.rollout.pauseBetweenWaves`): the fields, and the rules that read them.
//!
//! A window opens on the days listed, at `start` in its time zone, and closes at `end` (the
//! next day when `end` is not after `start`). A wave starts only while a window is open; a wave
//! that started runs to its end. Times are wall-clock times of the zone: a window of 22:00 to
//! 04:00 in `Europe/Berlin` opens at 22:00 there in winter and in summer.

use std::time::Duration;

use jiff::civil::{Date, Time as CivilTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The longest rest between waves: a week.
pub const MAX_PAUSE_BETWEEN_WAVES: Duration = Duration::from_secs(7 * 24 * 3600);

/// When the waves of a rollout may start.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// The days it opens on; every day when omitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<Weekday>,
    /// When it opens, `HH:MM` (24 hours) in `timeZone`.
    #[schemars(regex(pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub start: String,
    /// When it closes, `HH:MM`; at or before `start`, on the next day.
    #[schemars(regex(pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub end: String,
    /// An IANA time zone such as `Europe/Berlin`; `UTC` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// A day of the week.
// Plain comments on the variants, as for `Phase`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Weekday {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

impl Weekday {
    fn of(weekday: jiff::civil::Weekday) -> Self {
        use jiff::civil::Weekday as W;
        match weekday {
            W::Monday => Self::Mon,
            W::Tuesday => Self::Tue,
            W::Wednesday => Self::Wed,
            W::Thursday => Self::Thu,
            W::Friday => Self::Fri,
            W::Saturday => Self::Sat,
            W::Sunday => Self::Sun,
        }
    }
}

/// A field of the spec that cannot be read as what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FieldError {
    /// The field, e.g. `spec.rollout.window.timeZone`.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

fn refused(field: &'static str, problem: impl Into<String>) -> FieldError {
    FieldError {
        field,
        problem: problem.into(),
    }
}

/// A window read: when it opens and for how long, in which zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    days: Vec<Weekday>,
    start: CivilTime,
    /// How long it stays open: up to a day.
    open_for: SignedDuration,
    zone: TimeZone,
}

/// Where `now` falls against a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// It is open, until then.
    Open { closes: Timestamp },
    /// It is closed; it opens next then.
    Closed { opens: Timestamp },
}

impl MaintenanceWindow {
    /// The window as people write it: `Mon,Fri 22:00-04:00 Europe/Berlin`, or `daily ...`.
    pub fn shown(&self) -> String {
        let days = if self.days.is_empty() {
            "daily".to_string()
        } else {
            let days: Vec<String> = self.days.iter().map(|d| format!("{d:?}")).collect();
            days.join(",")
        };
        let zone = self.time_zone.as_deref().unwrap_or("UTC");
        format!("{days} {}-{} {zone}", self.start, self.end)
    }

    /// The window read, or the field that is wrong: a time that is not `HH:MM`, a zone that is
    /// not known, or a window that never opens (`start` equal to `end`).
    ///
    /// # Errors
    /// The field that cannot be read, and why.
    pub fn schedule(&self) -> Result<Schedule, FieldError> {
        let start = clock("spec.rollout.window.start", &self.start)?;
        let end = clock("spec.rollout.window.end", &self.end)?;
        if start == end {
            return Err(refused(
                "spec.rollout.window.end",
                format!(
                    "the window opens and closes at {}: it is never open; give an end other than its start",
                    self.start
                ),
            ));
        }
        let name = self.time_zone.as_deref().unwrap_or("UTC");
        let zone = TimeZone::get(name).map_err(|_| {
            refused(
                "spec.rollout.window.timeZone",
                format!("{name:?} is not a known time zone; give an IANA name such as \"Europe/Berlin\" or \"UTC\""),
            )
        })?;
        let mut open_for = end.duration_since(start);
        if open_for.is_negative() {
            open_for += SignedDuration::from_hours(24);
        }
        Ok(Schedule {
            days: self.days.clone(),
            start,
            open_for,
            zone,
        })
    }
}

/// `HH:MM` of `field`.
fn clock(field: &'static str, text: &str) -> Result<CivilTime, FieldError> {
    let parsed = text
        .split_once(':')
        .filter(|(h, m)| h.len() == 2 && m.len() == 2)
        .and_then(|(h, m)| Some((h.parse::<i8>().ok()?, m.parse::<i8>().ok()?)))
        .and_then(|(h, m)| CivilTime::new(h, m, 0, 0).ok());
    parsed.ok_or_else(|| {
        refused(
            field,
            format!("{text:?} is not a time of day like \"22:00\""),
        )
    })
}

impl Schedule {
    /// Whether the window is open at `now`, and until when; or when it opens next.
    pub fn at(&self, now: Timestamp) -> Opening {
        let today = now.to_zoned(self.zone.clone()).date();
        // A window of yesterday may still be open; the next one is at most a week ahead.
        let mut opens_next = None;
        for offset in -1..=7_i32 {
            let Ok(day) = today.checked_add(offset.days()) else {
                continue;
            };
            if !self.opens_on(day) {
                continue;
            }
            let Some(opens) = self.opening(day) else {
                continue;
            };
            let closes = opens.saturating_add(self.open_for).unwrap_or(opens);
            if opens <= now && now < closes {
                return Opening::Open { closes };
            }
            if opens > now && opens_next.is_none() {
                opens_next = Some(opens);
            }
        }
        // Every day of a week was looked at: a window with at least one day opens in it.
        Opening::Closed {
            opens: opens_next.unwrap_or(now),
        }
    }

    fn opens_on(&self, day: Date) -> bool {
        self.days.is_empty() || self.days.contains(&Weekday::of(day.weekday()))
    }

    /// When the window of `day` opens: its start on that day in the zone (a start that a
    /// clock change skips opens when the clock has moved on).
    fn opening(&self, day: Date) -> Option<Timestamp> {
        let zoned = day
            .to_datetime(self.start)
            .to_zoned(self.zone.clone())
            .ok()?;
        Some(zoned.timestamp())
    }
}

/// `spec.rollout.pauseBetweenWaves` read: a duration such as `30s`, `5m` or `1h30m`, above 0
/// and at most a week.
///
/// # Errors
/// It is not such a duration.
pub fn pause_between_waves(text: &str) -> Result<Duration, FieldError> {
    const FIELD: &str = "spec.rollout.pauseBetweenWaves";
    let parsed: SignedDuration = text.trim().parse().map_err(|_| {
        refused(
            FIELD,
            format!("{text:?} is not a duration like \"30s\", \"5m\" or \"1h30m\""),
        )
    })?;
    let pause = Duration::try_from(parsed)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| refused(FIELD, format!("{text:?} is not above 0")))?;
    if pause > MAX_PAUSE_BETWEEN_WAVES {
        return Err(refused(
            FIELD,
            format!("{text:?} is longer than a week, the longest pause allowed"),
        ));
    }
    Ok(pause)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(days: &[Weekday], start: &str, end: &str, zone: Option<&str>) -> Schedule {
        MaintenanceWindow {
            days: days.to_vec(),
            start: start.into(),
            end: end.into(),
            time_zone: zone.map(Into::into),
        }
        .schedule()
        .expect("a window that opens")
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    #[test]
    fn a_window_is_open_between_its_start_and_end_and_says_when_it_opens_next() {
        let nightly = window(&[], "22:00", "23:30", None);
        assert_eq!(
            nightly.at(at("2026-12-03T22:10:00Z")),
            Opening::Open {
                closes: at("2026-12-03T23:30:00Z")
            }
        );
        assert_eq!(
            nightly.at(at("2026-12-03T23:30:00Z")),
            Opening::Closed {
                opens: at("2026-12-04T22:00:00Z")
            }
        );
        assert_eq!(
            nightly.at(at("2026-12-03T08:00:00Z")),
            Opening::Closed {
                opens: at("2026-12-03T22:00:00Z")
            }
        );
    }

    #[test]
    fn a_window_past_midnight_is_open_the_next_morning_on_the_day_after_its_day() {
        // 2026-12-04 is a Friday: the window opens Friday 22:00 and closes Saturday 04:00.
        let friday_night = window(&[Weekday::Fri], "22:00", "04:00", None);
        assert_eq!(
            friday_night.at(at("2026-12-05T03:59:00Z")),
            Opening::Open {
                closes: at("2026-12-05T04:00:00Z")
            }
        );
        assert_eq!(
            friday_night.at(at("2026-12-05T04:00:00Z")),
            Opening::Closed {
                opens: at("2026-12-11T22:00:00Z")
            }
        );
        // Thursday morning is not in it: Wednesday has no window.
        assert_eq!(
            friday_night.at(at("2026-12-03T03:00:00Z")),
            Opening::Closed {
                opens: at("2026-12-04T22:00:00Z")
            }
        );
    }

    #[test]
    fn a_window_opens_at_the_wall_clock_time_of_its_zone_in_winter_and_in_summer() {
        let berlin = window(&[], "22:00", "23:00", Some("Europe/Berlin"));
        // CET is UTC+1 in December, CEST UTC+2 in July.
        assert_eq!(
            berlin.at(at("2026-12-03T12:00:00Z")),
            Opening::Closed {
                opens: at("2026-12-03T21:00:00Z")
            }
        );
        assert_eq!(
            berlin.at(at("2026-07-03T12:00:00Z")),
            Opening::Closed {
                opens: at("2026-07-03T20:00:00Z")
            }
        );
    }

    #[test]
    fn a_window_that_never_opens_or_cannot_be_read_names_its_field() {
        let spoiled = |start: &str, end: &str, zone: Option<&str>| {
            MaintenanceWindow {
                days: Vec::new(),
                start: start.into(),
                end: end.into(),
                time_zone: zone.map(Into::into),
            }
            .schedule()
            .expect_err("refused")
        };
        let never = spoiled("02:00", "02:00", None);
        assert_eq!(never.field, "spec.rollout.window.end");
        assert!(never.problem.contains("never open"), "{never}");
        assert_eq!(
            spoiled("24:00", "02:00", None).field,
            "spec.rollout.window.start"
        );
        assert_eq!(
            spoiled("2:00", "03:00", None).field,
            "spec.rollout.window.start"
        );
        assert_eq!(
            spoiled("02:00", "03:00", Some("Mars/Olympus")).field,
            "spec.rollout.window.timeZone"
        );
    }

    #[test]
    fn a_pause_between_waves_is_a_duration_above_zero_and_at_most_a_week() {
        assert_eq!(pause_between_waves("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(pause_between_waves("1h30m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "5", "soon", "0s", "-5s", "8d"] {
            let error = pause_between_waves(bad).expect_err(bad);
            assert_eq!(error.field, "spec.rollout.pauseBetweenWaves", "{bad}");
        }
    }
}
