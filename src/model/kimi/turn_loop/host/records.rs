//! The host's durable record log (kimi-loop.md §8.2 `wire.jsonl`): one JSON object per line,
//! a metadata record first, every record stamped with `time` from the injected clock.

use serde::{Deserialize, Serialize};

use super::context::{ContextMessage, Origin};
use crate::model::kimi::turn_loop::events::LoopRecordedEvent;
use crate::model::kimi::turn_loop::types::{ContentPart, TokenUsage};

/// kimi-loop.md §8.2: the protocol version in the metadata record.
pub const PROTOCOL_VERSION: &str = "1.4";

/// One record. Loop events are stored verbatim under `context.append_loop_event`.
// Records are written once and dropped; boxing the loop event would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum WireRecord {
    /// The first record of every log.
    #[serde(rename = "metadata")]
    Metadata {
        /// `1.4`.
        protocol_version: String,
        /// Clock milliseconds at creation.
        created_at: u64,
    },
    /// A user prompt, logged before the turn launches.
    #[serde(rename = "turn.prompt")]
    TurnPrompt {
        /// The prompt parts.
        input: Vec<ContentPart>,
        /// Who sent it.
        origin: Origin,
        /// Clock milliseconds.
        time: u64,
    },
    /// A message appended to the context (the user prompt, reminders, summaries).
    #[serde(rename = "context.append_message")]
    AppendMessage {
        /// The message.
        message: ContextMessage,
        /// Clock milliseconds.
        time: u64,
    },
    /// One recorded loop event, verbatim.
    #[serde(rename = "context.append_loop_event")]
    AppendLoopEvent {
        /// The event.
        event: LoopRecordedEvent,
        /// Clock milliseconds.
        time: u64,
    },
    /// Usage of a turn.
    #[serde(rename = "usage.record")]
    UsageRecord {
        /// The model.
        model: String,
        /// The usage.
        usage: TokenUsage,
        /// Clock milliseconds.
        time: u64,
    },
    /// Choice (the reference's compaction records are not in the facts): a compaction that
    /// replaced the first `removed_count` history messages with `summary`.
    #[serde(rename = "context.compaction")]
    Compaction {
        /// How many messages were replaced.
        removed_count: u32,
        /// The summary message.
        summary: ContextMessage,
        /// Clock milliseconds.
        time: u64,
    },
}

/// Why a log could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptLog(pub String);

/// An append-only JSONL log held in memory; the harness decides where bytes go.
#[derive(Debug, Clone, Default)]
pub struct WireLog {
    lines: Vec<String>,
}

impl WireLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append a record, writing the metadata record first if the log is empty.
    pub fn append(&mut self, record: &WireRecord, now_ms: u64) {
        if self.lines.is_empty() {
            let metadata = WireRecord::Metadata {
                protocol_version: PROTOCOL_VERSION.to_owned(),
                created_at: now_ms,
            };
            self.lines.push(encode(&metadata));
        }
        self.lines.push(encode(record));
    }

    /// The lines written so far.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The whole log, one record per line, each ending in `\n`.
    pub fn to_jsonl(&self) -> String {
        self.lines.iter().map(|line| format!("{line}\n")).collect()
    }

    /// Read a log. A truncated last line is tolerated; a corrupt line anywhere else is an
    /// error naming it (`wire.jsonl: corrupted line N in <name>`).
    pub fn parse(text: &str, name: &str) -> Result<Vec<WireRecord>, CorruptLog> {
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect();
        let mut records = Vec::with_capacity(lines.len());
        for (index, line) in lines.iter().enumerate() {
            match serde_json::from_str::<WireRecord>(line) {
                Ok(record) => records.push(record),
                Err(_) if index + 1 == lines.len() && !text.ends_with('\n') => break,
                Err(_) => {
                    return Err(CorruptLog(format!(
                        "wire.jsonl: corrupted line {} in {name}",
                        index + 1
                    )));
                }
            }
        }
        Ok(records)
    }
}

fn encode(record: &WireRecord) -> String {
    serde_json::to_string(record).expect("wire records always serialise")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kimi-loop.md §8.2: a truncated last line is tolerated; a corrupt line elsewhere is an error.
    #[test]
    fn wire_log_tolerates_only_a_truncated_last_line() {
        let mut log = WireLog::new();
        log.append(
            &WireRecord::UsageRecord {
                model: "m".into(),
                usage: TokenUsage {
                    input_other: 1,
                    output: 1,
                    ..TokenUsage::default()
                },
                time: 5,
            },
            5,
        );
        let whole = log.to_jsonl();
        let truncated = format!("{whole}{{\"type\":\"usage.rec");
        assert_eq!(WireLog::parse(&truncated, "s").unwrap().len(), 2);
        let corrupt = format!("{{oops\n{whole}");
        assert_eq!(
            WireLog::parse(&corrupt, "s").unwrap_err().0,
            "wire.jsonl: corrupted line 1 in s"
        );
        // A last line that ends in its newline was written whole: corrupt, it is an error too.
        let corrupt_last = format!("{whole}{{oops\n");
        assert_eq!(
            WireLog::parse(&corrupt_last, "s").unwrap_err().0,
            "wire.jsonl: corrupted line 3 in s"
        );
        // A truncated last line excuses only itself, not a corrupt line before it.
        let both = format!("{{oops\n{whole}{{\"type\":\"usage.rec");
        assert_eq!(
            WireLog::parse(&both, "s").unwrap_err().0,
            "wire.jsonl: corrupted line 1 in s"
        );
    }
}
