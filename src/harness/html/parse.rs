//! Reads the canonical trace rendering (docs/trace.md) back into rows: time, host, event and
//! fields. The report draws from the text, not from the model's types, so it draws every
//! system's trace, a recorded one, or a trace file a user kept, the same way.

use serde_json::Value;

/// One trace line, split.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// 0-based index in the trace (the `event` of a violation).
    pub index: usize,
    pub t_ms: u64,
    pub host: String,
    pub event: String,
    /// `key=value` pairs in their rendered order; JSON values are kept as their text.
    pub fields: Vec<(String, String)>,
    /// The line as the trace has it.
    pub line: String,
}

impl Row {
    /// The value of field `key`, unquoted when it was a JSON string.
    pub fn field(&self, key: &str) -> Option<String> {
        let (_, raw) = self.fields.iter().find(|(k, _)| k == key)?;
        if raw.starts_with('"') {
            serde_json::from_str::<String>(raw).ok()
        } else {
            Some(raw.clone())
        }
    }
}

/// Splits a whole trace; lines that are not trace lines (none in a trace `sim` wrote) are kept
/// as rows with host `?` so that indices stay those of the trace.
pub fn rows(trace: &str) -> Vec<Row> {
    trace
        .lines()
        .enumerate()
        .map(|(index, line)| {
            parse_line(index, line).unwrap_or_else(|| Row {
                index,
                t_ms: 0,
                host: "?".into(),
                event: "unparsed".into(),
                fields: Vec::new(),
                line: line.trim_end().to_string(),
            })
        })
        .collect()
}

fn parse_line(index: usize, line: &str) -> Option<Row> {
    let rest = line.trim_start();
    let (t, rest) = rest.split_once(' ')?;
    let t_ms = t.parse().ok()?;
    let rest = rest.trim_start();
    let (host, rest) = rest.split_once(' ')?;
    let rest = rest.trim_start();
    let (event, mut rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let mut fields = Vec::new();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let (value, after) = split_value(after)?;
        fields.push((key.to_string(), value.to_string()));
        rest = after.strip_prefix(' ').unwrap_or(after);
    }
    Some(Row {
        index,
        t_ms,
        host: host.to_string(),
        event: event.to_string(),
        fields,
        line: line.trim_end().to_string(),
    })
}

/// A value is bare up to the next space, or a JSON value (string, array, object, number).
fn split_value(s: &str) -> Option<(&str, &str)> {
    if s.starts_with(['"', '[', '{']) {
        let mut stream = serde_json::Deserializer::from_str(s).into_iter::<Value>();
        stream.next()?.ok()?;
        let end = stream.byte_offset();
        Some((&s[..end], &s[end..]))
    } else {
        Some(s.split_once(' ').map_or((s, ""), |(v, r)| (v, r)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_bare_and_json_values() {
        let r = rows(
            r#"      13 client   client_send turn=1 method=POST path=/v1/x items=user otids=["a b","c"]
      15 server   fault fault="approval_pending_in_band send=1"
"#,
        );
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].t_ms, 13);
        assert_eq!(r[0].host, "client");
        assert_eq!(r[0].event, "client_send");
        assert_eq!(r[0].field("path").as_deref(), Some("/v1/x"));
        assert_eq!(r[0].field("otids").as_deref(), Some(r#"["a b","c"]"#));
        assert_eq!(
            r[1].field("fault").as_deref(),
            Some("approval_pending_in_band send=1")
        );
    }

    #[test]
    fn keeps_the_index_of_a_line_it_cannot_read() {
        let r = rows("not a trace line\n 1 client turn_start turn=1\n");
        assert_eq!(r[0].event, "unparsed");
        assert_eq!(r[1].index, 1);
        assert_eq!(r[1].field("turn").as_deref(), Some("1"));
    }
}
