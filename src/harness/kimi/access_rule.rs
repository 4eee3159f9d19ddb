//! `lock-safety`'s conflict rule (kimi-loop.md §5.1), written from the reference rather than
//! taken from the model's scheduler, so a scheduler with a wrong rule cannot also judge itself
//! right.

use crate::model::kimi::turn_loop::access::{FileOperation, ToolAccesses, ToolResourceAccess};

/// Whether two access lists conflict (kimi-loop.md §5.1): some pair does, so an empty list
/// never conflicts.
pub fn conflict(left: &ToolAccesses, right: &ToolAccesses) -> bool {
    left.0
        .iter()
        .any(|l| right.0.iter().any(|r| pair_conflicts(l, r)))
}

/// §5.1's pair rule: `all` conflicts with anything; two file accesses conflict when one of
/// them writes (`write`, `readwrite`) and their paths overlap: equal once normalised, or one
/// under the other where the other is recursive.
fn pair_conflicts(left: &ToolResourceAccess, right: &ToolResourceAccess) -> bool {
    use FileOperation::{Readwrite, Write};
    let (
        ToolResourceAccess::File {
            operation: left_op,
            path: left_path,
            recursive: left_tree,
        },
        ToolResourceAccess::File {
            operation: right_op,
            path: right_path,
            recursive: right_tree,
        },
    ) = (left, right)
    else {
        return true;
    };
    let writes = |op: &FileOperation| matches!(op, Write | Readwrite);
    if !writes(left_op) && !writes(right_op) {
        return false;
    }
    let (l, r) = (normal_path(left_path), normal_path(right_path));
    let under = |tree: &str, path: &str| {
        let base = tree.strip_suffix('/').unwrap_or(tree);
        path.strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('/'))
    };
    l == r || (*left_tree && under(&l, &r)) || (*right_tree && under(&r, &l))
}

/// §5.1's normalisation: backslashes are slashes, runs of slashes one, all lower case, and no
/// trailing slash except on the root.
fn normal_path(path: &str) -> String {
    let lower = path.replace('\\', "/").to_lowercase();
    let rooted = lower.starts_with('/');
    let parts: Vec<&str> = lower.split('/').filter(|p| !p.is_empty()).collect();
    match (rooted, parts.is_empty()) {
        (true, true) => "/".to_string(),
        (true, false) => format!("/{}", parts.join("/")),
        (false, _) => parts.join("/"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle's own conflict rule gives kimi-loop.md §5.1's worked examples, and agrees
    /// with the scheduler's on every pair drawn from a grid of operations, paths and trees.
    #[test]
    fn the_oracles_conflict_rule_is_the_references() {
        use FileOperation::{Read, Readwrite, Search, Write};
        let f = |op, path: &str, tree| ToolAccesses::file(op, path, tree);
        let examples = [
            (
                f(Write, "C:\\Repo\\a.ts", false),
                f(Read, "c:/repo/A.ts", false),
                true,
            ),
            (
                f(Read, "/repo/src", true),
                f(Write, "/repo/src/a.ts", false),
                true,
            ),
            (
                f(Write, "/repo/src", false),
                f(Write, "/repo/src/a.ts", false),
                false,
            ),
            (f(Read, "/a", true), f(Write, "/ab", false), false),
            (f(Write, "/", true), f(Read, "/x/y", false), true),
            (f(Search, "/repo", true), f(Read, "/repo/x", false), false),
            (
                f(Write, "/repo//src/", false),
                f(Read, "/repo/src", false),
                true,
            ),
            (ToolAccesses::all(), ToolAccesses::none(), false),
            (ToolAccesses::all(), f(Read, "/x", false), true),
        ];
        for (left, right, want) in &examples {
            assert_eq!(conflict(left, right), *want, "{left:?} vs {right:?}");
            assert_eq!(conflict(right, left), *want, "{right:?} vs {left:?}");
        }
        let paths = [
            "/", "", "/a", "/A/", "/a/b", "/ab", "a", "a/b", "\\a\\b", "//a//b//",
        ];
        let mut lists = vec![ToolAccesses::all(), ToolAccesses::none()];
        for op in [Read, Write, Readwrite, Search] {
            for path in paths {
                for tree in [false, true] {
                    lists.push(f(op, path, tree));
                }
            }
        }
        for left in &lists {
            for right in &lists {
                assert_eq!(
                    conflict(left, right),
                    left.conflicts_with(right),
                    "{left:?} vs {right:?}"
                );
            }
        }
    }
}
