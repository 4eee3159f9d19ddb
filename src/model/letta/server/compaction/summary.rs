//! The summariser's input and output (letta-protocol.md §8.5, §8.6; A.9.3): the transcript it
//! is shown, the overflow ladder of transcript budgets, the clip of its answer, and the packed
//! `system_alert` summary message with its compaction stats.

use serde_json::{Value, json};

use super::estimate::{CtxMessage, Role, js_len};
use crate::model::port::observe::StoredSummary;

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

/// The built-in prompts (500-word limit for `all`, 300 for the sliding window, §8.5), as the
/// published CLI's local backend (0.32.18) sends them as the summariser's system prompt: the
/// text captured from its requests by tests/interop/compaction.rs, which checks them.
pub const ALL_PROMPT: &str = include_str!("prompts/all.txt");
pub const SLIDING_PROMPT: &str = include_str!("prompts/sliding_window.txt");

/// The first `n` UTF-16 code units of `s` (JavaScript's `slice(0, n)`).
fn js_head(s: &str, n: usize) -> String {
    let units: Vec<u16> = s.encode_utf16().take(n).collect();
    String::from_utf16_lossy(&units)
}

/// The last `n` UTF-16 code units of `s` (JavaScript's `slice(-n)`).
fn js_tail(s: &str, n: usize) -> String {
    let units: Vec<u16> = s.encode_utf16().collect();
    String::from_utf16_lossy(&units[units.len().saturating_sub(n)..])
}

/// Cuts a tool result at `limit` characters with `... [truncated N chars]` (A.9.3: limit 10,
/// 12 x's + "END" → "xxxxxxxxxx... [truncated 5 chars]"). Lengths are JavaScript's.
pub fn truncate_tool_result(text: &str, limit: usize) -> String {
    let n = js_len(text) as usize;
    if n <= limit {
        return text.to_string();
    }
    format!(
        "{}... [truncated {} chars]",
        js_head(text, limit),
        n - limit
    )
}

/// `text` with ` [Image omitted]` / ` [N images omitted]` appended for `n` images (A.9.3).
fn with_images(text: String, n: u64) -> String {
    let placeholder = match n {
        0 => return text,
        1 => "[Image omitted]".to_string(),
        n => format!("[{n} images omitted]"),
    };
    if text.is_empty() {
        placeholder
    } else {
        format!("{text} {placeholder}")
    }
}

/// One transcript line (A.9.3), or none when the message renders empty (the CLI skips those):
/// `[user] text` (text parts joined by a blank line, images as `[Image omitted]`, an earlier
/// summary as its raw summary), `[assistant] <thinking>\n\n<text> -> A(<args>), B(<args>)`
/// (all of a message's tool calls after one arrow), `[tool] <text>` cut at
/// [`TOOL_RETURN_TRUNCATION_CHARS`]. Checked against the published CLI's summariser requests
/// by tests/interop/compaction.rs.
pub fn render_line(m: &CtxMessage) -> Option<String> {
    let text = match m.role {
        Role::User => match &m.summary {
            Some(s) => s.clone(),
            None if !m.parts.is_empty() => with_images(m.parts.join("\n\n"), m.images),
            None => with_images(m.text.clone(), m.images),
        },
        Role::Assistant => {
            let body: Vec<&str> = [m.thinking.as_str(), m.text.as_str()]
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect();
            let mut line = body.join("\n\n");
            if !m.tool_calls.is_empty() {
                let calls: Vec<String> = m
                    .tool_calls
                    .iter()
                    .map(|c| format!("{}({})", c.name, compact_json(&c.arguments)))
                    .collect();
                if !line.is_empty() {
                    line.push(' ');
                }
                line.push_str(&format!("-> {}", calls.join(", ")));
            }
            line
        }
        Role::ToolResult => {
            let full = with_images(m.text.clone(), m.images);
            truncate_tool_result(&full, TOOL_RETURN_TRUNCATION_CHARS)
        }
    };
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::ToolResult => "tool",
    };
    (!text.is_empty()).then(|| format!("[{role}] {text}"))
}

/// Arguments as compact JSON in their own key order (as given when they are not JSON): what
/// `JSON.stringify` makes of the parsed arguments.
fn compact_json(args: &str) -> String {
    serde_json::from_str::<Value>(args)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| args.to_string())
}

/// The middle truncation of the overflow ladder (`middleTruncateText`, as the published CLI
/// does it): the first 30 % and the last 30 % of `budget` (floored), with the marker of what
/// was dropped between them; text within the budget is unchanged.
pub fn truncate_middle(text: &str, budget: usize) -> String {
    let n = js_len(text) as usize;
    if budget == 0 || n <= budget {
        return text.to_string();
    }
    let head_n = (budget as f64 * 0.3).floor() as usize;
    let mut tail_n = (budget as f64 * 0.3).floor() as usize;
    if head_n + tail_n > budget {
        tail_n = budget - head_n;
    }
    let head = js_head(text, head_n);
    let tail = if tail_n > 0 {
        js_tail(text, tail_n)
    } else {
        String::new()
    };
    let dropped = n - (js_len(&head) as usize + js_len(&tail) as usize);
    format!("{head}\n[TRUNCATED: dropped {dropped} middle chars due to context budget]\n{tail}")
}

/// The summariser's transcript of `msgs` (§8.5): the head, one line per message, the tail;
/// with a budget (the overflow ladder) the whole of it cut in the middle to that many
/// characters.
pub fn render_transcript(msgs: &[CtxMessage], budget: Option<usize>) -> String {
    let lines: Vec<String> = msgs.iter().filter_map(render_line).collect();
    let t = format!("{TRANSCRIPT_HEAD}{}{TRANSCRIPT_TAIL}", lines.join("\n"));
    match budget {
        Some(b) => truncate_middle(&t, b),
        None => t,
    }
}

/// The transcripts the summariser is offered, in order: the whole one, then one per ladder
/// budget, skipping a budget whose transcript equals the previous budget's (§8.2). The first
/// budget is always tried, even when it leaves the transcript whole: the CLI compares a
/// ladder step only with the step before it.
pub fn ladder_transcripts(msgs: &[CtxMessage]) -> Vec<(Option<usize>, String)> {
    let mut out: Vec<(Option<usize>, String)> = vec![(None, render_transcript(msgs, None))];
    let mut previous: Option<String> = None;
    for b in OVERFLOW_LADDER {
        let t = render_transcript(msgs, Some(b));
        if previous.as_ref() == Some(&t) {
            continue;
        }
        previous = Some(t.clone());
        out.push((Some(b), t));
    }
    out
}

/// The summariser's answer trimmed and, when longer than `clip_chars` (`None`: no clip), cut
/// to that many characters with the suffix appended after them (§8.5).
pub fn clip_summary(raw: &str, clip_chars: Option<usize>) -> String {
    let s = raw.trim();
    match clip_chars {
        Some(limit) if js_len(s) as usize > limit => format!("{}{CLIP_SUFFIX}", js_head(s, limit)),
        _ => s.to_string(),
    }
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
    /// The stats object in the CLI's key order, `context_window` left out when unknown (what
    /// `JSON.stringify` does with `undefined`); the order is checked against the published
    /// CLI's packed summary by tests/interop/compaction.rs.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "trigger": self.trigger,
            "context_tokens_before": self.context_tokens_before,
            "context_tokens_after": self.context_tokens_after,
        });
        if let Some(w) = self.context_window {
            v["context_window"] = json!(w);
        }
        v["messages_count_before"] = json!(self.messages_count_before);
        v["messages_count_after"] = json!(self.messages_count_after);
        v
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
            None => "Note: prior messages from the beginning of the conversation have been hidden from view due to conversation memory constraints.".to_string(),
        }
    };
    format!("{lead}\nThe following is a summary of the previous messages:\n {summary}")
}

/// `packageLocalSummaryMessage` (A.9.3): the JSON text `{type:"system_alert", message, time,
/// compaction_stats}` the summary message carries as its content (key order as the published
/// CLI sends it).
pub fn package_summary(
    sliding: bool,
    stats: &CompactionStats,
    summary: &str,
    time: &str,
) -> String {
    json!({
        "type": "system_alert",
        "message": summary_note(sliding, Some(stats), summary),
        "time": time,
        "compaction_stats": stats.to_json(),
    })
    .to_string()
}

/// The `time` and `compaction_stats` of a packed summary, read back from its text (an empty
/// time and a null stats object where the text does not carry them).
pub fn read_packed(packed: &str) -> StoredSummary {
    let v: Value = serde_json::from_str(packed).unwrap_or(Value::Null);
    StoredSummary {
        summary_time: v["time"].as_str().unwrap_or_default().to_string(),
        summary_stats: v["compaction_stats"].clone(),
    }
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
                .unwrap()
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
        // 50,000 characters of transcript: the first budget (120000) is tried although it
        // leaves the transcript whole (it is compared only with the budget before it); 90000
        // and 60000 leave it the same again and are skipped; 40000 … 2000 each cut it.
        let msgs = vec![CtxMessage::new(Role::User, &"u".repeat(49_990))];
        let ladder = ladder_transcripts(&msgs);
        let budgets: Vec<Option<usize>> = ladder.iter().map(|(b, _)| *b).collect();
        assert_eq!(
            budgets,
            vec![
                None,
                Some(120_000),
                Some(40_000),
                Some(25_000),
                Some(15_000),
                Some(10_000),
                Some(6_000),
                Some(4_000),
                Some(2_000)
            ]
        );
        assert_eq!(ladder[0].1, ladder[1].1);
        let short = vec![CtxMessage::new(Role::User, "hi")];
        assert_eq!(ladder_transcripts(&short).len(), 2);
    }

    #[test]
    fn rule_8_2_the_ladder_keeps_30_percent_from_each_end_with_the_drop_marker() {
        let t = format!("{}{}", "h".repeat(50), "t".repeat(50));
        assert_eq!(
            truncate_middle(&t, 10),
            "hhh\n[TRUNCATED: dropped 94 middle chars due to context budget]\nttt"
        );
        assert_eq!(truncate_middle(&t, 100), t);
        // The whole transcript is cut, its head and tail included.
        let msgs = vec![CtxMessage::new(Role::User, &"u".repeat(5000))];
        let cut = render_transcript(&msgs, Some(2000));
        assert!(cut.starts_with(" \n[user] uuu"), "{cut}");
        assert!(cut.ends_with("uuu\n \n. Generate the summary."), "{cut}");
    }

    #[test]
    fn rule_8_5_parallel_calls_share_one_arrow_and_empty_lines_are_skipped() {
        let call = |id: &str, name: &str, args: &str| CtxToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        };
        let calls = CtxMessage {
            tool_calls: vec![
                call("a", "Read", r#"{"file_path": "/a"}"#),
                call("b", "Read", r#"{"file_path": "/b"}"#),
            ],
            ..CtxMessage::new(Role::Assistant, "")
        };
        let empty_result = CtxMessage::new(Role::ToolResult, "");
        let parts = CtxMessage {
            parts: vec!["one".into(), "two".into()],
            ..CtxMessage::new(Role::User, "onetwo")
        };
        assert_eq!(
            render_transcript(&[parts, calls, empty_result], None),
            " \n[user] one\n\ntwo\n[assistant] -> Read({\"file_path\":\"/a\"}), Read({\"file_path\":\"/b\"})\n \n. Generate the summary."
        );
    }

    #[test]
    fn rule_8_5_the_summary_is_trimmed_and_clipped_with_the_suffix() {
        assert_eq!(clip_summary("  s  ", Some(10)), "s");
        let long = "y".repeat(100);
        let c = clip_summary(&long, Some(40));
        assert_eq!(c, format!("{}{CLIP_SUFFIX}", "y".repeat(40)));
        assert_eq!(clip_summary(&long, Some(100)), long);
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
        assert_eq!(keys, ["type", "message", "time", "compaction_stats"]);
        let stat_keys: Vec<&String> = v["compaction_stats"].as_object().unwrap().keys().collect();
        assert_eq!(
            stat_keys,
            [
                "trigger",
                "context_tokens_before",
                "context_tokens_after",
                "context_window",
                "messages_count_before",
                "messages_count_after"
            ]
        );
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
