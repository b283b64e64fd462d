#!/usr/bin/env python3
"""Results and effects of every call in a team's AgentDojo runs, for `stateval import
--from agentdojo LOGDIR --cover FILE`.

The converted fixtures (convert.py) answer the calls of AgentDojo's ground truth. A real
model makes other calls too — a payment with its own wording of the subject, a read with
other arguments — which the fixtures cannot answer, so their replay would show an error
and no state change where the model's run had both. This script runs each run's calls,
in the run's order, through AgentDojo's own tool functions on the converted environment
(the one the fixtures hold: every injection vector with the converted attack text), and
writes each call's result and JSON-patch effect, as convert.py does for the ground truth:

    tools/agentdojo/.venv/bin/python tools/agentdojo/cover_runs.py LOGDIR --out cover.json

Output: {"agentdojo": VERSION, "benchmark": VERSION, "runs": {CASE_ID: {"file", "calls":
[{"tool", "args", "result", "is_error"?, "effect"?}] | "skipped": why}}}, keys sorted.
Needs `agentdojo==0.1.35` (tools/agentdojo/requirements.txt); reads convert.py's tables.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def assistant_calls(messages: list) -> list[tuple[str, dict]]:
    out = []
    for m in messages:
        if m.get("role") == "assistant":
            for c in m.get("tool_calls") or []:
                out.append((c["function"], c.get("args") or {}))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir", type=Path, help="AgentDojo's logdir (or one run file)")
    parser.add_argument("--out", type=Path, required=True, help="the cover file to write")
    args = parser.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    sys.path.insert(0, str(HERE))
    import convert  # the converter's tables, clock and call runner

    from importlib.metadata import version

    if version("agentdojo") != convert.SUPPORTED_VERSION:
        print(f"agentdojo {version('agentdojo')} installed; the converted suites are {convert.SUPPORTED_VERSION}",
              file=sys.stderr)
        return 2
    conv = convert.Converter(scorecard=True)  # freezes the clock as the converter did
    from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime

    files = [args.logdir] if args.logdir.is_file() else sorted(args.logdir.rglob("*.json"))
    runs: dict[str, dict] = {}
    envs: dict[tuple[str, str | None], object] = {}
    for f in files:
        try:
            run = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            print(f"{f}: skipped, not JSON: {e}", file=sys.stderr)
            continue
        if not isinstance(run, dict) or "suite_name" not in run or "messages" not in run:
            continue
        name, uid, iid = run["suite_name"], run["user_task_id"], run.get("injection_task_id")
        if name not in conv.suites or uid.startswith("injection_task_"):
            continue
        case = f"{name}-{uid}-{iid or 'benign'}"
        shown = str(f.relative_to(args.logdir)) if f != args.logdir else f.name
        suite = conv.suites[name]
        key = (name, iid)
        if key not in envs:
            if iid is None:
                envs[key] = suite.load_and_inject_default_environment({})
            else:
                itask = suite.get_injection_task_by_id(iid)
                text = conv.jailbreak.format(goal=itask.GOAL, user=convert.ATTACK_USER, model=conv.model_name, task="")
                defaults = suite.get_injection_vector_defaults()
                envs[key] = suite.load_and_inject_default_environment({v: text for v in defaults})
        # `initial`: the case's environment before any call, as convert.py hands it over
        initial = envs[key].model_copy(deep=True)
        env = initial.model_copy(deep=True)
        calls = [FunctionCall(function=fn, args=a) for fn, a in assistant_calls(run["messages"])]
        try:
            steps = conv.run_calls(name, env, calls, FunctionsRuntime(suite.tools), initial)
        except convert.Skip as e:
            runs[case] = {"file": shown, "skipped": str(e)}
            continue
        out = []
        for s in steps:
            entry = {"tool": s["tool"], "args": s["args"], "result": s.get("form", s["result"])}
            if s.get("is_error"):
                entry["is_error"] = True
            if s.get("effect"):
                entry["effect"] = s["effect"]
            out.append(entry)
        runs[case] = {"file": shown, "calls": out}
    doc = {"agentdojo": convert.SUPPORTED_VERSION, "benchmark": convert.BENCHMARK_VERSION, "runs": runs}
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{len(runs)} runs covered → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
