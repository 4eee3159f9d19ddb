//! How the client shows a server-side compaction (letta-protocol.md §1.4, §8.6; A.9): an
//! `event_message` of type `compaction` opens a running compaction line, the `summary_message`
//! completes the most recent one and flags the next `usage_statistics` as post-compaction. A
//! legacy server sends a `user_message` whose content is the `system_alert` JSON instead; its
//! summary is the text after "The following is a/an (in-context recursive) summary (of the
//! previous/prior messages):". None of these is turn content: no assistant line, no tool line.
//! Both profiles behave alike here.

use serde_json::Value;

use crate::wire::letta::LettaChunk;

/// One compaction line of the UI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionLine {
    /// The line id: the chunk's `otid`, else its `id`.
    pub id: String,
    /// `event_data.trigger` of the event (or `compaction_stats.trigger` of the summary).
    pub trigger: Option<String>,
    /// Still waiting for its summary.
    pub running: bool,
    pub summary: Option<String>,
    /// Came as a legacy `system_alert` user message.
    pub legacy: bool,
}

/// The compaction lines of a drain and the post-compaction usage flag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compactions {
    pub lines: Vec<CompactionLine>,
    /// A summary arrived; the next usage is post-compaction.
    pending_usage_flag: bool,
    /// Whether the most recent `usage_statistics` came after a compaction.
    pub last_usage_post_compaction: bool,
    /// How many `usage_statistics` chunks were flagged post-compaction.
    pub post_compaction_usages: u32,
}

/// The text after the legacy summary marker, trimmed (§8.6).
pub fn extract_legacy_summary(message: &str) -> Option<String> {
    let start = message.find("The following is a")?;
    let rest = &message[start..];
    let colon = rest.find(':')?;
    let head = &rest[..colon];
    let known = [
        "The following is a summary",
        "The following is an in-context recursive summary",
    ]
    .iter()
    .any(|p| head.starts_with(p));
    known.then(|| rest[colon + 1..].trim().to_string())
}

/// The summary of a `user_message` whose content is a `system_alert` JSON text, if it is one.
pub fn legacy_alert_summary(content: &str) -> Option<String> {
    let v: Value = serde_json::from_str(content.trim()).ok()?;
    if v.get("type").and_then(Value::as_str) != Some("system_alert") {
        return None;
    }
    extract_legacy_summary(v.get("message").and_then(Value::as_str)?)
}

impl Compactions {
    /// Takes one output chunk. `true`: it was a compaction chunk (not turn content).
    pub fn take(&mut self, chunk: &LettaChunk) -> bool {
        match chunk {
            LettaChunk::EventMessage(m)
                if m.fields.get("event_type").and_then(Value::as_str) == Some("compaction") =>
            {
                self.lines.push(CompactionLine {
                    id: m.env.otid.clone().unwrap_or_else(|| m.env.id.clone()),
                    trigger: m.fields["event_data"]
                        .get("trigger")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    running: true,
                    summary: None,
                    legacy: false,
                });
                true
            }
            LettaChunk::SummaryMessage(m) => {
                let summary = m
                    .fields
                    .get("summary")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let stats_trigger = m
                    .fields
                    .get("compaction_stats")
                    .and_then(|s| s.get("trigger"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                match self.lines.iter_mut().rev().find(|l| l.running) {
                    Some(line) => {
                        line.running = false;
                        line.summary = Some(summary);
                        if stats_trigger.is_some() {
                            line.trigger = stats_trigger;
                        }
                    }
                    None => self.lines.push(CompactionLine {
                        id: m.env.otid.clone().unwrap_or_else(|| m.env.id.clone()),
                        trigger: stats_trigger,
                        running: false,
                        summary: Some(summary),
                        legacy: false,
                    }),
                }
                self.pending_usage_flag = true;
                true
            }
            LettaChunk::UserMessage(m) => match legacy_alert_summary(&m.content.text()) {
                Some(summary) => {
                    self.lines.push(CompactionLine {
                        id: m.env.otid.clone().unwrap_or_else(|| m.env.id.clone()),
                        trigger: None,
                        running: false,
                        summary: Some(summary),
                        legacy: true,
                    });
                    self.pending_usage_flag = true;
                    true
                }
                None => false,
            },
            LettaChunk::UsageStatistics(_) => {
                self.last_usage_post_compaction = std::mem::take(&mut self.pending_usage_flag);
                if self.last_usage_post_compaction {
                    self.post_compaction_usages += 1;
                }
                false
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> LettaChunk {
        LettaChunk::from_json(s).unwrap()
    }

    #[test]
    fn rule_8_6_event_opens_a_running_line_and_summary_completes_it() {
        let mut k = Compactions::default();
        assert!(k.take(&c(r#"{"id":"letta-msg-4","date":"d","message_type":"event_message","event_type":"compaction","event_data":{"trigger":"context_window_limit"},"run_id":"local-run-1","seq_id":1}"#)));
        assert!(k.lines[0].running);
        assert_eq!(k.lines[0].trigger.as_deref(), Some("context_window_limit"));
        assert!(k.take(&c(r#"{"id":"letta-msg-5","date":"d","message_type":"summary_message","summary":"S","compaction_stats":{"trigger":"context_window_overflow"},"run_id":"local-run-1","seq_id":2}"#)));
        assert_eq!(
            k.lines,
            vec![CompactionLine {
                id: "letta-msg-4".into(),
                trigger: Some("context_window_overflow".into()),
                running: false,
                summary: Some("S".into()),
                legacy: false,
            }]
        );
    }

    #[test]
    fn rule_8_6_the_usage_after_a_summary_is_post_compaction() {
        let usage = r#"{"message_type":"usage_statistics","prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"step_count":1}"#;
        let mut k = Compactions::default();
        k.take(&c(usage));
        assert!(!k.last_usage_post_compaction);
        k.take(&c(
            r#"{"id":"s","date":"d","message_type":"summary_message","summary":"S"}"#,
        ));
        k.take(&c(usage));
        assert!(k.last_usage_post_compaction);
        k.take(&c(usage));
        assert!(!k.last_usage_post_compaction, "only the next usage");
        assert_eq!(k.post_compaction_usages, 1);
    }

    #[test]
    fn rule_8_6_a_legacy_system_alert_user_message_is_a_compaction() {
        let alert = serde_json::json!({
            "type": "system_alert",
            "message": "Note: prior messages have been hidden from view due to conversation memory constraints.\nThe following is a summary of the previous messages:\n what came before",
            "time": "t",
        })
        .to_string();
        let chunk =
            serde_json::json!({"id":"u","date":"d","message_type":"user_message","content":alert});
        let mut k = Compactions::default();
        assert!(k.take(&LettaChunk::from_json(&chunk.to_string()).unwrap()));
        assert_eq!(k.lines[0].summary.as_deref(), Some("what came before"));
        assert!(k.lines[0].legacy);
        // A plain user message is not.
        assert!(!k.take(&c(
            r#"{"id":"u2","date":"d","message_type":"user_message","content":"hello"}"#
        )));
        assert_eq!(
            extract_legacy_summary(
                "x The following is an in-context recursive summary of the prior messages: abc"
            )
            .as_deref(),
            Some("abc")
        );
        assert_eq!(extract_legacy_summary("The following is a list: no"), None);
    }

    #[test]
    fn rule_8_6_retry_events_are_not_compactions() {
        let mut k = Compactions::default();
        assert!(!k.take(&c(r#"{"id":"r","date":"d","message_type":"event_message","event_type":"retry","event_data":{"attempt":1}}"#)));
        assert!(k.lines.is_empty());
    }
}
