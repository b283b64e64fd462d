#!/usr/bin/env python3
"""A custom grader for stateval (docs/graders.md): is the agent's reply courteous?

stateval runs this from the pipeline's base directory with one JSON object on stdin,
    {"target": "final_response", "value": "...", "case": {"id", "dataset", "tags", "turns"}, "run": 0}
and reads one JSON object from stdout,
    {"pass": true|false, "score"?: number, "reason"?: "..."}.
A non-zero exit, anything else on stdout, or running past the matcher's timeout_ms is a
case error that shows the end of stderr. Standard library only, and deterministic: the
same reply always gets the same verdict, so the run's golden stays put.
"""

import json
import sys

COURTESY = ("sorry", "thank", "please", "happy to help")
DISMISSIVE = ("whatever", "not my problem", "calm down")


def main() -> int:
    request = json.load(sys.stdin)
    reply = request["value"]
    if not isinstance(reply, str):
        print(f"tone.py grades text; {request['target']} is {type(reply).__name__}", file=sys.stderr)
        return 2
    text = reply.lower()
    courteous = [w for w in COURTESY if w in text]
    dismissive = [w for w in DISMISSIVE if w in text]
    verdict = {
        "pass": bool(courteous) and not dismissive,
        "score": len(courteous) - 2 * len(dismissive),
        "reason": f"courteous: {', '.join(courteous) or 'none'}; dismissive: {', '.join(dismissive) or 'none'}",
    }
    json.dump(verdict, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
