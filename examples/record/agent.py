"""An order-tracking agent on the Python standard library: OpenAI Chat Completions over
plain HTTP, with the fixture tools from STATEVAL_TOOLS_URL. Under `stateval run` its
model answers come from the case's recording; under `stateval record` they come from
the live model (or the walk-through's fake_upstream.py) and are recorded.

Protocol: JSON Lines on stdin ({"type":"turn",...} / {"type":"end"}) and stdout
({"type":"turn_result",...}); see docs/agents.md.
"""

import json
import os
import sys
import urllib.request

MODEL = "gpt-4o-mini"
SYSTEM = "You track orders. Look the order up before answering; be warm and say what happens next."


def post(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def main():
    tools_url = os.environ["STATEVAL_TOOLS_URL"]
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                "parameters": t["input_schema"]}}
             for t in post(tools_url)["tools"]]
    messages = [{"role": "system", "content": SYSTEM}]
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "end":
            return 0
        if msg["type"] != "turn":
            continue
        messages.append({"role": "user", "content": msg["input"]})
        while True:
            reply = post(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
                         {"model": MODEL, "messages": messages, "tools": tools})
            message = reply["choices"][0]["message"]
            messages.append(message)
            if not message.get("tool_calls"):
                break
            for call in message["tool_calls"]:
                args = json.loads(call["function"]["arguments"])
                result = post(f"{tools_url}/{call['function']['name']}", args)["result"]
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
        print(json.dumps({"type": "turn_result", "turn": msg["turn"], "output": message["content"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
