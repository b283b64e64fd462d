#!/usr/bin/env python3
"""A replay suite of N cases x T user turns, all of one shape (docs/speed.md, "The 50 x 50
replay suite"; the same work as a 50 x 50 Inspect AI suite, for side-by-side timing).

usage: gen_same_shape.py DIR N T [--fixture per-case|keyed-shared|default]

Turn t of case c: the recorded model calls lookup(key="c-t"), the fixture sandbox answers,
and the model replies "The value is value-c-t.". Each case is graded on its final answer
(it contains value-c-(T-1)) and on its tool sequence (lookup, T times).

--fixture says how the sandbox knows the answers:
  per-case      (what the speed figures use) an agent and a manifest per case, each holding
                that case's T keys
  keyed-shared  (the default) one agent whose one manifest holds all N x T keys
  default       one agent whose lookup answers one constant for every key: the final-answer
                check still passes (it reads the recorded reply), the sandbox does no lookup

Writes DIR/pipeline/same.toml (printed on stdout) and what it names, relative to DIR.
Deterministic: the same arguments write the same bytes.
"""
import json
import os
import sys

FIXTURES = ("per-case", "keyed-shared", "default")
USAGE = "usage: gen_same_shape.py DIR N T [--fixture " + "|".join(FIXTURES) + "]"


def parse(argv):
    args = list(argv)
    fixture = "keyed-shared"
    if "--fixture" in args:
        at = args.index("--fixture")
        if at + 1 >= len(args):
            sys.exit("--fixture needs a value\n" + USAGE)
        fixture = args[at + 1]
        del args[at:at + 2]
        if fixture not in FIXTURES:
            sys.exit(f"unknown --fixture {fixture!r}: expected one of {', '.join(FIXTURES)}")
    if len(args) != 3:
        sys.exit(USAGE)
    try:
        cases, turns = int(args[1]), int(args[2])
    except ValueError:
        sys.exit("N and T must be whole numbers\n" + USAGE)
    if cases < 1 or turns < 1:
        sys.exit("N and T must be at least 1")
    return args[0], cases, turns, fixture


def dump(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, sort_keys=True)
        f.write("\n")


def lookup_manifest(keys):
    """A fixture sandbox with one read-only tool, `lookup`; keys None means one answer for all."""
    tool = {
        "name": "lookup",
        "description": "Return the value stored under a key.",
        "safety_class": "read",
        "input_schema": {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
    }
    if keys is None:
        tool["default"] = {"result": "value-any"}
    else:
        tool["responses"] = [{"args": {"key": k}, "result": f"value-{k}"} for k in keys]
    return {"tools": [tool]}


def main():
    root, cases, turns, fixture = parse(sys.argv[1:])
    for sub in ("pipeline", "datasets/same", "fixtures/tools", "fixtures/recordings"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)

    # agent name per case, and the manifests the agents use
    if fixture == "per-case":
        agent_of = [f"case{c}" for c in range(cases)]
        manifests = {
            f"case{c}": (f"fixtures/tools/lookup-{c}.json", [f"{c}-{t}" for t in range(turns)])
            for c in range(cases)
        }
    else:
        agent_of = ["lookup"] * cases
        keys = None if fixture == "default" else [f"{c}-{t}" for c in range(cases) for t in range(turns)]
        manifests = {"lookup": ("fixtures/tools/lookup.json", keys)}
    for path, keys in manifests.values():
        dump(os.path.join(root, path), lookup_manifest(keys))

    lines = [
        "[pipeline]",
        'name = "same"',
        'datasets = ["datasets/same/*.jsonl"]',
        'store = ".stateval"',
        "",
    ]
    for name, (path, _) in manifests.items():
        lines += [f"[agents.{name}]", 'system = "You answer from the lookup tool."', f'tools = "{path}"', ""]
    lines += [
        "[gates]",
        "default = { min_pass_rate = 1.0 }",
        "",
        "[report]",
        'junit = "reports/junit.xml"',
        'json = "reports/report.json"',
        "",
    ]
    pipeline = os.path.join(root, "pipeline", "same.toml")
    with open(pipeline, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))

    usage = {"input_tokens": 40, "output_tokens": 10}
    with open(os.path.join(root, "datasets/same/suite.jsonl"), "w", encoding="utf-8") as dataset:
        for c in range(cases):
            recording = f"fixtures/recordings/case-{c}.jsonl"
            with open(os.path.join(root, recording), "w", encoding="utf-8") as rec:
                for t in range(turns):
                    key = f"{c}-{t}"
                    call = {"id": f"c{c}t{t}", "name": "lookup", "args": {"key": key}}
                    for step, response in enumerate(
                        [{"content": "", "tool_calls": [call]}, {"content": f"The value is value-{key}."}]
                    ):
                        row = {"turn": t, "step": step, "response": response, "usage": usage}
                        rec.write(json.dumps(row, sort_keys=True) + "\n")
            case = {
                "id": f"case-{c}",
                "agent": agent_of[c],
                "turns": [f"What is stored under key {c}-{t}?" for t in range(turns)],
                "recordings": [recording],
                "expect": [
                    {"target": "final_response", "matcher": {"contains": f"value-{c}-{turns - 1}"}},
                    {"target": "tool_sequence", "matcher": {"exact": ["lookup"] * turns}},
                ],
            }
            dataset.write(json.dumps(case, sort_keys=True) + "\n")
    print(pipeline)


if __name__ == "__main__":
    main()
