//! `loop-envelope`'s reading of preflight (kimi-loop.md §4.6): a call whose arguments break its
//! tool's declared schema by a property never runs, and its result is the schema failure. The
//! schema is the tool's own declaration (the contract the model was shown); the check of it is
//! the oracle's, written from §4.6 (Ajv's `required` and `additionalProperties: false`), so a
//! validator that stops looking cannot also judge itself right.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::harness::invariants::{LOOP_ENVELOPE, Violation};
use crate::harness::kimi::stop_rule::is_unexecuted_output;
use crate::harness::trace::TraceEvent;
use crate::model::kimi::agent::tools::declared_parameters;
use crate::model::port::observe::Observation;

/// What is wrong with `args` under `schema`, by property: each required property it lacks and
/// each property it has that a closed schema does not declare. Empty when it passes (or when
/// `args` is not an object, which §4.6's other rules judge).
pub fn property_errors(schema: &Value, args: &Value) -> Vec<String> {
    let Some(object) = args.as_object() else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    for required in schema["required"].as_array().into_iter().flatten() {
        if let Some(name) = required.as_str()
            && !object.contains_key(name)
        {
            errors.push(format!("lacks required property '{name}'"));
        }
    }
    if schema["additionalProperties"] == Value::Bool(false) {
        let declared = schema["properties"].as_object();
        for key in object.keys() {
            if !declared.is_some_and(|p| p.contains_key(key)) {
                errors.push(format!("has undeclared property '{key}'"));
            }
        }
    }
    errors
}

/// Each call whose arguments break its tool's schema by a property: it must not start, and its
/// `tool.result` must be an error that begins `Invalid args for tool "<name>"` (§4.6 item 3).
pub fn violations(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    // Calls that broke their schema and have no result yet: (id, tool name, what broke).
    let mut broken: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut started: BTreeSet<&str> = BTreeSet::new();
    for (i, e) in events.iter().enumerate() {
        if e.host != "client" {
            continue;
        }
        match &e.obs {
            Observation::LoopToolCall {
                tool_call_id,
                name,
                args,
                ..
            } => {
                let Some(schema) = declared_parameters(name) else {
                    continue;
                };
                let Ok(args) = serde_json::from_str::<Value>(args) else {
                    continue;
                };
                let errors = property_errors(&schema, &args);
                if !errors.is_empty() {
                    broken.push((tool_call_id.clone(), name.clone(), errors));
                }
            }
            Observation::LoopToolStart { tool_call_id, .. } => {
                if let Some((_, name, errors)) = broken.iter().find(|b| &b.0 == tool_call_id)
                    && started.insert(tool_call_id)
                {
                    out.push(Violation::at(
                        LOOP_ENVELOPE,
                        i,
                        format!(
                            "tool call {tool_call_id} to {name} ran though its arguments {}: kimi-loop.md §4.6 rejects them in preflight",
                            errors.join(" and ")
                        ),
                    ));
                }
            }
            Observation::LoopToolResult {
                tool_call_id,
                is_error,
                output,
            } => {
                let Some(k) = broken.iter().position(|b| &b.0 == tool_call_id) else {
                    continue;
                };
                let (_, name, errors) = broken.remove(k);
                // The texts that stand in for preflight's own: a call recorded unexecuted
                // (§4.2), skipped after a stop (§4.4), or closed by the host's backstop (§8.1).
                let replaced = is_unexecuted_output(output)
                    || ["Tool skipped because", "Tool call did not complete"]
                        .iter()
                        .any(|t| output.starts_with(t));
                let rejected =
                    *is_error && output.starts_with(&format!("Invalid args for tool \"{name}\""));
                if !(rejected || replaced || started.contains(tool_call_id.as_str())) {
                    out.push(Violation::at(
                        LOOP_ENVELOPE,
                        i,
                        format!(
                            "tool call {tool_call_id} to {name}, whose arguments {}, got is_error={is_error} {output:?}, not the schema failure of kimi-loop.md §4.6",
                            errors.join(" and ")
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_property_missing_or_undeclared_breaks_a_closed_schema() {
        let read = declared_parameters("Read").unwrap();
        assert_eq!(
            property_errors(&read, &json!({"path": "/a"})),
            Vec::<String>::new()
        );
        assert_eq!(
            property_errors(&read, &json!({})),
            ["lacks required property 'path'"]
        );
        assert_eq!(
            property_errors(&read, &json!({"path": "/a", "mode": "fast"})),
            ["has undeclared property 'mode'"]
        );
        // get_weather's schema is open: an extra property is its own business.
        let weather = declared_parameters("get_weather").unwrap();
        assert_eq!(
            property_errors(&weather, &json!({"location": "Paris", "unit": "C"})),
            Vec::<String>::new()
        );
        assert_eq!(declared_parameters("Fetch"), None);
    }

    /// A Read without a path must be rejected in preflight; a loop that runs it, or answers it
    /// with another text, breaks `loop-envelope`.
    #[test]
    fn a_call_that_breaks_its_schema_never_runs() {
        use crate::harness::kimi::test_events::{ev, messages};
        use crate::model::kimi::turn_loop::access::ToolAccesses;
        let call = ev(Observation::LoopToolCall {
            step: 1,
            tool_call_id: "a".into(),
            name: "Read".into(),
            args: "{}".into(),
        });
        let result = |output: &str| {
            ev(Observation::LoopToolResult {
                tool_call_id: "a".into(),
                is_error: true,
                output: output.into(),
            })
        };
        let start = ev(Observation::LoopToolStart {
            tool_call_id: "a".into(),
            tool: "Read".into(),
            execution: 1,
            accesses: crate::model::port::observe::AccessList(ToolAccesses::none()),
        });
        let rejection = "Invalid args for tool \"Read\": must have required property 'path'";
        assert_eq!(
            messages(violations(&[call.clone(), result(rejection)])),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(violations(&[call.clone(), start, result("read /")])),
            [
                "tool call a to Read ran though its arguments lacks required property 'path': kimi-loop.md §4.6 rejects them in preflight"
            ]
        );
        assert_eq!(
            messages(violations(&[
                call,
                result("Tool \"Read\" failed: no such file")
            ])),
            [
                "tool call a to Read, whose arguments lacks required property 'path', got is_error=true \"Tool \\\"Read\\\" failed: no such file\", not the schema failure of kimi-loop.md §4.6"
            ]
        );
    }
}
