//! Approvals on the client (letta-protocol.md §5, §2.3): classification of each requested tool
//! call (allow / ask / deny / alwaysAsk, missing names and arguments), the tool sets and
//! resource keys, and the normalisation of results before they are sent. All pure; running a
//! decided batch is `approval_batch` (§5.3).

use indexmap::IndexMap;
use serde_json::{Value, json};

use super::policy::{
    HEADLESS_ASK_DENY_REASON, INTERRUPTED_BY_USER, MISSING_NAME_REASON_HEADLESS,
    approval_comment_text,
};
use super::stream_processor::Approval;
use crate::wire::letta::{ApprovalItem, Content};

// ---------------------------------------------------------------------------------------------
// §5.1 tool sets, §5.2 resource keys
// ---------------------------------------------------------------------------------------------

/// `PARALLEL_SAFE_TOOLS` (letta-protocol.md §5.1).
pub const PARALLEL_SAFE_TOOLS: [&str; 27] = [
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

/// `FILE_PATH_TOOLS` (letta-protocol.md §5.1).
pub const FILE_PATH_TOOLS: [&str; 7] = [
    "Edit",
    "Write",
    "MultiEdit",
    "replace",
    "write_file_gemini",
    "Replace",
    "WriteFileGemini",
];

/// `GLOBAL_LOCK_TOOLS` (letta-protocol.md §5.1).
pub const GLOBAL_LOCK_TOOLS: [&str; 13] = [
    "Bash",
    "KillBash",
    "run_shell_command",
    "RunShellCommand",
    "memory",
    "shell_command",
    "exec_command",
    "write_stdin",
    "shell",
    "ShellCommand",
    "Shell",
    "apply_patch",
    "ApplyPatch",
];

/// The global resource key (letta-protocol.md §5.2).
pub const GLOBAL_KEY: &str = "__global__";

pub fn is_parallel_safe(tool: &str) -> bool {
    PARALLEL_SAFE_TOOLS.contains(&tool)
}

pub fn is_global_lock_tool(tool: &str) -> bool {
    GLOBAL_LOCK_TOOLS.contains(&tool)
}

pub fn is_file_path_tool(tool: &str) -> bool {
    FILE_PATH_TOOLS.contains(&tool)
}

/// `getResourceKey` (letta-protocol.md §5.2): `None` for parallel-safe tools; `__global__` for
/// global-lock tools; the normalised absolute `file_path` for file-path tools (relative paths
/// resolved against `cwd`); `__global__` for anything else (unknown tool, missing or non-string
/// path, unparseable args).
pub fn resource_key(tool: &str, raw_args: &str, cwd: &str) -> Option<String> {
    if is_parallel_safe(tool) {
        return None;
    }
    if is_global_lock_tool(tool) {
        return Some(GLOBAL_KEY.into());
    }
    if is_file_path_tool(tool)
        && let Ok(Value::Object(args)) = serde_json::from_str::<Value>(raw_args)
        && let Some(Value::String(p)) = args.get("file_path")
    {
        return Some(normalize_path(p, cwd));
    }
    Some(GLOBAL_KEY.into())
}

/// An absolute, normalised path: relative paths are resolved against `cwd`; `.`, `..` and
/// repeated separators are collapsed.
pub fn normalize_path(p: &str, cwd: &str) -> String {
    let joined = if p.starts_with('/') {
        p.to_string()
    } else {
        format!("{}/{p}", cwd.trim_end_matches('/'))
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Parses tool arguments as the client does before executing: malformed or empty → `{}`
/// (letta-protocol.md §5.3).
pub fn parse_args(raw: &str) -> Value {
    serde_json::from_str::<Value>(raw)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

// ---------------------------------------------------------------------------------------------
// Permission rules and the simulated human
// ---------------------------------------------------------------------------------------------

/// The permission check's verdict (letta-protocol.md §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Allow,
    Ask,
    Deny,
    /// An `alwaysAsk` rule: needs the user even in unrestricted mode.
    AlwaysAsk,
}

impl Permission {
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Ask => "ask",
            Permission::Deny => "deny",
            Permission::AlwaysAsk => "alwaysAsk",
        }
    }
}

/// The permission check's result with the rule that decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionResult {
    pub decision: Permission,
    pub matched_rule: Option<String>,
    pub reason: String,
}

/// Ordered rules: the first whose pattern matches wins; no match means `default`. A pattern is a
/// tool name, `*` (any tool), `Prefix*` (a name prefix), or `Tool(cmd:*)` (the tool with a
/// `command` argument starting with `cmd`, e.g. `Bash(git push:*)`).
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

/// Does `pattern` match a call of `tool` with `args`?
pub fn pattern_matches(pattern: &str, tool: &str, args: &Value) -> bool {
    if let Some(open) = pattern.find('(')
        && pattern.ends_with(')')
    {
        let name = &pattern[..open];
        let inner = &pattern[open + 1..pattern.len() - 1];
        if name != tool {
            return false;
        }
        let command = args
            .get("command")
            .or_else(|| args.get("cmd"))
            .and_then(Value::as_str)
            .unwrap_or("");
        return match inner.strip_suffix(":*") {
            Some(prefix) => command.starts_with(prefix),
            None => command == inner,
        };
    }
    match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => pattern == tool,
    }
}

impl PermissionRules {
    /// The permission check (letta-protocol.md §5.4).
    pub fn check(&self, tool: &str, args: &Value) -> PermissionResult {
        for (pattern, p) in &self.rules {
            if pattern_matches(pattern, tool, args) {
                return PermissionResult {
                    decision: *p,
                    matched_rule: Some(pattern.clone()),
                    reason: format!(
                        "Matched {} rule",
                        match p {
                            Permission::AlwaysAsk => "alwaysAsk",
                            Permission::Ask => "ask",
                            Permission::Allow => "allow",
                            Permission::Deny => "deny",
                        }
                    ),
                };
            }
        }
        PermissionResult {
            decision: self.default,
            matched_rule: None,
            reason: "Default permission".into(),
        }
    }
}

/// How the simulated human answers an `ask`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HumanAnswer {
    Approve,
    /// Approve with a comment ("allow with comment", letta-protocol.md §2.3).
    ApproveWithComment(String),
    Deny(String),
    /// Never answers: the turn stays paused.
    Never,
}

/// The simulated human: answers consumed in order across the run, the last one repeating; no
/// answers at all means `Never`.
#[derive(Debug, Clone, Default)]
pub struct Human {
    pub answers: Vec<HumanAnswer>,
    pub next: usize,
}

impl Human {
    pub fn answer(&mut self) -> HumanAnswer {
        let a = self
            .answers
            .get(self.next)
            .or(self.answers.last())
            .cloned()
            .unwrap_or(HumanAnswer::Never);
        self.next += 1;
        a
    }
}

// ---------------------------------------------------------------------------------------------
// §5.4 classifyApprovals
// ---------------------------------------------------------------------------------------------

/// Tools whose calls always need the user (`alwaysRequiresUserInput`, letta-protocol.md §5.4).
pub const ALWAYS_REQUIRES_USER_INPUT: [&str; 1] = ["AskUserQuestion"];

/// Options of `classifyApprovals` (letta-protocol.md §5.4).
#[derive(Debug, Clone)]
pub struct ClassifyOptions {
    /// `treatAskAsDeny` (headless one-shot).
    pub treat_ask_as_deny: bool,
    /// `denyReasonForAsk`.
    pub deny_reason_for_ask: String,
    /// `missingNameReason`.
    pub missing_name_reason: String,
    /// `requireArgsForAutoApprove`.
    pub require_args_for_auto_approve: bool,
    /// Required argument names per tool (from the tool's JSON schema `required`).
    pub required_args: IndexMap<String, Vec<String>>,
    /// (reference) Deny a call whose arguments are not valid JSON instead of running it with
    /// `{}`: they were truncated on the way, and a tool must not run on a guess.
    pub deny_unparseable_args: bool,
}

impl Default for ClassifyOptions {
    fn default() -> Self {
        ClassifyOptions {
            treat_ask_as_deny: false,
            deny_reason_for_ask: HEADLESS_ASK_DENY_REASON.into(),
            missing_name_reason: MISSING_NAME_REASON_HEADLESS.into(),
            require_args_for_auto_approve: false,
            required_args: IndexMap::new(),
            deny_unparseable_args: false,
        }
    }
}

/// How the arguments of an approval parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgsParse {
    Ok,
    /// Empty string → `{}` flagged empty.
    Empty,
    /// Not a JSON object → `{}` flagged parse-failed.
    ParseFailed,
}

/// One classified approval (letta-protocol.md §5.4 output entry).
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub approval: Approval,
    pub permission: Option<PermissionResult>,
    pub parsed_args: Value,
    pub args_parse: ArgsParse,
    pub missing_required_args: Option<Vec<String>>,
    pub deny_reason: Option<String>,
}

/// `{needsUserInput, autoAllowed, autoDenied}`, input order kept within each list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Classification {
    pub needs_user_input: Vec<Classified>,
    pub auto_allowed: Vec<Classified>,
    pub auto_denied: Vec<Classified>,
}

/// The missing-arguments denial text (letta-protocol.md §3.12; exact texts from A.5.3):
/// `<Tool> tool missing required parameter(s): a, b. Received parameters: x, y`, plus a
/// paragraph when the raw arguments were empty or not valid JSON.
pub fn missing_args_reason(
    tool: &str,
    missing: &[String],
    received: &[String],
    raw: &str,
    parse: ArgsParse,
) -> String {
    let noun = if missing.len() == 1 {
        "parameter"
    } else {
        "parameters"
    };
    let received = if received.is_empty() {
        "(none)".to_string()
    } else {
        received.join(", ")
    };
    let mut s = format!(
        "{tool} tool missing required {noun}: {}. Received parameters: {received}",
        missing.join(", ")
    );
    match parse {
        ArgsParse::Ok => {}
        ArgsParse::Empty => s.push_str(
            "\n\nThe tool call arrived with empty arguments, so its arguments were probably lost or truncated before they reached the client. Do not resend an identical call; re-issue it with every required parameter.",
        ),
        ArgsParse::ParseFailed => s.push_str(&format!(
            "\n\nThe raw arguments ({} chars) were not valid JSON, so they were probably truncated before they reached the client. Do not resend an identical call; re-issue it with complete arguments.",
            raw.chars().count()
        )),
    }
    s
}

fn parse_with_flag(raw: &str) -> (Value, ArgsParse) {
    if raw.trim().is_empty() {
        return (json!({}), ArgsParse::Empty);
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => {
            let empty = v.as_object().is_some_and(|o| o.is_empty());
            (
                v,
                if empty {
                    ArgsParse::Empty
                } else {
                    ArgsParse::Ok
                },
            )
        }
        _ => (json!({}), ArgsParse::ParseFailed),
    }
}

/// `classifyApprovals` (letta-protocol.md §5.4): no name → auto-denied; required args missing
/// (with `requireArgsForAutoApprove`) → auto-denied; then the permission check: `deny` →
/// auto-denied; `alwaysRequiresUserInput` upgrades `allow` to `ask`; `ask`/`alwaysAsk` → needs
/// the user (or auto-denied with `treatAskAsDeny`); `allow` → auto-allowed.
pub fn classify_approvals(
    approvals: &[Approval],
    rules: &PermissionRules,
    opts: &ClassifyOptions,
) -> Classification {
    let mut out = Classification::default();
    for a in approvals {
        let (parsed, parse) = parse_with_flag(&a.tool_args);
        let mut entry = Classified {
            approval: a.clone(),
            permission: None,
            parsed_args: parsed.clone(),
            args_parse: parse,
            missing_required_args: None,
            deny_reason: None,
        };
        if a.tool_name.is_empty() {
            entry.deny_reason = Some(opts.missing_name_reason.clone());
            out.auto_denied.push(entry);
            continue;
        }
        if opts.require_args_for_auto_approve
            && let Some(required) = opts.required_args.get(&a.tool_name)
        {
            let missing: Vec<String> = required
                .iter()
                .filter(|k| parsed.get(k.as_str()).is_none_or(Value::is_null))
                .cloned()
                .collect();
            if !missing.is_empty() {
                let received: Vec<String> = parsed
                    .as_object()
                    .map(|o| o.keys().cloned().collect())
                    .unwrap_or_default();
                entry.deny_reason = Some(missing_args_reason(
                    &a.tool_name,
                    &missing,
                    &received,
                    &a.tool_args,
                    parse,
                ));
                entry.missing_required_args = Some(missing);
                out.auto_denied.push(entry);
                continue;
            }
        }
        if opts.deny_unparseable_args && parse == ArgsParse::ParseFailed {
            entry.deny_reason = Some(format!(
                "{} tool call arguments ({} chars) were not valid JSON, so they were probably truncated before they reached the client. Do not resend an identical call; re-issue it with complete arguments.",
                a.tool_name,
                a.tool_args.chars().count()
            ));
            out.auto_denied.push(entry);
            continue;
        }
        let mut perm = rules.check(&a.tool_name, &parsed);
        if perm.decision == Permission::Allow
            && ALWAYS_REQUIRES_USER_INPUT.contains(&a.tool_name.as_str())
        {
            perm.decision = Permission::Ask;
        }
        entry.permission = Some(perm.clone());
        match perm.decision {
            Permission::Deny => {
                entry.deny_reason = Some(format!(
                    "Permission denied: {} is not allowed{}",
                    a.tool_name,
                    perm.matched_rule
                        .map(|r| format!(" (rule {r})"))
                        .unwrap_or_default()
                ));
                out.auto_denied.push(entry);
            }
            Permission::Ask | Permission::AlwaysAsk => {
                if opts.treat_ask_as_deny {
                    entry.deny_reason = Some(opts.deny_reason_for_ask.clone());
                    out.auto_denied.push(entry);
                } else {
                    out.needs_user_input.push(entry);
                }
            }
            Permission::Allow => out.auto_allowed.push(entry),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Decisions, results and normalisation (§2.3, §5.3)
// ---------------------------------------------------------------------------------------------

/// Who made a decision: what `approval-attribution` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The permission rules allowed or denied it.
    Policy,
    /// The (simulated) human answered.
    Human,
    /// Headless mode denied an `ask` on the human's behalf.
    HeadlessAsk,
    /// The call had no name or lacked required arguments.
    Incomplete,
    /// The harness closed a stale pending approval (§3.11).
    StaleRecovery,
    /// The user interrupted (§9.1).
    Interrupt,
    /// The user sent a new message while the approval dialog was open (§3.12).
    UserCancel,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Policy => "policy",
            Origin::Human => "human",
            Origin::HeadlessAsk => "headless-ask",
            Origin::Incomplete => "incomplete",
            Origin::StaleRecovery => "stale-recovery",
            Origin::Interrupt => "interrupt",
            Origin::UserCancel => "user-cancel",
        }
    }
}

/// A decision about one approval, in the order the approvals arrived.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Execute (with an optional approval comment).
    Approve {
        approval: Approval,
        comment: Option<String>,
        origin: Origin,
    },
    Deny {
        approval: Approval,
        reason: String,
        origin: Origin,
    },
}

impl Decision {
    pub fn approval(&self) -> &Approval {
        match self {
            Decision::Approve { approval, .. } | Decision::Deny { approval, .. } => approval,
        }
    }

    pub fn origin(&self) -> Origin {
        match self {
            Decision::Approve { origin, .. } | Decision::Deny { origin, .. } => *origin,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Decision::Approve { comment: None, .. } => "allow".into(),
            Decision::Approve {
                comment: Some(c), ..
            } => format!("allow with comment: {c}"),
            Decision::Deny { reason, .. } => format!("deny: {reason}"),
        }
    }
}

/// A result before normalisation: what the executor produced, or a decision (legacy shapes
/// included, letta-protocol.md §2.3).
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalResult {
    /// `{type:"tool", tool_call_id, tool_return, status, stdout?, stderr?, reason?}`.
    Tool {
        tool_call_id: String,
        /// `None` is a JSON `null` return.
        tool_return: Option<Content>,
        status: String,
        stdout: Option<Vec<String>>,
        stderr: Option<Vec<String>>,
        /// An approval comment ("allow with comment").
        reason: Option<String>,
    },
    /// `{type:"approval", tool_call_id, approve, reason?}` with an optional legacy
    /// `tool_return`/`status` for `approve:true`.
    Approval {
        tool_call_id: String,
        approve: bool,
        reason: Option<String>,
        tool_return: Option<Content>,
        status: Option<String>,
    },
}

impl ApprovalResult {
    pub fn tool_call_id(&self) -> &str {
        match self {
            ApprovalResult::Tool { tool_call_id, .. }
            | ApprovalResult::Approval { tool_call_id, .. } => tool_call_id,
        }
    }

    pub fn interrupted(tool_call_id: &str) -> Self {
        ApprovalResult::Tool {
            tool_call_id: tool_call_id.into(),
            tool_return: Some(Content::Text(INTERRUPTED_BY_USER.into())),
            status: "error".into(),
            stdout: None,
            stderr: None,
            reason: None,
        }
    }

    pub fn denial(tool_call_id: &str, reason: &str) -> Self {
        ApprovalResult::Approval {
            tool_call_id: tool_call_id.into(),
            approve: false,
            reason: Some(reason.into()),
            tool_return: None,
            status: None,
        }
    }
}

fn text_part(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// `normalizeApprovalResultsForPersistence(results, opts)` (letta-protocol.md §2.3; A.5.1):
/// legacy `approve:true` items become `type:"tool"` (status `error` only if they said error);
/// a non-empty trimmed `reason` on a tool result becomes a first text part
/// `The user approved the tool execution with the following comment: "<reason>"` before the
/// original text or parts; ids listed as interrupted are forced to `status:"error"`, as is the
/// text `Interrupted by user` when the legacy fallback is on.
pub fn normalize_approval_results(
    results: &[ApprovalResult],
    interrupted_tool_call_ids: &[String],
    allow_interrupt_text_fallback: bool,
) -> Vec<ApprovalItem> {
    results
        .iter()
        .map(|r| match r {
            ApprovalResult::Approval {
                tool_call_id,
                approve: true,
                tool_return,
                status,
                reason,
            } => finish_tool(
                tool_call_id,
                tool_return.clone(),
                if status.as_deref() == Some("error") {
                    "error"
                } else {
                    "success"
                },
                None,
                None,
                reason.as_deref(),
                interrupted_tool_call_ids,
                allow_interrupt_text_fallback,
            ),
            ApprovalResult::Approval {
                tool_call_id,
                approve: false,
                reason,
                ..
            } => ApprovalItem::Approval {
                tool_call_id: tool_call_id.clone(),
                approve: false,
                reason: reason.clone(),
            },
            ApprovalResult::Tool {
                tool_call_id,
                tool_return,
                status,
                stdout,
                stderr,
                reason,
            } => finish_tool(
                tool_call_id,
                tool_return.clone(),
                status,
                stdout.clone(),
                stderr.clone(),
                reason.as_deref(),
                interrupted_tool_call_ids,
                allow_interrupt_text_fallback,
            ),
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn finish_tool(
    tool_call_id: &str,
    tool_return: Option<Content>,
    status: &str,
    stdout: Option<Vec<String>>,
    stderr: Option<Vec<String>>,
    reason: Option<&str>,
    interrupted: &[String],
    fallback: bool,
) -> ApprovalItem {
    let text_is_interrupted =
        matches!(&tool_return, Some(Content::Text(t)) if t == INTERRUPTED_BY_USER);
    let mut status = status.to_string();
    if interrupted.iter().any(|i| i == tool_call_id) || (fallback && text_is_interrupted) {
        status = "error".into();
    }
    let tool_return = match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(comment) => {
            let mut parts = vec![text_part(&approval_comment_text(comment))];
            match tool_return {
                Some(Content::Text(t)) => parts.push(text_part(&t)),
                Some(Content::Parts(p)) => parts.extend(p),
                None => {}
            }
            Content::Parts(parts)
        }
        None => tool_return.unwrap_or_else(|| Content::Text(String::new())),
    };
    ApprovalItem::Tool {
        tool_call_id: tool_call_id.to_string(),
        tool_return,
        status,
        stdout,
        stderr,
    }
}

#[cfg(test)]
mod tests;
