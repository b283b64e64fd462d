"""An agent that breaks the rules on purpose, to show how stateval reports each failure.

The env variable MISBEHAVE picks the failure (pipeline/agents-failing.toml has one
profile per mode):

  exit_early      exits 0 before answering the first turn
  exit_nonzero    answers turn 0, then exits with status 3
  hang            never answers; sleeps until stateval's timeout kills it
  garbage         prints a banner on stdout (kept as output, harmless), then a line that
                  is not JSON on its protocol channel (a protocol error)
  unserved        POSTs to $OPENAI_BASE_URL/embeddings (not a replay endpoint), then answers
  past_recording  makes one model call more than the recording holds and answers with
                  the error it got

Unset (or anything else), it is a minimal, well-behaved chat agent: one
Chat Completions call per turn, no tools.
"""

import json
import os
import sys
import time

import openai
from openai import OpenAI

# Protocol lines go to the pipe stateval passes as STATEVAL_PROTOCOL_FD, so whatever
# a library prints on stdout cannot get in their way; without it, to stdout.
PROTOCOL_FD = os.environ.get("STATEVAL_PROTOCOL_FD")
PROTOCOL = os.fdopen(int(PROTOCOL_FD), "w") if PROTOCOL_FD else sys.stdout


MODEL = "gpt-4o-mini"
MODE = os.environ.get("MISBEHAVE", "")


def log(*parts):
    print(f"[misbehaving-agent:{MODE or 'none'}]", *parts, file=sys.stderr, flush=True)


def send(message):
    PROTOCOL.write(json.dumps(message) + "\n")
    PROTOCOL.flush()


def chat(client, messages):
    completion = client.chat.completions.create(model=MODEL, messages=messages)
    return completion.choices[0].message.content or ""


def answer(client, messages, user_text):
    messages.append({"role": "user", "content": user_text})
    if MODE == "unserved":
        try:
            client.embeddings.create(model="text-embedding-3-small", input=user_text)
            log("embeddings unexpectedly answered")
        except openai.APIError as exc:
            log("embeddings refused, as it should be:", exc)
    text = chat(client, messages)
    messages.append({"role": "assistant", "content": text})
    if MODE == "past_recording":
        # stateval fails the case at the miss and stops the agent soon after; the
        # error is logged first, so the run's .stderr file usually shows it
        try:
            chat(client, messages + [{"role": "user", "content": "Anything else?"}])
            return text + " [the extra model call was answered]"
        except openai.APIStatusError as exc:
            log("extra model call failed:", exc.status_code, exc.body)
            return f"{text} [extra model call failed: HTTP {exc.status_code}: {exc.message}]"
        except openai.APIError as exc:
            log("extra model call failed:", exc)
            return f"{text} [extra model call failed: {exc}]"
    return text


def main():
    client = OpenAI(max_retries=0)
    messages = [{"role": "system", "content": "You are a friendly assistant."}]
    for line in iter(sys.stdin.readline, ""):
        if not line.strip():
            continue
        message = json.loads(line)
        if message["type"] == "end":
            return 0
        if message["type"] != "turn":
            continue
        turn = message["turn"]
        if MODE == "exit_early":
            log("leaving before turn", turn)
            return 0
        if MODE == "hang":
            log("hanging in turn", turn)
            while True:
                time.sleep(3600)
        if MODE == "garbage":
            print("Some library's banner: stdout is not the protocol channel", flush=True)
            PROTOCOL.write("this line is not JSON\n")
            PROTOCOL.flush()
        send({"type": "turn_result", "turn": turn, "output": answer(client, messages, message["input"])})
        if MODE == "exit_nonzero":
            log("exiting with status 3 after turn", turn)
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
