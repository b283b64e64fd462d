"""A chat agent on the official `openai` SDK, evaluated by `stateval run`.

What it shows:

* Nothing in the agent knows about stateval except the turn protocol: stdin, and the
  pipe named by STATEVAL_PROTOCOL_FD (stdout when it is not set).
  The SDK reads OPENAI_BASE_URL and OPENAI_API_KEY from the environment, which
  stateval points at its replay endpoint; the same script runs against the real API.
* Chat Completions with `stream=True`: the agent assembles text and tool-call deltas
  itself.
* Function tools listed from `GET $STATEVAL_TOOLS_URL` and executed with
  `POST $STATEVAL_TOOLS_URL/{name}` (plain HTTP, standard library only).
* One message list for the whole conversation (system prompt and every turn), and a
  model -> tools -> model loop until the model answers without tool calls.
* Several tool calls proposed in one step run in parallel threads, started in
  reverse order on purpose: stateval applies them in the model's order regardless.

Protocol (JSON Lines): stateval sends {"type":"start"}, then {"type":"turn","turn":N,
"input":TEXT} per user turn and {"type":"end"}; the agent answers each turn with
{"type":"turn_result","turn":N,"output":TEXT} on the protocol fd, so a library that
prints to stdout is harmless (its lines are kept beside stderr); logs go to stderr.
"""

import json
import os
import sys
import threading
import urllib.request

from openai import OpenAI

# Protocol lines go to the pipe stateval passes as STATEVAL_PROTOCOL_FD, so whatever
# a library prints on stdout cannot get in their way; without it, to stdout.
PROTOCOL_FD = os.environ.get("STATEVAL_PROTOCOL_FD")
PROTOCOL = os.fdopen(int(PROTOCOL_FD), "w") if PROTOCOL_FD else sys.stdout


MODEL = "gpt-4o-mini"
SYSTEM = "You are a concise personal assistant. Use the tools when they help."
TOOLS_URL = os.environ["STATEVAL_TOOLS_URL"]


def log(*parts):
    print("[chat-agent]", *parts, file=sys.stderr, flush=True)


def http_json(url, body=None):
    """GET (no body) or POST a JSON body; return the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def list_tools():
    """The fixture tools, as Chat Completions function tools."""
    tools = []
    for tool in http_json(TOOLS_URL)["tools"]:
        schema = tool.get("input_schema") or {"type": "object", "properties": {}}
        tools.append({"type": "function", "function": {
            "name": tool["name"], "description": tool.get("description", ""), "parameters": schema}})
    return tools


def call_tool(name, args):
    """Run one tool; returns {"result": ..., "is_error": bool}."""
    return http_json(f"{TOOLS_URL}/{name}", args)


def run_in_parallel(calls):
    """Execute the model's tool calls concurrently; results come back in the model's order.

    The threads start last-to-first, so the requests usually reach stateval out of
    order; stateval still applies them in the order the model proposed them.
    """
    results = [None] * len(calls)

    def work(i):
        call = calls[i]
        try:
            results[i] = call_tool(call["name"], json.loads(call["arguments"] or "{}"))
        except Exception as exc:  # a tool that cannot be reached is an error result, not a crash
            results[i] = {"result": {"error": str(exc)}, "is_error": True}

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    for thread in reversed(threads):
        thread.start()
    for thread in threads:
        thread.join()
    return results


def model_step(client, messages, tools):
    """One streamed model call; returns (text, [{"id", "name", "arguments"}])."""
    text = []
    calls = {}  # tool-call index -> the call assembled so far
    extra = {"tools": tools} if tools else {}
    stream = client.chat.completions.create(model=MODEL, messages=messages, stream=True, **extra)
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for part in delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
    return "".join(text), [calls[i] for i in sorted(calls)]


def answer(client, messages, tools, user_text):
    """Add a user turn to the conversation and loop model -> tools until an answer."""
    messages.append({"role": "user", "content": user_text})
    while True:
        text, calls = model_step(client, messages, tools)
        assistant = {"role": "assistant", "content": text or None}
        if calls:
            assistant["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls
            ]
        messages.append(assistant)
        if not calls:
            return text
        log("running", len(calls), "tool call(s):", ", ".join(c["name"] for c in calls))
        for call, outcome in zip(calls, run_in_parallel(calls)):
            result = outcome["result"]
            content = result if isinstance(result, str) else json.dumps(result)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})


def send(message):
    PROTOCOL.write(json.dumps(message) + "\n")
    PROTOCOL.flush()


def main():
    client = OpenAI(max_retries=0)  # a replayed call is never retried: a retry would be another call
    tools = list_tools()
    messages = [{"role": "system", "content": SYSTEM}]  # the whole conversation, kept across turns
    for line in iter(sys.stdin.readline, ""):
        if not line.strip():
            continue
        message = json.loads(line)
        if message["type"] == "start":
            log("case", message.get("case"), "run", message.get("run"))
        elif message["type"] == "turn":
            output = answer(client, messages, tools, message["input"])
            send({"type": "turn_result", "turn": message["turn"], "output": output})
        elif message["type"] == "end":
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
