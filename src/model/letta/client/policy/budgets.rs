//! Budgets and constants (letta-protocol.md §3.3, §3.4, §3.8, §3.9, §4.4): the retry budgets
//! of a turn and how they reset, and the resume policies.

/// `LLM_API_ERROR_MAX_RETRIES`: shared by pre-stream transient retries, TUI approval-pending
/// recovery and post-stream retries (letta-protocol.md §3.9).
pub const LLM_API_ERROR_MAX_RETRIES: u32 = 3;
/// `EMPTY_RESPONSE_MAX_RETRIES` (letta-protocol.md §3.9).
pub const EMPTY_RESPONSE_MAX_RETRIES: u32 = 2;
/// `CONVERSATION_BUSY_MAX_RETRIES` (letta-protocol.md §3.9).
pub const CONVERSATION_BUSY_MAX_RETRIES: u32 = 3;
/// `CLOUD_API_SHUTDOWN_MAX_RETRIES`: inside the send, independent (letta-protocol.md §3.3).
pub const CLOUD_API_SHUTDOWN_MAX_RETRIES: u32 = 3;
/// Default 503 shutdown retry delay without `Retry-After` (letta-protocol.md §3.3).
pub const CLOUD_API_SHUTDOWN_DEFAULT_DELAY_MS: u64 = 1000;
/// `maxTransientRetries` passed to `getPreStreamErrorAction` (letta-protocol.md §3.4).
pub const MAX_TRANSIENT_RETRIES: u32 = 3;
/// Transient provider backoff base (letta-protocol.md §3.8).
pub const TRANSIENT_BASE_DELAY_MS: u64 = 1000;
/// Transient backoff base for a Cloudflare edge 52x detail (letta-protocol.md §3.8).
pub const CLOUDFLARE_BASE_DELAY_MS: u64 = 5000;
/// Conversation-busy backoff base (letta-protocol.md §3.8).
pub const CONVERSATION_BUSY_BASE_DELAY_MS: u64 = 10_000;
/// Empty-response linear step (letta-protocol.md §3.8).
pub const EMPTY_RESPONSE_STEP_MS: u64 = 500;
/// The busy wait polls the abort signal this often (letta-protocol.md §3.4).
pub const BUSY_WAIT_ABORT_POLL_MS: u64 = 100;
/// Whole-discovery timeout of the fallback run lookup (letta-protocol.md §2.6).
pub const RUN_DISCOVERY_TIMEOUT_MS: u64 = 5000;
/// `batch_size` of every resume request (letta-protocol.md §2.5).
pub const RESUME_BATCH_SIZE: u64 = 1000;

/// The policy of the mid-stream resume loop (letta-protocol.md §4.4 step 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePolicy {
    pub initial_delay_ms: u64,
    pub max_attempts: u32,
    pub max_delay_ms: u64,
}

impl ResumePolicy {
    /// TUI and listener: no policy passed, a single immediate attempt (letta-protocol.md §3.9,
    /// §4.4 note).
    pub const INTERACTIVE: ResumePolicy = ResumePolicy {
        initial_delay_ms: 0,
        max_attempts: 1,
        max_delay_ms: 0,
    };
    /// Headless: `{250, 20, 2000}` (letta-protocol.md §3.9; reference B.5.6).
    pub const HEADLESS: ResumePolicy = ResumePolicy {
        initial_delay_ms: 250,
        max_attempts: 20,
        max_delay_ms: 2000,
    };

    /// Wait before attempt `attempt + 1` after attempt `attempt` failed (1-based):
    /// `min(initial · 2^(attempt-1), max)` (letta-protocol.md §4.4 step 7).
    pub fn delay_after(&self, attempt: u32) -> u64 {
        let exp = attempt.saturating_sub(1).min(40);
        self.initial_delay_ms
            .saturating_mul(1u64 << exp)
            .min(self.max_delay_ms)
    }
}

/// The retry counters of one user turn (letta-protocol.md §3.9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budgets {
    /// Shared LLM budget: pre-stream transient, TUI approval-pending recovery, post-stream.
    pub llm_api_error_retries: u32,
    pub empty_response_retries: u32,
    pub conversation_busy_retries: u32,
    /// The quota auto-swap happens at most once per turn.
    pub quota_swap_tried: bool,
}

impl Budgets {
    /// A non-reentrant turn start, `end_turn`, or a terminal error shown: everything resets
    /// (letta-protocol.md §3.9). Reentrant continuations keep the counters.
    pub fn reset(&mut self) {
        *self = Budgets::default();
    }

    /// "The busy counter also resets on a transient retry and on any non-busy pre-stream error"
    /// (letta-protocol.md §3.9).
    pub fn reset_busy(&mut self) {
        self.conversation_busy_retries = 0;
    }

    pub fn llm_budget_left(&self) -> bool {
        self.llm_api_error_retries < LLM_API_ERROR_MAX_RETRIES
    }
}
