//! Projection of the history into wire messages (kimi-loop.md §8.3 `projector.ts`,
//! `tool-result-render.ts`): the normal, strict and media projections the loop's message
//! builders return.

use std::collections::BTreeMap;

use super::context::{ContextMessage, Origin};
use crate::model::kimi::turn_loop::result::TOOL_OUTPUT_EMPTY;
use crate::model::kimi::turn_loop::types::{ContentPart, Message, Role};

/// kimi-loop.md §8.3: a missing mid-history result.
pub const RESULT_NOT_AVAILABLE: &str = "Tool result is not available in the current context. Do \
not assume the tool completed successfully.";
const ERROR_STATUS: &str = "<system>ERROR: Tool execution failed.</system>";
const ERROR_EMPTY: &str = "<system>ERROR: Tool execution failed. Tool output is empty.</system>";
const EMPTY_STATUS: &str = "<system>Tool output is empty.</system>";

/// Which projection to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectionMode {
    /// `context.messages`.
    Normal,
    /// `context.strictMessages`: also repairs trailing calls, duplicate ids, leading
    /// non-user messages and consecutive assistants.
    Strict,
}

fn is_blank(part: &ContentPart) -> bool {
    match part {
        ContentPart::Text { text } => text.trim().is_empty(),
        ContentPart::Think { think, encrypted } => think.is_empty() && encrypted.is_none(),
        _ => false,
    }
}

fn single_text(message: &ContextMessage) -> Option<&str> {
    match message.content.as_slice() {
        [ContentPart::Text { text }] => Some(text),
        [] => Some(""),
        _ => None,
    }
}

/// `tool-result-render.ts`: error status, empty placeholder and note.
fn render_tool_result(message: &ContextMessage) -> Vec<ContentPart> {
    let mut content = match single_text(message) {
        Some(text) => {
            let empty = text.trim().is_empty() || text == TOOL_OUTPUT_EMPTY;
            let rendered = match (message.is_error, empty) {
                (true, true) => ERROR_EMPTY.to_owned(),
                (true, false) => format!("{ERROR_STATUS}\n{text}"),
                (false, true) => EMPTY_STATUS.to_owned(),
                (false, false) => text.to_owned(),
            };
            vec![ContentPart::text(rendered)]
        }
        None => {
            let mut parts = Vec::new();
            if message.is_error {
                parts.push(ContentPart::text(ERROR_STATUS));
            }
            parts.extend(message.content.iter().cloned());
            parts
        }
    };
    if let Some(note) = &message.note {
        match content.as_mut_slice() {
            [ContentPart::Text { text }] => {
                text.push('\n');
                text.push_str(note);
            }
            _ => content.push(ContentPart::text(note.clone())),
        }
    }
    content
}

/// Merge two adjacent user messages: texts joined with a blank line, other parts after.
fn merge_users(first: &mut ContextMessage, second: ContextMessage) {
    let mut texts = Vec::new();
    let mut others = Vec::new();
    for part in first.content.drain(..).chain(second.content) {
        match part {
            ContentPart::Text { text } => texts.push(text),
            other => others.push(other),
        }
    }
    first.content = std::iter::once(ContentPart::text(texts.join("\n\n")))
        .filter(|_| !texts.is_empty())
        .chain(others)
        .collect();
}

fn synthetic_result(tool_call_id: &str) -> ContextMessage {
    let mut message = ContextMessage::tool(
        tool_call_id,
        &crate::model::kimi::turn_loop::result::ToolResult::error(RESULT_NOT_AVAILABLE),
    );
    message.content = render_tool_result(&message);
    message
}

/// The planted `errors_shown_as_success` defect (`LoopBugs`): each tool message of a
/// projection loses its error status, as if every tool had succeeded.
pub fn without_error_status(mut messages: Vec<Message>) -> Vec<Message> {
    for message in messages.iter_mut().filter(|m| m.role == Role::Tool) {
        message
            .content
            .retain(|part| !matches!(part, ContentPart::Text { text } if text == ERROR_STATUS));
        for part in &mut message.content {
            if let ContentPart::Text { text } = part {
                if let Some(output) = text.strip_prefix(&format!("{ERROR_STATUS}\n")) {
                    *text = output.to_owned();
                } else if text == ERROR_EMPTY {
                    *text = EMPTY_STATUS.to_owned();
                }
            }
        }
    }
    messages
}

/// `project(history, {dropOrphanResults:true})`, rules 1–9 of kimi-loop.md §8.3.
pub fn project(history: &[ContextMessage], mode: ProjectionMode) -> Vec<Message> {
    let mut messages: Vec<ContextMessage> = Vec::new();
    for message in history.iter().filter(|message| !message.partial) {
        let mut message = message.clone();
        if message.role == Role::Tool {
            message.content = render_tool_result(&message);
        }
        message.content.retain(|part| !is_blank(part));
        if message.content.is_empty() && message.tool_calls.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last.origin == Origin::User && message.origin == Origin::User => {
                merge_users(last, message)
            }
            _ => messages.push(message),
        }
    }
    let repaired = repair_tool_exchange(messages, mode);
    let repaired = if mode == ProjectionMode::Strict {
        strict_shape(repaired)
    } else {
        repaired
    };
    repaired.iter().map(ContextMessage::to_message).collect()
}

/// Rules 7 and 8: results right after their call; synthesise mid-history gaps (and, in strict
/// mode, trailing ones); drop orphans and, in strict mode, duplicate ids.
fn repair_tool_exchange(
    messages: Vec<ContextMessage>,
    mode: ProjectionMode,
) -> Vec<ContextMessage> {
    let mut results: BTreeMap<String, ContextMessage> = BTreeMap::new();
    for message in messages.iter().filter(|m| m.role == Role::Tool) {
        if let Some(id) = &message.tool_call_id {
            results.entry(id.clone()).or_insert_with(|| message.clone());
        }
    }
    let last_non_tool = messages.iter().rposition(|m| m.role != Role::Tool);
    let mut seen_calls: Vec<String> = Vec::new();
    let mut output = Vec::new();
    for (index, mut message) in messages.into_iter().enumerate() {
        if message.role == Role::Tool {
            continue;
        }
        if mode == ProjectionMode::Strict {
            message
                .tool_calls
                .retain(|call| !seen_calls.contains(&call.id));
            if message.content.is_empty() && message.tool_calls.is_empty() {
                continue;
            }
        }
        let calls = message.tool_calls.clone();
        output.push(message);
        let trailing = Some(index) == last_non_tool;
        for call in calls {
            seen_calls.push(call.id.clone());
            match results.remove(&call.id) {
                Some(result) => output.push(result),
                None if trailing && mode == ProjectionMode::Normal => {}
                None => output.push(synthetic_result(&call.id)),
            }
        }
    }
    output
}

/// Strict extras: drop leading non-user messages; merge consecutive assistant messages.
fn strict_shape(messages: Vec<ContextMessage>) -> Vec<ContextMessage> {
    let first_user = messages
        .iter()
        .position(|m| m.role == Role::User)
        .unwrap_or(messages.len());
    let mut output: Vec<ContextMessage> = Vec::new();
    for message in messages.into_iter().skip(first_user) {
        match output.last_mut() {
            Some(last)
                if last.role == Role::Assistant
                    && message.role == Role::Assistant
                    && last.tool_calls.is_empty() =>
            {
                last.content.extend(message.content);
                last.tool_calls = message.tool_calls;
            }
            _ => output.push(message),
        }
    }
    output
}

fn media_marker(part: &ContentPart) -> ContentPart {
    let kind = match part {
        ContentPart::ImageUrl { .. } => "image",
        ContentPart::AudioUrl { .. } => "audio",
        _ => "video",
    };
    ContentPart::text(format!("[{kind} omitted to reduce request size]"))
}

/// The media projections. Choice (the reference's exact markers and its snapshot of which
/// media existed are not in the facts): `degraded` keeps the media parts of the most recent
/// message that has any and replaces older ones with a marker; `stripped` replaces every
/// media part.
pub fn project_media(history: &[ContextMessage], keep_latest: bool) -> Vec<Message> {
    let latest = history
        .iter()
        .rposition(|m| m.content.iter().any(ContentPart::is_media))
        .filter(|_| keep_latest);
    let replaced: Vec<ContextMessage> = history
        .iter()
        .enumerate()
        .map(|(index, message)| {
            let mut message = message.clone();
            if Some(index) != latest {
                message.content = message
                    .content
                    .iter()
                    .map(|part| {
                        if part.is_media() {
                            media_marker(part)
                        } else {
                            part.clone()
                        }
                    })
                    .collect();
            }
            message
        })
        .collect();
    project(&replaced, ProjectionMode::Normal)
}
