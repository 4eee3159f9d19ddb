//! What a run needs from the request that started it ([`RunJob`]), and the provider request
//! body built from the conversation history in the provider's own format.

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
    }
}
