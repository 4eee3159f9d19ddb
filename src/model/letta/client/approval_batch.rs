//! `executeApprovalBatch` (letta-protocol.md §5.3): the decided approvals of one batch run with
//! per-resource-key queues, results in the original decision order. Generic over the tool
//! runner, so the same code runs tools on the simulated workspace and in unit tests.

use std::future::Future;

use indexmap::IndexMap;

use super::approvals::{ApprovalResult, Decision, GLOBAL_KEY, resource_key};
use super::policy::ERROR_EXECUTING_TOOL_PREFIX;
use super::stream_processor::Approval;
use crate::wire::letta::Content;

/// How the batch serialises resource keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockScheme {
    /// The published client: one sequential queue per resource key; `__global__` tools
    /// serialise only with each other (letta-protocol.md §5.3, §10.3 item 5).
    PerKey,
    /// The reference: `__global__` tools serialise with every non-parallel-safe tool (what the
    /// upstream comment says is intended): when a batch holds a global tool, all its
    /// non-parallel-safe approvals share one queue in decision order.
    GlobalExclusive,
    /// Planted defect (breaks `lock-safety`): no queues at all, every approval runs at once.
    Unlocked,
}

/// What running one tool produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolRun {
    Done {
        tool_return: Content,
        status: String,
        stdout: Option<Vec<String>>,
        stderr: Option<Vec<String>>,
    },
    /// An AbortError (or "The operation was aborted").
    Aborted,
    /// Any other throw.
    Failed(String),
}

/// Buckets of a batch: denials, parallel-safe approvals, and per-key queues (decision indexes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Buckets {
    pub denials: Vec<usize>,
    pub parallel: Vec<usize>,
    pub queues: IndexMap<String, Vec<usize>>,
}

/// Buckets the decisions (letta-protocol.md §5.3).
pub fn bucket_decisions(decisions: &[Decision], cwd: &str, scheme: LockScheme) -> Buckets {
    let mut b = Buckets::default();
    let has_global = decisions.iter().any(|d| {
        matches!(d, Decision::Approve { approval, .. }
            if resource_key(&approval.tool_name, &approval.tool_args, cwd).as_deref() == Some(GLOBAL_KEY))
    });
    for (i, d) in decisions.iter().enumerate() {
        match d {
            Decision::Deny { .. } => b.denials.push(i),
            Decision::Approve { approval, .. } => {
                match resource_key(&approval.tool_name, &approval.tool_args, cwd) {
                    None => b.parallel.push(i),
                    Some(_) if scheme == LockScheme::Unlocked => b.parallel.push(i),
                    Some(key) => {
                        let key = if scheme == LockScheme::GlobalExclusive && has_global {
                            GLOBAL_KEY.to_string()
                        } else {
                            key
                        };
                        b.queues.entry(key).or_default().push(i);
                    }
                }
            }
        }
    }
    b
}

/// `executeApprovalBatch` (letta-protocol.md §5.3): every parallel-safe approval and every
/// denial independently, each resource queue sequentially in original order, queues
/// concurrently; results in the **original decision order** regardless of completion order.
/// `aborted()` is consulted before each execution (an already-aborted signal gives "Interrupted
/// by user" without executing). `run` executes one approved call.
pub async fn execute_approval_batch<R, F>(
    decisions: &[Decision],
    cwd: &str,
    scheme: LockScheme,
    aborted: &dyn Fn() -> bool,
    run: R,
) -> Vec<ApprovalResult>
where
    R: Fn(usize, Approval) -> F,
    F: Future<Output = ToolRun>,
{
    let buckets = bucket_decisions(decisions, cwd, scheme);
    let one = |i: usize| {
        let run = &run;
        async move {
            match &decisions[i] {
                Decision::Deny {
                    approval, reason, ..
                } => (i, ApprovalResult::denial(&approval.tool_call_id, reason)),
                Decision::Approve {
                    approval, comment, ..
                } => {
                    if aborted() {
                        return (i, ApprovalResult::interrupted(&approval.tool_call_id));
                    }
                    let r = match run(i, approval.clone()).await {
                        ToolRun::Done {
                            tool_return,
                            status,
                            stdout,
                            stderr,
                        } => ApprovalResult::Tool {
                            tool_call_id: approval.tool_call_id.clone(),
                            tool_return: Some(tool_return),
                            status,
                            stdout,
                            stderr,
                            reason: comment.clone(),
                        },
                        ToolRun::Aborted => ApprovalResult::interrupted(&approval.tool_call_id),
                        ToolRun::Failed(e) => ApprovalResult::Tool {
                            tool_call_id: approval.tool_call_id.clone(),
                            tool_return: Some(Content::Text(format!(
                                "{ERROR_EXECUTING_TOOL_PREFIX}{e}"
                            ))),
                            status: "error".into(),
                            stdout: None,
                            stderr: None,
                            reason: comment.clone(),
                        },
                    };
                    (i, r)
                }
            }
        }
    };
    type Lane<'a> = std::pin::Pin<Box<dyn Future<Output = Vec<(usize, ApprovalResult)>> + 'a>>;
    let mut lanes: Vec<Lane<'_>> = Vec::new();
    for i in buckets
        .denials
        .iter()
        .chain(buckets.parallel.iter())
        .copied()
    {
        let f = one(i);
        lanes.push(Box::pin(async move { vec![f.await] }));
    }
    for queue in buckets.queues.values() {
        let queue = queue.clone();
        let one = &one;
        lanes.push(Box::pin(async move {
            let mut out = Vec::new();
            for i in queue {
                out.push(one(i).await);
            }
            out
        }));
    }
    let mut slots: Vec<Option<ApprovalResult>> = vec![None; decisions.len()];
    for lane in futures::future::join_all(lanes).await {
        for (i, r) in lane {
            slots[i] = Some(r);
        }
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.unwrap_or_else(|| ApprovalResult::interrupted(&decisions[i].approval().tool_call_id))
        })
        .collect()
}

#[cfg(test)]
mod tests;
