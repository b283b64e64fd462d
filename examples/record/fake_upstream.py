"""A stand-in for the OpenAI API on 127.0.0.1, so the walk-through runs without a key
or a network: `python3 fake_upstream.py PORT` (0: any free port) prints its base URL,
then answers Chat Completions the way a model might for this one case — look the order
up, then reply — and answers judge requests (they ask for a JSON object) with a score.
Point `stateval record --upstream-url` at it; with a real key, leave it out.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

REPLY = ("I'm sorry order 1042 is late. It is delayed at the warehouse and ships tomorrow; "
         "I'll send you the tracking number as soon as it moves.")


def answer(body):
    if body.get("response_format", {}).get("type") == "json_object":
        return {"role": "assistant", "content": json.dumps({"score": 5, "reason": "Apologises and says what happens next."})}
    if body["messages"][-1]["role"] == "tool":
        return {"role": "assistant", "content": REPLY}
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": "{\"order\": \"1042\"}"}}]}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        out = json.dumps({"id": "chatcmpl-fake", "object": "chat.completion", "model": body["model"],
                          "choices": [{"index": 0, "message": answer(body), "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 120, "completion_tokens": 30}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = HTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Handler)
    print(f"http://127.0.0.1:{server.server_port}/v1", flush=True)
    server.serve_forever()
