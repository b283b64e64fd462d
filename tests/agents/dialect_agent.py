"""A test agent on the Python standard library: one model call per turn, in the API
named by DIALECT_API ("chat", "responses" or "messages"), streamed when DIALECT_STREAM
is "1". It reads a streamed answer the way an SDK does (text deltas up to the end
event) and reports the text as the turn's output. Raw HTTP, so it runs wherever
python3 does.
"""

import json
import os
import sys
import urllib.request

API = os.environ.get("DIALECT_API", "chat")
STREAM = os.environ.get("DIALECT_STREAM") == "1"
SYSTEM = os.environ.get("DIALECT_SYSTEM", "You are a terse test agent.")


def post(url, body, headers=None):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode()


def sse_data(text):
    """The data of each event, parsed (the [DONE] marker left out)."""
    out = []
    for line in text.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data != "[DONE]":
                out.append(json.loads(data))
    return out


def ask(text):
    if API == "chat":
        body = {"model": "m", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]}
        if STREAM:
            body["stream"] = True
        raw = post(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body)
        if not STREAM:
            return json.loads(raw)["choices"][0]["message"]["content"]
        return "".join((c["choices"][0]["delta"].get("content") or "") for c in sse_data(raw) if c.get("choices"))
    if API == "responses":
        body = {"model": "m", "instructions": SYSTEM, "input": text}
        if STREAM:
            body["stream"] = True
        raw = post(os.environ["OPENAI_BASE_URL"] + "/responses", body)
        if not STREAM:
            return "".join(part["text"] for item in json.loads(raw)["output"] if item["type"] == "message"
                           for part in item["content"])
        return "".join(e["delta"] for e in sse_data(raw) if e.get("type") == "response.output_text.delta")
    body = {"model": "m", "max_tokens": 64, "system": SYSTEM, "messages": [{"role": "user", "content": text}]}
    if STREAM:
        body["stream"] = True
    raw = post(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", body, {"anthropic-version": "2023-06-01"})
    if not STREAM:
        return "".join(b["text"] for b in json.loads(raw)["content"] if b["type"] == "text")
    return "".join(e["delta"]["text"] for e in sse_data(raw)
                   if e.get("type") == "content_block_delta" and e["delta"].get("type") == "text_delta")


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "end":
            return 0
        if msg["type"] == "turn":
            answer = ask(msg["input"])
            print(json.dumps({"type": "turn_result", "turn": msg["turn"], "output": answer}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
