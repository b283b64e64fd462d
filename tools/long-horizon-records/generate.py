#!/usr/bin/env python3
"""Write the long-horizon records case: 64 user turns in which the agent keeps its
own records (tasks, notes, contacts) in its tools, then creates, edits, reads back,
lists and deletes them. Every read answers from the fixture state
(fixtures/tools/records.json), so a read that sees a stale state fails the case's
checks and differs from its golden.

    python3 tools/long-horizon-records/generate.py   # rewrites the two files below
    python3 tools/long-horizon-records/generate.py --out DIR   # writes them under DIR

(tests/cli_stateful.rs writes them under a temporary directory and compares them with
the committed files, so a hand edit of either fails the test.)

The script mirrors the manifest's semantics to know what each read must answer; the
case's checks are those answers. Deterministic: the same script writes the same bytes.
"""

import argparse
import copy
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets/long_horizon/records.jsonl"
RECORDING = "fixtures/recordings/long-horizon-records.jsonl"
MANIFEST = ROOT / "fixtures/tools/records.json"

state = copy.deepcopy(json.loads(MANIFEST.read_text())["state"])
calls = []  # (turn, name, args, result, is_error)


def call(turn, name, args):
    """Answer a call as the manifest does, and keep it."""
    recs = state["records"]
    err = {"error": "no such record", "id": args.get("id")}
    if name == "create_record":
        recs[args["id"]] = dict(args, status="open")
        result, is_error = {"created": recs[args["id"]]}, False
    elif name == "update_record":
        if args["id"] in recs:
            recs[args["id"]][args["field"]] = args["value"]
            result, is_error = {"updated": recs[args["id"]]}, False
        else:
            result, is_error = err, True
    elif name == "get_record":
        result, is_error = (recs[args["id"]], False) if args["id"] in recs else (err, True)
    elif name == "list_records":
        kept = [r for _, r in sorted(recs.items()) if r["kind"] == args["kind"] and r["status"] == args["status"]]
        result, is_error = {"records": kept}, False
    elif name == "list_all_records":
        result, is_error = {"records": [r for _, r in sorted(recs.items())]}, False
    elif name == "delete_record":
        if args["id"] in recs:
            del recs[args["id"]]
            result, is_error = {"deleted": args["id"]}, False
        else:
            result, is_error = err, True
    else:
        raise SystemExit(f"unknown tool {name}")
    calls.append((turn, name, args, copy.deepcopy(result), is_error))
    return len(calls) - 1, calls[-1][3], is_error


turns = []  # (user text, [(name, args)], answer function of the results)
checks = []  # (call index, result, is_error, why)

TASKS = [
    ("T-01", "Renew the office lease", "Call the landlord before the 30th."),
    ("T-02", "Book flights to Lisbon", "Two seats, aisle, for the 12th."),
    ("T-03", "File the Q3 expense report", "Receipts are in the blue folder."),
    ("T-04", "Order a new laptop battery", "Model 45N1 for the ThinkPad."),
    ("T-05", "Plan Mia's birthday dinner", "Eight people, somewhere quiet."),
    ("T-06", "Renew passport", "Photos first, then the form."),
]
NOTES = [
    ("N-01", "Wi-Fi password at the cabin", "cedar-lake-42"),
    ("N-02", "Favourite ramen place", "Menya on 5th; order the shoyu."),
    ("N-03", "Gym locker", "Locker 118, code 7-2-9."),
]
CONTACTS = [
    ("C-01", "Dr. Okafor", "Dentist, 555-0142."),
    ("C-02", "Sam (plumber)", "555-0177, weekday mornings."),
    ("C-03", "Ines (landlord)", "ines@example.com"),
]


def plan():
    t = []
    for rid, title, body in TASKS:
        t.append((f"Add a task {rid}: {title}. {body}", [("create_record", {"id": rid, "kind": "task", "title": title, "body": body})]))
    for rid, title, body in NOTES:
        t.append((f"Keep a note {rid}: {title} is {body}", [("create_record", {"id": rid, "kind": "note", "title": title, "body": body})]))
    for rid, title, body in CONTACTS:
        t.append((f"Save a contact {rid}: {title}, {body}", [("create_record", {"id": rid, "kind": "contact", "title": title, "body": body})]))
    t.append(("Which tasks are open?", [("list_records", {"kind": "task", "status": "open"})]))  # 15
    t.append(("I've started on the lease: mark T-01 as doing.", [("update_record", {"id": "T-01", "field": "status", "value": "doing"})]))
    t.append(("What is the status of T-01 now?", [("get_record", {"id": "T-01"})]))
    t.append(("And which tasks are still open?", [("list_records", {"kind": "task", "status": "open"})]))
    t.append(("The flights are booked. Mark T-02 done.", [("update_record", {"id": "T-02", "field": "status", "value": "done"})]))
    t.append(("What have I finished so far?", [("list_records", {"kind": "task", "status": "done"})]))
    t.append(("The cabin changed its Wi-Fi password to birch-pond-17; update N-01.", [("update_record", {"id": "N-01", "field": "body", "value": "birch-pond-17"})]))
    for i in range(6):
        topics = ["the weather in Lisbon", "a good book for the flight", "how to pack light", "a birthday gift idea", "a quick dinner recipe", "stretching after the gym"]
        t.append((f"Unrelated: tell me about {topics[i]}.", []))
    t.append(("What's the Wi-Fi password at the cabin?", [("get_record", {"id": "N-01"})]))
    t.append(("Mia wants ramen instead: T-05 body should say 'Menya on 5th, table for eight at 7pm'.", [("update_record", {"id": "T-05", "field": "body", "value": "Menya on 5th, table for eight at 7pm"})]))
    t.append(("Read T-05 back to me.", [("get_record", {"id": "T-05"})]))
    t.append(("I no longer need the laptop battery; delete T-04.", [("delete_record", {"id": "T-04"})]))
    t.append(("List my open tasks again.", [("list_records", {"kind": "task", "status": "open"})]))
    t.append(("What did T-04 say?", [("get_record", {"id": "T-04"})]))
    t.append(("Sam moved away; delete contact C-02.", [("delete_record", {"id": "C-02"})]))
    t.append(("Add a contact C-04: Rosa (plumber), 555-0190, any day.", [("create_record", {"id": "C-04", "kind": "contact", "title": "Rosa (plumber)", "body": "555-0190, any day."})]))
    t.append(("Who are my open contacts?", [("list_records", {"kind": "contact", "status": "open"})]))
    for i in range(8):
        topics = ["jet lag", "a museum in Lisbon", "a podcast", "tidying a desk", "saving on groceries", "a weekend hike", "learning Portuguese", "a houseplant"]
        t.append((f"Chat: any thoughts on {topics[i]}?", []))
    t.append(("Lease signed: mark T-01 done.", [("update_record", {"id": "T-01", "field": "status", "value": "done"})]))
    t.append(("Expense report filed too: mark T-03 done.", [("update_record", {"id": "T-03", "field": "status", "value": "done"})]))
    t.append(("What have I finished?", [("list_records", {"kind": "task", "status": "done"})]))
    t.append(("And what's still open?", [("list_records", {"kind": "task", "status": "open"})]))
    t.append(("Add a task T-07: Send the lease copy to Ines.", [("create_record", {"id": "T-07", "kind": "task", "title": "Send the lease copy to Ines", "body": "Scan and email it."})]))
    t.append(("Rename T-07 to 'Email the signed lease to Ines'.", [("update_record", {"id": "T-07", "field": "title", "value": "Email the signed lease to Ines"})]))
    t.append(("Read T-07.", [("get_record", {"id": "T-07"})]))
    t.append(("Delete the gym locker note, N-03.", [("delete_record", {"id": "N-03"})]))
    t.append(("Delete N-03 again, just to be sure.", [("delete_record", {"id": "N-03"})]))
    t.append(("Mark T-04 done.", [("update_record", {"id": "T-04", "field": "status", "value": "done"})]))
    for i in range(6):
        topics = ["a late-night snack", "a birthday toast", "a rainy-day plan", "a budgeting tip", "a short poem", "a morning routine"]
        t.append((f"Small talk: suggest {topics[i]}.", []))
    t.append(("Sent the lease to Ines: mark T-07 done and delete it.", [("update_record", {"id": "T-07", "field": "status", "value": "done"}), ("delete_record", {"id": "T-07"})]))
    t.append(("Which notes do I keep?", [("list_records", {"kind": "note", "status": "open"})]))
    t.append(("Read me everything I have, one last time.", [("list_all_records", {})]))
    return t


def answer(name, result, is_error):
    if is_error:
        return f"I couldn't: there is no record {result['id']}."
    if name == "create_record":
        return f"Saved {result['created']['id']}: {result['created']['title']}."
    if name == "update_record":
        r = result["updated"]
        return f"{r['id']} now reads: {r['title']} ({r['status']}): {r['body']}"
    if name == "get_record":
        return f"{result['id']}: {result['title']} ({result['status']}): {result['body']}"
    if name in ("list_records", "list_all_records"):
        items = result["records"]
        return "None." if not items else "; ".join(f"{r['id']} {r['title']} ({r['status']})" for r in items)
    if name == "delete_record":
        return f"Deleted {result['deleted']}."
    raise SystemExit(name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT, help="root to write into (default: the repository)")
    out = parser.parse_args().out
    lines = []
    users = []
    # which reads a stale state would get wrong: every read after the first write
    for turn, (text, planned) in enumerate(plan()):
        users.append(text)
        said = []
        if planned:
            lines.append({"latency_ms": 200, "response": {"content": "", "tool_calls": [{"args": a, "name": n} for n, a in planned]}, "step": 0, "turn": turn})
            for n, a in planned:
                i, result, is_error = call(turn, n, a)
                said.append(answer(n, result, is_error))
                if n in ("get_record", "list_records", "list_all_records") or is_error:
                    checks.append((i, result, is_error))
        content = " ".join(said) if said else "Happy to chat about that; nothing to record."
        lines.append({"latency_ms": 200, "response": {"content": content}, "step": 1 if planned else 0, "turn": turn})
    n_turns = len(users)
    expect = []
    for i, result, is_error in checks:
        expect.append({"target": f"tool_calls[{i}].result", "matcher": {"exact": result}})
        expect.append({"target": f"tool_calls[{i}].is_error", "matcher": {"exact": is_error}})
    for rid, rec in sorted(state["records"].items()):
        expect.append({"target": f"sandbox.records.{rid}", "matcher": {"exact": rec}})
    expect.append({"target": "sandbox.records", "matcher": {"schema": {"type": "object", "required": sorted(state["records"]), "maxProperties": len(state["records"])}}})
    expect.append({"target": "status", "matcher": {"exact": "completed"}})
    case = {
        "agent": "records",
        "description": f"{n_turns} user turns in which the agent keeps its own tasks, notes and contacts in its tools: it creates, edits, reads back, lists and deletes them, and every read must see the writes before it (a stale read fails a check and the golden).",
        "expect": expect,
        "id": f"long-horizon-records-{n_turns}",
        "recordings": [RECORDING],
        "tags": ["long-horizon", "stateful"],
        "turns": users,
    }
    assert n_turns >= 60, n_turns
    dataset, recording = out / DATASET.relative_to(ROOT), out / RECORDING
    for path in (dataset, recording):
        path.parent.mkdir(parents=True, exist_ok=True)
    dataset.write_text(json.dumps(case, sort_keys=True, ensure_ascii=False) + "\n")
    recording.write_text("".join(json.dumps(l, sort_keys=True, ensure_ascii=False) + "\n" for l in lines))
    print(f"{n_turns} turns, {len(calls)} calls, {len(expect)} checks")


if __name__ == "__main__":
    main()
