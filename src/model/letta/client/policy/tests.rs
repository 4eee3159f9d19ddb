//! Unit tests of the recovery policy: every case of letta-tests-and-real-client.md Part A §A.3
//! and §A.4, and every entry of every table of letta-protocol.md §3.5-3.6. The texts and the
//! helper shared by the test files are here.

mod classifiers;
mod decision_order;
mod input;
mod retriable;
mod tables;

use serde_json::{Value, json};

use super::*;
use crate::wire::letta::{
    ApprovalCreate, ApprovalItem, Content, MessageCreate, MessageItem, StopReason,
};

const APPROVAL_CONFLICT: &str = "CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call. Please approve or deny the pending request before continuing.";
const APPROVAL_CONFLICT_SHORT: &str =
    "CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call.";
const BUSY: &str = "CONFLICT: Cannot send a new message: Another request is currently being processed for this conversation. Please wait for the current request to complete.";
const BUSY_WITH_RUN: &str = "CONFLICT: Cannot send a new message: Another request (run_id=run-abc-123) is currently being processed for this conversation. Please wait for it to complete.";
const CF_521_HTML: &str = "<!DOCTYPE html><html><head><title>example.com | 521: Web server is down</title></head><body>Cloudflare Ray ID: 1 error code 521</body></html>";
const CF_521_FORMATTED: &str = "Cloudflare 521: Web server is down (host example.com)";

fn s(v: &str) -> Value {
    Value::String(v.into())
}
