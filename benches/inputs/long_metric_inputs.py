#!/usr/bin/env python3
"""Hand-sized metric inputs a real user could send (issue #19, item 2), one JSON document each.

usage: long_metric_inputs.py OUTDIR [--scale N]
Writes trajectory-unordered.json / trajectory-superset.json (3,000 expected and 3,000 recorded
calls), golden-path.json (20,000 golden names, 20,000 calls), stability-across.json (500 runs of
500 calls), narrative.json (20,000 calls, about 500 KB of text). --scale multiplies every size
(use 2 to check that doubling the input roughly doubles the time). Deterministic.
"""
import json, os, random, sys

out = sys.argv[1]
scale = float(sys.argv[sys.argv.index("--scale") + 1]) if "--scale" in sys.argv else 1.0
os.makedirs(out, exist_ok=True)
rnd = random.Random(19)
TOOLS = ["search", "fetch_page", "read_file", "write_file", "get_weather", "lookup", "send_email", "create_issue"]


def n(x):
    return int(x * scale)


def call(i):
    t = TOOLS[rnd.randrange(len(TOOLS))]
    return {"name": f"srv__{t}", "server": "srv", "args": {"q": f"k{rnd.randrange(40)}", "limit": rnd.randrange(5)}}


def dump(name, doc):
    with open(os.path.join(out, name), "w") as f:
        json.dump(doc, f)


calls = [call(i) for i in range(n(3000))]
shuffled = calls[:]
rnd.shuffle(shuffled)
expected = []
for k, c in enumerate(shuffled):
    bare = c["name"].split("__", 1)[1]
    shape = ["any", {"subset": {"q": c["args"]["q"]}}, {"exact": c["args"]}][k % 3]
    expected.append({"name": bare, "args": shape})
for mode in ["unordered", "superset"]:
    dump(f"trajectory-{mode}.json", {"tool_calls": calls, "expected": {"mode": mode, "calls": expected}})

golden_calls = [call(i) for i in range(n(20000))]
golden = [TOOLS[rnd.randrange(len(TOOLS))] for _ in range(n(20000))]
dump("golden-path.json", {"tool_calls": golden_calls, "golden": {"calls": golden}})

runs = []
for r in range(n(500)):
    rc = [call(i) for i in range(n(500))]
    turns = [{"role": "assistant", "content": "done " * rnd.randrange(1, 40)} for _ in range(5)]
    runs.append({"tool_calls": rc, "conversation": {"tokens": {"total": 1000 * len(rc)}, "turns": turns}})
dump("stability-across.json", {"runs": runs})

words = ["I", "created", "the", "issue", "and", "sent", "an", "email", "with", "q", "k7", "limit", "3",
         "searched", "for", "weather", "in", "Paris", "then", "updated", "ticket", "wrote", "file", "report"]
text = []
size = 0
while size < n(500_000):
    w = words[rnd.randrange(len(words))]
    text.append(w)
    size += len(w) + 1
dump("narrative.json", {"tool_calls": [call(i) for i in range(n(20000))], "narrative": " ".join(text) + "."})
print("wrote", out)
