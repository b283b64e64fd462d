"""An agent on LangGraph (a prebuilt ReAct graph) with langchain-openai and
langchain-anthropic, evaluated by `stateval run` unchanged: the vendors' clients read
`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` and their keys, which stateval sets.

Knobs (environment):

  AGENT_API           "chat" (`ChatOpenAI`), "responses" (`ChatOpenAI` with
                      `use_responses_api=True`) or "messages" (`ChatAnthropic`)
  AGENT_STREAM        "1": the chat model streams (`streaming=True`)
  AGENT_INSTRUCTIONS  the system prompt

The graph's message list is carried from turn to turn. Tools are plain LangChain tools
posting to STATEVAL_TOOLS_URL.

Protocol: JSON Lines on stdin; each turn's result goes to the file descriptor named by
STATEVAL_PROTOCOL_FD when stateval sets one, else to stdout. Logs go to stderr.
"""

import json
import os
import sys
import urllib.request

from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

API = os.environ.get("AGENT_API", "chat")
STREAM = os.environ.get("AGENT_STREAM") == "1"
INSTRUCTIONS = os.environ.get("AGENT_INSTRUCTIONS", "You are an order-tracking assistant.")


def protocol_out():
    fd = os.environ.get("STATEVAL_PROTOCOL_FD")
    return os.fdopen(int(fd), "w", buffering=1) if fd else sys.stdout


@tool
def get_order(order: str) -> str:
    """Look an order up by its number."""
    request = urllib.request.Request(f"{os.environ['STATEVAL_TOOLS_URL']}/get_order",
                                     data=json.dumps({"order": order}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.dumps(json.load(response)["result"])


def chat_model():
    if API == "messages":
        from langchain_anthropic import ChatAnthropic
        return ChatAnthropic(model="claude-3-5-haiku-latest", streaming=STREAM, max_retries=0)
    from langchain_openai import ChatOpenAI
    return ChatOpenAI(model="gpt-4o-mini", streaming=STREAM, max_retries=0, use_responses_api=API == "responses")


def text_of(message):
    text = message.text
    return text() if callable(text) else text


def main():
    graph = create_react_agent(chat_model(), tools=[get_order], prompt=INSTRUCTIONS)
    out = protocol_out()
    history = []
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "end":
            break
        if message["type"] != "turn":
            continue
        state = graph.invoke({"messages": history + [{"role": "user", "content": message["input"]}]})
        history = state["messages"]
        out.write(json.dumps({"type": "turn_result", "turn": message["turn"], "output": text_of(history[-1])}) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
