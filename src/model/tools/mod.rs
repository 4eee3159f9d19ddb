//! The simulated workspace the client's tools act on: in-memory files and a deterministic
//! shell. Every execution is counted per `tool_call_id`, so the harness can prove a side effect
//! happened at most once (`no-double-execution`) and with the arguments the provider produced
//! (`args-intact`).
//!
//! The workspace is the client host's "disk": the harness keeps it outside the client task so
//! it survives a client crash, as a real workspace would.

use std::collections::BTreeMap;

use serde_json::Value;

/// Result status of a tool execution, as sent back in an approval item (letta-protocol.md §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    Success,
    Error,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Success => "success",
            ToolStatus::Error => "error",
        }
    }
}

/// What a tool returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub tool_return: String,
    pub status: ToolStatus,
}

impl ToolOutcome {
    fn ok(s: impl Into<String>) -> Self {
        ToolOutcome {
            tool_return: s.into(),
            status: ToolStatus::Success,
        }
    }
    fn err(s: impl Into<String>) -> Self {
        ToolOutcome {
            tool_return: s.into(),
            status: ToolStatus::Error,
        }
    }
}

/// One recorded execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    pub tool_call_id: String,
    pub tool: String,
    pub arguments: String,
}

/// In-memory files plus the execution log.
#[derive(Debug, Clone, Default)]
pub struct Workspace {
    files: BTreeMap<String, String>,
    executions: Vec<Execution>,
    per_call: BTreeMap<String, u32>,
}

impl Workspace {
    pub fn new() -> Self {
        Self::default()
    }

    /// A workspace with files already present (from the scenario).
    pub fn with_files(files: impl IntoIterator<Item = (String, String)>) -> Self {
        Workspace {
            files: files.into_iter().collect(),
            ..Self::default()
        }
    }

    pub fn file(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(String::as_str)
    }

    pub fn executions(&self) -> &[Execution] {
        &self.executions
    }

    /// How many times this tool call id has executed.
    pub fn executions_of(&self, tool_call_id: &str) -> u32 {
        self.per_call.get(tool_call_id).copied().unwrap_or(0)
    }

    /// Runs a tool. Arguments are the raw JSON string; malformed or empty arguments become `{}`
    /// (letta-protocol.md §5.3). Returns the outcome and the execution count for this id.
    pub fn execute(
        &mut self,
        tool_call_id: &str,
        tool: &str,
        arguments: &str,
    ) -> (ToolOutcome, u32) {
        let args: Value = serde_json::from_str(arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Default::default()));
        let arg = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        let outcome = match tool {
            "Read" | "read_file" => match arg("file_path") {
                Some(p) => match self.files.get(&p) {
                    Some(c) => ToolOutcome::ok(c.clone()),
                    None => ToolOutcome::err(format!("File does not exist: {p}")),
                },
                None => ToolOutcome::err("Missing required argument: file_path"),
            },
            "Write" | "write_file" => match (arg("file_path"), arg("content")) {
                (Some(p), Some(c)) => {
                    let n = c.len();
                    self.files.insert(p.clone(), c);
                    ToolOutcome::ok(format!("Wrote {n} bytes to {p}"))
                }
                _ => ToolOutcome::err("Missing required arguments: file_path, content"),
            },
            "Bash" | "shell" => match arg("command") {
                Some(cmd) => self.shell(&cmd),
                None => ToolOutcome::err("Missing required argument: command"),
            },
            // The client tool of the real-server captures (captures/letta_server/PROVENANCE.md).
            "get_secret_weather" | "get_weather" => {
                let city = arg("city").or_else(|| arg("location")).unwrap_or_default();
                ToolOutcome::ok(format!(
                    "{{\"city\": {}, \"forecast\": \"sunny, 21C\"}}",
                    Value::String(city)
                ))
            }
            other => ToolOutcome::err(format!("Unknown tool: {other}")),
        };
        self.executions.push(Execution {
            tool_call_id: tool_call_id.to_string(),
            tool: tool.to_string(),
            arguments: arguments.to_string(),
        });
        let n = self.per_call.entry(tool_call_id.to_string()).or_insert(0);
        *n += 1;
        (outcome, *n)
    }

    // ---- agent-loop tools -----------------------------------------------------------------
    // `model::kimi::agent::tools` runs its Read/Write/Edit/Grep tools on this same workspace.

    /// Writes a file, creating it if needed.
    pub fn put_file(&mut self, path: &str, content: String) {
        self.files.insert(path.to_string(), content);
    }

    /// Every file as (path, content), in path order.
    pub fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files.iter().map(|(p, c)| (p.as_str(), c.as_str()))
    }

    /// Counts one execution of a tool call that ran outside [`execute`](Self::execute);
    /// returns the count for this id.
    pub fn record_execution(&mut self, tool_call_id: &str, tool: &str, arguments: &str) -> u32 {
        self.executions.push(Execution {
            tool_call_id: tool_call_id.to_string(),
            tool: tool.to_string(),
            arguments: arguments.to_string(),
        });
        let n = self.per_call.entry(tool_call_id.to_string()).or_insert(0);
        *n += 1;
        *n
    }

    /// A deterministic shell: `echo`, `cat`, `ls`, `touch`; anything else "runs" and prints
    /// nothing, like a command with no output.
    fn shell(&mut self, cmd: &str) -> ToolOutcome {
        let mut words = cmd.split_whitespace();
        match words.next() {
            Some("echo") => ToolOutcome::ok(format!("{}\n", words.collect::<Vec<_>>().join(" "))),
            Some("cat") => match words.next().and_then(|p| self.files.get(p)) {
                Some(c) => ToolOutcome::ok(c.clone()),
                None => ToolOutcome::err("cat: No such file or directory"),
            },
            Some("ls") => ToolOutcome::ok(
                self.files
                    .keys()
                    .map(|k| format!("{k}\n"))
                    .collect::<String>(),
            ),
            Some("touch") => {
                for p in words {
                    self.files.entry(p.to_string()).or_default();
                }
                ToolOutcome::ok("")
            }
            Some(_) => ToolOutcome::ok(""),
            None => ToolOutcome::err("empty command"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read_and_counts() {
        let mut ws = Workspace::new();
        let (o, n) = ws.execute("t1", "Write", r#"{"file_path":"/a","content":"hi"}"#);
        assert_eq!((o.status, n), (ToolStatus::Success, 1));
        let (o, _) = ws.execute("t2", "Read", r#"{"file_path":"/a"}"#);
        assert_eq!(o.tool_return, "hi");
        let (_, n) = ws.execute("t1", "Write", r#"{"file_path":"/a","content":"hi"}"#);
        assert_eq!(n, 2);
        assert_eq!(ws.executions().len(), 3);
    }

    #[test]
    fn malformed_arguments_are_empty_object() {
        let mut ws = Workspace::new();
        let (o, _) = ws.execute("t", "Bash", "{\"comm");
        assert_eq!(o.status, ToolStatus::Error);
        let (o, _) = ws.execute("t", "Bash", r#"{"command":"echo hi there"}"#);
        assert_eq!(o.tool_return, "hi there\n");
    }
}
