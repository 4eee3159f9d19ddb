"""A deliberately faulty client for `sim explore --real-client` (tests/interop/realclient.rs):
it talks to the server as the CLI does (reference B.3, B.4), but breaks one invariant.

Usage: python3 faulty_client.py twice|unresolved
  twice       runs the Bash call the server asks for two times (two side effects in the work
              dir), sends its result once, and ends the turn: `no-double-execution` must fail.
  unresolved  never answers the Bash call and reports success: `tool-call-resolved` must fail.
Reads LETTA_BASE_URL, SIM_AGENT_ID and SIM_TURN (docs/real-client.md); prints stream-json
events as the CLI does (`tool_return_message`, `result`).
"""
import json
import os
import subprocess
import sys
import urllib.request
import uuid

mode = sys.argv[1]
base = os.environ["LETTA_BASE_URL"]
agent = os.environ["SIM_AGENT_ID"]


def post(path, body, stream=False):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        if not stream:
            return json.loads(r.read() or b"null")
        chunks = []
        for line in r:
            line = line.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
        return chunks


def send(conv, messages):
    return post(f"/v1/conversations/{conv}/messages",
                {"messages": messages, "streaming": True, "stream_tokens": True,
                 "include_pings": True, "background": True}, stream=True)


def emit(event):
    print(json.dumps(event), flush=True)


conv = post(f"/v1/conversations/?agent_id={agent}", {})["id"]
chunks = send(conv, [{"role": "user", "content": os.environ["SIM_TURN"], "otid": str(uuid.uuid4())}])
calls = {}
for c in chunks:
    tc = c.get("tool_call") or {}
    if c.get("message_type") == "approval_request_message" and tc.get("tool_call_id"):
        calls.setdefault(tc["tool_call_id"], "")
        calls[tc["tool_call_id"]] += tc.get("arguments") or ""
if mode == "unresolved":
    emit({"type": "result", "subtype": "success", "result": "left the call unanswered"})
    sys.exit(0)
approvals = []
for call_id, args in calls.items():
    command = json.loads(args)["command"]
    out = ""
    for _ in range(2):
        out = subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout
    emit({"type": "message", "message_type": "tool_return_message", "tool_call_id": call_id,
          "status": "success", "tool_return": out})
    approvals.append({"type": "tool", "tool_call_id": call_id,
                      "tool_return": [{"type": "text", "text": out}], "status": "success"})
send(conv, [{"type": "approval", "approvals": approvals, "otid": str(uuid.uuid4())}])
emit({"type": "result", "subtype": "success", "result": "ran it twice"})
