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
//!   preceeding message with 'tool_calls'." (the API's spelling);
//! - OpenAI Responses (checked only without `previous_response_id`, since with one the calls
//!   live in the stored response): "No tool call found for function call output with call_id
//!   ID." and "No tool output found for function call ID.";
//! - Gemini `generateContent` / `streamGenerateContent` (status `INVALID_ARGUMENT`): "Please
//!   ensure that function call turn comes immediately after a user turn or after a function
//!   response turn.", "Please ensure that function response turn comes immediately after a
//!   function call turn." and "Please ensure that the number of function response parts is
//!   equal to the number of function call parts of the function call turn."
//!
//! Both OpenAI APIs refuse a request without a `model`: Chat with "you must provide a model
//! parameter" (its 400 in irudnyts/openai #68 and chain-ml/council #45), Responses with
//! "Missing required parameter: 'model'." (`param` `model`, code `missing_required_parameter`:
//! mattermost/mattermost-plugin-agents #476). Anthropic's and Gemini's texts for it are not on
//! record (Gemini's model is in the URL), so those two are not checked for it.
//!
//! Anthropic also refuses a message whose content is empty (`""` or `[]`), the final assistant
//! message (a prefill) excepted: "messages.N: all messages must have non-empty content except
//! for the optional final assistant message" (anthropics/claude-code #3196, #6774).
//!
//! An empty conversation is refused by each of the three that carry one in a list, with the
//! API's own text: Anthropic "messages: at least one message is required" (the text
//! langchain-anthropic matches to warn of a system-only request), OpenAI Chat "[] is too short -
//! 'messages'" (llama_index #9373), Gemini "* GenerateContentRequest.contents: contents is not
//! specified" (the same text as a missing `contents`: langchain-google #1393, a request with a
//! system instruction only). OpenAI Responses is not checked: an empty `input` beside a
//! `previous_response_id` is how a client continues, and its text without one is not on record.

use serde_json::{Value, json};

use crate::wire::provider::{ProviderFormat, StreamFormat};

/// The 400 body of any stream format's API for an invalid request.
pub fn stream_error_body(format: StreamFormat, message: &str) -> Value {
    error_body(format.model_format(), message)
}

/// Checks a request body of any stream format; `Err` carries the API's error message.
pub fn validate_stream(format: StreamFormat, body: &[u8]) -> Result<(), String> {
    validate(format.model_format(), body)
}

fn parse(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|e| format!("There was an error parsing the body: {e}"))
}

/// Every `function_call_output` answers an earlier `function_call` of the input, and every
/// `function_call` has its output before the input ends.
fn responses(items: &[Value]) -> Result<(), String> {
    let mut open: Vec<&str> = Vec::new();
    for item in items {
        let id = item["call_id"].as_str().unwrap_or("");
        match item["type"].as_str() {
            Some("function_call") => open.push(id),
            Some("function_call_output") => match open.iter().position(|c| *c == id) {
                Some(i) => {
                    open.remove(i);
                }
                None => {
                    return Err(format!(
                        "No tool call found for function call output with call_id {id}."
                    ));
                }
            },
            _ => {}
        }
    }
    match open.first() {
        Some(id) => Err(format!("No tool output found for function call {id}.")),
        None => Ok(()),
    }
}

/// A function call turn follows a user turn (a function response turn is one); a function
/// response turn follows a function call turn and answers each of its calls.
fn gemini(contents: &[Value]) -> Result<(), String> {
    let count = |c: &Value, key: &str| -> usize {
        c["parts"]
            .as_array()
            .map_or(0, |ps| ps.iter().filter(|p| p.get(key).is_some()).count())
    };
    for (i, c) in contents.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|p| contents.get(p));
        if count(c, "functionCall") > 0
            && !prev.is_some_and(|p| p["role"] == "user" || p["role"] == "function")
        {
            return Err("Please ensure that function call turn comes immediately after a user turn or after a function response turn.".into());
        }
        let responses = count(c, "functionResponse");
        if responses > 0 {
            let calls = prev.map_or(0, |p| count(p, "functionCall"));
            if calls == 0 {
                return Err("Please ensure that function response turn comes immediately after a function call turn.".into());
            }
            if calls != responses {
                return Err("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.".into());
            }
        }
    }
    Ok(())
}

/// The 400 body each API sends for an invalid request.
pub fn error_body(format: ProviderFormat, message: &str) -> Value {
    match format {
        ProviderFormat::Anthropic => json!({
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
        }),
        ProviderFormat::OpenAiChat if message == CHAT_NO_MODEL => json!({
            "error": {"message": message, "type": "invalid_request_error",
                      "param": null, "code": null},
        }),
        ProviderFormat::OpenAiChat => json!({
            "error": {"message": message, "type": "invalid_request_error",
                      "param": "messages", "code": null},
        }),
        ProviderFormat::OpenAiResponses if message == RESPONSES_NO_MODEL => json!({
            "error": {"message": message, "type": "invalid_request_error",
                      "param": "model", "code": "missing_required_parameter"},
        }),
        ProviderFormat::OpenAiResponses => json!({
            "error": {"message": message, "type": "invalid_request_error",
                      "param": "input", "code": null},
        }),
        ProviderFormat::Gemini => json!({
            "error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"},
        }),
    }
}

/// The OpenAI Chat API's refusal of a request without a model.
const CHAT_NO_MODEL: &str = "you must provide a model parameter";
/// The OpenAI Responses API's refusal of a request without a model.
const RESPONSES_NO_MODEL: &str = "Missing required parameter: 'model'.";

/// Checks a request body; `Err` carries the API's error message.
pub fn validate(format: ProviderFormat, body: &[u8]) -> Result<(), String> {
    let v = parse(body)?;
    let no_model = v["model"].as_str().is_none_or(str::is_empty);
    match format {
        ProviderFormat::OpenAiChat if no_model => Err(CHAT_NO_MODEL.into()),
        ProviderFormat::OpenAiResponses if no_model => Err(RESPONSES_NO_MODEL.into()),
        ProviderFormat::Anthropic | ProviderFormat::OpenAiChat => {
            let Some(messages) = v["messages"].as_array() else {
                return Err("messages: Field required".into());
            };
            if messages.is_empty() {
                return Err(if format == ProviderFormat::Anthropic {
                    "messages: at least one message is required".into()
                } else {
                    "[] is too short - 'messages'".into()
                });
            }
            if format == ProviderFormat::Anthropic {
                anthropic(messages)
            } else {
                openai(messages)
            }
        }
        ProviderFormat::OpenAiResponses => {
            if !v["previous_response_id"].is_null() {
                return Ok(());
            }
            match &v["input"] {
                Value::Array(items) => responses(items),
                _ => Ok(()),
            }
        }
        ProviderFormat::Gemini => match v["contents"].as_array() {
            Some(contents) if !contents.is_empty() => gemini(contents),
            _ => Err("* GenerateContentRequest.contents: contents is not specified".into()),
        },
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
        let empty = match &m["content"] {
            Value::String(text) => text.is_empty(),
            Value::Array(blocks) => blocks.is_empty(),
            _ => false,
        };
        let final_assistant = i + 1 == messages.len() && m["role"] == "assistant";
        if empty && !final_assistant {
            return Err(format!(
                "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
            ));
        }
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
    fn anthropic_refuses_empty_content_except_a_final_assistant_prefill() {
        let check = |messages: Value| {
            validate(
                ProviderFormat::Anthropic,
                json!({ "messages": messages }).to_string().as_bytes(),
            )
        };
        let text = "all messages must have non-empty content except for the optional final assistant message";
        assert_eq!(
            check(json!([{"role": "user", "content": ""}])),
            Err(format!("messages.0: {text}"))
        );
        assert_eq!(
            check(json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": []},
                {"role": "user", "content": "again"},
            ])),
            Err(format!("messages.1: {text}"))
        );
        assert_eq!(
            check(json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": []},
            ])),
            Ok(())
        );
    }

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
    fn an_empty_conversation_is_refused_with_each_api_text() {
        let check = |format, body: Value| validate(format, body.to_string().as_bytes());
        assert_eq!(
            check(
                ProviderFormat::Anthropic,
                json!({"system": "s", "messages": []})
            ),
            Err("messages: at least one message is required".into())
        );
        assert_eq!(
            check(
                ProviderFormat::OpenAiChat,
                json!({"model": "m", "messages": []})
            ),
            Err("[] is too short - 'messages'".into())
        );
        assert_eq!(
            check(
                ProviderFormat::Gemini,
                json!({"systemInstruction": {"parts": [{"text": "s"}]}, "contents": []})
            ),
            Err("* GenerateContentRequest.contents: contents is not specified".into())
        );
        // A system message alone is a conversation to OpenAI Chat.
        assert_eq!(
            check(
                ProviderFormat::OpenAiChat,
                json!({"model": "m", "messages": [{"role": "system", "content": "s"}]})
            ),
            Ok(())
        );
    }

    #[test]
    fn responses_outputs_and_calls_pair_by_call_id() {
        let check = |input: Value| {
            validate_stream(
                StreamFormat::OpenAiResponses,
                json!({"model": "m", "input": input}).to_string().as_bytes(),
            )
        };
        let call =
            json!({"type": "function_call", "call_id": "fc_1", "name": "x", "arguments": "{}"});
        let output = json!({"type": "function_call_output", "call_id": "fc_1", "output": "r"});
        let user = json!({"role": "user", "content": "hi"});
        assert_eq!(check(json!([user, call, output])), Ok(()));
        assert_eq!(
            check(json!([user, output])),
            Err("No tool call found for function call output with call_id fc_1.".into())
        );
        assert_eq!(
            check(json!([user, call])),
            Err("No tool output found for function call fc_1.".into())
        );
        // With a previous response the calls live there: nothing to check.
        let later = json!({"model": "m", "previous_response_id": "resp_1", "input": [output]});
        assert_eq!(
            validate_stream(StreamFormat::OpenAiResponses, later.to_string().as_bytes()),
            Ok(())
        );
    }

    #[test]
    fn gemini_function_turns_follow_each_other() {
        let check = |contents: Value| {
            validate_stream(
                StreamFormat::Gemini,
                json!({"contents": contents}).to_string().as_bytes(),
            )
        };
        let user = json!({"role": "user", "parts": [{"text": "hi"}]});
        let call = json!({"role": "model", "parts": [{"functionCall": {"name": "x", "args": {}}}]});
        let two_calls = json!({"role": "model", "parts": [
            {"functionCall": {"name": "x", "args": {}}}, {"functionCall": {"name": "y", "args": {}}}]});
        let answer =
            json!({"role": "user", "parts": [{"functionResponse": {"name": "x", "response": {}}}]});
        assert_eq!(check(json!([user, call, answer])), Ok(()));
        assert!(
            check(json!([call]))
                .unwrap_err()
                .starts_with("Please ensure that function call turn")
        );
        assert!(
            check(json!([user, answer]))
                .unwrap_err()
                .starts_with("Please ensure that function response turn")
        );
        assert!(
            check(json!([user, two_calls, answer]))
                .unwrap_err()
                .contains("number of function response parts")
        );
        assert!(
            validate_stream(StreamFormat::Gemini, b"{}")
                .unwrap_err()
                .contains("contents is not specified")
        );
    }

    #[test]
    fn the_recorded_gemini_and_responses_requests_are_valid() {
        let root = env!("CARGO_MANIFEST_DIR");
        for (file, format) in [
            (
                "gemini/pydanticai_function_call_thought_signature.jsonl",
                StreamFormat::Gemini,
            ),
            (
                "gemini/pydanticai_thinking_parts.jsonl",
                StreamFormat::Gemini,
            ),
            (
                "openai_responses/pydanticai_function_call_args_delta__and__output_text_after_tool.jsonl",
                StreamFormat::OpenAiResponses,
            ),
            (
                "openai_responses/pydanticai_reasoning_encrypted_then_function_call_usage.jsonl",
                StreamFormat::OpenAiResponses,
            ),
        ] {
            let text =
                std::fs::read_to_string(format!("{root}/cassettes/provider/vcr/{file}")).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for line in &lines[1..lines.len() - 1] {
                let x: Value = serde_json::from_str(line).unwrap();
                let body = x["request"]["body"]["json"].to_string();
                assert_eq!(validate_stream(format, body.as_bytes()), Ok(()), "{file}");
            }
        }
    }

    /// Both OpenAI APIs refuse a request without a model, each with its own text and body; a
    /// body that is not a request at all (`null`) has none either.
    #[test]
    fn openai_requests_without_a_model_are_refused() {
        let chat = json!({"messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(
            validate(ProviderFormat::OpenAiChat, chat.to_string().as_bytes()),
            Err("you must provide a model parameter".into())
        );
        for body in [json!({"input": []}), Value::Null] {
            let refused = validate(ProviderFormat::OpenAiResponses, body.to_string().as_bytes());
            assert_eq!(refused, Err("Missing required parameter: 'model'.".into()));
        }
        assert_eq!(
            error_body(ProviderFormat::OpenAiResponses, RESPONSES_NO_MODEL)["error"]["code"],
            "missing_required_parameter"
        );
    }

    #[test]
    fn openai_orphan_tool_calls_and_stray_tool_messages_are_refused() {
        let body = json!({"model": "m", "messages": [
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "user", "content": "next"},
        ]});
        let err = validate(ProviderFormat::OpenAiChat, body.to_string().as_bytes()).unwrap_err();
        assert!(
            err.ends_with("did not have response messages: call_1"),
            "{err}"
        );
        let stray = json!({"model": "m", "messages": [{"role": "tool", "tool_call_id": "c", "content": "r"}]});
        assert!(validate(ProviderFormat::OpenAiChat, stray.to_string().as_bytes()).is_err());
        let ok = json!({"model": "m", "messages": [
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "r"},
        ]});
        assert_eq!(
            validate(ProviderFormat::OpenAiChat, ok.to_string().as_bytes()),
            Ok(())
        );
    }
}
