//! The plan's stream and server-behaviour faults, served to the models through their hooks
//! (the server's responses and sends, the provider's answers). Each fault that acts is reported
//! in the trace.

use std::sync::Arc;

use super::plan::Fault;
use crate::harness::trace::Trace;
use crate::model::letta::server::{
    RetryAfter, RunStreamFault, SendFault, StoredToolCall, StreamHooks,
};
use crate::model::port::inject::{DateField, ProviderHooks, ProviderOverride, StreamFault};
use crate::model::port::observe::Observation;

/// Reads the current time for fault reports; simulated under turmoil, real on TCP.
pub type NowFn = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The plan's stream faults, consulted by the server and the provider.
pub struct PlanHooks {
    faults: Vec<Fault>,
    trace: Trace,
    now: NowFn,
}

impl PlanHooks {
    pub fn new(faults: &[Fault], trace: &Trace, now: NowFn) -> Arc<Self> {
        Arc::new(PlanHooks {
            faults: faults.to_vec(),
            trace: trace.clone(),
            now,
        })
    }

    fn report(&self, f: &Fault) {
        self.trace.push(
            (self.now)(),
            "harness",
            Observation::Fault {
                fault: f.to_string(),
            },
        );
    }
}

impl StreamHooks for PlanHooks {
    fn before_frame(&self, response: u64, frame: u64) -> StreamFault {
        for f in &self.faults {
            let hit = match f {
                Fault::DropConnection {
                    response: r,
                    after_frame,
                } if *r == response && frame == after_frame + 1 => StreamFault::Reset,
                Fault::ServerStream {
                    response: r,
                    frame: n,
                    action,
                } if *r == response && *n == frame => *action,
                _ => continue,
            };
            self.report(f);
            return hit;
        }
        StreamFault::Pass
    }

    // Server-behaviour faults: the server reports these itself.
    fn on_send(&self, send: u64) -> SendFault {
        for f in &self.faults {
            match f {
                Fault::BusyOnSend { send: n } if *n == send => return SendFault::Busy,
                Fault::ShuttingDownOnSend {
                    send: n,
                    retry_after_s,
                    retry_after_date,
                    retry_after_broken,
                } if *n == send => {
                    return SendFault::ShuttingDown(retry_after(
                        *retry_after_s,
                        *retry_after_date,
                        *retry_after_broken,
                    ));
                }
                Fault::ApprovalPendingOnSend {
                    send: n,
                    tool_call_id,
                    tool,
                    arguments,
                } if *n == send => {
                    return SendFault::ApprovalAppears(StoredToolCall {
                        id: tool_call_id.clone(),
                        name: tool.clone(),
                        arguments: arguments.clone(),
                    });
                }
                Fault::BusyOwnRun { send: n } if *n == send => return SendFault::BusyOwnRun,
                Fault::ApprovalPendingInBand {
                    send: n,
                    tool_call_id,
                    tool,
                    arguments,
                } if *n == send => {
                    return SendFault::ApprovalAppearsInBand(StoredToolCall {
                        id: tool_call_id.clone(),
                        name: tool.clone(),
                        arguments: arguments.clone(),
                    });
                }
                _ => {}
            }
        }
        SendFault::Pass
    }

    fn fail_run_stream(&self, n: u64) -> RunStreamFault {
        for f in &self.faults {
            if let Fault::RunStreamFail {
                times,
                retry_after_s,
                retry_after_date,
                retry_after_broken,
            } = f
                && n <= *times
            {
                return RunStreamFault::Fail500(retry_after(
                    *retry_after_s,
                    *retry_after_date,
                    *retry_after_broken,
                ));
            }
        }
        RunStreamFault::Pass
    }

    fn fail_run_read(&self, n: u64) -> bool {
        self.faults
            .iter()
            .any(|f| matches!(f, Fault::RunReadFail { times } if n <= *times))
    }
}

/// A fault's `retry_after_s` / `retry_after_date` / `retry_after_broken` as the header the
/// server writes.
fn retry_after(
    seconds: Option<u64>,
    as_date: bool,
    broken: Option<DateField>,
) -> Option<RetryAfter> {
    seconds.map(|s| match (as_date, broken) {
        (true, Some(field)) => RetryAfter::BrokenDate(s, field),
        (true, None) => RetryAfter::DateIn(s),
        (false, _) => RetryAfter::Seconds(s),
    })
}

impl ProviderHooks for PlanHooks {
    fn override_call(&self, call: u32) -> Option<ProviderOverride> {
        for f in &self.faults {
            if let Fault::ProviderError {
                call: c,
                status,
                retry_after_s,
                message,
            } = f
                && *c == call
            {
                self.report(f);
                let message = message.clone().unwrap_or_else(|| match status {
                    429 => {
                        "Number of request tokens has exceeded your per-minute rate limit".into()
                    }
                    529 => "Overloaded".into(),
                    // kimi-loop.md §7.13 (the media harness's body-size rejection).
                    413 => "Request exceeds the maximum size".into(),
                    _ => "Internal server error".into(),
                });
                // Anthropic's error body shape and types; the server and the agent read only
                // the status and `error.message`.
                let error_type = match status {
                    400 | 422 => "invalid_request_error",
                    401 => "authentication_error",
                    403 => "permission_error",
                    404 => "not_found_error",
                    413 => "request_too_large",
                    429 => "rate_limit_error",
                    529 => "overloaded_error",
                    _ => "api_error",
                };
                let body = serde_json::json!({
                    "type": "error",
                    "error": {"type": error_type, "message": message},
                })
                .to_string();
                let headers = retry_after_s
                    .map(|s| vec![("retry-after".to_string(), s.to_string())])
                    .unwrap_or_default();
                return Some(ProviderOverride {
                    status: *status,
                    headers,
                    body,
                });
            }
        }
        None
    }

    fn before_frame(&self, call: u32, frame: u64) -> StreamFault {
        for f in &self.faults {
            if let Fault::ProviderStream {
                call: c,
                frame: n,
                action,
            } = f
                && *c == call
                && *n == frame
            {
                self.report(f);
                return *action;
            }
        }
        StreamFault::Pass
    }
}
