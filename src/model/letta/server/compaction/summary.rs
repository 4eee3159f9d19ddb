//! The summariser's input and output (letta-protocol.md §8.5, §8.6; A.9.3): the transcript it
//! is shown, the overflow ladder of transcript budgets, the clip of its answer, and the packed
//! `system_alert` summary message with its compaction stats.

use serde_json::{Value, json};

use super::estimate::{CtxMessage, Role, js_len};

/// Tool results longer than this are cut in the summariser's transcript
/// (`LOCAL_SUMMARY_TOOL_RETURN_TRUNCATION_CHARS`, A.9.3).
pub const TOOL_RETURN_TRUNCATION_CHARS: usize = 2000;

/// The summary is clipped to this many characters by default (`clip_chars`, §8.5).
pub const DEFAULT_CLIP_CHARS: usize = 50_000;

/// What a clipped summary ends with (§8.5).
pub const CLIP_SUFFIX: &str = "... [summary truncated to fit]";

/// The summary of an empty transcript, without a model call (§8.5).
pub const NO_PRIOR_MESSAGES: &str = "No prior conversation messages.";

/// The transcript budgets tried after the summariser overflowed, in order (§8.2).
pub const OVERFLOW_LADDER: [usize; 10] = [
    120_000, 90_000, 60_000, 40_000, 25_000, 15_000, 10_000, 6_000, 4_000, 2_000,
];

/// The transcript's opening and closing (§8.5, A.9.3).
pub const TRANSCRIPT_HEAD: &str = " \n";
pub const TRANSCRIPT_TAIL: &str = "\n \n. Generate the summary.";

/// The built-in prompts. The reference gives their word limits (500 for `all`, 300 for the
/// sliding window) but not their text, so these words are loopsim's (docs/server.md
/// "Compaction").
pub const ALL_PROMPT: &str = "You are summarizing a conversation between a user and a coding \
agent so that the agent can continue the work with this summary in place of the messages. \
Capture the user's goals, the decisions made, the files and commands involved, the results of \
tool calls and what remains to be done. Write at most 500 words.";
pub const SLIDING_PROMPT: &str = "The following messages are being evicted from the beginning of \
the agent's context window. Summarize them so that the agent keeps what it needs from them: the \
user's goals, decisions, files and commands, tool results and open tasks. Write at most 300 \
words.";

/// Cuts a tool result at `limit` characters with `... [truncated N chars]` (A.9.3: limit 10,
/// 12 x's + "END" → "xxxxxxxxxx... [truncated 5 chars]").
pub fn truncate_tool_result(text: &str, limit: usize) -> String {
    let n = text.chars().count();
    if n <= limit {
        return text.to_string();
    }
    let head: String = text.chars().take(limit).collect();
    format!("{head}... [truncated {} chars]", n - limit)
}

fn images_line(n: u64) -> Option<String> {
    match n {
        0 => None,
        1 => Some("[Image omitted]".into()),
        n => Some(format!("[{n} images omitted]")),
    }
}

/// One transcript line (A.9.3): `[user] text` (images as `[Image omitted]`, an earlier summary
/// as its raw summary), `[assistant] <thinking>\n\n<text> -> Tool(<args>)`, `[tool] <text>`.
pub fn render_line(m: &CtxMessage) -> String {
    match m.role {
        Role::User => {
            let text = m.summary.clone().unwrap_or_else(|| m.text.clone());
            let parts: Vec<String> = [Some(text).filter(|t| !t.is_empty()), images_line(m.images)]
                .into_iter()
                .flatten()
                .collect();
            format!("[user] {}", parts.join(" "))
        }
        Role::Assistant => {
            let mut body: Vec<&str> = Vec::new();
            if !m.thinking.is_empty() {
                body.push(&m.thinking);
            }
            if !m.text.is_empty() {
                body.push(&m.text);
            }
            let mut line = format!("[assistant] {}", body.join("\n\n"));
            for c in &m.tool_calls {
                line.push_str(&format!(" -> {}({})", c.name, compact_json(&c.arguments)));
            }
            line
        }
        Role::ToolResult => {
            let text = truncate_tool_result(&m.text, TOOL_RETURN_TRUNCATION_CHARS);
            let parts: Vec<String> = [Some(text).filter(|t| !t.is_empty()), images_line(m.images)]
                .into_iter()
                .flatten()
                .collect();
            format!("[tool] {}", parts.join(" "))
        }
    }
}

/// Arguments as compact JSON (as given when they are not JSON).
fn compact_json(args: &str) -> String {
    serde_json::from_str::<Value>(args)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| args.to_string())
}

/// Keeps `budget` characters of `text`, half from each end, with a marker of what was cut in
/// the middle. The reference names the middle truncation but not its marker; this one is
/// loopsim's (docs/server.md "Compaction").
pub fn truncate_middle(text: &str, budget: usize) -> String {
    let n = text.chars().count();
    if n <= budget {
        return text.to_string();
    }
    let head_n = budget / 2;
    let tail_n = budget - head_n;
    let head: String = text.chars().take(head_n).collect();
    let tail: String = text.chars().skip(n - tail_n).collect();
    format!("{head}\n... [{} chars truncated] ...\n{tail}", n - budget)
}

/// The summariser's transcript of `msgs` (§8.5), the lines cut to `budget` characters in the
/// middle when a budget is given (the overflow ladder).
pub fn render_transcript(msgs: &[CtxMessage], budget: Option<usize>) -> String {
    let lines: Vec<String> = msgs.iter().map(render_line).collect();
    let body = lines.join("\n");
    let body = match budget {
        Some(b) => truncate_middle(&body, b),
        None => body,
    };
    format!("{TRANSCRIPT_HEAD}{body}{TRANSCRIPT_TAIL}")
}

/// The transcripts the summariser is offered, in order: the whole one, then one per ladder
/// budget, skipping a budget whose transcript equals the one tried before it (§8.2).
pub fn ladder_transcripts(msgs: &[CtxMessage]) -> Vec<(Option<usize>, String)> {
    let mut out: Vec<(Option<usize>, String)> = vec![(None, render_transcript(msgs, None))];
    for b in OVERFLOW_LADDER {
        let t = render_transcript(msgs, Some(b));
        if out.last().is_some_and(|(_, prev)| *prev == t) {
            continue;
        }
        out.push((Some(b), t));
    }
    out
}

/// The summariser's answer trimmed and clipped to `clip_chars` characters (`None`: no clip),
/// the suffix included in the limit (§8.5; where the suffix goes is loopsim's choice).
pub fn clip_summary(raw: &str, clip_chars: Option<usize>) -> String {
    let s = raw.trim();
    let Some(limit) = clip_chars else {
        return s.to_string();
    };
    let n = s.chars().count();
    if n <= limit {
        return s.to_string();
    }
    let keep = limit.saturating_sub(CLIP_SUFFIX.chars().count());
    let head: String = s.chars().take(keep).collect();
    format!("{head}{CLIP_SUFFIX}")
}

/// `compaction_stats` of a summary (§8.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionStats {
    pub trigger: String,
    pub context_window: Option<u64>,
    pub messages_count_before: usize,
    pub messages_count_after: usize,
    pub context_tokens_before: u64,
    pub context_tokens_after: u64,
}

impl CompactionStats {
    pub fn to_json(&self) -> Value {
        json!({
            "trigger": self.trigger,
            "context_window": self.context_window,
            "messages_count_before": self.messages_count_before,
            "messages_count_after": self.messages_count_after,
            "context_tokens_before": self.context_tokens_before,
            "context_tokens_after": self.context_tokens_after,
        })
    }
}

/// Tokens of a summary in the stats: ceil(length / 4) (§8.4).
pub fn summary_tokens(summary: &str) -> u64 {
    js_len(summary).div_ceil(4)
}

/// The summary message's text (§8.6): the sliding-window note counts the hidden messages
/// (`before - after`), the `all` note does not.
pub fn summary_note(sliding: bool, stats: Option<&CompactionStats>, summary: &str) -> String {
    let lead = if !sliding {
        "Note: prior messages have been hidden from view due to conversation memory constraints."
            .to_string()
    } else {
        match stats {
            Some(s) => format!(
                "Note: {} messages from the beginning of the conversation have been hidden from view due to memory constraints.",
                s.messages_count_before.saturating_sub(s.messages_count_after)
            ),
            None => "Note: prior messages from the beginning of the conversation have been hidden from view due to memory constraints.".to_string(),
        }
    };
    format!("{lead}\nThe following is a summary of the previous messages:\n {summary}")
}

/// `packageLocalSummaryMessage` (A.9.3): the JSON text `{type:"system_alert", message,
/// compaction_stats, time}` the summary message carries as its content.
pub fn package_summary(
    sliding: bool,
    stats: &CompactionStats,
    summary: &str,
    time: &str,
) -> String {
    json!({
        "type": "system_alert",
        "message": summary_note(sliding, Some(stats), summary),
        "compaction_stats": stats.to_json(),
        "time": time,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::super::estimate::CtxToolCall;
    use super::*;

    #[test]
    fn rule_8_5_tool_results_are_cut_at_the_limit_with_the_count() {
        let t = format!("{}END", "x".repeat(12));
        assert_eq!(
            truncate_tool_result(&t, 10),
            "xxxxxxxxxx... [truncated 5 chars]"
        );
        let t = format!("{}END", "x".repeat(TOOL_RETURN_TRUNCATION_CHARS + 100));
        assert!(
            render_line(&CtxMessage::new(Role::ToolResult, &t))
                .ends_with("... [truncated 103 chars]")
        );
    }

    #[test]
    fn rule_8_5_the_transcript_has_its_head_one_line_per_message_and_its_tail() {
        let user = CtxMessage {
            images: 1,
            ..CtxMessage::new(Role::User, "see this")
        };
        let assistant = CtxMessage {
            thinking: "hmm".into(),
            tool_calls: vec![CtxToolCall {
                id: "t1".into(),
                name: "Read".into(),
                arguments: "{ \"path\": \"a.txt\" }".into(),
            }],
            ..CtxMessage::new(Role::Assistant, "reading")
        };
        let tool = CtxMessage::new(Role::ToolResult, "contents");
        let earlier = CtxMessage {
            summary: Some("the raw summary".into()),
            ..CtxMessage::new(Role::User, "{\"type\":\"system_alert\"}")
        };
        assert_eq!(
            render_transcript(&[earlier, user, assistant, tool], None),
            " \n[user] the raw summary\n[user] see this [Image omitted]\n[assistant] hmm\n\nreading -> Read({\"path\":\"a.txt\"})\n[tool] contents\n \n. Generate the summary."
        );
    }

    #[test]
    fn rule_8_2_the_overflow_ladder_steps_down_and_skips_identical_transcripts() {
        // 50,000 characters of transcript: budgets 120000 and 90000 and 60000 leave it whole,
        // as the unbudgeted one did, so they are skipped; 40000 … 2000 each cut it.
        let msgs = vec![CtxMessage::new(Role::User, &"u".repeat(49_990))];
        let budgets: Vec<Option<usize>> = ladder_transcripts(&msgs)
            .into_iter()
            .map(|(b, _)| b)
            .collect();
        assert_eq!(
            budgets,
            vec![
                None,
                Some(40_000),
                Some(25_000),
                Some(15_000),
                Some(10_000),
                Some(6_000),
                Some(4_000),
                Some(2_000)
            ]
        );
        let short = vec![CtxMessage::new(Role::User, "hi")];
        assert_eq!(ladder_transcripts(&short).len(), 1);
    }

    #[test]
    fn rule_8_5_the_summary_is_trimmed_and_clipped_with_the_suffix() {
        assert_eq!(clip_summary("  s  ", Some(10)), "s");
        let long = "y".repeat(100);
        let c = clip_summary(&long, Some(40));
        assert_eq!(c.chars().count(), 40);
        assert!(c.ends_with(CLIP_SUFFIX));
        assert_eq!(clip_summary(&long, None), long);
    }

    #[test]
    fn rule_8_6_the_packed_summary_message_is_a_system_alert() {
        let stats = CompactionStats {
            trigger: "context_window_limit".into(),
            context_window: Some(1000),
            messages_count_before: 10,
            messages_count_after: 4,
            context_tokens_before: 900,
            context_tokens_after: 200,
        };
        let v: Value = serde_json::from_str(&package_summary(true, &stats, "S", "t")).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["type", "message", "compaction_stats", "time"]);
        assert!(v["message"].as_str().unwrap().starts_with(
            "Note: 6 messages from the beginning of the conversation have been hidden from view due to memory constraints."
        ));
        let all: Value = serde_json::from_str(&package_summary(false, &stats, "S", "t")).unwrap();
        assert_eq!(
            all["message"],
            "Note: prior messages have been hidden from view due to conversation memory constraints.\nThe following is a summary of the previous messages:\n S"
        );
    }
}
