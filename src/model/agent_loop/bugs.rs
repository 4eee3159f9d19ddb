//! Deliberate defects, off by default. They exist only so the harness can prove that its
//! agent-loop oracles catch a broken loop (a planted-bug canary per invariant, DESIGN.md §5):
//! switched on from a scenario's `[planted]` table, never in a real run. Each switch breaks
//! exactly one documented contract of kimi-loop.md and names it.

/// Planted defects of the loop. `Default` is the faithful loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopBugs {
    /// Breaks kimi-loop.md §1 contract 8 / §3.3 B ("results in provider order"): the result
    /// loop records each `tool.result` as soon as its tool finishes, in completion order, not
    /// in provider order. Caught by the harness invariant `loop-envelope`.
    pub results_in_completion_order: bool,
    /// Breaks kimi-loop.md §5.2 ("blocked if it conflicts with any active *or queued* task"):
    /// `add` only checks the active tasks, so a call can overtake an earlier queued call it
    /// conflicts with and then run alongside it. Caught by the harness invariant `lock-safety`.
    pub scheduler_ignores_queued: bool,
}
