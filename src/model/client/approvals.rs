//! Approval classification (letta-protocol.md §5.4): each requested tool call is allowed,
//! denied, or needs the (simulated) human.

use super::stream_processor::Approval;

/// Permission rule outcome for a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Allow,
    Ask,
    Deny,
}

/// Ordered rules: the first whose pattern matches the tool name wins; `*` matches any name and
/// a trailing `*` matches a prefix. No match means `default`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionRules {
    pub rules: Vec<(String, Permission)>,
    pub default: Permission,
}

impl Default for PermissionRules {
    fn default() -> Self {
        PermissionRules {
            rules: Vec::new(),
            default: Permission::Ask,
        }
    }
}

impl PermissionRules {
    pub fn check(&self, tool: &str) -> Permission {
        self.rules
            .iter()
            .find(|(pattern, _)| match pattern.strip_suffix('*') {
                Some(prefix) => tool.starts_with(prefix),
                None => pattern == tool,
            })
            .map(|(_, p)| *p)
            .unwrap_or(self.default)
    }
}

/// How the simulated human answers an `ask`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HumanAnswer {
    Approve,
    Deny(String),
    /// Never answers: the turn stays paused.
    Never,
}

/// The decision for one approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(String),
    AwaitHuman,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Allow => write!(f, "allow"),
            Decision::Deny(r) => write!(f, "deny: {r}"),
            Decision::AwaitHuman => write!(f, "await-human"),
        }
    }
}

/// Auto-deny reason for a call with no tool name (letta-protocol.md §5.4).
pub const MISSING_NAME_REASON: &str = "Tool call incomplete - missing name";

/// Classifies approvals in order. `human` answers are consumed in order (`next` is the cursor,
/// kept across turns); the last answer repeats; no answers at all means `Never`.
pub fn classify(
    approvals: &[Approval],
    rules: &PermissionRules,
    human: &[HumanAnswer],
    next: &mut usize,
) -> Vec<Decision> {
    approvals
        .iter()
        .map(|a| {
            if a.tool_name.is_empty() {
                return Decision::Deny(MISSING_NAME_REASON.into());
            }
            match rules.check(&a.tool_name) {
                Permission::Allow => Decision::Allow,
                Permission::Deny => {
                    Decision::Deny(format!("Permission denied: {} is not allowed", a.tool_name))
                }
                Permission::Ask => {
                    let answer = human
                        .get(*next)
                        .or(human.last())
                        .cloned()
                        .unwrap_or(HumanAnswer::Never);
                    *next += 1;
                    match answer {
                        HumanAnswer::Approve => Decision::Allow,
                        HumanAnswer::Deny(r) => Decision::Deny(r),
                        HumanAnswer::Never => Decision::AwaitHuman,
                    }
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(name: &str) -> Approval {
        Approval {
            tool_call_id: format!("id-{name}"),
            tool_name: name.into(),
            tool_args: "{}".into(),
            message_id: None,
        }
    }

    #[test]
    fn rules_first_match_and_human_answers() {
        let rules = PermissionRules {
            rules: vec![
                ("Read".into(), Permission::Allow),
                ("Bash*".into(), Permission::Deny),
            ],
            default: Permission::Ask,
        };
        let human = vec![HumanAnswer::Deny("no".into()), HumanAnswer::Approve];
        let mut next = 0;
        let d = classify(
            &[
                approval("Read"),
                approval("BashOutput"),
                approval("Write"),
                approval("Write"),
                approval(""),
            ],
            &rules,
            &human,
            &mut next,
        );
        assert_eq!(d[0], Decision::Allow);
        assert!(matches!(d[1], Decision::Deny(_)));
        assert_eq!(d[2], Decision::Deny("no".into()));
        assert_eq!(d[3], Decision::Allow);
        assert_eq!(d[4], Decision::Deny(MISSING_NAME_REASON.into()));
    }
}
