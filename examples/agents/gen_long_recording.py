"""Generate the 50-turn memory case of datasets/agents/suite.jsonl and its recording.

Turn 0 plants a fact (an account number) that the agent also saves with the
`save_note` fixture tool, 48 turns of small talk follow, and turn 49 asks for the
fact back. Writes fixtures/recordings/agents/memory-50.jsonl and replaces the case's
line in datasets/agents/suite.jsonl (the other lines are kept). Deterministic: run it
again and nothing changes.

    python3 examples/agents/gen_long_recording.py
"""

import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDING = "fixtures/recordings/agents/memory-50.jsonl"
DATASET = ROOT / "datasets/agents/suite.jsonl"
CASE_ID = "chat-memory-50-turns"
FACT = "7741"
TURNS = 50

# (question, answer) pairs for the small talk between planting and recall
TOPICS = [
    ("a good book for a rainy afternoon", "Something unhurried, like a long mystery novel."),
    ("the best way to brew green tea", "Water at about 80 °C and no more than two minutes."),
    ("whether to learn the piano or the guitar", "The guitar travels better; the piano teaches theory."),
    ("a quick weekday dinner", "A vegetable stir-fry with rice takes twenty minutes."),
    ("how to keep houseplants alive", "Water less often than you think and give them light."),
    ("a nice day trip by train", "A coastal town an hour or two away is hard to beat."),
    ("how many hours of sleep I need", "Most adults do best with seven to nine hours."),
    ("a board game for four people", "A cooperative game keeps everyone at the table."),
    ("how to start running", "Alternate walking and jogging for the first few weeks."),
    ("a podcast for a long drive", "A serialized story makes the miles pass quickly."),
    ("whether cats or dogs are easier", "Cats, if you travel; dogs, if you want a walking partner."),
    ("a good habit to start this month", "Ten minutes of reading before bed is an easy one."),
    ("the best season to visit the mountains", "Early autumn: fewer crowds and clear air."),
    ("how to make coffee less bitter", "Use a coarser grind and slightly cooler water."),
    ("a hobby I can do at home", "Sketching needs only a pencil and a notebook."),
    ("how to remember names better", "Repeat the name once in conversation right away."),
]
PHRASINGS = [
    "Small talk, turn {n}: any thoughts on {topic}?",
    "Turn {n}. What would you suggest for {topic}?",
    "Another one (turn {n}): what about {topic}?",
]


def turns_and_recording():
    turns = [f"Hi! Please remember this for later: my account number is {FACT}."]
    lines = [
        {"turn": 0, "step": 0,
         "response": {"content": "", "tool_calls": [
             {"id": "n1", "name": "save_note", "args": {"text": f"Account number: {FACT}"}}]},
         "usage": {"input_tokens": 240, "output_tokens": 22}, "latency_ms": 400},
        {"turn": 0, "step": 1,
         "response": {"content": f"Got it: your account number is {FACT}. I saved a note."},
         "usage": {"input_tokens": 280, "output_tokens": 16}, "latency_ms": 300},
    ]
    for n in range(1, TURNS - 1):
        topic, reply = TOPICS[(n - 1) % len(TOPICS)]
        turns.append(PHRASINGS[(n - 1) // len(TOPICS)].format(n=n, topic=topic))
        lines.append({"turn": n, "step": 0, "response": {"content": reply},
                      "usage": {"input_tokens": 280 + 30 * n, "output_tokens": 14}, "latency_ms": 250 + (n * 37) % 200})
    turns.append("Quick question before I go: what was my account number again?")
    lines.append({"turn": TURNS - 1, "step": 0,
                  "response": {"content": f"Your account number is {FACT}."},
                  "usage": {"input_tokens": 280 + 30 * TURNS, "output_tokens": 9}, "latency_ms": 320})
    return turns, lines


def case_line(turns):
    expect = [
        {"target": "final_response", "matcher": {"contains": FACT}},
        {"target": "turns[0].response", "matcher": {"contains": FACT}},
        {"target": "turns[48].response", "matcher": {"not": {"contains": FACT}}},
        {"target": "tool_sequence", "matcher": {"exact": ["save_note"]}},
        {"target": "tool_calls[0].turn", "matcher": {"exact": 0}},
        {"target": "sandbox.notes", "matcher": {"exact": [{"text": f"Account number: {FACT}"}]}},
        {"target": "usage.model_calls", "matcher": {"exact": TURNS + 1}},
        {"target": "status", "matcher": {"exact": "completed"}},
    ]
    case = {
        "id": CASE_ID,
        "description": "50 user turns on one conversation: turn 0 plants an account number (and the agent "
                       "notes it), 48 turns of small talk follow, turn 49 asks for it back.",
        "tags": ["agents", "memory", "long-horizon"],
        "agent": "chat",
        "turns": turns,
        "recordings": [RECORDING],
        "expect": expect,
    }
    return json.dumps(case, ensure_ascii=False, separators=(",", ":"))


def main():
    turns, lines = turns_and_recording()
    (ROOT / RECORDING).parent.mkdir(parents=True, exist_ok=True)
    with open(ROOT / RECORDING, "w", encoding="utf-8", newline="\n") as out:
        for line in lines:
            out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    kept = []
    if DATASET.exists():
        kept = [l for l in DATASET.read_text(encoding="utf-8").splitlines()
                if l.strip() and json.loads(l).get("id") != CASE_ID]
    DATASET.parent.mkdir(parents=True, exist_ok=True)
    DATASET.write_text("\n".join([case_line(turns)] + kept) + "\n", encoding="utf-8")
    print(f"wrote {RECORDING} ({len(lines)} responses) and case {CASE_ID} in {DATASET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
