//! The loop's logger seam. Log entries are part of the observable contract in a few places
//! (kimi-loop.md §7.7 case 2, §7.4 cases 12, 17, 18), so they are structured, not text.

use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

/// Log level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Warn.
    Warn,
}

/// A logger the host injects.
pub trait LoopLog: Send + Sync {
    /// Record one entry. Must not fail.
    fn log(&self, level: LogLevel, message: &str, payload: Value);
}

/// A logger that drops everything (the reference's absent `log`).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopLog;

impl LoopLog for NoopLog {
    fn log(&self, _level: LogLevel, _message: &str, _payload: Value) {}
}

/// One recorded log entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogEntry {
    /// Level.
    pub level: LogLevel,
    /// Message.
    pub message: String,
    /// Structured payload.
    pub payload: Value,
}

/// A logger that keeps every entry in order (for tests and traces).
#[derive(Debug, Default)]
pub struct MemoryLog {
    entries: Mutex<Vec<LogEntry>>,
}

impl MemoryLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every entry so far.
    pub fn entries(&self) -> Vec<LogEntry> {
        self.entries.lock().expect("log poisoned").clone()
    }
}

impl LoopLog for MemoryLog {
    fn log(&self, level: LogLevel, message: &str, payload: Value) {
        self.entries.lock().expect("log poisoned").push(LogEntry {
            level,
            message: message.to_owned(),
            payload,
        });
    }
}
