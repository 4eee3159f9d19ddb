//! Compaction as the local backend does it (letta-protocol.md §8), as pure functions: the
//! trigger threshold, the estimates ([`estimate`]), the plans ([`plan`]), the summariser's
//! transcript and the packed summary ([`summary`]), and [`compact`], which runs the whole
//! algorithm (mode selection, fallback to `all`, the overflow ladder) against any summariser,
//! so the server calls the fake provider with it and a test can call it with a closure.
//!
//! What a compaction decides is a function of the transcript alone: [`should_compact`] says
//! whether (and at which phase), [`compact`] where it cuts and what the summariser is asked.

pub mod estimate;
pub mod plan;
pub mod summary;

use self::estimate::{CtxMessage, messages_tokens};
use self::plan::{PlanError, plan_all, plan_sliding_window};
use self::summary::{
    ALL_PROMPT, CompactionStats, DEFAULT_CLIP_CHARS, NO_PRIOR_MESSAGES, SLIDING_PROMPT,
    clip_summary, ladder_transcripts, summary_tokens,
};

/// The reserve kept free below the window: at most this many tokens (§8.1).
pub const RESERVE_MAX: u64 = 16_384;

/// How many compactions a provider overflow may cause in one turn (§7.7).
pub const OVERFLOW_COMPACTIONS_PER_TURN: u32 = 3;

/// `reserve = min(16384, max(1, floor(window * 0.2)))` (§8.1).
pub fn reserve(window: u64) -> u64 {
    RESERVE_MAX.min(((window as f64 * 0.2).floor() as u64).max(1))
}

/// `threshold = max(0, window - reserve)` (§8.1).
pub fn threshold(window: u64) -> u64 {
    window.saturating_sub(reserve(window))
}

/// Whether `tokens` call for compaction against `window` (§8.1): strictly above the threshold;
/// never without a positive window.
pub fn over_threshold(tokens: u64, window: Option<u64>) -> bool {
    match window {
        Some(w) if w > 0 => tokens > threshold(w),
        _ => false,
    }
}

/// Why a compaction ran (§8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The preflight or post-turn check.
    ContextWindowLimit,
    /// The provider refused the request as too long.
    ContextWindowOverflow,
    /// `POST /v1/conversations/{id}/compact`.
    Manual,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::ContextWindowLimit => "context_window_limit",
            Trigger::ContextWindowOverflow => "context_window_overflow",
            Trigger::Manual => "manual",
        }
    }
}

/// Which plan (§8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    SlidingWindow,
    All,
}

impl Mode {
    /// Only `all` and `sliding_window` are accepted (§8.2).
    pub fn from_name(s: &str) -> Option<Mode> {
        match s {
            "sliding_window" => Some(Mode::SlidingWindow),
            "all" => Some(Mode::All),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::SlidingWindow => "sliding_window",
            Mode::All => "all",
        }
    }
}

/// Compaction settings (§8.2): agent settings overlaid by request settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub mode: Mode,
    pub sliding_window_percentage: Option<f64>,
    /// A custom summariser prompt.
    pub prompt: Option<String>,
    /// `clip_chars` (default 50000; `None` disables the clip).
    pub clip_chars: Option<usize>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::SlidingWindow,
            sliding_window_percentage: None,
            prompt: None,
            clip_chars: Some(DEFAULT_CLIP_CHARS),
        }
    }
}

/// Which check found the context too large (§8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Preflight,
    PostTurn,
}

/// The summariser: the server's is a model call through the provider; a test's a script.
pub trait Summariser: Send {
    fn summarise(
        &mut self,
        req: SummaryRequest,
    ) -> futures::future::BoxFuture<'_, Result<String, SummariserError>>;
}

/// One request to the summariser: its system prompt and the transcript (its one user
/// message), and the ladder budget it was cut to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRequest {
    pub mode: Mode,
    pub prompt: String,
    pub transcript: String,
    pub budget: Option<usize>,
}

/// How a summariser call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummariserError {
    /// The provider said the request is too long (the context-overflow markers of §7.7).
    Overflow(String),
    /// Anything else: it propagates (§8.2).
    Other(String),
}

/// One summarisation that was carried out.
#[derive(Debug, Clone, PartialEq)]
pub struct Pass {
    pub mode: Mode,
    /// `messages[..cutoff]` of the pass's input were summarised, the rest kept.
    pub cutoff: usize,
    /// Summariser requests made, the ladder's included, in order.
    pub requests: Vec<SummaryRequest>,
    pub summary: String,
    /// Why the sliding window did not plan, when this is the `all` fallback.
    pub planning_error: Option<PlanError>,
}

/// What [`compact`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The passes: the sliding window and, on fallback, `all` on its result.
    pub passes: Vec<Pass>,
    /// The mode of the last pass (what the summary message says).
    pub mode: Mode,
    /// The final summary.
    pub summary: String,
    /// Indexes into the original messages that are kept, in order.
    pub kept: Vec<usize>,
    /// Stats of the last pass: before from its input (the original transcript, or the
    /// sliding pass's result when `all` fell back after it), after from the final one.
    pub stats: CompactionStats,
    /// The sliding window failed to plan, or left the context at or above the window.
    pub fell_back_to_all: bool,
    /// The overflow ladder was used.
    pub laddered: bool,
}

/// Whether a turn compacts before calling the model (§8.1 preflight): the provider estimate
/// of [`estimate::provider_estimate`] above the threshold.
pub fn should_compact(tokens: Option<u64>, window: Option<u64>) -> bool {
    tokens.is_some_and(|t| over_threshold(t, window))
}

/// Summarises `msgs[..cutoff]` with the custom prompt, else the built-in prompt of `mode`,
/// walking the overflow ladder on overflow (§8.2). Returns the clipped summary; every request
/// made is added to `log`.
///
/// §8.2 says the `all` fallback keeps a custom prompt only when the configured mode was
/// `all`; the published CLI (0.32.18, `summarizeLocalMessagesWithPrompt`: `prompt ??
/// defaultPrompt`, its fallback passing the resolved prompt on) uses a custom prompt in every
/// pass, and the model follows the CLI (docs/server.md "Compaction").
async fn summarise_part<S: Summariser>(
    msgs: &[CtxMessage],
    mode: Mode,
    settings: &Settings,
    summariser: &mut S,
    log: &mut Vec<SummaryRequest>,
) -> Result<String, SummariserError> {
    if msgs.is_empty() {
        return Ok(NO_PRIOR_MESSAGES.to_string());
    }
    let prompt = match &settings.prompt {
        Some(p) => p.clone(),
        None => match mode {
            Mode::All => ALL_PROMPT.to_string(),
            Mode::SlidingWindow => SLIDING_PROMPT.to_string(),
        },
    };
    let mut last_overflow = None;
    for (budget, transcript) in ladder_transcripts(msgs) {
        let req = SummaryRequest {
            mode,
            prompt: prompt.clone(),
            transcript,
            budget,
        };
        log.push(req.clone());
        match summariser.summarise(req).await {
            Ok(raw) => return Ok(clip_summary(&raw, settings.clip_chars)),
            Err(SummariserError::Overflow(e)) => last_overflow = Some(e),
            Err(other) => return Err(other),
        }
    }
    Err(SummariserError::Overflow(
        last_overflow.expect("the ladder has at least one transcript"),
    ))
}

/// A failed compaction: the summariser's error and the requests made before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    pub error: SummariserError,
    pub requests: Vec<SummaryRequest>,
}

/// Runs the compaction of `msgs` (§8.2-8.4): the configured plan (the sliding window by
/// default) and, when it cannot plan or leaves `context_tokens_after >= window`, `all` on the
/// already-compacted transcript. `summary_message` builds the summary message the sliding
/// pass leaves in front of the kept messages from its summary and stats (its text is what the
/// `all` pass's stats estimate: the CLI stores the packed summary, then its fallback lists the
/// stored messages, letta-protocol.md §8.2).
pub async fn compact<S: Summariser>(
    msgs: &[CtxMessage],
    settings: &Settings,
    window: Option<u64>,
    trigger: Trigger,
    summary_message: &(dyn Fn(&str, &CompactionStats) -> CtxMessage + Sync),
    summariser: &mut S,
) -> Result<Outcome, Failed> {
    let mut passes: Vec<Pass> = Vec::new();
    let mut log: Vec<SummaryRequest> = Vec::new();
    // Indexes into `msgs` of what is kept; the summary of a pass stands in front of them.
    let mut kept: Vec<usize> = (0..msgs.len()).collect();
    let mut current: Vec<CtxMessage> = msgs.to_vec();
    let mut planning_error = None;
    let mut fell_back = false;
    if settings.mode == Mode::SlidingWindow {
        match plan_sliding_window(&current, settings.sliding_window_percentage, window) {
            Ok(cutoff) => {
                let summary = match summarise_part(
                    &current[..cutoff],
                    Mode::SlidingWindow,
                    settings,
                    summariser,
                    &mut log,
                )
                .await
                {
                    Ok(s) => s,
                    Err(error) => {
                        return Err(Failed {
                            error,
                            requests: log,
                        });
                    }
                };
                let requests = log.clone();
                kept = kept[cutoff..].to_vec();
                let after = summary_tokens(&summary) + messages_tokens(&current[cutoff..]);
                let stats = CompactionStats {
                    trigger: trigger.as_str().to_string(),
                    context_window: window,
                    messages_count_before: current.len(),
                    messages_count_after: 1 + current.len() - cutoff,
                    context_tokens_before: messages_tokens(&current),
                    context_tokens_after: after,
                };
                let mut next = vec![summary_message(&summary, &stats)];
                next.extend(current[cutoff..].iter().cloned());
                passes.push(Pass {
                    mode: Mode::SlidingWindow,
                    cutoff,
                    requests,
                    summary,
                    planning_error: None,
                });
                current = next;
                fell_back = window.is_some_and(|w| after >= w);
            }
            Err(e) => {
                planning_error = Some(e);
                fell_back = true;
            }
        }
    }
    if settings.mode == Mode::All || fell_back {
        let keep_from = plan_all(&current);
        let before = log.len();
        let summary = match summarise_part(
            &current[..keep_from],
            Mode::All,
            settings,
            summariser,
            &mut log,
        )
        .await
        {
            Ok(s) => s,
            Err(error) => {
                return Err(Failed {
                    error,
                    requests: log,
                });
            }
        };
        let requests = log[before..].to_vec();
        // `current` is either the original messages or [summary, kept...]: map its kept
        // tail back to indexes into `msgs`.
        let tail = current.len() - keep_from;
        kept = kept[kept.len() - tail.min(kept.len())..].to_vec();
        passes.push(Pass {
            mode: Mode::All,
            cutoff: keep_from,
            requests,
            summary,
            planning_error,
        });
    }
    let last = passes.last().expect("at least one pass ran");
    let summary = last.summary.clone();
    let kept_msgs: Vec<CtxMessage> = kept.iter().map(|&i| msgs[i].clone()).collect();
    // The last pass's own stats: its "before" is its input, which for the `all` fallback
    // after a sliding pass is the sliding pass's result as stored, `[summary, kept...]`
    // (the CLI's `compactLocalConversationAll` estimates the messages it lists, §8.2, §8.4).
    let input: &[CtxMessage] = if last.mode == Mode::All {
        &current
    } else {
        msgs
    };
    let stats = CompactionStats {
        trigger: trigger.as_str().to_string(),
        context_window: window,
        messages_count_before: input.len(),
        messages_count_after: 1 + kept.len(),
        context_tokens_before: messages_tokens(input),
        context_tokens_after: summary_tokens(&summary) + messages_tokens(&kept_msgs),
    };
    let laddered = passes
        .iter()
        .any(|p| p.requests.iter().any(|r| r.budget.is_some()));
    Ok(Outcome {
        mode: last.mode,
        summary,
        kept,
        stats,
        fell_back_to_all: settings.mode == Mode::SlidingWindow && fell_back,
        laddered,
        passes,
    })
}

#[cfg(test)]
mod tests;
