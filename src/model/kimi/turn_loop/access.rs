//! Resource accesses and their conflict rule (kimi-loop.md §5.1 `tool-access.ts`).

use serde::{Deserialize, Serialize};

/// What a file access does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileOperation {
    /// Reads (non-writing).
    Read,
    /// Writes.
    Write,
    /// Reads and writes.
    Readwrite,
    /// Searches (non-writing).
    Search,
}

impl FileOperation {
    fn writes(self) -> bool {
        matches!(self, Self::Write | Self::Readwrite)
    }
}

/// One resource access.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolResourceAccess {
    /// Arbitrary side effects: globally exclusive.
    All,
    /// A file or tree access.
    File {
        /// The operation.
        operation: FileOperation,
        /// The path (required; normalised only for comparison).
        path: String,
        /// Whether the access covers the whole tree under `path`.
        recursive: bool,
    },
}

/// A list of accesses. An empty list (`none`) conflicts with nothing, not even `all`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolAccesses(pub Vec<ToolResourceAccess>);

impl ToolAccesses {
    /// `none()`: no accesses.
    pub fn none() -> Self {
        Self(Vec::new())
    }

    /// `all()`: the default for a runnable that declares none.
    pub fn all() -> Self {
        Self(vec![ToolResourceAccess::All])
    }

    /// `file(op, path, {recursive})`.
    pub fn file(operation: FileOperation, path: impl Into<String>, recursive: bool) -> Self {
        Self(vec![ToolResourceAccess::File {
            operation,
            path: path.into(),
            recursive,
        }])
    }

    /// `readFile(p)`.
    pub fn read_file(path: impl Into<String>) -> Self {
        Self::file(FileOperation::Read, path, false)
    }

    /// `readTree(p)`.
    pub fn read_tree(path: impl Into<String>) -> Self {
        Self::file(FileOperation::Read, path, true)
    }

    /// `writeFile(p)`.
    pub fn write_file(path: impl Into<String>) -> Self {
        Self::file(FileOperation::Write, path, false)
    }

    /// `writeTree(p)`.
    pub fn write_tree(path: impl Into<String>) -> Self {
        Self::file(FileOperation::Write, path, true)
    }

    /// `readWriteFile(p)`.
    pub fn read_write_file(path: impl Into<String>) -> Self {
        Self::file(FileOperation::Readwrite, path, false)
    }

    /// `readWriteTree(p)`.
    pub fn read_write_tree(path: impl Into<String>) -> Self {
        Self::file(FileOperation::Readwrite, path, true)
    }

    /// `searchTree(p)`.
    pub fn search_tree(path: impl Into<String>) -> Self {
        Self::file(FileOperation::Search, path, true)
    }

    /// Concatenate two lists.
    pub fn and(mut self, other: ToolAccesses) -> Self {
        self.0.extend(other.0);
        self
    }

    /// True if any pair (left, right) conflicts.
    pub fn conflicts_with(&self, other: &ToolAccesses) -> bool {
        self.0
            .iter()
            .any(|left| other.0.iter().any(|right| accesses_conflict(left, right)))
    }
}

/// The pair rule of kimi-loop.md §5.1.
pub fn accesses_conflict(left: &ToolResourceAccess, right: &ToolResourceAccess) -> bool {
    match (left, right) {
        (ToolResourceAccess::All, _) | (_, ToolResourceAccess::All) => true,
        (
            ToolResourceAccess::File {
                operation: left_op,
                path: left_path,
                recursive: left_recursive,
            },
            ToolResourceAccess::File {
                operation: right_op,
                path: right_path,
                recursive: right_recursive,
            },
        ) => {
            if !left_op.writes() && !right_op.writes() {
                return false;
            }
            let left_path = normalize_access_path(left_path);
            let right_path = normalize_access_path(right_path);
            left_path == right_path
                || (*left_recursive && covers(&left_path, &right_path))
                || (*right_recursive && covers(&right_path, &left_path))
        }
    }
}

fn covers(tree: &str, path: &str) -> bool {
    let prefix = if tree.ends_with('/') {
        tree.to_owned()
    } else {
        format!("{tree}/")
    };
    path.starts_with(&prefix)
}

/// Path normalisation, in order: `\` → `/`; collapse runs of `/`; lower-case (always, on every
/// platform); drop one trailing `/` if longer than 1. No `.`/`..`, no symlinks.
pub fn normalize_access_path(path: &str) -> String {
    let slashed = path.replace('\\', "/");
    let mut collapsed = String::with_capacity(slashed.len());
    for character in slashed.chars() {
        if character == '/' && collapsed.ends_with('/') {
            continue;
        }
        collapsed.push(character);
    }
    let mut lowered = collapsed.to_lowercase();
    if lowered.chars().count() > 1 && lowered.ends_with('/') {
        lowered.pop();
    }
    lowered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(operation: FileOperation, path: &str, recursive: bool) -> ToolResourceAccess {
        ToolResourceAccess::File {
            operation,
            path: path.to_owned(),
            recursive,
        }
    }

    /// §5.1 worked conflict examples.
    #[test]
    fn conflict_rule_worked_examples() {
        use FileOperation::{Read, Search, Write};
        assert!(accesses_conflict(
            &file(Write, "C:\\Repo\\a.ts", false),
            &file(Read, "c:/repo/A.ts", false)
        ));
        assert!(accesses_conflict(
            &file(Read, "/repo/src", true),
            &file(Write, "/repo/src/a.ts", false)
        ));
        assert!(!accesses_conflict(
            &file(Write, "/repo/src", false),
            &file(Write, "/repo/src/a.ts", false)
        ));
        assert!(!accesses_conflict(
            &file(Read, "/a", true),
            &file(Write, "/ab", false)
        ));
        assert!(accesses_conflict(
            &file(Write, "/", true),
            &file(Read, "/etc/hosts", false)
        ));
        assert!(!accesses_conflict(
            &file(Search, "/repo", true),
            &file(Read, "/repo/x", false)
        ));
        assert!(!accesses_conflict(
            &file(Read, "/x", false),
            &file(Search, "/x", true)
        ));
        assert!(accesses_conflict(
            &file(FileOperation::Readwrite, "/x", false),
            &file(Read, "/x", false)
        ));
        assert_eq!(normalize_access_path("/repo//src/"), "/repo/src");
        assert_eq!(normalize_access_path("/"), "/");
        assert!(!ToolAccesses::all().conflicts_with(&ToolAccesses::none()));
        assert!(ToolAccesses::all().conflicts_with(&ToolAccesses::read_file("/x")));
        assert!(!ToolAccesses::read_file("/x").conflicts_with(&ToolAccesses::search_tree("/x")));
    }
}
