"""A test agent on the Python standard library that keeps the whole conversation itself
and re-sends it on every model call, the way most frameworks do, in the API named by
WIRE_API ("chat", "responses" or "messages"). Tools are listed from and called through
STATEVAL_TOOLS_URL. Knobs, from the environment:

  WIRE_API             chat | responses | messages (default responses)
  WIRE_STORED          "1" (Responses): earlier output items go back as
                       {"type": "item_reference", "id": ...}, as the Vercel AI SDK sends
                       them when `store` is true; otherwise the items themselves
  WIRE_REFERENCE       an id sent as an item_reference in the first request
  WIRE_PARAMS          a JSON object merged into every request body
  WIRE_MESSAGES_PATH   where Messages requests go under ANTHROPIC_BASE_URL
                       (default "/v1/messages")
  WIRE_SYSTEM          the system prompt

An HTTP error from a model call becomes the turn's answer: "HTTP 400: <message>".
"""

import json
import os
import sys
import urllib.error
import urllib.request

API = os.environ.get("WIRE_API", "responses")
STORED = os.environ.get("WIRE_STORED") == "1"
PARAMS = json.loads(os.environ.get("WIRE_PARAMS") or "{}")
SYSTEM = os.environ.get("WIRE_SYSTEM", "You track orders.")
TOOLS_URL = os.environ["STATEVAL_TOOLS_URL"]


class HttpError(Exception):
    pass


def post(url, body, headers=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        body = json.loads(e.read() or b"{}")
        raise HttpError(f"HTTP {e.code}: {body.get('error', {}).get('message', body)}")


TOOLS = post(TOOLS_URL, None)["tools"]


def run_tool(name, args):
    result = post(f"{TOOLS_URL}/{name}", args)["result"]
    return result if isinstance(result, str) else json.dumps(result)


class Chat:
    def __init__(self):
        self.messages = [{"role": "system", "content": SYSTEM}]

    def step(self):
        tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                   "parameters": t["input_schema"]}} for t in TOOLS]
        body = {"model": "m", "messages": self.messages, "tools": tools, **PARAMS}
        message = post(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body)["choices"][0]["message"]
        self.messages.append(message)
        calls = message.get("tool_calls") or []
        for c in calls:
            output = run_tool(c["function"]["name"], json.loads(c["function"]["arguments"]))
            self.messages.append({"role": "tool", "tool_call_id": c["id"], "content": output})
        return message.get("content") or "", bool(calls)

    def user(self, text):
        self.messages.append({"role": "user", "content": text})


class Responses:
    def __init__(self):
        self.items = []
        reference = os.environ.get("WIRE_REFERENCE")
        if reference:
            self.items.append({"type": "item_reference", "id": reference})

    def step(self):
        tools = [{"type": "function", "name": t["name"], "description": t["description"],
                  "parameters": t["input_schema"]} for t in TOOLS]
        body = {"model": "m", "instructions": SYSTEM, "input": self.items, "tools": tools, "store": STORED, **PARAMS}
        output = post(os.environ["OPENAI_BASE_URL"] + "/responses", body)["output"]
        text, calls = "", []
        for item in output:
            if STORED:
                self.items.append({"type": "item_reference", "id": item["id"]})
            elif item["type"] == "message":
                self.items.append({"role": "assistant", "content": item["content"], "id": item["id"]})
            else:
                self.items.append({k: item[k] for k in ("type", "id", "call_id", "name", "arguments")})
            if item["type"] == "message":
                text += "".join(part["text"] for part in item["content"])
            elif item["type"] == "function_call":
                calls.append(item)
        for c in calls:
            output = run_tool(c["name"], json.loads(c["arguments"]))
            self.items.append({"type": "function_call_output", "call_id": c["call_id"], "output": output})
        return text, bool(calls)

    def user(self, text):
        self.items.append({"role": "user", "content": [{"type": "input_text", "text": text}]})


class Messages:
    def __init__(self):
        self.messages = []

    def step(self):
        tools = [{"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
                 for t in TOOLS]
        body = {"model": "m", "max_tokens": 256, "system": SYSTEM, "messages": self.messages, "tools": tools,
                **PARAMS}
        path = os.environ.get("WIRE_MESSAGES_PATH", "/v1/messages")
        answer = post(os.environ["ANTHROPIC_BASE_URL"] + path, body, {"anthropic-version": "2023-06-01"})
        self.messages.append({"role": "assistant", "content": answer["content"]})
        calls = [b for b in answer["content"] if b["type"] == "tool_use"]
        if calls:
            self.messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c["id"], "content": run_tool(c["name"], c["input"])}
                for c in calls]})
        return "".join(b["text"] for b in answer["content"] if b["type"] == "text"), bool(calls)

    def user(self, text):
        self.messages.append({"role": "user", "content": text})


def main():
    conversation = {"chat": Chat, "responses": Responses, "messages": Messages}[API]()
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "end":
            return 0
        if message["type"] != "turn":
            continue
        conversation.user(message["input"])
        try:
            while True:
                text, called = conversation.step()
                if not called:
                    break
        except HttpError as e:
            text = str(e)
        print(json.dumps({"type": "turn_result", "turn": message["turn"], "output": text}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
