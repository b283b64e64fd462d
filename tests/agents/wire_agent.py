"""A test agent on the Python standard library alone: it speaks OpenAI Chat Completions
over raw HTTP (no SDK), so the end-to-end tests of the external-agent protocol run
wherever python3 does. Knobs, from the environment:

  WIRE_SYSTEM     system prompt (change it to make the request diverge)
  WIRE_ORDER      "reverse": send a step's tool calls in parallel threads, last first
  WIRE_EXTRA      a tool name to call once per turn although the model never proposed it
  WIRE_LOCAL      a tool name the agent runs itself (never sent to stateval)
  WIRE_NOW        "1": put the wall-clock time and a fresh uuid in the system prompt
  WIRE_REFUSE     a string: the agent's own code refuses every tool call whose arguments
                  contain it, whatever the model says (an agent with a guard of its own),
                  and tells the model so instead of calling stateval
"""

import json
import os
import sys
import threading
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timezone

BASE = os.environ["OPENAI_BASE_URL"]
TOOLS = os.environ["STATEVAL_TOOLS_URL"]


def http(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def call_tool(name, args):
    if name == os.environ.get("WIRE_LOCAL"):
        return {"local": True}
    refuse = os.environ.get("WIRE_REFUSE")
    if refuse and refuse in json.dumps(args):
        return {"error": f"the agent refuses to call {name} with these arguments"}
    _, answer = http(f"{TOOLS}/{name}", args)
    return answer["result"]


def run_calls(calls):
    results = [None] * len(calls)

    def one(i):
        c = calls[i]
        results[i] = call_tool(c["function"]["name"], json.loads(c["function"]["arguments"]))

    order = range(len(calls))
    if os.environ.get("WIRE_ORDER") == "reverse" and len(calls) > 1:
        threads = [threading.Thread(target=one, args=(i,)) for i in reversed(order)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for i in order:
            one(i)
    return results


def main():
    _, listed = http(TOOLS)
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                "parameters": t["input_schema"]}} for t in listed["tools"]]
    system = os.environ.get("WIRE_SYSTEM", "You are a test agent.")
    if os.environ.get("WIRE_NOW") == "1":
        system += f" Now: {datetime.now(timezone.utc).isoformat()}. Session {uuid.uuid4()}."
    messages = [{"role": "system", "content": system}]
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "end":
            return 0
        if msg["type"] != "turn":
            continue
        messages.append({"role": "user", "content": msg["input"]})
        if os.environ.get("WIRE_EXTRA"):
            call_tool(os.environ["WIRE_EXTRA"], {})
        while True:
            status, reply = http(f"{BASE}/chat/completions", {"model": "m", "messages": messages, "tools": tools})
            if status != 200:
                answer = "error: " + reply["error"]["message"]
                break
            message = reply["choices"][0]["message"]
            messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                answer = message["content"]
                break
            for c, result in zip(calls, run_calls(calls)):
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": json.dumps(result)})
        print(json.dumps({"type": "turn_result", "turn": msg["turn"], "output": answer}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
