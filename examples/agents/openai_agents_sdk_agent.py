"""An agent on the OpenAI Agents SDK (`openai-agents`), evaluated by `stateval run`
unchanged: the SDK reads `OPENAI_BASE_URL` and `OPENAI_API_KEY`, which stateval sets.

Knobs (environment):

  AGENT_API           "responses" (the SDK's default model) or "chat"
                      (`OpenAIChatCompletionsModel`)
  AGENT_STREAM        "1": `Runner.run_streamed` instead of `Runner.run`
  AGENT_TOOLS         "http" (a `function_tool` posting to STATEVAL_TOOLS_URL) or "mcp"
                      (the fixture tools over MCP, `MCPServerStreamableHttp` at
                      STATEVAL_MCP_URL)
  AGENT_INSTRUCTIONS  the agent's instructions (its system prompt)

The conversation is carried from turn to turn with `result.to_input_list()`.

Protocol: JSON Lines on stdin; each turn's result goes to the file descriptor named by
STATEVAL_PROTOCOL_FD when stateval sets one, else to stdout. Logs go to stderr.
"""

import asyncio
import json
import os
import sys
import urllib.request

from agents import (Agent, OpenAIChatCompletionsModel, Runner, function_tool,
                    set_tracing_disabled)
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI

API = os.environ.get("AGENT_API", "responses")
STREAM = os.environ.get("AGENT_STREAM") == "1"
TOOLS = os.environ.get("AGENT_TOOLS", "http")
INSTRUCTIONS = os.environ.get("AGENT_INSTRUCTIONS", "You are an order-tracking assistant.")
MODEL = "gpt-4o-mini"


def protocol_out():
    fd = os.environ.get("STATEVAL_PROTOCOL_FD")
    return os.fdopen(int(fd), "w", buffering=1) if fd else sys.stdout


@function_tool
def get_order(order: str) -> str:
    """Look an order up by its number.

    Args:
        order: The order number.
    """
    request = urllib.request.Request(f"{os.environ['STATEVAL_TOOLS_URL']}/get_order",
                                     data=json.dumps({"order": order}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.dumps(json.load(response)["result"])


async def main():
    set_tracing_disabled(True)  # nothing to export from a replay
    client = AsyncOpenAI(max_retries=0)
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client) if API == "chat" else MODEL
    if API != "chat":
        from agents import set_default_openai_client
        set_default_openai_client(client, use_for_tracing=False)
    servers = []
    if TOOLS == "mcp":
        servers.append(MCPServerStreamableHttp({"url": os.environ["STATEVAL_MCP_URL"]}, name="fixtures"))
    agent = Agent(name="orders", instructions=INSTRUCTIONS, model=model,
                  tools=[] if TOOLS == "mcp" else [get_order], mcp_servers=servers)
    for server in servers:
        await server.connect()
    out = protocol_out()
    history = []
    try:
        for line in sys.stdin:
            message = json.loads(line)
            if message["type"] == "end":
                break
            if message["type"] != "turn":
                continue
            turn_input = history + [{"role": "user", "content": message["input"]}]
            if STREAM:
                result = Runner.run_streamed(agent, turn_input)
                async for _ in result.stream_events():
                    pass
            else:
                result = await Runner.run(agent, turn_input)
            history = result.to_input_list()
            out.write(json.dumps({"type": "turn_result", "turn": message["turn"], "output": result.final_output}) + "\n")
            out.flush()
    finally:
        for server in servers:
            await server.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
