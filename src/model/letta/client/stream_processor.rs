//! The per-drain chunk processor of letta-code (letta-protocol.md §4.1), as a pure state
//! machine: it decides, for each chunk in order, whether it is output, and tracks run id,
//! seq id, pending approvals and the stop reason. The [`Approval`] it collects lives here, with
//! the merge of approvals continued across a cut ([`merge_approvals`], §4.4 step 7).

use indexmap::IndexMap;
use serde_json::Value;

use crate::wire::letta::{LettaChunk, StopReason};

/// An approval the stream asked for, accumulated across deltas per `tool_call_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub tool_call_id: String,
    pub tool_name: String,
    pub tool_args: String,
    pub message_id: Option<String>,
}

/// Prefix + suffix merge by `tool_call_id`: arguments appended, the name filled if empty,
/// new ids appended (letta-protocol.md §4.4 step 7).
pub fn merge_approvals(
    prefix: &[Approval],
    suffix: &[Approval],
    braces_fallback: bool,
) -> Vec<Approval> {
    let mut out = prefix.to_vec();
    for s in suffix {
        match out.iter_mut().find(|a| a.tool_call_id == s.tool_call_id) {
            Some(a) => {
                if a.tool_name.is_empty() {
                    a.tool_name = s.tool_name.clone();
                }
                if braces_fallback && a.tool_args.is_empty() {
                    a.tool_args = "{}".into();
                }
                a.tool_args.push_str(&s.tool_args);
                if s.message_id.is_some() {
                    a.message_id = s.message_id.clone();
                }
            }
            None => out.push(s.clone()),
        }
    }
    out
}

/// Error information from an `error_message` chunk or a bare `{error: ...}` object (§4.1 rule 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorInfo {
    pub message: String,
    pub error_type: Option<String>,
    pub detail: Option<String>,
    pub run_id: Option<String>,
}

/// What [`StreamProcessor::process`] decided about one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Processed {
    /// The chunk is shown to the user (accumulated into the transcript).
    pub output: bool,
    /// The chunk was at or below the seq threshold and ignored entirely (rule 1).
    pub skipped: bool,
    pub error: Option<ErrorInfo>,
    /// (reference only) The chunk skips seq ids: `(expected, got)`. The chunk is not processed;
    /// the drain treats the stream as broken and the resume replays from the last contiguous
    /// seq id.
    pub gap: Option<(u64, u64)>,
}

pub use super::policy::NOTHING_AWAITING_APPROVAL;

#[derive(Debug, Default)]
pub struct StreamProcessor {
    threshold: Option<u64>,
    /// Rule 6 also consults `tool_returns[]` entries (the reference profile). The published
    /// client reads only the top-level `tool_call_id` (letta-protocol.md §10.3 item 4).
    consult_tool_returns: bool,
    /// Drop a chunk whose `seq_id` is at or below the highest one already processed in this
    /// drain (the reference profile). The published client has no such check: §4.1 rule 1 only
    /// compares against the resume threshold, so a frame delivered twice is processed twice.
    drop_repeats: bool,
    max_seen: Option<u64>,
    /// A replay's `starting_after` (its first chunk is the next seq id).
    starting_after: Option<u64>,
    pub run_ids: Vec<String>,
    pub last_run_id: Option<String>,
    pub last_seq_id: Option<u64>,
    pending: IndexMap<String, Approval>,
    pub stop_reason: Option<StopReason>,
}

impl StreamProcessor {
    /// A processor that drops chunks with `seq_id <= threshold` (replayed chunks, §4.5).
    pub fn new(threshold: Option<u64>) -> Self {
        StreamProcessor {
            threshold,
            ..Self::default()
        }
    }

    /// Rule 6 also settles approvals whose id appears only in `tool_returns[]` (the reference
    /// profile's fix of letta-protocol.md §10.3 item 4).
    pub fn consulting_tool_returns(mut self, yes: bool) -> Self {
        self.consult_tool_returns = yes;
        self
    }

    /// Also drops repeated frames within one drain (see [`StreamProcessor::drop_repeats`]);
    /// the reference profile's answer to a duplicated SSE frame.
    pub fn dropping_repeats(mut self, yes: bool) -> Self {
        self.drop_repeats = yes;
        self
    }

    /// The stream is a replay after `starting_after` (for the reference's gap check).
    pub fn starting_after(mut self, after: Option<u64>) -> Self {
        self.starting_after = after;
        self
    }

    /// Applies the rules of letta-protocol.md §4.1, in order.
    pub fn process(&mut self, chunk: &LettaChunk) -> Processed {
        let seq = chunk.seq_id();
        if let Some(refused) = self.refuse(seq) {
            return refused;
        }
        if let Some(s) = seq {
            self.max_seen = Some(self.max_seen.map_or(s, |m| m.max(s)));
        }
        // 2. run id (last one wins).
        if let Some(r) = chunk.run_id() {
            if !self.run_ids.iter().any(|x| x == r) {
                self.run_ids.push(r.to_string());
            }
            self.last_run_id = Some(r.to_string());
        }
        // 3. seq id (last one wins; not a max).
        if let Some(s) = seq {
            self.last_seq_id = Some(s);
        }
        self.classify(chunk)
    }

    /// Rules 1-1'': a chunk refused by its seq id (replayed, repeated, or past a gap), before
    /// anything is recorded.
    fn refuse(&self, seq: Option<u64>) -> Option<Processed> {
        let skip = Processed {
            output: false,
            skipped: true,
            error: None,
            gap: None,
        };
        // 1. At or below the threshold: nothing is recorded.
        if let (Some(s), Some(t)) = (seq, self.threshold)
            && s <= t
        {
            return Some(skip);
        }
        // 1'. (reference only) At or below the highest seq id of this drain: a repeated frame.
        if self.drop_repeats
            && let (Some(s), Some(m)) = (seq, self.max_seen)
            && s <= m
        {
            return Some(skip);
        }
        // 1''. (reference only) Beyond the next seq id: a lost frame. Runs number their chunks
        // from 1 (docs/server.md "Runs and framing"); a resumed drain continues after its
        // threshold.
        if self.drop_repeats
            && let Some(s) = seq
        {
            let base = self
                .max_seen
                .or(match (self.threshold, self.starting_after) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                });
            let expected = base.map_or(1, |m| m + 1);
            if s > expected {
                return Some(Processed {
                    gap: Some((expected, s)),
                    ..skip
                });
            }
        }
        None
    }

    /// Rules 4-9: what an admitted chunk is (output or not, an error, a settled or collected
    /// approval, the stop reason).
    fn classify(&mut self, chunk: &LettaChunk) -> Processed {
        let not_output = |error| Processed {
            output: false,
            skipped: false,
            error,
            gap: None,
        };
        match chunk {
            // 4. ping and response_state are not output.
            LettaChunk::Ping(_) | LettaChunk::ResponseState(_) => not_output(None),
            // 5. error detection.
            LettaChunk::ErrorMessage(e) => {
                let info = ErrorInfo {
                    message: e.message.clone(),
                    error_type: Some(e.error_type.clone()),
                    detail: e.detail.clone(),
                    run_id: self.last_run_id.clone(),
                };
                let swallow = info.message.contains(NOTHING_AWAITING_APPROVAL);
                Processed {
                    output: !swallow,
                    skipped: false,
                    error: Some(info),
                    gap: None,
                }
            }
            LettaChunk::Unknown(v)
                if v.get("message_type").is_none() && v.get("error").is_some() =>
            {
                let err = &v["error"];
                let message = match (
                    err.get("message").and_then(Value::as_str),
                    err.get("detail").and_then(Value::as_str),
                ) {
                    (Some(m), Some(d)) => format!("{m}: {d}"),
                    (Some(m), None) => m.to_string(),
                    _ => "An error occurred".to_string(),
                };
                let swallow = message.contains(NOTHING_AWAITING_APPROVAL);
                Processed {
                    output: !swallow,
                    skipped: false,
                    error: Some(ErrorInfo {
                        message,
                        error_type: None,
                        detail: None,
                        run_id: self.last_run_id.clone(),
                    }),
                    gap: None,
                }
            }
            // 6. a tool return settles its pending approval (top-level id only in the
            // published client; the reference also reads `tool_returns[]`).
            LettaChunk::ToolReturnMessage(m) => {
                if !m.tool_call_id.is_empty() {
                    self.pending.shift_remove(&m.tool_call_id);
                }
                if self.consult_tool_returns {
                    for r in m.tool_returns.iter().flatten() {
                        if let Some(id) = r.get("tool_call_id").and_then(Value::as_str) {
                            self.pending.shift_remove(id);
                        }
                    }
                }
                Processed {
                    output: true,
                    skipped: false,
                    error: None,
                    gap: None,
                }
            }
            // 7. approval requests accumulate per tool_call_id.
            LettaChunk::ApprovalRequestMessage(m) => {
                for call in m.calls() {
                    let Some(id) = &call.tool_call_id else {
                        continue;
                    };
                    let entry = self.pending.entry(id.clone()).or_insert_with(|| Approval {
                        tool_call_id: id.clone(),
                        tool_name: String::new(),
                        tool_args: String::new(),
                        message_id: None,
                    });
                    entry.message_id = Some(m.env.id.clone());
                    if let Some(n) = &call.name {
                        entry.tool_name = n.clone();
                    }
                    if let Some(a) = &call.arguments
                        && !a.is_empty()
                    {
                        entry.tool_args.push_str(a);
                    }
                }
                Processed {
                    output: true,
                    skipped: false,
                    error: None,
                    gap: None,
                }
            }
            // 8. stop reason: recorded, reading continues.
            LettaChunk::StopReason(s) => {
                self.stop_reason = Some(s.stop_reason.clone());
                not_output(None)
            }
            // 9. everything else is output.
            _ => Processed {
                output: true,
                skipped: false,
                error: None,
                gap: None,
            },
        }
    }

    /// The approvals collected so far, in stream order.
    pub fn approvals(&self) -> impl Iterator<Item = &Approval> {
        self.pending.values()
    }

    /// The approvals collected, in the order their ids first appeared; clears them (§4.2).
    pub fn take_approvals(&mut self) -> Vec<Approval> {
        std::mem::take(&mut self.pending).into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(s: &str) -> LettaChunk {
        LettaChunk::from_json(s).unwrap()
    }

    #[test]
    fn approvals_accumulate_arguments_across_deltas() {
        let mut p = StreamProcessor::new(None);
        p.process(&chunk(r#"{"id":"m1","message_type":"approval_request_message","seq_id":2,"run_id":"r","tool_call":{"name":"Bash","arguments":null,"tool_call_id":"t1"}}"#));
        p.process(&chunk(r#"{"id":"m1","message_type":"approval_request_message","seq_id":3,"run_id":"r","tool_calls":{"name":null,"arguments":"{\"comm","tool_call_id":"t1"}}"#));
        p.process(&chunk(r#"{"id":"m1","message_type":"approval_request_message","seq_id":4,"run_id":"r","tool_calls":[{"arguments":"and\":1}","tool_call_id":"t1"}]}"#));
        p.process(&chunk(
            r#"{"message_type":"stop_reason","stop_reason":"requires_approval"}"#,
        ));
        assert_eq!(p.last_seq_id, Some(4));
        assert_eq!(p.stop_reason, Some(StopReason::RequiresApproval));
        let a = p.take_approvals();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].tool_name, "Bash");
        assert_eq!(a[0].tool_args, "{\"command\":1}");
    }

    #[test]
    fn threshold_drops_everything_about_replayed_chunks() {
        let mut p = StreamProcessor::new(Some(3));
        let r = p.process(&chunk(r#"{"id":"x","message_type":"assistant_message","seq_id":3,"run_id":"r","content":"a"}"#));
        assert!(r.skipped);
        assert_eq!(p.last_run_id, None);
        let r = p.process(&chunk(r#"{"id":"x","message_type":"assistant_message","seq_id":4,"run_id":"r","content":"a"}"#));
        assert!(r.output);
        assert_eq!(p.last_seq_id, Some(4));
    }

    #[test]
    fn repeated_frames_are_processed_twice_unless_dropping_repeats() {
        let args = r#"{"id":"m1","message_type":"approval_request_message","seq_id":1,"run_id":"r","tool_call":{"name":"Bash","arguments":"{\"a\":1}","tool_call_id":"t1"}}"#;
        // The published client: the duplicate is output again and its arguments appended twice.
        let mut p = StreamProcessor::new(None);
        assert!(p.process(&chunk(args)).output);
        assert!(p.process(&chunk(args)).output);
        assert_eq!(p.take_approvals()[0].tool_args, r#"{"a":1}{"a":1}"#);
        // The reference: the second copy is skipped; a keepalive ping repeating the seq too.
        let mut p = StreamProcessor::new(None).dropping_repeats(true);
        assert!(p.process(&chunk(args)).output);
        assert!(p.process(&chunk(args)).skipped);
        assert!(
            p.process(&chunk(r#"{"id":"p","message_type":"ping","seq_id":1}"#))
                .skipped
        );
        assert!(!p.process(&chunk(r#"{"id":"m2","message_type":"assistant_message","seq_id":2,"run_id":"r","content":"a"}"#)).skipped);
        assert_eq!(p.take_approvals()[0].tool_args, r#"{"a":1}"#);
    }

    #[test]
    fn a_skipped_seq_id_is_a_gap_for_the_reference_only() {
        let at = |seq: u64| {
            format!(
                r#"{{"id":"m","message_type":"assistant_message","seq_id":{seq},"run_id":"r","content":"a"}}"#
            )
        };
        let mut p = StreamProcessor::new(None).dropping_repeats(true);
        assert_eq!(p.process(&chunk(&at(1))).gap, None);
        assert_eq!(p.process(&chunk(&at(3))).gap, Some((2, 3)));
        assert_eq!(
            p.last_seq_id,
            Some(1),
            "the chunk after the gap is not recorded"
        );
        // A fresh stream starts at 1; a replay right after its starting_after.
        let mut p = StreamProcessor::new(None).dropping_repeats(true);
        assert_eq!(p.process(&chunk(&at(2))).gap, Some((1, 2)));
        let mut p = StreamProcessor::new(None)
            .dropping_repeats(true)
            .starting_after(Some(4));
        assert_eq!(p.process(&chunk(&at(5))).gap, None);
        // A resumed drain with a threshold drops what it saw and expects the next one.
        let mut p = StreamProcessor::new(Some(6)).dropping_repeats(true);
        assert!(p.process(&chunk(&at(2))).skipped);
        assert_eq!(p.process(&chunk(&at(7))).gap, None);
        // The published client has no such check.
        let mut p = StreamProcessor::new(None);
        assert_eq!(p.process(&chunk(&at(5))).gap, None);
        assert_eq!(p.last_seq_id, Some(5));
    }

    #[test]
    fn errors_and_swallowed_errors() {
        let mut p = StreamProcessor::new(None);
        let r = p.process(&chunk(r#"{"error":{"message":"boom","detail":"d"}}"#));
        assert_eq!(r.error.unwrap().message, "boom: d");
        let r = p.process(&chunk(&format!(
            r#"{{"message_type":"error_message","error_type":"internal_error","message":"Cannot process approval response: {NOTHING_AWAITING_APPROVAL}."}}"#
        )));
        assert!(!r.output && r.error.is_some());
        let r = p.process(&chunk(r#"{"id":"p","message_type":"ping","run_id":"r1"}"#));
        assert!(!r.output);
        assert_eq!(p.last_run_id.as_deref(), Some("r1"));
    }

    #[test]
    fn tool_returns_array_settles_only_when_consulted() {
        let req = r#"{"id":"m","message_type":"approval_request_message","tool_call":{"name":"Read","arguments":"{}","tool_call_id":"t"}}"#;
        let ret = r#"{"id":"m2","message_type":"tool_return_message","status":"success","tool_return":"x","tool_returns":[{"tool_call_id":"t","status":"success","tool_return":"x"}]}"#;
        // The published client: the approval stays pending (letta-protocol.md §10.3 item 4).
        let mut p = StreamProcessor::new(None);
        p.process(&chunk(req));
        p.process(&chunk(ret));
        assert_eq!(p.take_approvals().len(), 1);
        let mut p = StreamProcessor::new(None).consulting_tool_returns(true);
        p.process(&chunk(req));
        p.process(&chunk(ret));
        assert!(p.take_approvals().is_empty());
    }

    #[test]
    fn ping_and_response_state_are_not_output_but_record_ids() {
        let mut p = StreamProcessor::new(None);
        let r = p.process(&chunk(r#"{"id":"rs","message_type":"response_state","response_id":"resp-1","cache_scope":"approval_boundary","run_id":"r9","seq_id":7}"#));
        assert!(!r.output && !r.skipped);
        assert_eq!(
            (p.last_run_id.as_deref(), p.last_seq_id),
            (Some("r9"), Some(7))
        );
        // lastSeqId is the last one seen, not a max.
        p.process(&chunk(r#"{"id":"p","message_type":"ping","seq_id":3}"#));
        assert_eq!(p.last_seq_id, Some(3));
        // Unknown chunk types are output (rule 9) and keep their ids.
        let r = p.process(&chunk(
            r#"{"message_type":"brand_new","run_id":"r10","seq_id":8}"#,
        ));
        assert!(r.output);
        assert_eq!(p.last_run_id.as_deref(), Some("r10"));
        // A tool_call_message is never tracked as an approval.
        p.process(&chunk(r#"{"id":"t","message_type":"tool_call_message","tool_call":{"name":"web_search","arguments":"{}","tool_call_id":"s1"}}"#));
        assert!(p.take_approvals().is_empty());
        assert_eq!(p.run_ids, vec!["r9".to_string(), "r10".to_string()]);
    }

    #[test]
    fn tool_return_settles_pending() {
        let mut p = StreamProcessor::new(None);
        p.process(&chunk(r#"{"id":"m","message_type":"approval_request_message","tool_call":{"name":"Read","arguments":"{}","tool_call_id":"t"}}"#));
        p.process(&chunk(r#"{"id":"m2","message_type":"tool_return_message","tool_call_id":"t","status":"success","tool_return":"x"}"#));
        assert!(p.take_approvals().is_empty());
    }
}
