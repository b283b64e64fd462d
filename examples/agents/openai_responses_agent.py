"""An agent on the official `openai` SDK's Responses API, evaluated by `stateval run`.

What it shows:

* `client.responses.create(...)` chained with `previous_response_id`: the server side
  keeps the conversation, so each request carries only what is new — the user's
  message, or the `function_call_output` items answering the model's calls.
* Function tools listed from `GET $STATEVAL_TOOLS_URL` and run with
  `POST $STATEVAL_TOOLS_URL/{name}` (standard library only).

Protocol (JSON Lines on stdin and the protocol fd; logs on stderr): see openai_chat_agent.py.
"""

import json
import os
import sys
import urllib.request

from openai import OpenAI

# Protocol lines go to the pipe stateval passes as STATEVAL_PROTOCOL_FD, so whatever
# a library prints on stdout cannot get in their way; without it, to stdout.
PROTOCOL_FD = os.environ.get("STATEVAL_PROTOCOL_FD")
PROTOCOL = os.fdopen(int(PROTOCOL_FD), "w") if PROTOCOL_FD else sys.stdout


MODEL = "gpt-4o-mini"
INSTRUCTIONS = "You are an order-tracking assistant. Look orders up before answering."
TOOLS_URL = os.environ["STATEVAL_TOOLS_URL"]


def log(*parts):
    print("[responses-agent]", *parts, file=sys.stderr, flush=True)


def http_json(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def list_tools():
    """The fixture tools, as Responses function tools."""
    return [{"type": "function", "name": t["name"], "description": t.get("description", ""),
             "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}
            for t in http_json(TOOLS_URL)["tools"]]


class Conversation:
    def __init__(self, client, tools):
        self.client = client
        self.tools = tools
        self.last_id = None  # the previous response: the thread the next request continues

    def create(self, items):
        kwargs = {"previous_response_id": self.last_id} if self.last_id else {}
        response = self.client.responses.create(
            model=MODEL, instructions=INSTRUCTIONS, input=items, tools=self.tools, **kwargs)
        self.last_id = response.id
        return response

    def answer(self, user_text):
        """One user turn: loop model -> tools until a response without function calls."""
        response = self.create([{"role": "user", "content": user_text}])
        while True:
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                return response.output_text
            outputs = []
            for call in calls:
                log("calling", call.name)
                outcome = http_json(f"{TOOLS_URL}/{call.name}", json.loads(call.arguments or "{}"))
                result = outcome["result"]
                outputs.append({"type": "function_call_output", "call_id": call.call_id,
                                "output": result if isinstance(result, str) else json.dumps(result)})
            response = self.create(outputs)


def send(message):
    PROTOCOL.write(json.dumps(message) + "\n")
    PROTOCOL.flush()


def main():
    conversation = Conversation(OpenAI(max_retries=0), list_tools())
    for line in iter(sys.stdin.readline, ""):
        if not line.strip():
            continue
        message = json.loads(line)
        if message["type"] == "turn":
            send({"type": "turn_result", "turn": message["turn"], "output": conversation.answer(message["input"])})
        elif message["type"] == "end":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
