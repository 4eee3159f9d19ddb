// The port's answer to one call of the published client's policy, `{"fn": name, "args": [...]}`
// as tests/letta/policy_oracle/oracle.cjs takes it. Included (`include!`) by
// tests/letta/policy_oracle.rs and by the mutation crate of tests/mutants/policy.sh, each of
// which brings `policy`, `StopReason`, `Value` and `json` into scope first.

/// The epoch milliseconds tests/letta/policy_oracle/oracle.cjs gives the client's `Date.now`.
const ORACLE_NOW_MS: u64 = 1_796_000_000_000;

/// An optional string argument (`null` when absent, as the generator writes it).
fn opt_str(value: &Value) -> Option<&str> {
    value.as_str()
}

fn opt_u16(value: &Value) -> Option<u16> {
    value.as_u64().and_then(|n| u16::try_from(n).ok())
}

fn num(value: &Value) -> u32 {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .expect("a small whole number")
}

fn text(value: &Value) -> &str {
    value.as_str().expect("a string argument")
}

fn stop_reason(name: &str) -> StopReason {
    serde_json::from_value(json!(name)).expect("a stop reason")
}

/// The port's answer, as the JSON the client's function would return.
fn model_answer(call: &Value) -> Value {
    let args = call["args"].as_array().expect("args");
    let arg = |i: usize| args.get(i).unwrap_or(&Value::Null);
    match call["fn"].as_str().expect("fn") {
        "isApprovalPendingError" => json!(policy::is_approval_pending_error(arg(0))),
        "isConversationBusyError" => json!(policy::is_conversation_busy_error(arg(0))),
        "isInvalidToolCallIdsError" => json!(policy::is_invalid_tool_call_ids_error(arg(0))),
        "isEmptyResponseError" => json!(policy::is_empty_response_error(arg(0))),
        "extractConversationBusyRunId" => {
            json!(policy::extract_conversation_busy_run_id(text(arg(0))))
        }
        "classifyPreStreamConflict" => {
            match policy::classify_pre_stream_conflict(text(arg(0))) {
                Some(policy::PreStreamConflict::ApprovalPending) => json!("approval_pending"),
                Some(policy::PreStreamConflict::ConversationBusy) => json!("conversation_busy"),
                None => Value::Null,
            }
        }
        "isCloudflareEdge52xErrorText" => json!(policy::is_cloudflare_edge_52x(text(arg(0)))),
        "isZaiNonRetryableError" => json!(policy::is_zai_non_retryable(text(arg(0)))),
        "hasNonRetryableQuotaDetail" => json!(policy::is_quota_limit_detail(text(arg(0)))),
        "isRetryableProviderErrorDetail" => {
            json!(policy::is_retryable_provider_detail(text(arg(0))))
        }
        "isNonRetryableProviderErrorDetail" => {
            json!(policy::is_non_retryable_provider_detail(text(arg(0))))
        }
        "shouldRetryPreStreamTransientError" => {
            let opts = arg(0);
            json!(policy::should_retry_pre_stream_transient_error(
                opt_u16(&opts["status"]),
                text(&opts["detail"])
            ))
        }
        "shouldRetryRunMetadataError" => json!(policy::should_retry_run_metadata_error(
            opt_str(arg(0)),
            text(arg(1))
        )),
        "shouldRetryPostStreamRunError" => {
            let opts = arg(0);
            json!(policy::should_retry_post_stream_run_error(
                &stop_reason(text(&opts["stopReason"])),
                opt_str(&opts["errorType"]),
                text(&opts["detail"]),
                opts["retryable"].as_bool()
            ))
        }
        "isEmptyResponseRetryable" => json!(policy::is_empty_response_retryable(
            opt_str(arg(0)),
            text(arg(1)),
            num(arg(2)),
            num(arg(3))
        )),
        "shouldAttemptApprovalRecovery" => {
            let opts = arg(0);
            json!(policy::should_attempt_approval_recovery(
                opts["approvalPendingDetected"].as_bool().expect("a flag"),
                num(&opts["retries"]),
                num(&opts["maxRetries"])
            ))
        }
        "getPreStreamErrorAction" => {
            let transient = args.get(3).map(|opts| policy::TransientOptions {
                status: opt_u16(&opts["status"]),
                transient_retries: num(&opts["transientRetries"]),
                max_transient_retries: num(&opts["maxTransientRetries"]),
            });
            let action =
                policy::get_pre_stream_error_action(text(arg(0)), num(arg(1)), num(arg(2)), transient);
            json!(match action {
                policy::PreStreamAction::ResolveApprovalPending => "resolve_approval_pending",
                policy::PreStreamAction::RetryConversationBusy => "retry_conversation_busy",
                policy::PreStreamAction::RetryTransient => "retry_transient",
                policy::PreStreamAction::Rethrow => "rethrow",
            })
        }
        "getRetryDelayMs2" => {
            let opts = arg(0);
            let category = match text(&opts["category"]) {
                "transient_provider" => policy::DelayCategory::TransientProvider,
                "conversation_busy" => policy::DelayCategory::ConversationBusy,
                _ => policy::DelayCategory::EmptyResponse,
            };
            json!(policy::get_retry_delay_ms(
                category,
                num(&opts["attempt"]),
                text(&opts["detail"]),
                opts["retryAfterMs"].as_u64()
            ))
        }
        "isConversationBusyErrorText" => json!(policy::is_display_busy_error(text(arg(0)))),
        "parseRetryAfterHeaderMs" => {
            json!(policy::parse_retry_after_header_ms(text(arg(0)), ORACLE_NOW_MS))
        }
        other => panic!("no port of the client's {other}"),
    }
}
