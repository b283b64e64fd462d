#!/usr/bin/env python3
"""Metric batches of a realistic size, for `stateval metric NAME --batch` and for a peer
given the same lines (docs/speed.md, "metric batches"; README's speed table).

usage: gen_perf_batches.py OUTDIR [--scale S]

Writes one JSONL file per metric family into OUTDIR, one input document per line:
  stability.jsonl         1,000 lines: a run of 200 tool calls and 50 exchanges
  stability-across.jsonl    100 lines: 5 such runs each
  trajectory.jsonl        1,000 lines: 200 calls against 40 expected (strict, subsequence or
                                       unordered; arguments any, subset or exact)
  golden-path.jsonl       2,000 lines: 200 calls against a golden path of 6 tool names
  reliability.jsonl      20,000 lines: 50 pass/fail outcomes each
--scale multiplies every line count (0.01 for a quick check; at least one line each).
Only shapes a peer harness also accepts are used. Deterministic: a fixed seed.
"""
import json
import os
import random
import sys

TOOL_NAMES = ["search", "fetch_page", "read_file", "write_file", "get_weather", "lookup", "send_email", "create_issue"]
USAGE = "usage: gen_perf_batches.py OUTDIR [--scale S]"


def parse(argv):
    args = list(argv)
    scale = 1.0
    if "--scale" in args:
        at = args.index("--scale")
        try:
            scale = float(args[at + 1])
        except (IndexError, ValueError):
            sys.exit("--scale needs a number\n" + USAGE)
        del args[at:at + 2]
        if scale <= 0:
            sys.exit("--scale must be above 0")
    if len(args) != 1:
        sys.exit(USAGE)
    return args[0], scale


class Gen:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def call(self):
        r = self.rng
        return {
            "name": r.choice(TOOL_NAMES),
            "server": "srv",
            "args": {"q": f"k{r.randrange(40)}", "limit": r.randrange(5), "opts": {"lang": "en"}},
        }

    def run(self, calls=200, exchanges=50):
        r = self.rng
        turns = []
        for i in range(exchanges):
            turns.append({"role": "user", "content": f"question {i}"})
            turns.append({"role": "assistant", "content": "y" * r.randrange(20, 400)})
        return {
            "tool_calls": [self.call() for _ in range(calls)],
            "conversation": {"tokens": {"total": r.randrange(1000, 400000)}, "turns": turns},
        }

    def trajectory(self):
        r = self.rng
        calls = [self.call() for _ in range(200)]
        expected = []
        for i in sorted(r.sample(range(len(calls)), 40)):
            c = calls[i]
            how = r.randrange(3)
            args = "any" if how == 0 else {"subset": {"q": c["args"]["q"]}} if how == 1 else {"exact": c["args"]}
            expected.append({"name": c["name"], "args": args})
        mode = r.choice(["strict", "subsequence", "unordered"])
        return {"tool_calls": calls, "expected": {"mode": mode, "calls": expected}}

    def golden_path(self):
        return {"tool_calls": [self.call() for _ in range(200)], "golden": {"calls": self.rng.sample(TOOL_NAMES, 6)}}

    def reliability(self):
        return {"outcomes": [self.rng.random() < 0.8 for _ in range(50)]}


def main():
    out, scale = parse(sys.argv[1:])
    os.makedirs(out, exist_ok=True)
    g = Gen(20261121)
    batches = [
        ("stability.jsonl", 1000, g.run),
        ("stability-across.jsonl", 100, lambda: {"runs": [g.run() for _ in range(5)]}),
        ("trajectory.jsonl", 1000, g.trajectory),
        ("golden-path.jsonl", 2000, g.golden_path),
        ("reliability.jsonl", 20000, g.reliability),
    ]
    for name, lines, make in batches:
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            for _ in range(max(1, round(lines * scale))):
                f.write(json.dumps(make(), sort_keys=True) + "\n")
    print(out)


if __name__ == "__main__":
    main()
