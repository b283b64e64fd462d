"""SDK conformance client for stateval's replay endpoints (see README.md here).

An external agent for pipeline/conformance.toml. Each user turn names one client
method; the agent performs that call with the real SDK against stateval's endpoints
and answers the turn with a canonical JSON string of what the SDK assembled. The
dataset asserts that string exactly, so a case passes only when every SDK parsed
stateval's wire format back into what the recording holds.

Answers:
  model calls      {"content": TEXT, "tool_calls": [{"id", "name", "args"}]}
                   (args parsed to an object; content "" when the response has none)
  responses.previous  {"first": <model call>, "second": <model call>}
  mcp.*.list_call  {"tools": [names, sorted], "calls": [{"name", "result", "is_error"}]}
                   after one model call whose proposed calls it runs over MCP, in order
  models.list      {"models": {"openai": [ids], "anthropic": [ids]}}, from both clients
"""

import asyncio
import json
import os
import sys
import urllib.request

from anthropic import Anthropic
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from openai import OpenAI

# Protocol lines go to the pipe stateval passes as STATEVAL_PROTOCOL_FD, so whatever
# a library prints on stdout cannot get in their way; without it, to stdout.
PROTOCOL_FD = os.environ.get("STATEVAL_PROTOCOL_FD")
PROTOCOL = os.fdopen(int(PROTOCOL_FD), "w") if PROTOCOL_FD else sys.stdout


OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-6"


def log(*parts):
    print("[conformance]", *parts, file=sys.stderr, flush=True)


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def assembled(content, calls):
    """The common shape of one model response: text and tool calls (args as objects)."""
    return {"content": content or "", "tool_calls": [
        {"id": i, "name": n, "args": a if isinstance(a, dict) else json.loads(a or "{}")} for i, n, a in calls]}


class Clients:
    def __init__(self):
        self.openai = OpenAI(max_retries=0)
        self.anthropic = Anthropic(max_retries=0)
        listing = json.load(urllib.request.urlopen(os.environ["STATEVAL_TOOLS_URL"], timeout=60))["tools"]
        schema = lambda t: t.get("input_schema") or {"type": "object", "properties": {}}  # noqa: E731
        self.chat_tools = [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""), "parameters": schema(t)}} for t in listing]
        self.responses_tools = [{"type": "function", "name": t["name"], "description": t.get("description", ""),
                                 "parameters": schema(t)} for t in listing]
        self.anthropic_tools = [{"name": t["name"], "description": t.get("description", ""),
                                 "input_schema": schema(t)} for t in listing]

    # --- OpenAI Chat Completions -------------------------------------------------

    def chat_kwargs(self, prompt):
        return {"model": OPENAI_MODEL, "tools": self.chat_tools,
                "messages": [{"role": "user", "content": prompt}]}

    @staticmethod
    def from_chat_message(message):
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        return assembled(message.content, calls)

    def chat_create(self, prompt):
        completion = self.openai.chat.completions.create(**self.chat_kwargs(prompt))
        return self.from_chat_message(completion.choices[0].message)

    def chat_create_stream(self, prompt):
        text, calls = [], {}
        for chunk in self.openai.chat.completions.create(stream=True, **self.chat_kwargs(prompt)):
            for choice in chunk.choices:
                if choice.delta.content:
                    text.append(choice.delta.content)
                for part in choice.delta.tool_calls or []:
                    call = calls.setdefault(part.index, ["", "", ""])
                    call[0] = part.id or call[0]
                    if part.function is not None:
                        call[1] += part.function.name or ""
                        call[2] += part.function.arguments or ""
        return assembled("".join(text), [tuple(calls[i]) for i in sorted(calls)])

    def chat_stream_helper(self, prompt):
        with self.openai.chat.completions.stream(**self.chat_kwargs(prompt)) as stream:
            completion = stream.get_final_completion()
        return self.from_chat_message(completion.choices[0].message)

    # --- OpenAI Responses --------------------------------------------------------

    def responses_kwargs(self, items):
        return {"model": OPENAI_MODEL, "tools": self.responses_tools, "input": items}

    @staticmethod
    def from_response(response):
        calls = [(i.call_id, i.name, i.arguments) for i in response.output if i.type == "function_call"]
        return assembled(response.output_text, calls)

    def responses_create(self, prompt):
        return self.from_response(self.openai.responses.create(**self.responses_kwargs(prompt)))

    def responses_stream(self, prompt):
        with self.openai.responses.stream(**self.responses_kwargs(prompt)) as stream:
            response = stream.get_final_response()
        return self.from_response(response)

    def responses_previous(self, prompt):
        first = self.openai.responses.create(**self.responses_kwargs(prompt))
        second = self.openai.responses.create(
            previous_response_id=first.id, **self.responses_kwargs([{"role": "user", "content": "Go on."}]))
        return {"first": self.from_response(first), "second": self.from_response(second)}

    # --- Anthropic Messages ------------------------------------------------------

    def messages_kwargs(self, prompt):
        return {"model": ANTHROPIC_MODEL, "max_tokens": 1024, "tools": self.anthropic_tools,
                "messages": [{"role": "user", "content": prompt}]}

    @staticmethod
    def from_message(message):
        text = "".join(b.text for b in message.content if b.type == "text")
        calls = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
        return assembled(text, calls)

    def messages_create(self, prompt):
        return self.from_message(self.anthropic.messages.create(**self.messages_kwargs(prompt)))

    def messages_stream(self, prompt):
        with self.anthropic.messages.stream(**self.messages_kwargs(prompt)) as stream:
            message = stream.get_final_message()
        return self.from_message(message)

    # --- MCP ---------------------------------------------------------------------

    def mcp_list_call(self, prompt, transport):
        proposed = self.chat_create(prompt)["tool_calls"]  # MCP may run only what the model proposed
        return asyncio.run(mcp_session(transport, proposed))

    def mcp_http_list_call(self, prompt):
        return self.mcp_list_call(prompt, streamable_http_client(os.environ["STATEVAL_MCP_URL"]))

    def mcp_stdio_list_call(self, prompt):
        env = {k: os.environ[k] for k in ("STATEVAL_MCP_URL", "STATEVAL_TOOLS_URL") if k in os.environ}
        server = StdioServerParameters(command=os.environ["STATEVAL_BIN"], args=["mcp-stdio"], env=env)
        return self.mcp_list_call(prompt, stdio_client(server))

    # --- Models ------------------------------------------------------------------

    def models_list(self, prompt):
        return {"models": {"openai": [m.id for m in self.openai.models.list()],
                           "anthropic": [m.id for m in self.anthropic.models.list()]}}


async def mcp_session(transport, proposed):
    async with transport as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = sorted(tool.name for tool in (await session.list_tools()).tools)
        calls = []
        for call in proposed:
            result = await session.call_tool(call["name"], call["args"])
            text = "".join(b.text for b in result.content if getattr(b, "type", "") == "text")
            try:
                value = json.loads(text)  # any result but a string arrives as JSON text
            except ValueError:
                value = text
            calls.append({"name": call["name"], "result": value, "is_error": bool(result.is_error)})
        return {"tools": names, "calls": calls}


METHODS = {
    "chat.create": Clients.chat_create,
    "chat.create_stream": Clients.chat_create_stream,
    "chat.stream_helper": Clients.chat_stream_helper,
    "responses.create": Clients.responses_create,
    "responses.stream": Clients.responses_stream,
    "responses.previous": Clients.responses_previous,
    "messages.create": Clients.messages_create,
    "messages.stream": Clients.messages_stream,
    "mcp.http.list_call": Clients.mcp_http_list_call,
    "mcp.stdio.list_call": Clients.mcp_stdio_list_call,
    "models.list": Clients.models_list,
}


def perform(clients, text):
    """Run the method the turn names (its first word); errors become the answer."""
    method = text.split()[0] if text.split() else ""
    if method not in METHODS:
        return canonical({"error": f"unknown method {method!r}"})
    try:
        return canonical(METHODS[method](clients, text))
    except Exception as exc:  # the dataset's exact answer fails and shows what went wrong
        log(method, "failed:", repr(exc))
        return canonical({"error": f"{type(exc).__name__}: {exc}"})


def main():
    clients = Clients()
    for line in iter(sys.stdin.readline, ""):
        if not line.strip():
            continue
        message = json.loads(line)
        if message["type"] == "turn":
            output = perform(clients, message["input"])
            PROTOCOL.write(json.dumps({"type": "turn_result", "turn": message["turn"], "output": output}) + "\n")
            PROTOCOL.flush()
        elif message["type"] == "end":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
