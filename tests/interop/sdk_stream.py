"""The official Python SDK (letta-client) against sim serve.

Usage: python3 sdk_stream.py BASE_URL AGENT_ID
Prints one JSON object: what the SDK yielded and raised. The Rust test asserts on it.
Scenario: scenarios/letta/approval_turn.toml (get_weather approval, then a text answer).
"""
import json
import sys

import letta_client
from letta_client import Letta
from letta_client.types.agents.letta_streaming_response import (
    LettaPing,
    LettaStopReason,
    LettaUsageStatistics,
)
from letta_client.types.agents.assistant_message import AssistantMessage
from letta_client.types.agents.approval_request_message import ApprovalRequestMessage

base_url, agent_id = sys.argv[1], sys.argv[2]
client = Letta(base_url=base_url, api_key="dummy-key", max_retries=2)
tools = [{"name": "get_weather", "description": "weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}}}}]
out = {"version": letta_client.__version__}


def classes(stream):
    seen = []
    for chunk in stream:
        seen.append([type(chunk).__name__, getattr(chunk, "message_type", None),
                     getattr(chunk, "seq_id", None), getattr(chunk, "run_id", None)])
        if isinstance(chunk, ApprovalRequestMessage) and chunk.tool_call and chunk.tool_call.tool_call_id:
            out["tool_call_id"] = chunk.tool_call.tool_call_id
    return seen


# 1. A streamed turn that ends at requires_approval.
out["turn"] = classes(client.conversations.messages.create(
    agent_id, messages=[{"role": "user", "content": "What is the weather in Paris?", "otid": "sdk-otid-1"}],
    client_tools=tools, streaming=True, stream_tokens=True, include_pings=True, background=True))
documented = (LettaPing, AssistantMessage, ApprovalRequestMessage, LettaStopReason, LettaUsageStatistics)
out["documented"] = sorted({n for n, *_ in out["turn"]} & {c.__name__ for c in documented})

# 2. A plain message while the approval is pending: the error arrives in-band as
#    `event: error`, which the SDK raises as APIStatusError with the HTTP status (200).
try:
    seen = []
    for chunk in client.conversations.messages.create(
            agent_id, messages=[{"role": "user", "content": "hello?", "otid": "sdk-otid-2"}],
            streaming=True, background=True):
        seen.append(type(chunk).__name__)
    out["pending_error"] = {"raised": False, "seen": seen}
except letta_client.APIStatusError as e:
    out["pending_error"] = {"raised": True, "class": type(e).__name__, "status": e.status_code,
                            "body": e.body, "seen": seen}

# 3. A non-streaming send while pending: 409 with x-should-retry: false, so one request only.
try:
    client.conversations.messages.create(
        agent_id, messages=[{"role": "user", "content": "again?", "otid": "sdk-otid-3"}], streaming=False)
    out["conflict"] = {"raised": False}
except letta_client.ConflictError as e:
    out["conflict"] = {"raised": True, "status": e.status_code, "body": e.body}

# 4. The approval continuation ends the turn.
out["continuation"] = classes(client.conversations.messages.create(
    agent_id, messages=[{"type": "approval", "otid": "sdk-otid-4", "approvals": [
        {"type": "tool", "tool_call_id": out.get("tool_call_id"), "tool_return": "sunny", "status": "success"}]}],
    client_tools=tools, streaming=True, background=True))

# 5. The run object and its replay.
run_id = out["continuation"][0][3]
run = client.runs.retrieve(run_id)
out["run"] = {"status": run.status, "stop_reason": run.stop_reason}
out["replay"] = classes(client.runs.messages.stream(run_id, starting_after=2))
print(json.dumps(out))
