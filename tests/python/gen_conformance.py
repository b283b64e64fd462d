"""Generate the SDK conformance suite: datasets/conformance/suite.jsonl and one
recording per case under fixtures/recordings/conformance/.

Each case names client methods in its turns; the recording holds the model responses
those calls get; the expected answer of each turn is computed here from the recording
(and, for MCP calls, from fixtures/tools/conformance.json) in the shape
conformance_agent.py answers with. So a case passes exactly when what the SDK
assembled equals what was recorded. Deterministic: rerun it after editing CASES.

    python3 tests/python/gen_conformance.py
"""

import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "fixtures/tools/conformance.json"
DATASET = ROOT / "datasets/conformance/suite.jsonl"
RECORDINGS = "fixtures/recordings/conformance"
REPLAY_MODEL = "stateval-replay"  # the one model GET /v1/models lists

UNICODE = "naïve — ✓ 🙂"
MULTILINE = 'Line one says "hi".\nLine two: tabs\tand back\\slashes — ✓'
LONG = " ".join(f"{UNICODE} #{i}" for i in range(40))  # long enough to arrive in many chunks

TEXT = {"content": UNICODE}
TWO_CALLS = {"content": "", "tool_calls": [
    {"id": "call_w1", "name": "get_weather", "args": {"city": "Zürich"}},
    {"name": "get_motto", "args": {"lang": "fr"}},  # no id: the wire id is call-{turn}-{step}-{j}
]}
TEXT_AND_CALL = {"content": MULTILINE, "tool_calls": [
    {"name": "search", "args": {"query": "naïve café", "filters": {"tags": ["a", "ü"], "max": 3.5, "exact": False}}},
]}
LONG_TEXT = {"content": LONG}
NO_ARGS = {"content": "", "tool_calls": [{"id": "t-no-args", "name": "search", "args": {}}]}

# id -> (description, [(method, [responses of that turn's model calls])])
CASES = {
    "chat-create": ("Chat Completions, non-streaming.", [
        ("chat.create", [TEXT]), ("chat.create", [TWO_CALLS]), ("chat.create", [TEXT_AND_CALL])]),
    "chat-create-stream": ("Chat Completions with stream=True, deltas assembled by hand.", [
        ("chat.create_stream", [LONG_TEXT]), ("chat.create_stream", [TWO_CALLS]),
        ("chat.create_stream", [TEXT_AND_CALL]), ("chat.create_stream", [NO_ARGS])]),
    "chat-stream-helper": ("Chat Completions through the SDK's .stream() helper and get_final_completion().", [
        ("chat.stream_helper", [TEXT]), ("chat.stream_helper", [TWO_CALLS]), ("chat.stream_helper", [TEXT_AND_CALL]),
        ("chat.stream_helper", [NO_ARGS])]),
    "responses-create": ("Responses API, non-streaming.", [
        ("responses.create", [TEXT]), ("responses.create", [TWO_CALLS]), ("responses.create", [TEXT_AND_CALL])]),
    "responses-stream": ("Responses API through .stream() and get_final_response().", [
        ("responses.stream", [LONG_TEXT]), ("responses.stream", [TWO_CALLS]), ("responses.stream", [TEXT_AND_CALL]),
        ("responses.stream", [NO_ARGS])]),
    "responses-previous": ("Two Responses calls in one turn, the second chained with previous_response_id.", [
        ("responses.previous", [TEXT, TWO_CALLS]), ("responses.previous", [TEXT_AND_CALL, LONG_TEXT])]),
    "messages-create": ("Anthropic Messages, non-streaming.", [
        ("messages.create", [TEXT]), ("messages.create", [TWO_CALLS]), ("messages.create", [TEXT_AND_CALL]),
        ("messages.create", [NO_ARGS])]),
    "messages-stream": ("Anthropic Messages through .stream() and get_final_message().", [
        ("messages.stream", [LONG_TEXT]), ("messages.stream", [TWO_CALLS]), ("messages.stream", [TEXT_AND_CALL]),
        ("messages.stream", [NO_ARGS])]),
    "mcp-http": ("MCP over streamable HTTP: tools/list, then tools/call of the calls the model proposed "
                 "(an object result, a string result, then an error result).", [
        ("mcp.http.list_call", [TWO_CALLS]),
        ("mcp.http.list_call", [{"content": "", "tool_calls": [{"name": "get_weather", "args": {"city": "Atlantis"}}]}])]),
    "mcp-stdio": ("MCP over stdio (`stateval mcp-stdio` spawned by the client): the same calls as mcp-http.", [
        ("mcp.stdio.list_call", [TWO_CALLS]),
        ("mcp.stdio.list_call", [{"content": "", "tool_calls": [{"name": "get_weather", "args": {"city": "Atlantis"}}]}])]),
    "models-list": ("GET /v1/models through the OpenAI and the Anthropic client, then a model call.", [
        ("models.list", []), ("chat.create", [TEXT])]),
}


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def assembled(response, turn, step):
    """What a client assembles from one recorded response (conformance_agent.assembled)."""
    return {"content": response.get("content", ""), "tool_calls": [
        {"id": call.get("id") or f"call-{turn}-{step}-{j}", "name": call["name"], "args": call.get("args", {})}
        for j, call in enumerate(response.get("tool_calls", []))]}


def fixture_result(tools, name, args):
    tool = tools[name]
    for keyed in tool.get("responses", []):
        if keyed["args"] == args:
            return keyed["result"], keyed.get("is_error", False)
    return tool["default"]["result"], tool["default"].get("is_error", False)


def expected(method, responses, turn, tools):
    models = [assembled(r, turn, step) for step, r in enumerate(responses)]
    if method == "responses.previous":
        return canonical({"first": models[0], "second": models[1]})
    if method.startswith("mcp."):
        calls = []
        for call in models[0]["tool_calls"]:
            result, is_error = fixture_result(tools, call["name"], call["args"])
            calls.append({"name": call["name"], "result": result, "is_error": is_error})
        return canonical({"tools": sorted(tools), "calls": calls})
    if method == "models.list":
        return canonical({"models": {"openai": [REPLAY_MODEL], "anthropic": [REPLAY_MODEL]}})
    return canonical(models[0])


def main():
    tools = {t["name"]: t for t in json.loads(MANIFEST.read_text(encoding="utf-8"))["tools"]}
    (ROOT / RECORDINGS).mkdir(parents=True, exist_ok=True)
    lines = []
    for case_id, (description, turns) in CASES.items():
        recording = f"{RECORDINGS}/{case_id}.jsonl"
        with open(ROOT / recording, "w", encoding="utf-8", newline="\n") as out:
            for turn, (_, responses) in enumerate(turns):
                for step, response in enumerate(responses):
                    line = {"turn": turn, "step": step, "response": response,
                            "usage": {"input_tokens": 100 + 10 * turn, "output_tokens": 20 + step}}
                    out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        expect = []
        for turn, (method, responses) in enumerate(turns):
            answer = expected(method, responses, turn, tools)
            expect.append({"target": f"turns[{turn}].response", "matcher": {"exact": answer}})
        if case_id.startswith("mcp-"):
            expect.append({"target": "tool_sequence", "matcher": {"exact": ["get_weather", "get_motto", "get_weather"]}})
            expect.append({"target": "tool_calls[2].is_error", "matcher": {"exact": True}})
        expect.append({"target": "status", "matcher": {"exact": "completed"}})
        lines.append({"id": case_id, "description": description, "tags": ["conformance"], "agent": "conformance",
                      "turns": [method for method, _ in turns], "recordings": [recording], "expect": expect})
    DATASET.parent.mkdir(parents=True, exist_ok=True)
    with open(DATASET, "w", encoding="utf-8", newline="\n") as out:
        for line in lines:
            out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"wrote {len(lines)} cases to {DATASET.relative_to(ROOT)} and their recordings under {RECORDINGS}/")


if __name__ == "__main__":
    main()
