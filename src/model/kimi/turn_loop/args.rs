//! `parseToolCallArguments` (kimi-loop.md §4.6, §7.12). No JSON repair: it was tried and
//! removed upstream (#1209).

use serde_json::{Map, Value};

/// The parse outcome. `data` is `{}` when the text was absent, empty or unparseable.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedArguments {
    /// The parsed value (any JSON value, not only objects).
    pub data: Value,
    /// True if the text was present but not valid JSON.
    pub parse_failed: bool,
    /// The parser's message on failure.
    pub error: Option<String>,
}

/// `null` or `""` → `{}`; valid JSON → the value; invalid → `{}` with `parse_failed`.
pub fn parse_tool_call_arguments(raw: Option<&str>) -> ParsedArguments {
    let empty = Value::Object(Map::new());
    match raw {
        None | Some("") => ParsedArguments {
            data: empty,
            parse_failed: false,
            error: None,
        },
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(data) => ParsedArguments {
                data,
                parse_failed: false,
                error: None,
            },
            Err(error) => ParsedArguments {
                data: empty,
                parse_failed: true,
                error: Some(error.to_string()),
            },
        },
    }
}
