//! `lock-safety`'s view of which Letta tool executions conflict, written from the reference
//! (letta-protocol.md §5.1 tool sets, §5.2 resource key) rather than taken from the client's
//! `resource_key`, so a client that files a tool in the wrong set or keys it wrongly cannot also
//! judge its own schedule right.
//!
//! The conflict rule is the intended one, not §5.3's: a `__global__` tool conflicts with every
//! keyed tool, not only with other global ones. The published client queues per key, so its
//! shell command may run while a file tool writes the file the command reads; that overlap is
//! the `letta-code` profile's own finding (docs/findings.md), expected where that profile runs.

use serde_json::Value;

/// §5.1 `PARALLEL_SAFE_TOOLS`: they take no lock.
const PARALLEL_SAFE: [&str; 27] = [
    "Read",
    "view_image",
    "ViewImage",
    "Grep",
    "Glob",
    "read_file",
    "list_dir",
    "grep_files",
    "ReadFile",
    "ListDir",
    "GrepFiles",
    "read_file_gemini",
    "list_directory",
    "glob_gemini",
    "search_file_content",
    "read_many_files",
    "ReadFileGemini",
    "ListDirectory",
    "GlobGemini",
    "SearchFileContent",
    "ReadManyFiles",
    "conversation_search",
    "web_search",
    "fetch_webpage",
    "TaskOutput",
    "Task",
    "Agent",
];

/// §5.1 `FILE_PATH_TOOLS`: they lock the file their `file_path` names.
const FILE_PATH: [&str; 7] = [
    "Edit",
    "Write",
    "MultiEdit",
    "replace",
    "write_file_gemini",
    "Replace",
    "WriteFileGemini",
];

/// The working directory the simulated client runs its tools in; a relative `file_path` is
/// resolved against it (§5.2).
pub const WORKSPACE: &str = "/workspace";

/// The lock one execution holds (§5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lock {
    /// A parallel-safe tool: no lock.
    Free,
    /// `__global__`: a global-lock tool (§5.1 `GLOBAL_LOCK_TOOLS`), and every tool §5.2 cannot
    /// key by file (an unknown tool; a file tool whose arguments are not an object with a
    /// string `file_path`).
    Global,
    /// A file tool's absolute, normalised path.
    File(String),
}

impl Lock {
    /// The lock `tool` called with the JSON text `arguments` holds. The global-lock set needs
    /// no list of its own here: outside the other two sets every tool is global.
    pub fn of(tool: &str, arguments: &str) -> Lock {
        if PARALLEL_SAFE.contains(&tool) {
            return Lock::Free;
        }
        if !FILE_PATH.contains(&tool) {
            return Lock::Global;
        }
        let path = serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|args| match args.get("file_path") {
                Some(Value::String(p)) => Some(absolute(p)),
                _ => None,
            });
        path.map_or(Lock::Global, Lock::File)
    }

    /// The key as the trace and the reference name it: `__global__` or the path.
    pub fn key(&self) -> Option<&str> {
        match self {
            Lock::Free => None,
            Lock::Global => Some("__global__"),
            Lock::File(p) => Some(p),
        }
    }

    /// Whether two executions holding these locks may not overlap: neither is free, and they
    /// hold the same file or either is global (the intended rule, see the module doc).
    pub fn conflicts(&self, other: &Lock) -> bool {
        match (self, other) {
            (Lock::Free, _) | (_, Lock::Free) => false,
            (Lock::File(a), Lock::File(b)) => a == b,
            _ => true,
        }
    }
}

/// `path.resolve(WORKSPACE, p)`: relative paths joined to the workspace; empty and `.`
/// segments dropped; `..` climbs, never above the root.
fn absolute(p: &str) -> String {
    let start = if p.starts_with('/') {
        String::new()
    } else {
        WORKSPACE.to_string()
    };
    let mut out: Vec<&str> = Vec::new();
    for segment in start.split('/').chain(p.split('/')) {
        match segment {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            name => out.push(name),
        }
    }
    format!("/{}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::letta::client::approvals::{GLOBAL_LOCK_TOOLS, resource_key};

    #[test]
    fn the_references_tool_sets_and_keys() {
        assert_eq!(Lock::of("Read", r#"{"file_path":"/a"}"#), Lock::Free);
        assert_eq!(Lock::of("Bash", r#"{"command":"ls"}"#), Lock::Global);
        assert_eq!(Lock::of("apply_patch", "{}"), Lock::Global);
        assert_eq!(Lock::of("SomeMcpTool", "{}"), Lock::Global);
        assert_eq!(
            Lock::of("Write", r#"{"file_path":"b.txt"}"#),
            Lock::File("/workspace/b.txt".into())
        );
        assert_eq!(
            Lock::of("Edit", r#"{"file_path":"/x//y/./../z"}"#),
            Lock::File("/x/z".into())
        );
        assert_eq!(
            Lock::of("Edit", r#"{"file_path":"../../../etc"}"#),
            Lock::File("/etc".into())
        );
        for args in [
            "",
            "not json",
            "[]",
            r#"{"file_path":3}"#,
            r#"{"path":"/a"}"#,
        ] {
            assert_eq!(Lock::of("MultiEdit", args), Lock::Global, "{args}");
        }
    }

    #[test]
    fn the_intended_conflict_rule() {
        let a = Lock::File("/a".into());
        let b = Lock::File("/b".into());
        assert!(a.conflicts(&a.clone()));
        assert!(!a.conflicts(&b));
        assert!(Lock::Global.conflicts(&a) && a.conflicts(&Lock::Global));
        assert!(Lock::Global.conflicts(&Lock::Global));
        for l in [Lock::Free, a, Lock::Global] {
            assert!(!Lock::Free.conflicts(&l) && !l.conflicts(&Lock::Free));
        }
    }

    /// The oracle and the faithful client agree on every tool of §5.1 and a stranger, under
    /// every shape of arguments §5.2 distinguishes.
    #[test]
    fn the_client_keys_as_the_reference_does() {
        let tools = PARALLEL_SAFE
            .iter()
            .chain(FILE_PATH.iter())
            .chain(GLOBAL_LOCK_TOOLS.iter())
            .chain(["Unknown", "read", ""].iter());
        let args = [
            r#"{"file_path":"/w/a.txt"}"#,
            r#"{"file_path":"rel/../b.txt"}"#,
            r#"{"file_path":"/a/./b//c/.."}"#,
            r#"{"file_path":7}"#,
            r#"{"command":"ls"}"#,
            "[]",
            "{",
            "",
        ];
        let mut checked = 0;
        for tool in tools {
            for a in args {
                let theirs = resource_key(tool, a, WORKSPACE);
                assert_eq!(Lock::of(tool, a).key(), theirs.as_deref(), "{tool} {a}");
                checked += 1;
            }
        }
        assert_eq!(checked, (27 + 7 + 13 + 3) * 8);
    }
}
