//! Request validation of the fake provider: the conversation rules the real APIs enforce with a
//! 400, so a server that sends an invalid history is caught the way production would catch it
//! (invariant `history-valid`, docs/invariants.md).
//!
//! The error texts are the APIs' own, as they appear verbatim in public bug reports:
//! - Anthropic Messages: ``messages.N: `tool_use` ids were found without `tool_result` blocks
//!   immediately after: ID. Each `tool_use` block must have a corresponding `tool_result`
//!   block in the next message.`` and the mirror error for a `tool_result` with no `tool_use`;
//! - OpenAI Chat: "An assistant message with 'tool_calls' must be followed by tool messages
//!   responding to each 'tool_call_id'. The following tool_call_ids did not have response
//!   messages: ID" and "Invalid parameter: messages with role 'tool' must be a response to a
//!   preceeding message with 'tool_calls'." (the API's spelling).

use serde_json::{Value, json};

use crate::wire::provider::ProviderFormat;

/// The 400 body each API sends for an invalid request.
pub fn error_body(format: ProviderFormat, message: &str) -> Value {
    match format {
        ProviderFormat::Anthropic => json!({
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
        }),
        ProviderFormat::OpenAiChat => json!({
            "error": {"message": message, "type": "invalid_request_error",
                      "param": "messages", "code": null},
        }),
    }
}

/// Checks a request body; `Err` carries the API's error message.
pub fn validate(format: ProviderFormat, body: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("There was an error parsing the body: {e}"))?;
    let Some(messages) = v["messages"].as_array() else {
        return Err("messages: Field required".into());
    };
    match format {
        ProviderFormat::Anthropic => anthropic(messages),
        ProviderFormat::OpenAiChat => openai(messages),
    }
}

fn anthropic(messages: &[Value]) -> Result<(), String> {
    let blocks = |m: &Value, kind: &str, key: &str| -> Vec<String> {
        m["content"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|b| b["type"] == kind)
                    .filter_map(|b| b[key].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (i, m) in messages.iter().enumerate() {
        if m["role"] == "assistant" {
            let uses = blocks(m, "tool_use", "id");
            if uses.is_empty() {
                continue;
            }
            let results = messages
                .get(i + 1)
                .filter(|n| n["role"] == "user")
                .map(|n| blocks(n, "tool_result", "tool_use_id"))
                .unwrap_or_default();
            let missing: Vec<&str> = uses
                .iter()
                .filter(|u| !results.contains(u))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    missing.join(", ")
                ));
            }
        } else if m["role"] == "user" {
            let results = blocks(m, "tool_result", "tool_use_id");
            if results.is_empty() {
                continue;
            }
            let uses = i
                .checked_sub(1)
                .and_then(|p| messages.get(p))
                .filter(|p| p["role"] == "assistant")
                .map(|p| blocks(p, "tool_use", "id"))
                .unwrap_or_default();
            if let Some(orphan) = results.iter().find(|r| !uses.contains(r)) {
                return Err(format!(
                    "messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {orphan}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
        }
    }
    Ok(())
}

fn openai(messages: &[Value]) -> Result<(), String> {
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        if m["role"] == "tool" {
            return Err("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into());
        }
        if m["role"] == "assistant"
            && let Some(calls) = m["tool_calls"].as_array()
            && !calls.is_empty()
        {
            let ids: Vec<&str> = calls.iter().filter_map(|c| c["id"].as_str()).collect();
            let mut answered: Vec<&str> = Vec::new();
            let mut j = i + 1;
            while let Some(n) = messages.get(j).filter(|n| n["role"] == "tool") {
                answered.extend(n["tool_call_id"].as_str());
                j += 1;
            }
            let missing: Vec<&str> = ids
                .iter()
                .copied()
                .filter(|id| !answered.contains(id))
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                    missing.join(", ")
                ));
            }
            i = j;
            continue;
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_orphan_tool_use_is_refused_with_the_api_text() {
        let body = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}]},
            {"role": "user", "content": "next"},
        ]});
        let err = validate(ProviderFormat::Anthropic, body.to_string().as_bytes()).unwrap_err();
        assert!(err.starts_with("messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1."), "{err}");
        let ok = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}]},
        ]});
        assert_eq!(
            validate(ProviderFormat::Anthropic, ok.to_string().as_bytes()),
            Ok(())
        );
    }

    #[test]
    fn openai_orphan_tool_calls_and_stray_tool_messages_are_refused() {
        let body = json!({"messages": [
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "user", "content": "next"},
        ]});
        let err = validate(ProviderFormat::OpenAiChat, body.to_string().as_bytes()).unwrap_err();
        assert!(
            err.ends_with("did not have response messages: call_1"),
            "{err}"
        );
        let stray = json!({"messages": [{"role": "tool", "tool_call_id": "c", "content": "r"}]});
        assert!(validate(ProviderFormat::OpenAiChat, stray.to_string().as_bytes()).is_err());
        let ok = json!({"messages": [
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "r"},
        ]});
        assert_eq!(
            validate(ProviderFormat::OpenAiChat, ok.to_string().as_bytes()),
            Ok(())
        );
    }
}
