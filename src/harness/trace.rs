//! The trace: every observable protocol event with its simulated time and host, rendered
//! canonically (one event per line), hashed for determinism checks.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::warp::WorldClock;
use crate::model::port::observe::Observation;

/// One event on the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    pub t_ms: u64,
    pub host: String,
    pub obs: Observation,
}

impl TraceEvent {
    /// `   12345 client   client_chunk run_id=run-… seq_id=3 message_type=assistant_message`
    pub fn render(&self) -> String {
        let v = serde_json::to_value(&self.obs).expect("observations serialise");
        let mut line = format!("{:>8} {:<8}", self.t_ms, self.host);
        if let Value::Object(map) = v {
            for (k, val) in map {
                if k == "ev" {
                    line.push(' ');
                    line.push_str(val.as_str().unwrap_or("?"));
                } else {
                    render_field(&mut line, &k, &val);
                }
            }
        }
        line
    }
}

fn render_field(line: &mut String, key: &str, val: &Value) {
    match val {
        Value::Object(map) => {
            for (k, v) in map {
                render_field(line, &format!("{key}.{k}"), v);
            }
        }
        _ => {
            line.push(' ');
            line.push_str(key);
            line.push('=');
            line.push_str(&render_value(val));
        }
    }
}

fn render_value(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s)
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.:/[],+@#".contains(c)) =>
        {
            s.clone()
        }
        other => other.to_string(),
    }
}

/// A shared, append-only trace, and the world clock its events are stamped with. Cloning
/// shares both.
#[derive(Clone, Default)]
pub struct Trace {
    events: Arc<Mutex<Vec<TraceEvent>>>,
    clock: WorldClock,
}

impl Trace {
    pub fn new() -> Self {
        Self::default()
    }

    /// The world's clock (simulated time and its warp; unused on real TCP).
    pub fn clock(&self) -> &WorldClock {
        &self.clock
    }

    pub fn push(&self, t_ms: u64, host: &str, obs: Observation) {
        self.events.lock().unwrap().push(TraceEvent {
            t_ms,
            host: host.to_string(),
            obs,
        });
    }

    pub fn events(&self) -> Vec<TraceEvent> {
        self.events.lock().unwrap().clone()
    }

    /// Events from index `from` on.
    pub fn events_since(&self, from: usize) -> Vec<TraceEvent> {
        let events = self.events.lock().unwrap();
        events
            .get(from..)
            .map(<[TraceEvent]>::to_vec)
            .unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The canonical text: one rendered event per line, each ending in `\n`.
    pub fn render(&self) -> String {
        render_events(&self.events())
    }
}

pub fn render_events(events: &[TraceEvent]) -> String {
    let mut s = String::new();
    for e in events {
        s.push_str(&e.render());
        s.push('\n');
    }
    s
}

/// First 16 hex digits of the SHA-256 of the canonical text.
pub fn hash_text(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where two renderings first differ: (1-based line, left line, right line).
pub fn first_divergence(a: &str, b: &str) -> Option<(usize, String, String)> {
    if a == b {
        return None;
    }
    let diff = similar::TextDiff::from_lines(a, b);
    for op in diff.ops() {
        if op.tag() == similar::DiffTag::Equal {
            continue;
        }
        let old = op.old_range();
        let new = op.new_range();
        let left = a
            .lines()
            .nth(old.start)
            .unwrap_or("<end of trace>")
            .to_string();
        let right = b
            .lines()
            .nth(new.start)
            .unwrap_or("<end of trace>")
            .to_string();
        return Some((old.start + 1, left, right));
    }
    Some((1, String::new(), String::new()))
}

/// Where each turn ended in `trace`: the index of its `turn_end`, in turn order.
pub fn turn_ends(trace: &[TraceEvent]) -> Vec<usize> {
    trace
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.obs, Observation::TurnEnd { .. }))
        .map(|(i, _)| i)
        .collect()
}
