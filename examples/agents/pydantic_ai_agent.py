"""An agent on Pydantic AI, evaluated by `stateval run` unchanged: its OpenAI and
Anthropic providers use the vendors' clients, which read `OPENAI_BASE_URL` /
`ANTHROPIC_BASE_URL` and the keys stateval sets.

Knobs (environment):

  AGENT_API           "chat" (`OpenAIChatModel`), "responses" (`OpenAIResponsesModel`) or
                      "messages" (`AnthropicModel`)
  AGENT_STREAM        "1": `agent.run_stream` instead of `agent.run`
  AGENT_TOOLS         "http" (a plain tool posting to STATEVAL_TOOLS_URL) or "mcp" (the
                      fixture tools over MCP, an `MCPToolset` at STATEVAL_MCP_URL)
  AGENT_INSTRUCTIONS  the agent's instructions

The message history is carried from turn to turn with `result.all_messages()`.

Protocol: JSON Lines on stdin; each turn's result goes to the file descriptor named by
STATEVAL_PROTOCOL_FD when stateval sets one, else to stdout. Logs go to stderr.
"""

import asyncio
import json
import os
import sys
import urllib.request

from pydantic_ai import Agent

API = os.environ.get("AGENT_API", "chat")
STREAM = os.environ.get("AGENT_STREAM") == "1"
TOOLS = os.environ.get("AGENT_TOOLS", "http")
INSTRUCTIONS = os.environ.get("AGENT_INSTRUCTIONS", "You are an order-tracking assistant.")


def protocol_out():
    fd = os.environ.get("STATEVAL_PROTOCOL_FD")
    return os.fdopen(int(fd), "w", buffering=1) if fd else sys.stdout


def model():
    if API == "messages":
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider
        return AnthropicModel("claude-3-5-haiku-latest",
                              provider=AnthropicProvider(anthropic_client=AsyncAnthropic(max_retries=0)))
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider
    provider = OpenAIProvider(openai_client=AsyncOpenAI(max_retries=0))
    kind = OpenAIResponsesModel if API == "responses" else OpenAIChatModel
    return kind("gpt-4o-mini", provider=provider)


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
    if TOOLS == "mcp":
        from pydantic_ai.mcp import MCPToolset
        agent = Agent(model(), instructions=INSTRUCTIONS, toolsets=[MCPToolset(os.environ["STATEVAL_MCP_URL"])])
    else:
        agent = Agent(model(), instructions=INSTRUCTIONS, tools=[get_order])
    out = protocol_out()
    history = []
    async with agent:
        for line in sys.stdin:
            message = json.loads(line)
            if message["type"] == "end":
                break
            if message["type"] != "turn":
                continue
            if STREAM:
                async with agent.run_stream(message["input"], message_history=history) as result:
                    output = await result.get_output()
            else:
                result = await agent.run(message["input"], message_history=history)
                output = result.output
            history = result.all_messages()
            out.write(json.dumps({"type": "turn_result", "turn": message["turn"], "output": output}) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
