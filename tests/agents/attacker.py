"""A test agent that attacks its own verdict, as the code under test would (Python
standard library only).

In stateval's threat model the agent under test is the attacker: it runs on the CI
machine with stateval's user id and would like its case, or its suite, to pass. This
agent tries what an outside tester tried, as the environment asks (ATTACKS, a
comma-separated list), and answers turn 0 with a JSON object saying what each attempt
got, so the test can check it was stopped:

- `key`: look for STATEVAL_SIGNING_KEY in the environment of every process /proc
  shows (its parent, stateval, first), and read KEY_GUESS, where a key file could be;
- `write`: append a line to each file of WRITE_PATHS (`:`-separated: its own log,
  `cases.jsonl`, a grader script, a golden, a file of the project);
- `store`: list STORE_GUESS, the store's directory;
- `read`: read each file of READ_PATHS (`:`-separated: the CI machine's credentials
  in the home directory);
- `daemon`: start `sleep MARKER` in a new session, detached, meant to outlive the case
  (as a process that edits files after the case would);
- `hold`: start `sleep MARKER` as a child and answer only after it ends (the test kills
  stateval meanwhile);
- `env`: name which variables of CREDENTIALS (`:`-separated) it was given.
"""

import json
import os
import subprocess
import sys


def key():
    found = []
    for pid in sorted(os.listdir("/proc"), key=lambda p: (not p.isdigit(), p)):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if b"STATEVAL_SIGNING_KEY=" in environ:
            found.append(int(pid))
    guess = os.environ.get("KEY_GUESS")
    read = None
    if guess:
        try:
            with open(guess) as f:
                read = f.read()
        except OSError as e:
            read = f"error: {e.strerror}"
    return {
        "environ_with_key": len(found),
        "key_file": "secret" if read and "stateval-ed25519-secret:" in read else read,
        "processes_seen": sum(1 for p in os.listdir("/proc") if p.isdigit()),
    }


def write():
    out = {}
    for path in filter(None, os.environ.get("WRITE_PATHS", "").split(":")):
        try:
            with open(path, "a") as f:
                f.write("\n# the agent was here\n")
            out[path] = "written"
        except OSError as e:
            out[path] = f"error: {e.strerror}"
    return out


def read():
    out = {}
    for path in filter(None, os.environ.get("READ_PATHS", "").split(":")):
        try:
            with open(path) as f:
                out[path] = f.read()
        except OSError as e:
            out[path] = f"error: {e.strerror}"
    return out


def store():
    try:
        return sorted(os.listdir(os.environ["STORE_GUESS"]))
    except OSError as e:
        return f"error: {e.strerror}"


def daemon():
    marker = os.environ["MARKER"]
    subprocess.Popen(
        ["sleep", marker],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
    )
    return "started"


def env():
    names = os.environ.get("CREDENTIALS", "").split(":")
    return sorted(n for n in names if n and n in os.environ)


def main():
    attacks = [a for a in os.environ.get("ATTACKS", "").split(",") if a]
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "turn":
            if "hold" in attacks:
                subprocess.run(["sleep", os.environ["MARKER"]])
            got = {}
            for attack in attacks:
                if attack != "hold":
                    got[attack] = globals()[attack]()
            print(json.dumps({"type": "turn_result", "turn": msg["turn"], "output": json.dumps(got)}), flush=True)
        elif msg["type"] == "end":
            break


if __name__ == "__main__":
    main()
