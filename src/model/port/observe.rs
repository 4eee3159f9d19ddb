//! Observable protocol events. Models report them through [`Env::observe`](super::env::Env);
//! the harness stamps them with simulated time and host, renders them into the trace and runs
//! the invariants over them. Every variant is something a person debugging the protocol would
//! want on the timeline, and nothing volatile (no wall clock, no addresses).

use std::collections::BTreeMap;

use serde::Serialize;

/// What kind of entry the server appended to a conversation's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HistoryEntry {
    User {
        otid: Option<String>,
    },
    Assistant {
        chars: usize,
    },
    ToolCall {
        tool_call_id: String,
        name: String,
        arguments: String,
    },
    ToolReturn {
        tool_call_id: String,
        status: String,
    },
    Denial {
        tool_call_id: String,
        reason: String,
    },
    // ---- server model ------------------------------------------------------------------
    /// The server closed a tool call that had no result with an error result: a new local
    /// turn ("Turn did not complete") or a cancel ("Interrupted by user"), letta-protocol.md §7.2.
    Settled {
        tool_call_id: String,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Observation {
    // ---- client ------------------------------------------------------------------------
    /// A user turn begins.
    TurnStart {
        turn: u32,
        text: String,
    },
    /// The client sends a request. `items` summarises the messages array; `response_state`
    /// says the request carries an `X-Letta-Response-State` header (letta-protocol.md §10.1),
    /// shown only when it does.
    ClientSend {
        turn: u32,
        method: String,
        path: String,
        items: String,
        otids: Vec<String>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        response_state: bool,
    },
    /// The HTTP status the client got for the request `method path`, and the `Retry-After`
    /// header of an error answer that carried one. The request is named because a client may
    /// have two in flight (the published client's eager cancel beside its send), whose answers
    /// interleave.
    ClientResponse {
        method: String,
        path: String,
        status: u16,
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_after: Option<String>,
    },
    /// The answer to `method path` named no content type (every answer a real Letta server
    /// gives carries one: `application/json`, `text/event-stream` for a stream). Recorded only
    /// when it happens, by whoever got the answer: the client or a probe.
    UntypedAnswer {
        method: String,
        path: String,
        status: u16,
    },
    /// Why the request `method path` got no answer.
    ClientConnectError {
        method: String,
        path: String,
        error: String,
    },
    /// The answer to `method path` came with a success status, but its body could not be read
    /// or parsed, so the call failed all the same. Recorded only when it happens.
    ClientBodyFailed {
        method: String,
        path: String,
        error: String,
    },
    /// A chunk the client's stream processor handled.
    ClientChunk {
        run_id: Option<String>,
        seq_id: Option<u64>,
        message_type: String,
    },
    /// A chunk reached the client without a name every Letta server gives it (`lacks` is `id`
    /// or `otid`; see the client's `unnamed`). Recorded only then, so a faithful trace has none.
    ClientChunkUnnamed {
        run_id: Option<String>,
        seq_id: Option<u64>,
        message_type: String,
        lacks: String,
    },
    /// How the response body ended, as the client saw it.
    ClientStreamEnd {
        how: String,
    },
    /// The result of one drain (letta-protocol.md §4.2).
    ClientDrained {
        stop_reason: String,
        approvals: Vec<String>,
        last_seq_id: Option<u64>,
    },
    /// The client's decision about one approval request (letta-protocol.md §5.4), and who made
    /// it (`policy`, `human`, `headless-ask`, `incomplete`, `stale-recovery`, `interrupt`).
    ClientDecision {
        tool_call_id: String,
        tool: String,
        decision: String,
        origin: String,
    },
    /// A tool ran on the client. `executions` counts runs of this tool call id so far.
    ToolExecuted {
        tool_call_id: String,
        tool: String,
        arguments: String,
        executions: u32,
        status: String,
    },
    /// The turn is over.
    TurnEnd {
        turn: u32,
        outcome: String,
    },

    // ---- client -----------------------------------------------------------------------
    /// The client process started (`restart` counts restarts after a crash).
    ClientStarted {
        restart: u32,
        profile: String,
        mode: String,
    },
    /// A request other than a message send (resume, run lookup, cancel, listing); `retry`
    /// counts the SDK's own retries of the same call.
    ClientRequest {
        method: String,
        path: String,
        retry: u32,
    },
    /// A mid-stream resume attempt (letta-protocol.md §4.4): by `run` id or by `otid`.
    ClientResume {
        attempt: u32,
        source: String,
        id: String,
        starting_after: u64,
    },
    /// The client waits before retrying (letta-protocol.md §3.3-3.10): `kind` is
    /// `transient`, `approval_pending`, `busy`, `shutdown_503`, `empty_response`,
    /// `post_stream`, `quota_swap` or `resume`; `attempt` is 1-based within its budget.
    ClientRetry {
        kind: String,
        attempt: u32,
        delay_ms: u64,
        detail: String,
        /// The parsed `Retry-After` the delay came from, if any.
        retry_after_ms: Option<u64>,
    },
    /// What the turn loop acted on after a drain (after coercion and resume merges).
    ClientActedOn {
        run_id: Option<String>,
        stop_reason: String,
        approvals: Vec<String>,
    },
    /// A recovery step: `stale_approvals`, `approval_pending`, `busy_attach`, `interrupt`, …
    ClientRecovery {
        kind: String,
        detail: String,
    },
    /// The user interrupted (letta-protocol.md §9).
    ClientInterrupt {
        turn: u32,
        during: String,
    },
    /// A tool started running; `resource_key` as the batch scheduler computed it (§5.2).
    ToolStarted {
        tool_call_id: String,
        tool: String,
        arguments: String,
        resource_key: Option<String>,
    },
    /// A running tool was aborted before it took effect.
    ToolAborted {
        tool_call_id: String,
    },
    /// The transcript a client process backfilled at start-up from the tail listing it read
    /// (letta-protocol.md §6.2): `listed` is the listing as it arrived, one `"<id> <message_type>
    /// <date> <otid>"` per message (`-` for a missing field), and `shown` the positions in it of
    /// the messages the client displays, in display order.
    ClientBackfill {
        conversation_id: String,
        listed: Vec<String>,
        shown: Vec<u32>,
    },

    // ---- server ------------------------------------------------------------------------
    /// The server answered a request (status of the response head).
    ServerRequest {
        method: String,
        path: String,
        status: u16,
    },
    /// The request `method path` matched no route the server serves: FastAPI's bare 404
    /// `{"detail":"Not Found"}` for an unknown path, 405 for a known path with another method.
    /// Recorded only when it happens; a client that calls a route the server does not have
    /// learns nothing it acts on from either answer.
    ServerUnrouted {
        method: String,
        path: String,
        status: u16,
    },
    /// The server sent a `response_state` chunk (letta-protocol.md §10.1) in run `run_id`: the
    /// response id a client may name, once, in its next approval continuation.
    ServerResponseState {
        run_id: String,
        response_id: String,
    },
    /// A request reached the server with an `X-Letta-Response-State` header (§10.1), `header`
    /// as it arrived. Recorded only then.
    ServerResponseStateHeader {
        method: String,
        path: String,
        header: String,
    },
    /// The server put `Retry-After: header` on an error answer, asking for a wait of `wait_ms`.
    /// An HTTP date has whole seconds, so a client reading it later reads up to a second, plus
    /// the answer's transit, less (`dated`). `broken` names the date's field written out of
    /// range: no client can read such a header, so none may wait what it meant.
    ServerRetryAfter {
        status: u16,
        header: String,
        wait_ms: u64,
        dated: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        broken: Option<String>,
    },
    RunStarted {
        run_id: String,
        conversation_id: String,
        request_token: String,
    },
    /// A chunk recorded in a run's log (and so streamed to followers).
    ChunkRecorded {
        run_id: String,
        seq_id: u64,
        message_type: String,
    },
    /// The server appended to a conversation's history.
    History {
        conversation_id: String,
        entry: HistoryEntry,
    },
    RunEnded {
        run_id: String,
        stop_reason: String,
    },
    /// The server called the provider.
    ProviderCall {
        run_id: String,
        attempt: u32,
    },
    ProviderResult {
        run_id: String,
        outcome: String,
    },
    /// The server compacted a conversation (letta-protocol.md §8). Messages are described as
    /// `role:id`, with the tool call ids an assistant makes or a tool result answers
    /// (`assistant:ui-msg-3[t1,t2]`, `tool:ui-msg-4[t1]`, `summary:ui-msg-9`).
    Compaction {
        conversation_id: String,
        run_id: Option<String>,
        trigger: String,
        mode: String,
        /// Left the in-context history.
        removed: Vec<String>,
        /// Shown to the summariser.
        summarized: Vec<String>,
        /// The in-context transcript after it, the summary first.
        kept: Vec<String>,
        /// The kept messages written to the conversation while the summariser ran (a run
        /// started or answered meanwhile): they follow the cut rather than define it.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        appended: Vec<String>,
        tokens_after: u64,
        threshold: Option<u64>,
        /// The sliding window fell back to `all`.
        fell_back: bool,
        /// The summariser overflowed and the ladder cut its transcript.
        laddered: bool,
        /// What the stored summary message says of the compaction.
        #[serde(flatten)]
        summary: Box<StoredSummary>,
    },
    /// One summariser call of a compaction; `budget` is the overflow ladder's transcript budget.
    SummariserCall {
        conversation_id: String,
        budget: Option<u64>,
        /// The transcript's length in JavaScript characters (UTF-16 units), what a ladder
        /// `budget` bounds (letta-protocol.md §8.2).
        transcript_chars: u64,
        outcome: String,
    },

    // ---- provider ----------------------------------------------------------------------
    /// The fake provider answers call number `call` from a cassette.
    ProviderServe {
        call: u32,
        cassette: String,
        status: u16,
        frames: usize,
    },
    ProviderServeEnd {
        call: u32,
        how: String,
    },

    // ---- server model ------------------------------------------------------------------
    /// A request re-attached to an existing run instead of starting one: a duplicate request
    /// token (`request_token`) or `POST /v1/conversations/{id}/stream` (`conversation_stream`).
    RunAttached {
        run_id: String,
        how: String,
    },
    /// A cancel ended a running run.
    RunCancelled {
        run_id: String,
    },
    /// The server started again on a store it had used before: what the store holds
    /// (`conversation=history units`, `run=chunks`) and which runs the crash interrupted.
    ServerRecovered {
        histories: Vec<String>,
        runs: Vec<String>,
        interrupted: Vec<String>,
    },
    /// The fake provider refused a request as the real API would (e.g. a tool use without
    /// its result): the status and the API's error message.
    ProviderRejected {
        call: u32,
        status: u16,
        message: String,
    },
    /// A scripted probe request (scenario `[[requests]]`) and its answer.
    ProbeRequest {
        n: u32,
        method: String,
        path: String,
        /// The tool call ids the request's body answers (approval messages): a second party
        /// deciding a call the client also decides.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        approvals: Vec<String>,
    },
    ProbeResponse {
        n: u32,
        status: u16,
        /// For a JSON body its `detail` (or the body); for a stream the message types in order.
        summary: String,
    },

    // ---- harness -----------------------------------------------------------------------
    /// A fault the harness injected.
    Fault {
        fault: String,
    },

    // ---- agent loop ----------------------------------------------------------------------
    // The agent host of `system = "agent-loop"` (`model::kimi::agent`). Recorded loop events are
    // reported as its live listener hears them (after they were persisted); `turn_start` and
    // `turn_end` above delimit the user turns.
    /// `step.begin`.
    LoopStepBegin {
        turn_id: String,
        step: u32,
        uuid: String,
    },
    /// `step.end`: the effective stop reason and the usage of the response the step used, and
    /// the provider's diagnostics where kimi-loop.md §3.2's rule includes them (absent when
    /// the provider's reason agrees with the effective one, so most steps show none).
    LoopStepEnd {
        turn_id: String,
        step: u32,
        uuid: String,
        finish_reason: String,
        usage: TokenUsage,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_finish_reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_finish_reason: Option<String>,
    },
    /// `content.part`: a completed text or think block (kind and length).
    LoopContentPart {
        step: u32,
        kind: String,
        chars: usize,
    },
    /// `tool.call`, with the effective arguments.
    LoopToolCall {
        step: u32,
        tool_call_id: String,
        name: String,
        args: String,
    },
    /// `tool.result`: whether it is an error, and the start of its output.
    LoopToolResult {
        tool_call_id: String,
        is_error: bool,
        output: String,
    },
    /// `step.retrying`.
    LoopRetrying {
        step: u32,
        failed_attempt: u32,
        next_attempt: u32,
        delay_ms: u64,
        error: String,
    },
    /// `turn.interrupted`.
    LoopInterrupted {
        reason: String,
        cause: String,
        attempted_steps: u32,
        active_step: Option<u32>,
        message: Option<String>,
    },
    /// A model call (`LLM.chat`) returned a response: `finish` is the provider's raw reason,
    /// `provider_finish` kosong's normalised one (kimi-loop.md §2.7), which the step derives
    /// its stop reason from (§4.1).
    LoopModelReturn {
        turn_step: Option<String>,
        usage: TokenUsage,
        tool_calls: usize,
        finish: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_finish: Option<String>,
    },
    /// A model call failed (what the retry logic then classifies).
    LoopModelError {
        turn_step: Option<String>,
        error: String,
    },
    /// The agent sent request number `call` (0-based) to the provider. `results` is the text
    /// of each tool message the request shows the model, by call id, cut as
    /// `loop_tool_result`'s `output` is: what the model is told each tool returned
    /// (kimi-loop.md §8.3 step 2), held by `history-valid` to the results the loop recorded.
    LoopProviderRequest {
        call: u32,
        path: String,
        messages: usize,
        tools: usize,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        results: BTreeMap<String, String>,
    },
    /// The provider's response head (`status`), or why none came (`error`).
    LoopProviderResponse {
        call: u32,
        status: Option<u16>,
        error: Option<String>,
    },
    /// How the provider's stream ended, as the agent saw it.
    LoopProviderStreamEnd {
        call: u32,
        how: String,
    },
    /// A tool execution began (`execution` counts executions across the run, 1-based), with
    /// the resource accesses it really touches.
    LoopToolStart {
        tool_call_id: String,
        tool: String,
        execution: u32,
        accesses: AccessList,
    },
    /// A tool execution ended: `ok`, `error`, `aborted`, `garbage`, or `dropped` (its future
    /// was abandoned, e.g. by the grace timeout, while it still ran).
    LoopToolEnd {
        tool_call_id: String,
        how: String,
    },
    /// The simulated user aborted the running turn.
    LoopUserAbort {
        turn: u32,
        reason: String,
    },
    /// The host compacted the context before retrying the turn (read off the host's record
    /// log, so reported when the turn ends).
    LoopCompaction {
        removed_count: u32,
    },
    /// The host closed a tool call the loop left without a result (turn-end backstop).
    LoopBackstopResult {
        tool_call_id: String,
    },
    /// At a turn's end, the host's record log, written out as its `wire.jsonl` and read back
    /// as a resumed session reads it, rebuilt another context than the one the host holds
    /// (kimi-loop.md §8.3: live and replay are the same code path). Reported only then.
    LoopResumeDiverged {
        turn: u32,
        difference: String,
    },
    /// What `runTurn` returned for the turn (absent when it threw), and the host context's
    /// token count once the turn ended (kimi-loop.md §8.3: the last `step.end`'s usage, or an
    /// estimate), the fill a status line shows.
    LoopTurnResult {
        turn: u32,
        stop_reason: String,
        steps: u32,
        usage: TokenUsage,
        context_tokens: u64,
    },
}

/// The stored summary message's own `time` and `compaction_stats` (letta-protocol.md §8.6),
/// read back from the packed text the conversation now holds (empty and null when it does not
/// parse): what the model is told of a compaction on its next step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredSummary {
    pub summary_time: String,
    pub summary_stats: serde_json::Value,
}

pub use crate::model::kimi::turn_loop::types::TokenUsage;

/// Resource accesses as one compact word list in the trace (`write:/a.txt,search-tree:/src`;
/// `none` for an empty list), and as data for the `lock-safety` oracle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessList(pub crate::model::kimi::turn_loop::access::ToolAccesses);

impl std::fmt::Display for AccessList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::model::kimi::turn_loop::access::{FileOperation, ToolResourceAccess};
        if self.0.0.is_empty() {
            return f.write_str("none");
        }
        for (i, access) in self.0.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match access {
                ToolResourceAccess::All => f.write_str("all")?,
                ToolResourceAccess::File {
                    operation,
                    path,
                    recursive,
                } => {
                    let op = match operation {
                        FileOperation::Read => "read",
                        FileOperation::Write => "write",
                        FileOperation::Readwrite => "readwrite",
                        FileOperation::Search => "search",
                    };
                    let tree = if *recursive { "-tree" } else { "" };
                    write!(f, "{op}{tree}:{path}")?;
                }
            }
        }
        Ok(())
    }
}

impl Serialize for AccessList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Observation {
    /// Every name [`Observation::name`] can return, one per variant, in declaration order.
    pub const NAMES: [&'static str; 64] = [
        "turn_start",
        "client_send",
        "client_response",
        "untyped_answer",
        "client_connect_error",
        "client_body_failed",
        "client_chunk",
        "client_chunk_unnamed",
        "client_stream_end",
        "client_drained",
        "client_decision",
        "tool_executed",
        "turn_end",
        "client_started",
        "client_request",
        "client_resume",
        "client_retry",
        "client_acted_on",
        "client_recovery",
        "client_interrupt",
        "tool_started",
        "tool_aborted",
        "client_backfill",
        "server_request",
        "server_unrouted",
        "server_response_state",
        "server_response_state_header",
        "server_retry_after",
        "run_started",
        "chunk_recorded",
        "history",
        "run_ended",
        "provider_call",
        "provider_result",
        "compaction",
        "summariser_call",
        "provider_serve",
        "provider_serve_end",
        "run_attached",
        "run_cancelled",
        "server_recovered",
        "provider_rejected",
        "probe_request",
        "probe_response",
        "fault",
        "loop_step_begin",
        "loop_step_end",
        "loop_content_part",
        "loop_tool_call",
        "loop_tool_result",
        "loop_retrying",
        "loop_interrupted",
        "loop_model_return",
        "loop_model_error",
        "loop_provider_request",
        "loop_provider_response",
        "loop_provider_stream_end",
        "loop_tool_start",
        "loop_tool_end",
        "loop_user_abort",
        "loop_compaction",
        "loop_backstop_result",
        "loop_resume_diverged",
        "loop_turn_result",
    ];

    /// The event's name as it appears in the trace (`client_chunk`, `fault`, …).
    pub fn name(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("ev").and_then(|e| e.as_str()).map(str::to_string))
            .unwrap_or_default()
    }
}
