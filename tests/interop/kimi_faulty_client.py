"""A deliberately faulty coding agent for `sim explore --real-client` over agent-loop scenarios
(tests/interop/kimi_realclient.rs): it runs a turn against the fake provider as a loop does
(call the model, answer its tool calls, call it again, until an answer has none), but breaks
the tool-call envelope on the first batch of more than one call.

Usage: python3 kimi_faulty_client.py drop|twice
  drop   answers only the first call of the batch: `loop-envelope` must find the others
         without a result.
  twice  answers the first call of the batch twice: `loop-envelope` must find it answered
         twice.
Reads SIM_PROVIDER_URL, SIM_PROVIDER_API (anthropic or openai_chat), SIM_MODEL and SIM_TURN
(docs/real-client.md, "The agent loop"). A refused request (the provider checks a
conversation as the real API does) ends the turn with its error on stderr and exit 1.
"""
import json
import os
import sys
import urllib.error
import urllib.request

mode = sys.argv[1]
base = os.environ["SIM_PROVIDER_URL"]
api = os.environ["SIM_PROVIDER_API"]
model = os.environ["SIM_MODEL"]


def sse(path, body):
    """POSTs `body` and yields each SSE event as (name, data)."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "x-api-key": "sk-faulty", "Authorization": "Bearer sk-faulty"})
    try:
        r = urllib.request.urlopen(req, timeout=30)
    except urllib.error.HTTPError as e:
        print(f"model call refused: {e.code} {e.read().decode()}", file=sys.stderr)
        sys.exit(1)
    name = None
    for line in r:
        line = line.decode().rstrip("\r\n")
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            yield name, line[5:].strip()
        elif not line:
            name = None


def anthropic(messages):
    """One model call: (text, [(id, name, input)])."""
    text, calls, args = "", [], {}
    for name, data in sse("/v1/messages", {"model": model, "max_tokens": 1024, "stream": True,
                                            "messages": messages}):
        ev = json.loads(data)
        if name == "content_block_start" and ev["content_block"]["type"] == "tool_use":
            calls.append((ev["content_block"]["id"], ev["content_block"]["name"], ev["index"]))
            args[ev["index"]] = ""
        elif name == "content_block_delta" and ev["delta"]["type"] == "input_json_delta":
            args[ev["index"]] += ev["delta"]["partial_json"]
        elif name == "content_block_delta" and ev["delta"]["type"] == "text_delta":
            text += ev["delta"]["text"]
    return text, [(i, n, json.loads(args[k] or "{}")) for i, n, k in calls]


def openai(messages):
    text, calls = "", {}
    for _, data in sse("/v1/chat/completions", {"model": model, "stream": True,
                                                 "messages": messages}):
        if data == "[DONE]":
            break
        for choice in json.loads(data).get("choices", []):
            delta = choice.get("delta", {})
            text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], {"id": "", "name": "", "args": ""})
                c["id"] = tc.get("id") or c["id"]
                c["name"] = (tc.get("function") or {}).get("name") or c["name"]
                c["args"] += (tc.get("function") or {}).get("arguments") or ""
    ordered = [calls[k] for k in sorted(calls)]
    return text, [(c["id"], c["name"], json.loads(c["args"] or "{}")) for c in ordered]


def answers(calls):
    """The results the client sends, one per call but for the planted fault."""
    out = [(i, f"ran {n}") for i, n, _ in calls]
    if len(calls) > 1 and not answers.broken:
        answers.broken = True
        if mode == "drop":
            out = out[:1]
        else:
            out = [out[0]] + out
    return out


answers.broken = False
messages = [{"role": "user", "content": os.environ["SIM_TURN"]}]
for _ in range(10):
    if api == "anthropic":
        text, calls = anthropic(messages)
        if not calls:
            break
        blocks = ([{"type": "text", "text": text}] if text else []) + [
            {"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
        messages.append({"role": "assistant", "content": blocks})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": t} for i, t in answers(calls)]})
    else:
        text, calls = openai(messages)
        if not calls:
            break
        messages.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls]})
        for i, t in answers(calls):
            messages.append({"role": "tool", "tool_call_id": i, "content": t})
print(json.dumps({"role": "assistant", "content": text}))
