"""A test agent that tries another case run's endpoints (Python standard library only).

Run two case runs of it at once. Each writes its own base URL into PEER_DIR, waits for
the other's, asks the other's chat completions for a response with its own API key (as
every vendor SDK sends it), and records what it got. Once both have tried, each asks
its own endpoint and answers the turn with {"tried": STATUS, "own": CONTENT,
"base": ITS OWN BASE URL}. Every wait is bounded.

CROSS_SDK=openai or CROSS_SDK=anthropic makes the attempt through that vendor's SDK,
with the client built as an agent would build it (the key from the environment), so
the test shows what the SDK sends on its own.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

BASE = os.environ["OPENAI_BASE_URL"]
KEY = os.environ["OPENAI_API_KEY"]
CASE = os.environ["STATEVAL_CASE"]
DIR = os.environ.get("PEER_DIR", "peers")
WAIT_S = 15


def chat(base):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "go"}]}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    req = urllib.request.Request(f"{base}/chat/completions", data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=WAIT_S) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def chat_through_sdk(sdk, base):
    """The status of one model call to `base` through the vendor's SDK."""
    try:
        if sdk == "openai":
            import openai

            openai.OpenAI(base_url=base, max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "go"}])
        else:
            import anthropic

            anthropic.Anthropic(base_url=base.removesuffix("/v1"), max_retries=0).messages.create(
                model="m", max_tokens=16, messages=[{"role": "user", "content": "go"}])
        return 200
    except Exception as e:  # the SDK's APIStatusError carries the HTTP status
        return getattr(e, "status_code", repr(e))


def publish(name, text):
    tmp = os.path.join(DIR, f".{name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(DIR, name))


def others(suffix):
    """The other case runs' files ending in `suffix`, once there is at least one."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = [n for n in os.listdir(DIR) if n.endswith(suffix) and n != CASE + suffix]
        if found:
            return [open(os.path.join(DIR, n)).read() for n in found]
        time.sleep(0.05)
    return []


def main():
    os.makedirs(DIR, exist_ok=True)
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "end":
            return 0
        if msg["type"] != "turn":
            continue
        publish(CASE + ".url", BASE)
        peers = others(".url")
        sdk = os.environ.get("CROSS_SDK")
        if not peers:
            tried = None
        elif sdk:
            tried = chat_through_sdk(sdk, peers[0])
        else:
            tried = chat(peers[0])[0]
        publish(CASE + ".tried", str(tried))
        others(".tried")
        status, reply = chat(BASE)
        own = reply["choices"][0]["message"]["content"] if status == 200 else f"error {status}"
        output = json.dumps({"tried": tried, "own": own, "base": BASE})
        print(json.dumps({"type": "turn_result", "turn": msg["turn"], "output": output}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
