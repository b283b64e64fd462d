"""A test agent that sends a model request's headers and then trickles its body, one
byte at a time, far slower than any real client (Python standard library only).

It never finishes the body: stateval should drop the connection and fail the case.
The loop is bounded, so the agent ends by itself if stateval does not stop it.
"""

import json
import os
import socket
import sys
import time
from urllib.parse import urlsplit

BASE = os.environ["OPENAI_BASE_URL"]
KEY = os.environ["OPENAI_API_KEY"]
MAX_BYTES = 150
EVERY_S = 0.2


def trickle():
    url = urlsplit(BASE)
    head = (
        f"POST {url.path}/chat/completions HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Content-Type: application/json\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Length: {MAX_BYTES + 1}\r\n\r\n"
    )
    with socket.create_connection((url.hostname, url.port)) as s:
        s.sendall(head.encode())
        for _ in range(MAX_BYTES):
            try:
                s.sendall(b" ")
            except OSError:
                return
            time.sleep(EVERY_S)


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "turn":
            trickle()
            print(json.dumps({"type": "turn_result", "turn": msg["turn"], "output": "sent"}), flush=True)
        elif msg["type"] == "end":
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
