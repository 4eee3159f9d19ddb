//! Folding provider events back into whole tool calls.

use super::ProviderEvent;

/// One tool call as the provider produced it. `arguments` is the exact concatenation of the
/// argument fragments (never parsed or re-serialised, so it may be invalid JSON when the
/// stream was cut; `""` when the provider sent no arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub index: u32,
    pub id: String,
    pub name: String,
    pub arguments: String,
    /// The provider ended the call (`ToolCallEnd`). An incomplete call was cut off (e.g. an
    /// Anthropic `max_tokens` stop inside the arguments) and must not be executed.
    pub complete: bool,
}

/// Folds [`ProviderEvent`]s into [`ToolCall`]s in the order the provider started them.
///
/// Argument fragments and ends go to the most recent not-yet-complete call with that index
/// (indices restart when a second message starts in one stream). Events for an index with no
/// such call cannot come from the decoders and are ignored.
#[derive(Debug, Clone, Default)]
pub struct ToolCallAccumulator {
    calls: Vec<ToolCall>,
}

impl ToolCallAccumulator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds a whole event list.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a ProviderEvent>) -> Self {
        let mut acc = Self::new();
        for ev in events {
            acc.push(ev);
        }
        acc
    }

    pub fn push(&mut self, ev: &ProviderEvent) {
        match ev {
            ProviderEvent::ToolCallStart { index, id, name } => self.calls.push(ToolCall {
                index: *index,
                id: id.clone(),
                name: name.clone(),
                arguments: String::new(),
                complete: false,
            }),
            ProviderEvent::ToolCallArgsDelta { index, delta } => {
                if let Some(call) = self.open_mut(*index) {
                    call.arguments.push_str(delta);
                }
            }
            ProviderEvent::ToolCallEnd { index } => {
                if let Some(call) = self.open_mut(*index) {
                    call.complete = true;
                }
            }
            _ => {}
        }
    }

    fn open_mut(&mut self, index: u32) -> Option<&mut ToolCall> {
        self.calls
            .iter_mut()
            .rev()
            .find(|c| c.index == index && !c.complete)
    }

    /// Every call seen, complete or not, in start order.
    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    /// Only the calls the provider ended.
    pub fn complete_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.calls.iter().filter(|c| c.complete)
    }

    pub fn into_calls(self) -> Vec<ToolCall> {
        self.calls
    }
}
