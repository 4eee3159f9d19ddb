//! Tool results at the trust boundary: [`coerce_tool_result`] turns whatever a tool or hook
//! returned into an [`ExecutableToolResult`], and [`normalize_tool_result`] turns that into the
//! persisted [`ToolResult`] (kimi-loop.md §4.3).
//!
//! Tools and hooks return raw `serde_json::Value`s on purpose: JavaScript tools can return
//! `undefined`, `42` or `{}`, and the texts for those cases are part of the contract
//! (kimi-loop.md §9.1).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::types::ContentPart;

/// kimi-loop.md §4.3: placeholder for empty output.
pub const TOOL_OUTPUT_EMPTY: &str = "Tool output is empty.";
/// kimi-loop.md §4.3: companion text for media-only output.
pub const TOOL_NON_TEXT_CONTENT: &str = "Tool returned non-text content.";

/// A tool's output: text or content parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolOutput {
    /// A string.
    Text(String),
    /// Content parts.
    Parts(Vec<ContentPart>),
}

impl ToolOutput {
    /// The text, if this is a string output.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(text) => Some(text),
            Self::Parts(_) => None,
        }
    }
}

/// A coerced, not yet normalised result (kosong `ExecutableToolResult`, kimi-loop.md §2.4).
/// `note` stays raw until normalisation, which keeps it only if it is a non-empty string.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutableToolResult {
    /// The output.
    pub output: ToolOutput,
    /// The error variant.
    pub is_error: bool,
    /// Loop-control hint; stripped before persistence.
    pub stop_turn: bool,
    /// UI-only side channel; stripped before persistence.
    pub message: Option<Value>,
    /// Model-visible, UI-hidden text; persisted if it is a non-empty string.
    pub note: Option<Value>,
    /// The tool already returned partial output.
    pub truncated: bool,
}

impl ExecutableToolResult {
    /// A successful text result.
    pub fn text(output: impl Into<String>) -> Self {
        Self {
            output: ToolOutput::Text(output.into()),
            is_error: false,
            stop_turn: false,
            message: None,
            note: None,
            truncated: false,
        }
    }

    /// An error text result.
    pub fn error(output: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(output)
        }
    }

    /// The raw JSON form a JavaScript tool would return (`{output, isError?, ...}`).
    pub fn to_value(&self) -> Value {
        let mut object = Map::new();
        object.insert(
            "output".to_owned(),
            serde_json::to_value(&self.output).unwrap_or(Value::Null),
        );
        if self.is_error {
            object.insert("isError".to_owned(), Value::Bool(true));
        }
        if self.stop_turn {
            object.insert("stopTurn".to_owned(), Value::Bool(true));
        }
        if let Some(message) = &self.message {
            object.insert("message".to_owned(), message.clone());
        }
        if let Some(note) = &self.note {
            object.insert("note".to_owned(), note.clone());
        }
        if self.truncated {
            object.insert("truncated".to_owned(), Value::Bool(true));
        }
        Value::Object(object)
    }
}

/// A normalised, persisted result (the `result` of a `tool.result` event, kimi-loop.md §3.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The output.
    pub output: ToolOutput,
    /// Present (as `true`) only for errors.
    #[serde(default, skip_serializing_if = "is_false")]
    pub is_error: bool,
    /// Present only if a non-empty string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Present (as `true`) only if the tool truncated its output.
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
}

impl ToolResult {
    /// An error result (as `recordUnexecutedToolCalls` writes it, without normalisation).
    pub fn error(output: impl Into<String>) -> Self {
        Self {
            output: ToolOutput::Text(output.into()),
            is_error: true,
            note: None,
            truncated: false,
        }
    }

    /// The output text, if it is a string.
    pub fn text(&self) -> Option<&str> {
        self.output.as_text()
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn js_typeof(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Null => "undefined",
        Value::Array(_) | Value::Object(_) => "object",
    }
}

/// `coerceToolResult(value, toolName)` (kimi-loop.md §4.3), texts verbatim. `Value::Null`
/// stands for both `null` and `undefined`.
///
/// Choice (Rust types cannot carry arbitrary values): an element of an output array that is
/// not a valid content part is dropped here; the reference would keep it verbatim in a media
/// array and drop it in a text-only one.
pub fn coerce_tool_result(value: &Value, tool_name: &str) -> ExecutableToolResult {
    let object = match value {
        Value::Null => {
            return ExecutableToolResult::error(format!(
                "Tool \"{tool_name}\" returned no result."
            ));
        }
        Value::Object(object) => object,
        Value::Array(_) => return malformed_output(tool_name),
        other => {
            return ExecutableToolResult::error(format!(
                "Tool \"{tool_name}\" returned a {} instead of a tool result.",
                js_typeof(other)
            ));
        }
    };
    let output = match object.get("output") {
        Some(Value::String(text)) => ToolOutput::Text(text.clone()),
        Some(Value::Array(parts)) => ToolOutput::Parts(
            parts
                .iter()
                .filter_map(|part| serde_json::from_value(part.clone()).ok())
                .collect(),
        ),
        _ => return malformed_output(tool_name),
    };
    ExecutableToolResult {
        output,
        is_error: object.get("isError") == Some(&Value::Bool(true)),
        stop_turn: object.get("stopTurn") == Some(&Value::Bool(true)),
        message: object.get("message").cloned(),
        note: object.get("note").cloned(),
        truncated: object.get("truncated") == Some(&Value::Bool(true)),
    }
}

fn malformed_output(tool_name: &str) -> ExecutableToolResult {
    ExecutableToolResult::error(format!(
        "Tool \"{tool_name}\" returned a result with a missing or malformed \"output\" field."
    ))
}

/// `normalizeToolResult` (kimi-loop.md §4.3).
pub fn normalize_tool_result(result: &ExecutableToolResult) -> ToolResult {
    let output = match &result.output {
        ToolOutput::Text(text) if text.is_empty() => ToolOutput::Text(TOOL_OUTPUT_EMPTY.to_owned()),
        ToolOutput::Text(text) => ToolOutput::Text(text.clone()),
        ToolOutput::Parts(parts) => normalize_parts(parts),
    };
    let note = match &result.note {
        Some(Value::String(note)) if !note.is_empty() => Some(note.clone()),
        _ => None,
    };
    ToolResult {
        output,
        is_error: result.is_error,
        note,
        truncated: result.truncated,
    }
}

fn normalize_parts(parts: &[ContentPart]) -> ToolOutput {
    if parts.is_empty() {
        return ToolOutput::Text(TOOL_OUTPUT_EMPTY.to_owned());
    }
    if parts.iter().any(ContentPart::is_media) {
        let has_text = parts
            .iter()
            .any(|part| matches!(part, ContentPart::Text { text } if !text.is_empty()));
        if has_text {
            return ToolOutput::Parts(parts.to_vec());
        }
        let mut with_companion = vec![ContentPart::text(TOOL_NON_TEXT_CONTENT)];
        with_companion.extend(parts.iter().cloned());
        return ToolOutput::Parts(with_companion);
    }
    let text: String = parts
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if text.is_empty() {
        ToolOutput::Text(TOOL_OUTPUT_EMPTY.to_owned())
    } else {
        ToolOutput::Text(text)
    }
}
