//! A safe YAML reader for vcrpy cassettes: YAML text to a JSON value, refusing tags (no
//! `!!python/object`, no `!!binary`), anchors and aliases (no expansion bombs), more than one
//! document, duplicate keys, and anything deeper or larger than fixed bounds. Scalars follow the
//! YAML 1.2 core schema: plain `null`/`~`/empty, `true`/`false`, integers and floats; every
//! quoted or block scalar is a string. Pure.

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};
use serde_json::{Map, Number, Value};

/// The deepest nesting accepted.
pub const MAX_DEPTH: usize = 64;
/// The most nodes (scalars, sequences, mappings) accepted in one document.
pub const MAX_NODES: usize = 1_000_000;

/// A refusal: the 1-based line and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub line: usize,
    pub message: String,
}

fn err(span: &Span, message: impl Into<String>) -> YamlError {
    YamlError {
        line: span.start.line(),
        message: message.into(),
    }
}

enum Open {
    Seq(Vec<Value>),
    Map(Map<String, Value>, Option<String>),
}

/// Reads one YAML document as JSON.
pub fn to_json(text: &str) -> Result<Value, YamlError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Open> = Vec::new();
    let mut done: Option<Value> = None;
    let mut documents = 0;
    let mut nodes = 0usize;
    while let Some(ev) = parser.next_event() {
        let (ev, span) = ev.map_err(|e| YamlError {
            line: e.marker().line(),
            message: format!("not YAML: {}", e.info()),
        })?;
        let value = match ev {
            Event::StreamStart | Event::Nothing | Event::DocumentEnd => continue,
            Event::StreamEnd => break,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(err(&span, "more than one YAML document"));
                }
                continue;
            }
            Event::Alias(_) => return Err(err(&span, "aliases are not accepted")),
            Event::Scalar(v, style, anchor, tag) => {
                if anchor != 0 {
                    return Err(err(&span, "anchors are not accepted"));
                }
                if let Some(t) = tag {
                    return Err(err(&span, format!("tag {} is not accepted", tag_name(&t))));
                }
                scalar(&v, style)
            }
            Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                if anchor != 0 {
                    return Err(err(&span, "anchors are not accepted"));
                }
                if let Some(t) = tag {
                    return Err(err(&span, format!("tag {} is not accepted", tag_name(t))));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(err(&span, format!("nested deeper than {MAX_DEPTH}")));
                }
                nodes += 1;
                if matches!(ev, Event::SequenceStart(..)) {
                    stack.push(Open::Seq(Vec::new()));
                } else {
                    stack.push(Open::Map(Map::new(), None));
                }
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::Seq(items)) => Value::Array(items),
                _ => return Err(err(&span, "unbalanced sequence")),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Map(m, None)) => Value::Object(m),
                _ => return Err(err(&span, "unbalanced mapping")),
            },
        };
        nodes += 1;
        if nodes > MAX_NODES {
            return Err(err(&span, format!("more than {MAX_NODES} nodes")));
        }
        match stack.last_mut() {
            None => {
                if done.is_some() {
                    return Err(err(&span, "more than one top-level node"));
                }
                done = Some(value);
            }
            Some(Open::Seq(items)) => items.push(value),
            Some(Open::Map(m, key)) => match key.take() {
                None => match value {
                    Value::String(k) => *key = Some(k),
                    Value::Null => *key = Some("null".into()),
                    Value::Bool(b) => *key = Some(b.to_string()),
                    Value::Number(n) => *key = Some(n.to_string()),
                    _ => return Err(err(&span, "a mapping key that is not a scalar")),
                },
                Some(k) => {
                    if m.contains_key(&k) {
                        return Err(err(&span, format!("duplicate key {k:?}")));
                    }
                    m.insert(k, value);
                }
            },
        }
    }
    done.ok_or(YamlError {
        line: 1,
        message: "an empty YAML document".into(),
    })
}

fn tag_name(t: &Tag) -> String {
    if t.handle == "!!" || t.handle.starts_with("tag:yaml.org,2002:") {
        format!("!!{}", t.suffix)
    } else {
        format!("{}{}", t.handle, t.suffix)
    }
}

fn scalar(v: &str, style: ScalarStyle) -> Value {
    if style != ScalarStyle::Plain {
        return Value::String(v.to_string());
    }
    match v {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let int_shape = {
        let d = v.strip_prefix(['-', '+']).unwrap_or(v);
        !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
    };
    if int_shape {
        if let Ok(n) = v.parse::<i64>() {
            return Value::Number(n.into());
        }
        if let Ok(n) = v.parse::<u64>() {
            return Value::Number(n.into());
        }
    }
    let float_shape = v
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
        && v.bytes().any(|b| b.is_ascii_digit());
    if float_shape
        && let Ok(f) = v.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_core_schema() {
        let v = to_json("a: 1\nb: [x, 'y', 2.5, true, null, ~]\nc:\n  d: \"q\"\ne: |\n  line\n")
            .unwrap();
        assert_eq!(
            v,
            json!({"a": 1, "b": ["x", "y", 2.5, true, null, null], "c": {"d": "q"}, "e": "line\n"})
        );
    }

    #[test]
    fn refuses_what_is_not_plain_data() {
        for (text, want) in [
            (
                "a: !!python/object:os.system x",
                "tag !!python/object:os.system is not accepted",
            ),
            ("a: !!binary aGk=", "tag !!binary is not accepted"),
            ("a: &x [1]\nb: *x", "anchors are not accepted"),
            ("a: 1\na: 2", "duplicate key \"a\""),
            ("--- 1\n--- 2", "more than one YAML document"),
            ("a: [1", "not YAML"),
        ] {
            let e = to_json(text).unwrap_err();
            assert!(e.message.starts_with(want), "{text}: {e:?}");
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(
            to_json(&deep)
                .unwrap_err()
                .message
                .contains("deeper than 64")
        );
    }
}
