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
    /// Breaks kimi-loop.md §5.2 `startQueuedTasks` ("a task stays queued if it conflicts with
    /// any active task"): when a task finishes, the queue is drained checking only the tasks
    /// kept queued, not the ones still running, so a queued call starts alongside a running
    /// call it conflicts with. Caught by the harness invariant `lock-safety`.
    pub scheduler_drain_ignores_active: bool,
    /// Breaks kimi-loop.md §6 `chatWithRetry` ("`delayMs = error.retryAfterMs` if it is a
    /// number > 0 (server `Retry-After`, with no cap applied), else `delays[attempt−1]`"): the
    /// server's `Retry-After` is ignored and every retry waits the backoff table's delay, the
    /// failure kimi-loop.md §9 item 11 records. Caught by the harness invariant
    /// `budget-respected` (agent loop).
    pub retry_ignores_retry_after: bool,
    /// Breaks kimi-loop.md §6 `DEFAULT_MAX_RETRY_ATTEMPTS` ("`10` (raised from 3 in #1740)"):
    /// a step the host gives no attempt budget gives up after 3 attempts, the default before
    /// #1740, so a third retryable error in a row fails the turn. Caught by the harness
    /// invariant `recovery-completes` (agent loop).
    pub retry_default_of_three: bool,
    /// Breaks kimi-loop.md §8.2 (`context.append_message`: "the user prompt (appended at turn
    /// start)"): the host appends a turn's prompt to the context only once the turn has ended,
    /// so each turn's model calls miss its own prompt and the first turn's first call carries
    /// an empty conversation, which the API refuses. Caught by the harness invariant
    /// `history-valid` (agent loop).
    pub prompt_appended_after_turn: bool,
    /// Breaks kimi-loop.md §1 contract 4 (`dispatchEvent` delivers each event with its `type`):
    /// the events reach the live listener without their type names, so no listener fault the
    /// harness keys by type ever fires, and a throwing listener changes nothing a turn shows.
    /// Caught by the harness invariant `client-faults-fire` (agent loop).
    pub listener_events_unnamed: bool,
    /// Breaks kimi-loop.md §8.3 step 2 (`tool-result-render.ts`: an error result reads
    /// `<system>ERROR: Tool execution failed.</system>` before its output): the projection shows
    /// a failed tool's output without its error status, so the model is told a failed tool
    /// succeeded. Caught by the harness invariant `history-valid` (agent loop).
    pub errors_shown_as_success: bool,
    /// Breaks kimi-loop.md §8.2-8.3 (the history is rebuilt from the records, live and on
    /// replay by the same code path): the host compacts its context without writing the
    /// compaction to its record log, so a session resumed from `wire.jsonl` gets the whole
    /// history back. Every turn still ends as before. Caught by the harness invariant
    /// `transcript-resumes` (agent loop).
    pub compaction_unrecorded: bool,
    /// Breaks kimi-loop.md §4.6 (the transcript append can reject, and the error propagates
    /// into the loop): the host writes every record without asking its record store, so an
    /// append the store rejects goes through and the batch carries on. Caught by the harness
    /// invariant `client-faults-fire` (agent loop).
    pub store_unconsulted: bool,
    /// Breaks kimi-loop.md §8.3 `step.end` ("Set the context token count to the sum of all
    /// four usage fields"): the count adds input and output only, so a prompt served from the
    /// cache leaves the context looking emptier than it is, the fill a status line shows and a
    /// compaction threshold reads. Caught by the harness invariant `loop-envelope`.
    pub context_count_without_cache: bool,
}
