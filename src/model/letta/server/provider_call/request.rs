//! What a run needs from the request that started it ([`RunJob`]), and the provider request
//! body built from the conversation history in the provider's own format: Anthropic Messages,
//! OpenAI Chat Completions, OpenAI Responses or Gemini `streamGenerateContent`.

use serde_json::{Value, json};

use crate::model::letta::server::store::MessageBody;
use crate::model::letta::server::{Message, tool_defs};
use crate::wire::letta::{ClientTool, Content};
use crate::wire::provider::ProviderFormat;

/// What a run needs from the request that started it.
pub struct RunJob {
    pub run_id: String,
    pub conversation_id: String,
    pub model: String,
    pub history: Vec<Message>,
    pub client_tools: Vec<ClientTool>,
    /// `stream_tokens` of the request. `letta-oss-0.16` with `false` makes a non-streaming
    /// model call and sends each message whole (PROVENANCE.md "Step streaming", a3/b2).
    pub stream_tokens: bool,
    /// The request asked for the compaction chunks (letta-protocol.md §10.2); the local
    /// backend always emits them.
    pub include_compaction_messages: bool,
}

/// The text of a stored user message's content.
fn content_text(v: &Value) -> String {
    serde_json::from_value::<Content>(v.clone())
        .map(|c| c.text())
        .unwrap_or_default()
}

/// Builds the provider request body from the conversation history.
pub(crate) fn provider_body(api: ProviderFormat, job: &RunJob) -> Value {
    let system: String = job
        .history
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::System { text } => Some(text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    match api {
        ProviderFormat::Anthropic => {
            let mut messages: Vec<Value> = Vec::new();
            for m in &job.history {
                match &m.body {
                    MessageBody::System { .. } | MessageBody::ApprovalResponse { .. } => {}
                    MessageBody::User { content } => {
                        messages.push(json!({"role": "user", "content": content_text(content)}))
                    }
                    MessageBody::Assistant { text, tool_calls } => {
                        let mut content = Vec::new();
                        if !text.is_empty() {
                            content.push(json!({"type": "text", "text": text}));
                        }
                        for c in tool_calls {
                            let input: Value =
                                serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                            content.push(
                                json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                            );
                        }
                        messages.push(json!({"role": "assistant", "content": content}));
                    }
                    MessageBody::Tool {
                        tool_call_id,
                        content,
                        is_error,
                        ..
                    } => {
                        let block = json!({"type": "tool_result", "tool_use_id": tool_call_id,
                            "content": content, "is_error": is_error});
                        // Consecutive results share one user message, as the API requires.
                        match messages.last_mut() {
                            Some(last)
                                if last["role"] == "user"
                                    && last["content"].as_array().is_some_and(|a| {
                                        a.iter().all(|b| b["type"] == "tool_result")
                                    }) =>
                            {
                                last["content"].as_array_mut().expect("array").push(block)
                            }
                            _ => messages.push(json!({"role": "user", "content": [block]})),
                        }
                    }
                }
            }
            json!({"model": job.model, "max_tokens": 4096, "stream": true, "system": system,
                   "messages": messages, "tools": tool_defs(&job.client_tools)})
        }
        ProviderFormat::OpenAiChat => {
            let mut messages: Vec<Value> = vec![json!({"role": "system", "content": system})];
            for m in &job.history {
                match &m.body {
                    MessageBody::System { .. } | MessageBody::ApprovalResponse { .. } => {}
                    MessageBody::User { content } => {
                        messages.push(json!({"role": "user", "content": content_text(content)}))
                    }
                    MessageBody::Assistant { text, tool_calls } => {
                        let calls: Vec<Value> = tool_calls
                            .iter()
                            .map(|c| {
                                json!({"id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": c.arguments}})
                            })
                            .collect();
                        // Content is null when the message only calls tools
                        // (captures/letta_e2e a model summary).
                        let content = if text.is_empty() {
                            Value::Null
                        } else {
                            json!(text)
                        };
                        let mut m = json!({"role": "assistant", "content": content});
                        if !calls.is_empty() {
                            m["tool_calls"] = Value::Array(calls);
                        }
                        messages.push(m);
                    }
                    MessageBody::Tool {
                        tool_call_id,
                        content,
                        ..
                    } => messages.push(
                        json!({"role": "tool", "content": content, "tool_call_id": tool_call_id}),
                    ),
                }
            }
            let tools: Vec<Value> = tool_defs(&job.client_tools)
                .into_iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                    "name": t["name"], "description": t["description"],
                    "parameters": t["input_schema"]}})
                })
                .collect();
            json!({"model": job.model, "stream": true, "messages": messages, "tools": tools,
                   "stream_options": {"include_usage": true}, "parallel_tool_calls": false,
                   "tool_choice": "auto"})
        }
        ProviderFormat::OpenAiResponses => responses_body(job, system),
        ProviderFormat::Gemini => gemini_body(job, system),
    }
}

/// An OpenAI Responses request (captures/openai_responses, the requests of
/// `pydanticai_function_call_args_delta__and__output_text_after_tool`): the system prompt as
/// `instructions`; the history as `input` items, a user or assistant message by role, each
/// tool call a `function_call` item and each result a `function_call_output` item with the
/// same `call_id`; flat `function` tools. One call per step, as on the Chat API.
fn responses_body(job: &RunJob, system: String) -> Value {
    let mut input: Vec<Value> = Vec::new();
    for m in &job.history {
        match &m.body {
            MessageBody::System { .. } | MessageBody::ApprovalResponse { .. } => {}
            MessageBody::User { content } => {
                input.push(json!({"role": "user", "content": content_text(content)}))
            }
            MessageBody::Assistant { text, tool_calls } => {
                if !text.is_empty() {
                    input.push(json!({"role": "assistant", "content": text}));
                }
                for c in tool_calls {
                    input.push(json!({"type": "function_call", "call_id": c.id,
                        "name": c.name, "arguments": c.arguments}));
                }
            }
            MessageBody::Tool {
                tool_call_id,
                content,
                ..
            } => input.push(
                json!({"type": "function_call_output", "call_id": tool_call_id, "output": content}),
            ),
        }
    }
    let tools: Vec<Value> = tool_defs(&job.client_tools)
        .into_iter()
        .map(|t| {
            json!({"type": "function", "name": t["name"], "description": t["description"],
                   "parameters": t["input_schema"], "strict": false})
        })
        .collect();
    json!({"model": job.model, "instructions": system, "input": input, "stream": true,
           "tools": tools, "tool_choice": "auto", "parallel_tool_calls": false})
}

/// A Gemini `streamGenerateContent` request (captures/gemini, the requests of
/// `pydanticai_function_call_thought_signature` and `pydanticai_thinking_parts`): the system
/// prompt as `systemInstruction`; the history as `contents`, the model's turns with role
/// `model` and its tool calls as `functionCall` parts, consecutive results as one `user` turn
/// of `functionResponse` parts (the API wants as many as the call turn had). A result is the
/// response's `output`, a failed one its `error` (the API's two keys for a function's
/// outcome). Tools are one `functionDeclarations` list, with JSON Schema parameters; the
/// output budget is the Anthropic request's.
fn gemini_body(job: &RunJob, system: String) -> Value {
    let mut contents: Vec<Value> = Vec::new();
    let mut names: Vec<(&str, &str)> = Vec::new();
    for m in &job.history {
        match &m.body {
            MessageBody::System { .. } | MessageBody::ApprovalResponse { .. } => {}
            MessageBody::User { content } => {
                contents.push(json!({"role": "user", "parts": [{"text": content_text(content)}]}))
            }
            MessageBody::Assistant { text, tool_calls } => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(json!({"text": text}));
                }
                for c in tool_calls {
                    names.push((c.id.as_str(), c.name.as_str()));
                    let args: Value =
                        serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                    parts.push(json!({"functionCall": {"id": c.id, "name": c.name, "args": args}}));
                }
                contents.push(json!({"role": "model", "parts": parts}));
            }
            MessageBody::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let name = names
                    .iter()
                    .find(|(id, _)| id == tool_call_id)
                    .map_or("", |(_, n)| n);
                let key = if *is_error { "error" } else { "output" };
                let part = json!({"functionResponse": {"id": tool_call_id, "name": name,
                    "response": {key: content}}});
                match contents.last_mut() {
                    Some(last)
                        if last["role"] == "user"
                            && last["parts"].as_array().is_some_and(|a| {
                                a.iter().all(|p| p.get("functionResponse").is_some())
                            }) =>
                    {
                        last["parts"].as_array_mut().expect("array").push(part)
                    }
                    _ => contents.push(json!({"role": "user", "parts": [part]})),
                }
            }
        }
    }
    let mut body = json!({"contents": contents,
        "systemInstruction": {"role": "user", "parts": [{"text": system}]},
        "generationConfig": {"maxOutputTokens": 4096}});
    let declarations: Vec<Value> = tool_defs(&job.client_tools)
        .into_iter()
        .map(|t| {
            json!({"name": t["name"], "description": t["description"],
                   "parametersJsonSchema": t["input_schema"]})
        })
        .collect();
    if !declarations.is_empty() {
        body["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::letta::server::StoredToolCall;
    use crate::model::provider::validate::validate;

    fn message(body: MessageBody) -> Message {
        Message {
            id: String::new(),
            otid: None,
            run_id: None,
            step_id: None,
            at_ms: 0,
            body,
        }
    }

    /// A history with two parallel calls and both results: system, user, assistant, 2 tools.
    fn job() -> RunJob {
        let call = |id: &str, name: &str| StoredToolCall {
            id: id.into(),
            name: name.into(),
            arguments: r#"{"city":"Paris"}"#.into(),
        };
        RunJob {
            run_id: "run-1".into(),
            conversation_id: "conv-1".into(),
            model: "google_ai/gemini-2.5-pro".into(),
            history: vec![
                message(MessageBody::System {
                    text: "be brief".into(),
                }),
                message(MessageBody::User {
                    content: json!("weather?"),
                }),
                message(MessageBody::Assistant {
                    text: "checking".into(),
                    tool_calls: vec![call("c1", "get_weather"), call("c2", "Read")],
                }),
                message(MessageBody::Tool {
                    tool_call_id: "c1".into(),
                    content: "sunny".into(),
                    tool_return: "sunny".into(),
                    status: "success".into(),
                    is_error: false,
                }),
                message(MessageBody::Tool {
                    tool_call_id: "c2".into(),
                    content: "no such file".into(),
                    tool_return: "no such file".into(),
                    status: "error".into(),
                    is_error: true,
                }),
            ],
            client_tools: vec![ClientTool {
                name: "get_weather".into(),
                description: None,
                parameters: None,
            }],
            stream_tokens: true,
            include_compaction_messages: false,
        }
    }

    #[test]
    fn every_format_builds_a_request_its_api_accepts() {
        for api in ProviderFormat::ALL {
            let body = provider_body(api, &job());
            assert_eq!(validate(api, body.to_string().as_bytes()), Ok(()), "{api}");
        }
    }

    #[test]
    fn a_gemini_request_answers_both_calls_in_one_turn() {
        let body = provider_body(ProviderFormat::Gemini, &job());
        assert_eq!(body["systemInstruction"]["parts"][0]["text"], "be brief");
        let contents = body["contents"].as_array().unwrap();
        let roles: Vec<&str> = contents
            .iter()
            .map(|c| c["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "model", "user"]);
        assert_eq!(contents[1]["parts"][0]["text"], "checking");
        assert_eq!(
            contents[1]["parts"][1]["functionCall"],
            json!({"id": "c1", "name": "get_weather", "args": {"city": "Paris"}})
        );
        let results = contents[2]["parts"].as_array().unwrap();
        assert_eq!(
            results[0]["functionResponse"],
            json!({"id": "c1", "name": "get_weather", "response": {"output": "sunny"}})
        );
        assert_eq!(
            results[1]["functionResponse"]["response"],
            json!({"error": "no such file"})
        );
        let decl = &body["tools"][0]["functionDeclarations"][0];
        assert_eq!(decl["name"], "get_weather");
        assert_eq!(decl["parametersJsonSchema"], json!({"type": "object"}));
        assert!(
            body.get("model").is_none(),
            "Gemini names the model in the path"
        );
    }

    /// A tool result merges only into a turn of function responses, never into a user's text,
    /// so a history with a result in the wrong place reaches the provider as one and
    /// `history-valid` names it (the validator refuses a response turn after a user turn).
    #[test]
    fn a_gemini_tool_result_after_a_user_text_is_a_turn_of_its_own() {
        let mut job = job();
        job.history.remove(2);
        job.history.truncate(3);
        let body = provider_body(ProviderFormat::Gemini, &job);
        let contents = body["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 2, "{body}");
        assert_eq!(contents[0]["parts"], json!([{"text": "weather?"}]));
        assert_eq!(contents[1]["parts"][0]["functionResponse"]["id"], "c1");
        assert!(
            validate(ProviderFormat::Gemini, body.to_string().as_bytes())
                .unwrap_err()
                .starts_with("Please ensure that function response turn")
        );
    }

    #[test]
    fn a_responses_request_pairs_calls_and_outputs_by_call_id() {
        let body = provider_body(ProviderFormat::OpenAiResponses, &job());
        assert_eq!(body["instructions"], "be brief");
        assert_eq!(body["stream"], true);
        let kinds: Vec<String> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                i["type"]
                    .as_str()
                    .map_or_else(|| format!("{}", i["role"]), str::to_string)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "\"user\"",
                "\"assistant\"",
                "function_call",
                "function_call",
                "function_call_output",
                "function_call_output"
            ]
        );
        assert_eq!(body["input"][2]["call_id"], "c1");
        assert_eq!(body["input"][2]["arguments"], r#"{"city":"Paris"}"#);
        assert_eq!(body["input"][5]["output"], "no such file");
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["name"], "get_weather");
    }
}
