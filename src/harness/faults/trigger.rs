//! [`When`]: the trigger of a network, process or user fault. In a scenario it is written as
//! keys of the fault's table: `at_ms = <simulated ms>`, or `on_event = "<trace event name>"`
//! with an optional `nth` (default 1).

use std::fmt;

use serde::{Deserialize, Serialize};

/// When a fault fires.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "Keys", into = "Keys")]
pub enum When {
    /// At this simulated time (ms).
    AtMs(u64),
    /// Right after the `nth` (1-based) trace event named `event`.
    OnEvent { event: String, nth: u32 },
}

/// The keys a trigger is written with, before they are checked.
#[derive(Deserialize, Serialize)]
struct Keys {
    #[serde(default)]
    at_ms: Option<u64>,
    #[serde(default)]
    on_event: Option<String>,
    #[serde(default)]
    nth: Option<u32>,
}

impl TryFrom<Keys> for When {
    type Error = String;

    fn try_from(k: Keys) -> Result<When, String> {
        match (k.at_ms, k.on_event, k.nth) {
            (Some(_), Some(_), _) => Err("give either at_ms or on_event, not both".into()),
            (None, None, _) => Err("give a trigger: at_ms = <ms> or on_event = \"<event>\"".into()),
            (None, Some(_), Some(0)) => Err("nth counts from 1".into()),
            (Some(_), None, Some(_)) => Err("nth goes with on_event".into()),
            (Some(t), None, None) => Ok(When::AtMs(t)),
            (None, Some(event), nth) => Ok(When::OnEvent {
                event,
                nth: nth.unwrap_or(1),
            }),
        }
    }
}

impl From<When> for Keys {
    fn from(w: When) -> Keys {
        match w {
            When::AtMs(t) => Keys {
                at_ms: Some(t),
                on_event: None,
                nth: None,
            },
            When::OnEvent { event, nth } => Keys {
                at_ms: None,
                on_event: Some(event),
                nth: Some(nth),
            },
        }
    }
}

impl When {
    /// What is wrong with a trigger built in code (one read from a file is checked as it is
    /// read).
    pub fn problem(&self) -> Option<String> {
        use crate::model::port::observe::Observation;
        match self {
            When::OnEvent { nth: 0, .. } => Some("nth counts from 1".into()),
            When::OnEvent { event, .. } if !Observation::NAMES.contains(&event.as_str()) => {
                Some(format!(
                    "unknown on_event {event:?}: expected a trace event name such as \"loop_tool_start\" (docs/scenario.md)"
                ))
            }
            _ => None,
        }
    }

    /// The time of an `at_ms` trigger.
    pub fn at_ms(&self) -> Option<u64> {
        match self {
            When::AtMs(t) => Some(*t),
            When::OnEvent { .. } => None,
        }
    }

    /// A copy made smaller by `f` (its time; with `nth_too`, also an event count, never below
    /// 1), or `None` if nothing in it shrinks.
    pub fn shrunk(&self, f: &impl Fn(u64) -> u64, nth_too: bool) -> Option<When> {
        match self {
            When::AtMs(t) => smaller(*t, f).map(When::AtMs),
            When::OnEvent { event, nth } if nth_too => {
                smaller_count(*nth, f).map(|nth| When::OnEvent {
                    event: event.clone(),
                    nth,
                })
            }
            When::OnEvent { .. } => None,
        }
    }
}

impl fmt::Display for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            When::AtMs(t) => write!(f, "at_ms={t}"),
            When::OnEvent { event, nth } => write!(f, "on_event={event} nth={nth}"),
        }
    }
}

/// `f(v)` if that is smaller than `v`.
pub(super) fn smaller(v: u64, f: &impl Fn(u64) -> u64) -> Option<u64> {
    let n = f(v);
    (n < v).then_some(n)
}

/// [`smaller`] for a 1-based count: it never goes below 1.
pub(super) fn smaller_count(v: u32, f: &impl Fn(u64) -> u64) -> Option<u32> {
    let n = f(u64::from(v)).max(1);
    (n < u64::from(v)).then_some(n as u32)
}
