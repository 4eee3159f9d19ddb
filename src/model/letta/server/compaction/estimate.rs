//! Token estimates of the local backend (letta-protocol.md §8.4; the tests of
//! letta-tests-and-real-client.md A.9.1): per-message ceilings of chars / 4, the usage anchor
//! after the newest compaction, and the provider estimate used for the preflight check.
//!
//! Lengths are JavaScript string lengths (UTF-16 code units), as the ported estimator counts.

/// Characters one image counts for in a user or tool-result message (1200 tokens,
/// letta-protocol.md §8.4, A.9.1).
pub const IMAGE_CHARS: u64 = 4800;

/// Who said a message, as the local transcript stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    ToolResult,
}

/// One tool call of an assistant message: its name and its arguments as compact JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtxToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A transcript message as the compaction code sees it: enough to estimate, plan and render
/// it. `index` ties it back to the store; the algorithm never reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct CtxMessage {
    pub role: Role,
    /// The text (a user message's text parts concatenated: the estimate counts their lengths).
    pub text: String,
    /// A user message's text parts when it has several: the summariser's transcript joins them
    /// with a blank line (§8.5). Empty: `text` is the one part.
    pub parts: Vec<String>,
    /// Assistant thinking text.
    pub thinking: String,
    /// Images in a user or tool-result message.
    pub images: u64,
    pub tool_calls: Vec<CtxToolCall>,
    /// Tool results: the call they answer and the tool's name.
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    /// Assistant messages: the usage-derived tokens of the provider response ([`usage_tokens`]).
    pub usage: Option<u64>,
    /// Assistant messages that ended `aborted` or `error` are never an anchor.
    pub failed: bool,
    /// When it was written (ms).
    pub at_ms: u64,
    /// A compaction summary message: its raw summary (letta-protocol.md §8.6 metadata).
    pub summary: Option<String>,
    /// The store id, for mapping a plan back (not read by the algorithm).
    pub id: String,
}

impl CtxMessage {
    /// A message of `role` with `text` and nothing else.
    pub fn new(role: Role, text: &str) -> Self {
        CtxMessage {
            role,
            text: text.to_string(),
            parts: Vec::new(),
            thinking: String::new(),
            images: 0,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            usage: None,
            failed: false,
            at_ms: 0,
            summary: None,
            id: String::new(),
        }
    }

    /// An assistant message that calls at least one tool.
    pub fn calls_tools(&self) -> bool {
        self.role == Role::Assistant && !self.tool_calls.is_empty()
    }
}

/// A JavaScript string length.
pub fn js_len(s: &str) -> u64 {
    s.encode_utf16().count() as u64
}

fn ceil4(chars: u64) -> u64 {
    chars.div_ceil(4)
}

/// The estimate of one message (letta-protocol.md §8.4 "Per message"): user text plus 4800
/// per image, assistant text + thinking + each call's name and JSON arguments, tool result
/// text plus 4800 per image; each divided by 4, rounded up.
pub fn message_tokens(m: &CtxMessage) -> u64 {
    match m.role {
        Role::User | Role::ToolResult => ceil4(js_len(&m.text) + IMAGE_CHARS * m.images),
        Role::Assistant => {
            let calls: u64 = m
                .tool_calls
                .iter()
                .map(|c| js_len(&c.name) + js_len(&c.arguments))
                .sum();
            ceil4(js_len(&m.text) + js_len(&m.thinking) + calls)
        }
    }
}

/// A message list's estimate: the sum of per-message ceilings (§8.4).
pub fn messages_tokens(msgs: &[CtxMessage]) -> u64 {
    msgs.iter().map(message_tokens).sum()
}

/// Usage-derived tokens (§8.4): `total` if positive, else the sum of the parts when any is
/// known and the sum is positive, else none.
pub fn usage_tokens(
    total: Option<u64>,
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
) -> Option<u64> {
    if let Some(t) = total
        && t > 0
    {
        return Some(t);
    }
    let parts = [input, output, cache_read, cache_write];
    if parts.iter().all(Option::is_none) {
        return None;
    }
    let sum: u64 = parts.iter().flatten().sum();
    (sum > 0).then_some(sum)
}

/// `estimateLocalContextTokens` (§8.4, A.9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextEstimate {
    pub tokens: u64,
    /// The anchor's usage (0 without one).
    pub usage_tokens: u64,
    /// The estimate of what follows the anchor (everything without one).
    pub trailing_tokens: u64,
    pub last_usage_index: Option<usize>,
}

/// The context estimate: the newest assistant message that did not fail, has positive usage
/// and was written strictly after the newest compaction summary is the anchor; tokens = its
/// usage + the estimates of the messages after it. Without an anchor: the sum of estimates.
pub fn context_estimate(msgs: &[CtxMessage]) -> ContextEstimate {
    let boundary = msgs
        .iter()
        .filter(|m| m.summary.is_some())
        .map(|m| m.at_ms)
        .max();
    let anchor = msgs.iter().enumerate().rev().find(|(_, m)| {
        m.role == Role::Assistant
            && !m.failed
            && m.usage.is_some_and(|u| u > 0)
            && boundary.is_none_or(|b| m.at_ms > b)
    });
    match anchor {
        Some((i, m)) => {
            let usage = m.usage.expect("anchor has usage");
            let trailing = messages_tokens(&msgs[i + 1..]);
            ContextEstimate {
                tokens: usage + trailing,
                usage_tokens: usage,
                trailing_tokens: trailing,
                last_usage_index: Some(i),
            }
        }
        None => {
            let t = messages_tokens(msgs);
            ContextEstimate {
                tokens: t,
                usage_tokens: 0,
                trailing_tokens: t,
                last_usage_index: None,
            }
        }
    }
}

/// The provider context estimate of the preflight check (§8.4): the anchored estimate when
/// there is an anchor, else ceil(system prompt / 4) + the message estimate + ceil(JSON of the
/// client tools / 4); `None` when it comes to 0.
pub fn provider_estimate(
    system: &str,
    msgs: &[CtxMessage],
    client_tools_json: &str,
) -> Option<u64> {
    let e = context_estimate(msgs);
    let tokens = if e.last_usage_index.is_some() {
        e.tokens
    } else {
        ceil4(js_len(system)) + messages_tokens(msgs) + ceil4(js_len(client_tools_json))
    };
    (tokens > 0).then_some(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> CtxMessage {
        CtxMessage::new(Role::User, text)
    }

    fn assistant_with_usage(text: &str, usage: u64, at_ms: u64) -> CtxMessage {
        CtxMessage {
            usage: Some(usage),
            at_ms,
            ..CtxMessage::new(Role::Assistant, text)
        }
    }

    #[test]
    fn rule_8_4_an_image_counts_4800_chars_whatever_its_payload() {
        let m = CtxMessage {
            images: 1,
            ..user("look")
        };
        assert_eq!(message_tokens(&m), 1201);
    }

    #[test]
    fn rule_8_4_assistant_counts_text_thinking_tool_name_and_json_arguments() {
        let m = CtxMessage {
            thinking: "abcd".into(),
            tool_calls: vec![CtxToolCall {
                id: "t".into(),
                name: "Bash".into(),
                arguments: r#"{"a":1}"#.into(),
            }],
            ..CtxMessage::new(Role::Assistant, "xy")
        };
        // 2 + 4 + 4 + 7 = 17 chars → 5.
        assert_eq!(message_tokens(&m), 5);
    }

    #[test]
    fn rule_8_4_lists_sum_per_message_ceilings() {
        // 1 char each: ceil(1/4) = 1 per message, 3 in all (not ceil(3/4) = 1).
        assert_eq!(messages_tokens(&[user("a"), user("b"), user("c")]), 3);
    }

    #[test]
    fn rule_8_4_usage_is_total_else_the_sum_of_known_parts() {
        assert_eq!(usage_tokens(Some(1025), None, None, None, None), Some(1025));
        assert_eq!(
            usage_tokens(Some(0), Some(10), Some(2), None, Some(1)),
            Some(13)
        );
        assert_eq!(usage_tokens(Some(0), Some(0), None, None, None), None);
        assert_eq!(usage_tokens(None, None, None, None, None), None);
    }

    #[test]
    fn rule_8_4_the_newest_usage_anchors_the_estimate() {
        let old_image = CtxMessage {
            images: 1,
            ..user("")
        };
        let msgs = [
            old_image,
            assistant_with_usage("ok", 407000, 10),
            user("keep going"),
        ];
        assert_eq!(
            context_estimate(&msgs),
            ContextEstimate {
                tokens: 407003,
                usage_tokens: 407000,
                trailing_tokens: 3,
                last_usage_index: Some(1),
            }
        );
    }

    #[test]
    fn rule_8_4_usage_at_or_before_the_newest_compaction_is_ignored() {
        let summary = CtxMessage {
            summary: Some("s".into()),
            at_ms: 1_000_000,
            ..user(&"x".repeat(400))
        };
        let stale = assistant_with_usage(&"y".repeat(400), 407000, 995_000);
        let msgs = [summary.clone(), stale.clone()];
        assert_eq!(
            context_estimate(&msgs),
            ContextEstimate {
                tokens: 200,
                usage_tokens: 0,
                trailing_tokens: 200,
                last_usage_index: None,
            }
        );
        // At the boundary's own timestamp: still stale (strictly after is required).
        let same = assistant_with_usage("y", 5, 1_000_000);
        assert_eq!(
            context_estimate(&[summary.clone(), same]).last_usage_index,
            None
        );
        // A fresh assistant after the compaction anchors again.
        let fresh = assistant_with_usage("z", 90000, 1_000_001);
        let msgs = [summary, stale, fresh, user("next")];
        let e = context_estimate(&msgs);
        assert_eq!(
            (e.tokens, e.usage_tokens, e.last_usage_index),
            (90001, 90000, Some(2))
        );
    }

    #[test]
    fn rule_8_4_failed_or_zero_usage_assistants_are_not_anchors() {
        let failed = CtxMessage {
            failed: true,
            ..assistant_with_usage("a", 500, 1)
        };
        let zero = assistant_with_usage("b", 0, 2);
        let e = context_estimate(&[failed, zero]);
        assert_eq!(e.last_usage_index, None);
        assert_eq!(e.tokens, 2);
    }

    #[test]
    fn rule_8_4_the_provider_estimate_adds_system_prompt_and_tools_only_unanchored() {
        let msgs = [user("abcd")];
        // 8/4 + 1 + ceil(5/4) = 2 + 1 + 2.
        assert_eq!(provider_estimate("12345678", &msgs, "[{}] "), Some(5));
        let anchored = [user("abcd"), assistant_with_usage("", 70, 1)];
        assert_eq!(provider_estimate("12345678", &anchored, "[]"), Some(70));
        assert_eq!(provider_estimate("", &[], ""), None);
    }
}
