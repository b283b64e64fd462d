#!/usr/bin/env python3
"""Run every shipped pipeline with two stateval binaries and compare what each wrote.

    tools/same-output/compare.py BIN_BEFORE BIN_AFTER [--only NAME ...] [--keep]
    tools/same-output/compare.py --self-test BIN

stateval promises byte-identical event logs, goldens and reports for the same inputs. A
change that is meant to alter no output (a refactor, a new internal representation) is
proved here: each pipeline in pipeline/*.toml runs with each binary in its own fresh
export of the repository (`git archive`, so neither run sees the other's store), with
`--jobs 1` and the same environment, and then every file the runs wrote and every
command's stdout, stderr and exit code are compared byte for byte. See README.md beside
this file for what is run, what is compared and the one thing that is masked.

Python 3.11+ standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# ---- masks --------------------------------------------------------------------------
#
# Only what differs between two runs of the *same* binary on the same inputs is masked,
# each with its reason. Found by running one binary against itself (`--self-test` does it
# again): the logs, run files, store, reports, goldens and every command's stdout were
# byte-identical; only the progress lines on stderr differ.
#
# (file name glob, regex, replacement, reason)
MASKS = [
    (
        "*.stderr",
        re.compile(rb"\[ *\d+\.\d{3}s\]"),
        b"[WALL s]",
        # `stateval run` off a terminal prints one line per case and a closing Summary
        # line on stderr, each with the wall-clock seconds it took (`PASS [   0.214s]`).
        # Wall time is the one thing that is not reproducible; the virtual time beside
        # it, and everything on stdout and in files, is left as it is.
        "wall-clock seconds in the progress lines of `stateval run` on stderr",
    ),
    (
        "*.stderr",
        re.compile(rb"/[^\s:'\"]*/(?:before|after)/[^/\s]+/tree/"),
        b"<TREE>/",
        # An agent program's own stderr, kept beside its log, may name the file it runs
        # from by its absolute path (a Python warning or traceback does: LangGraph's
        # deprecation warnings in pipeline/frameworks.toml), and each side runs in a tree
        # of its own. That path, and nothing else of the line, is masked.
        "the side's own tree path in an agent program's stderr",
    ),
]


def mask(name: str, data: bytes) -> tuple[bytes, int]:
    """The bytes of file `name` with every mask that applies to it; how many spans were masked."""
    hits = 0
    for pattern, regex, replacement, _ in MASKS:
        if Path(name).match(pattern):
            data, n = regex.subn(replacement, data)
            hits += n
    return data, hits


# ---- what is run --------------------------------------------------------------------

# The artefact classes, in the order they are printed.
CLASSES = [
    "run output",  # stdout, stderr, exit code of each `stateval run`
    "event logs",  # <store>/runs/<run>/<case>/<k>.jsonl
    "run files",  # <store>/runs/<run>/{run,suite,manifest}.json, cases/verdicts/units.jsonl
    "store catalog",  # the rest of the store (<store>/catalog)
    "reports",  # every file under reports/ (JSON, JUnit, TAP, Markdown, HTML)
    "verify",  # `stateval verify` of each run directory and of goldens
    "report re-render",  # `stateval report --FORMAT OUT RUN_DIR`, every format
    "show",  # `stateval show LOG`, `--at-turn LAST`, `--html OUT` of every log
    "goldens",  # every file under goldens/ after the scenario
    "golden diff",  # `stateval diff GOLDEN LOG` (text and JSON)
    "golden accept",  # `stateval golden accept --cause …`
    "rest of tree",  # every other file of the tree: nothing else may be written
]

# The golden-churn scenario's edits (as tests/cli_golden_churn.rs makes them): one tool
# description gains a space (a fixture cause), one recorded answer changes (behaviour).
CHURN_TOOLS = "fixtures/tools/treasury.json"
CHURN_RECORDING = ("fixtures/recordings/balance-check.jsonl", b"Your balance is $1,250.", b"Your balance is $1,250, as of today.")
CHURN_CASE_GOLDEN = "goldens/examples/treasury/balance-check.0.jsonl"

# `--tamper-fixture` (the self-test): one byte of one recording changed in the after tree.
TAMPER_FIXTURE = ("fixtures/recordings/balance-check.jsonl", b"$1,250.", b"$1,251.")


@dataclass
class Pipeline:
    name: str
    path: str  # relative to the tree
    store: str
    goldens: str | None  # the goldens directory, when the pipeline keeps goldens
    needs_sdk: bool  # an external agent run by python3: the SDK venv
    needs_frameworks: bool  # an agent on an agent framework: the frameworks venv, node_modules
    programs: list[str]  # other programs it spawns (graders, agents), first word


@dataclass
class Scenario:
    label: str  # printed: `ci`, `ci --bless`, `ci golden churn`
    pipeline: Pipeline
    kind: str  # run | bless | churn
    missing: str | None = None  # why it cannot run here
    filter: str | None = None  # `--quick`: a slice of the cases


# `--quick`: the slowest pipeline, 143 cases that each start a Python process with the
# openai SDK, cut to one user task, benign and under each of its 8 attacks (9 cases).
QUICK_SLICES = {"agentdojo-agent": "banking-user_task_1-*"}

# The example agents written on agent frameworks (pipeline/frameworks.toml): a pipeline
# that runs one needs the frameworks' Python (tests/frameworks/requirements.txt,
# --frameworks-python) first on PATH and examples/agents/node_modules (`npm ci` there),
# which the tree exported from git lacks: it is linked in from the repository.
FRAMEWORK_AGENTS = {"openai_agents_sdk_agent.py", "langgraph_agent.py", "pydantic_ai_agent.py", "openai_node_agent.mjs", "ai_sdk_agent.mjs"}


def read_pipelines(tree: Path) -> list[Pipeline]:
    out = []
    for path in sorted(tree.glob("pipeline/*.toml")):
        doc = tomllib.loads(path.read_text())
        section = doc.get("pipeline", {})
        goldens = section.get("goldens") or doc.get("goldens", {}).get("dir")
        needs_sdk, needs_frameworks, programs = False, False, []
        for agent in doc.get("agents", {}).values():
            if agent.get("kind") == "external":
                command = agent.get("command", [])
                needs_frameworks |= any(Path(str(a)).name in FRAMEWORK_AGENTS for a in command[1:2])
                if command[:1] == ["python3"]:
                    needs_sdk = True
                elif command:
                    programs.append(command[0])
        for pattern in section.get("datasets", []):
            for dataset in sorted(tree.glob(pattern)):
                for program in re.findall(r'"command"\s*:\s*\[\s*"([^"]+)"', dataset.read_text()):
                    programs.append(program)
        out.append(
            Pipeline(
                name=section.get("name", path.stem),
                path=str(path.relative_to(tree)),
                store=section.get("store", ".stateval"),
                goldens=goldens,
                needs_sdk=needs_sdk,
                needs_frameworks=needs_frameworks,
                programs=sorted(set(programs)),
            )
        )
    return out


def scenarios_of(pipelines: list[Pipeline], quick: bool) -> list[Scenario]:
    out = []
    for p in pipelines:
        if quick and p.name in QUICK_SLICES:
            out.append(Scenario(f"{p.name} --filter {QUICK_SLICES[p.name]}", p, "run", filter=QUICK_SLICES[p.name]))
            continue
        out.append(Scenario(p.name, p, "run"))
        if p.goldens:
            out.append(Scenario(f"{p.name} --bless", p, "bless"))
        if p.path == "pipeline/ci.toml":
            out.append(Scenario(f"{p.name} golden churn", p, "churn"))
    return out


# ---- one side: a binary running one scenario in its own tree --------------------------


@dataclass
class Side:
    name: str  # before | after
    binary: str
    root: Path  # <work>/<side>/<scenario>
    env: dict
    tamper_output: bool = False
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def tree(self) -> Path:
        return self.root / "tree"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def cmd(self, cls: str, name: str, args: list[str]) -> tuple[int, bytes]:
        """Run `BIN args` in the tree; keep its stdout, stderr and exit code under out/<cls>/."""
        proc = subprocess.run([self.binary, *args], cwd=self.tree, env=self.env, capture_output=True, stdin=subprocess.DEVNULL)
        d = self.out / cls
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.stdout").write_bytes(proc.stdout)
        (d / f"{name}.stderr").write_bytes(proc.stderr)
        (d / f"{name}.rc").write_text(f"{proc.returncode}\n")
        return proc.returncode, proc.stdout

    def outfile(self, cls: str, name: str) -> str:
        """A path for a file a command writes, relative to the tree (so the command line,
        and anything that echoes it, is the same on both sides), under out/<cls>/."""
        d = self.out / cls
        d.mkdir(parents=True, exist_ok=True)
        return os.path.relpath(d / name, self.tree)


def run_dirs(side: Side, p: Pipeline) -> list[Path]:
    return sorted(Path(d) for d in glob.glob(str(side.tree / p.store / "runs" / "*")) if Path(d).is_dir())


def logs_of(run_dir: Path) -> list[Path]:
    return sorted(f for f in run_dir.glob("*/*.jsonl"))


def last_turn(log: Path) -> int:
    turn = 0
    with open(log, "rb") as fh:
        for line in fh:
            try:
                t = json.loads(line).get("turn")
            except ValueError:
                continue
            if isinstance(t, int):
                turn = max(turn, t)
    return turn


def checked_run(side: Side, name: str, args: list[str]) -> int:
    rc, _ = side.cmd("run output", name, args)
    if rc not in (0, 1):
        # 0 and 1 are a run that finished (gates passed or not); anything else means the
        # pipeline did not run, and an identical error on both sides proves nothing.
        side.notes.append(f"`stateval {' '.join(args)}` exited {rc} (see {side.out / 'run output' / name}.stderr)")
    return rc


def readers(side: Side, p: Pipeline, show: bool) -> None:
    """verify, report and (optionally) show of every run directory the scenario left."""
    for run_dir in run_dirs(side, p):
        rel = str(run_dir.relative_to(side.tree))
        rid = run_dir.name
        side.cmd("verify", f"verify-{rid}", ["verify", rel])
        for fmt, ext in [("html", "html"), ("markdown", "md"), ("json", "json"), ("junit", "xml"), ("tap", "tap")]:
            side.cmd("report re-render", f"{rid}-{fmt}", ["report", f"--{fmt}", side.outfile("report re-render", f"{rid}.{ext}"), rel])
        if not show:
            continue
        for log in logs_of(run_dir):
            lrel = str(log.relative_to(side.tree))
            stem = f"{rid}-{log.parent.name}-{log.stem}"
            side.cmd("show", stem, ["show", lrel])
            side.cmd("show", f"{stem}-at-turn", ["show", "--at-turn", str(last_turn(log)), lrel])
            side.cmd("show", f"{stem}-html", ["show", "--html", side.outfile("show", f"{stem}.html"), lrel])


def snapshot(side: Side, p: Pipeline, step: str) -> None:
    """Keep what a run wrote before the next run of the same inputs replaces it: the run
    id is a digest of the inputs, so a second run of the pipeline rewrites the same run
    directory and the same reports. Copied to out/<class>/<step>/…, compared as that class."""
    for root in [*run_dirs(side, p), side.tree / "reports"]:
        for f in sorted(root.rglob("*")):
            if f.is_file():
                rel = str(f.relative_to(side.tree))
                dest = side.out / classify("tree/" + rel, p) / step / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dest)


def golden_files(side: Side, p: Pipeline) -> list[str]:
    return sorted(str(f.relative_to(side.tree)) for f in (side.tree / p.goldens).rglob("*.jsonl")) if p.goldens else []


def play(side: Side, sc: Scenario, export: Path, tamper_fixture: bool) -> None:
    """Run one scenario on one side from a fresh copy of the export."""
    started = time.monotonic()
    if side.root.exists():
        shutil.rmtree(side.root)
    side.out.mkdir(parents=True)
    shutil.copytree(export, side.tree, symlinks=True)
    if tamper_fixture:
        f = side.tree / TAMPER_FIXTURE[0]
        f.write_bytes(f.read_bytes().replace(TAMPER_FIXTURE[1], TAMPER_FIXTURE[2], 1))
    p = sc.pipeline
    jobs = ["--jobs", "1", *(["--filter", sc.filter] if sc.filter else [])]
    if sc.kind == "run":
        checked_run(side, "run", ["run", p.path, *jobs])
        readers(side, p, show=True)
    elif sc.kind == "bless":
        goldens = golden_files(side, p)
        if goldens:
            side.cmd("verify", "verify-committed-goldens", ["verify", *goldens])
        checked_run(side, "run-bless", ["run", p.path, *jobs, "--bless"])
        goldens = golden_files(side, p)
        if goldens:
            side.cmd("verify", "verify-blessed-goldens", ["verify", *goldens])
        readers(side, p, show=False)
    elif sc.kind == "churn":
        tools = side.tree / CHURN_TOOLS
        manifest = json.loads(tools.read_text())
        manifest["tools"][0]["description"] += " "
        tools.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        rec = side.tree / CHURN_RECORDING[0]
        rec.write_bytes(rec.read_bytes().replace(CHURN_RECORDING[1], CHURN_RECORDING[2]))
        checked_run(side, "1-run-churned", ["run", p.path, *jobs])
        snapshot(side, p, "1-run-churned")
        first = run_dirs(side, p)
        if first:
            log = first[0] / "balance-check" / "0.jsonl"
            lrel = str(log.relative_to(side.tree))
            side.cmd("golden diff", "diff-text", ["diff", CHURN_CASE_GOLDEN, lrel])
            side.cmd("golden diff", "diff-json", ["diff", "--format", "json", CHURN_CASE_GOLDEN, lrel])
        side.cmd("golden accept", "1-accept-tools", ["golden", "accept", p.path, "--cause", f"tools:{CHURN_TOOLS}"])
        checked_run(side, "2-run-after-tools", ["run", p.path, *jobs])
        snapshot(side, p, "2-run-after-tools")
        side.cmd("golden accept", "2-accept-behaviour", ["golden", "accept", p.path, "--cause", "behaviour"])
        checked_run(side, "3-run-after-behaviour", ["run", p.path, *jobs])
        readers(side, p, show=False)
    if side.tamper_output:
        # the self-test's planted difference: one byte of one report file
        reports = sorted(f for f in (side.tree / "reports").rglob("*") if f.is_file())
        if reports:
            data = bytearray(reports[0].read_bytes())
            data[len(data) // 2] ^= 0x01
            reports[0].write_bytes(bytes(data))
    side.seconds = time.monotonic() - started


# ---- comparing ----------------------------------------------------------------------


def classify(rel: str, p: Pipeline) -> str:
    parts = Path(rel).parts
    if parts[0] == "out":
        return parts[1]
    tree_rel = Path(*parts[1:])
    store = Path(p.store)
    if tree_rel.is_relative_to(store / "runs"):
        inner = tree_rel.relative_to(store / "runs").parts
        return "event logs" if len(inner) >= 3 else "run files"
    if tree_rel.is_relative_to(store):
        return "store catalog"
    if tree_rel.is_relative_to("reports"):
        return "reports"
    if p.goldens and tree_rel.is_relative_to(p.goldens):
        return "goldens"
    return "rest of tree"


def contents(path: Path) -> bytes:
    """A file's bytes; a symbolic link's target (node_modules, linked into a tree)."""
    return os.readlink(path).encode() if path.is_symlink() else path.read_bytes()


def files_under(root: Path) -> set[str]:
    return {str(f.relative_to(root)) for f in root.rglob("*") if f.is_file() or f.is_symlink()}


def excerpt(name: str, a: bytes, b: bytes) -> list[str]:
    """Where two files first differ, as `cmp` would say it, and the differing lines."""
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    line = a[:n].count(b"\n") + 1
    out = [f"cmp: differ: byte {n + 1}, line {line} (sizes {len(a)} and {len(b)})"]
    try:
        ta, tb = a.decode(), b.decode()
    except UnicodeDecodeError:
        out.append(f"  before: {a[max(0, n - 16):n + 16]!r}")
        out.append(f"  after:  {b[max(0, n - 16):n + 16]!r}")
        return out
    la, lb = ta.splitlines(), tb.splitlines()
    pairs = [i for i in range(max(len(la), len(lb))) if i >= len(la) or i >= len(lb) or la[i] != lb[i]]
    # the first three differing lines, side by side by line number (after an inserted line
    # the pairing drifts; the first pair is always exact), each cut at its first difference
    for i in pairs[:3]:
        x, y = (la[i] if i < len(la) else "<no line>"), (lb[i] if i < len(lb) else "<no line>")
        col = next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
        out.append(f"  line {i + 1}:")
        out.append(f"  - {clip(x, col)}")
        out.append(f"  + {clip(y, col)}")
    if len(pairs) > 3:
        out.append(f"  … {len(pairs) - 3} more line(s) differ by position")
    return out


def clip(line: str, col: int, width: int = 160) -> str:
    """A long line (an event log's) cut to a window around the first differing column."""
    if len(line) <= width:
        return line
    start = max(0, min(col, len(line)) - width // 2)
    return ("…" if start else "") + line[start : start + width] + ("…" if start + width < len(line) else "")


@dataclass
class Result:
    label: str
    cls: str
    status: str  # identical | DIFFERENT | NOT COMPARED
    detail: str = ""
    lines: list[str] = field(default_factory=list)


def run_ids(side: Side, p: Pipeline) -> list[str]:
    return [d.name for d in run_dirs(side, p)]


def compare(sc: Scenario, before: Side, after: Side) -> list[Result]:
    notes = [f"before: {n}" for n in before.notes] + [f"after: {n}" for n in after.notes]
    if notes:
        return [Result(sc.label, "*", "NOT COMPARED", "the pipeline did not run to its end", notes)]
    results = []
    # The run id is a digest of the run's inputs. When it differs, every path under the run
    # directory would be "only in" one side and hide what changed inside: say so once,
    # then pair the two run directories and compare their files.
    ids_b, ids_a = run_ids(before, sc.pipeline), run_ids(after, sc.pipeline)
    rename = {}
    if ids_b != ids_a and len(ids_b) == len(ids_a) == 1:
        rename = {ids_a[0]: ids_b[0]}
        results.append(Result(sc.label, "run id", "DIFFERENT", f"{ids_b[0]} before, {ids_a[0]} after; their files are compared as one run"))
    fb = {rel: rel for rel in files_under(before.root)}
    fa = {}
    for rel in files_under(after.root):
        key = rel
        for old, new in rename.items():
            key = key.replace(old, new)
        fa[key] = rel
    by_class: dict[str, set[str]] = {}
    for rel in fb.keys() | fa.keys():
        by_class.setdefault(classify(rel, sc.pipeline), set()).add(rel)
    for cls in CLASSES + sorted(set(by_class) - set(CLASSES)):
        rels = sorted(by_class.get(cls, ()))
        if not rels:
            continue
        differing, masked, first = [], 0, None
        for rel in rels:
            if rel not in fa or rel not in fb:
                differing.append(rel)
                first = first or [f"only in {'before' if rel in fb else 'after'}: {rel}"]
                continue
            a, hits_a = mask(rel, contents(before.root / fb[rel]))
            b, hits_b = mask(rel, contents(after.root / fa[rel]))
            masked += hits_a + hits_b
            if a != b:
                differing.append(rel)
                first = first or excerpt(rel, a, b)
        count = f"{len(rels)} file{'s' if len(rels) != 1 else ''}"
        runs = sum(1 for r in rels if r.endswith(".rc"))
        if runs:
            count += f" of {runs} command{'s' if runs != 1 else ''}"
        if differing:
            results.append(Result(sc.label, cls, "DIFFERENT", f"{len(differing)} of {count}; first: {differing[0]}", first))
        else:
            extra = f"; {masked} spans masked (wall-clock seconds, tree paths)" if masked else ""
            results.append(Result(sc.label, cls, "identical", f"({count}{extra})"))
    return results


# ---- the whole comparison -----------------------------------------------------------


def export_tree(rev: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def environment(sdk_python: str | None, home: Path) -> dict:
    """The one environment both binaries run in: nothing inherited but PATH, so no
    STATEVAL_*, CI or locale setting of the caller's shell can reach one side only."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if sdk_python:
        path = f"{Path(sdk_python).parent}:{path}"
    return {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        # the example agents are Python: no __pycache__ written into the tree
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def sdk_problem(sdk_python: str | None) -> str | None:
    if not sdk_python:
        return "needs the SDK Python (openai, anthropic, mcp): set STATEVAL_SDK_PYTHON or pass --sdk-python (tests/python/README.md)"
    try:
        subprocess.run([sdk_python, "-c", "import openai, anthropic, mcp"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        return f"the SDK Python {sdk_python} cannot import openai, anthropic, mcp ({e})"
    return None


def frameworks_problem(python: str | None) -> str | None:
    if not python:
        return "needs the agent frameworks' Python: set STATEVAL_FRAMEWORKS_PYTHON or pass --frameworks-python (tests/frameworks/requirements.txt)"
    try:
        subprocess.run([python, "-c", "import agents, langgraph, pydantic_ai"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        return f"the frameworks' Python {python} cannot import agents, langgraph, pydantic_ai ({e})"
    if not (REPO / "examples/agents/node_modules").is_dir():
        return "needs examples/agents/node_modules (`npm ci` in examples/agents)"
    return None


def run_comparison(args) -> tuple[list[Result], float, Path | None]:
    started = time.monotonic()
    for b in (args.before, args.after):
        if not os.access(b, os.X_OK):
            sys.exit(f"error: {b}: not an executable stateval binary")
    work = Path(tempfile.mkdtemp(prefix="same-output-", dir=args.work))
    export = work / "export"
    export_tree(args.rev, export)
    sdk = args.sdk_python
    env = environment(sdk, work / "home")
    (work / "home").mkdir()
    scenarios = scenarios_of(read_pipelines(export), args.quick)
    problem = sdk_problem(sdk)
    fw_python = getattr(args, "frameworks_python", None)
    fw_problem = frameworks_problem(fw_python)
    fw_env = dict(env, PATH=f"{Path(fw_python).parent}:{env['PATH']}") if fw_python else env
    for sc in scenarios:
        if args.only and sc.pipeline.name not in args.only:
            sc.missing = f"left out by --only {' '.join(args.only)}"
        elif sc.pipeline.needs_frameworks and fw_problem:
            sc.missing = fw_problem
        elif sc.pipeline.needs_sdk and problem:
            sc.missing = problem
        else:
            lost = [prog for prog in sc.pipeline.programs if not shutil.which(prog, path=env["PATH"])]
            if lost:
                sc.missing = f"needs {', '.join(lost)} on PATH"
    todo = [sc for sc in scenarios if not sc.missing]
    if any(sc.pipeline.needs_frameworks for sc in todo):
        # each side's copy keeps the link (copytree with symlinks)
        (export / "examples/agents/node_modules").symlink_to(REPO / "examples/agents/node_modules")
    sides = {
        (sc.label, name): Side(name, binary, work / name / re.sub(r"[^A-Za-z0-9_.-]+", "_", sc.label), fw_env if sc.pipeline.needs_frameworks else env, tamper_output=(name == "after" and args.tamper_output))
        for sc in todo
        for name, binary in (("before", args.before), ("after", args.after))
    }
    # the slowest pipelines first, so the two workers finish together
    order = sorted(todo, key=lambda sc: (not sc.pipeline.needs_sdk, sc.label))
    jobs = [(sc, sides[(sc.label, name)], name == "after" and args.tamper_fixture) for sc in order for name in ("before", "after")]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.workers) as pool:
        futures = {pool.submit(play, side, sc, export, tamper): (sc, side) for sc, side, tamper in jobs}
        for f in concurrent.futures.as_completed(futures):
            sc, side = futures[f]
            f.result()
            if args.verbose:
                print(f"  ran {sc.label} with {side.name} in {side.seconds:.1f} s", file=sys.stderr)
    results = []
    for sc in scenarios:
        if sc.missing:
            results.append(Result(sc.label, "*", "NOT COMPARED", sc.missing))
        else:
            results.extend(compare(sc, sides[(sc.label, "before")], sides[(sc.label, "after")]))
    elapsed = time.monotonic() - started
    bad = any(r.status == "DIFFERENT" for r in results)
    if args.keep or (bad and not getattr(args, "discard", False)):
        return results, elapsed, work
    shutil.rmtree(work)
    return results, elapsed, None


def print_results(results: list[Result]) -> None:
    width = max(len(r.label) for r in results)
    for r in results:
        print(f"{r.label:<{width}}  {r.cls:<16}  {r.status} {r.detail}".rstrip())
        for line in r.lines:
            print(f"{'':<{width}}    {line}")


def verdict(results: list[Result], elapsed: float) -> int:
    different = sum(r.status == "DIFFERENT" for r in results)
    missing = sum(r.status == "NOT COMPARED" for r in results)
    same = sum(r.status == "identical" for r in results)
    if different or missing:
        print(f"NOT SHOWN THE SAME: {different} DIFFERENT, {missing} NOT COMPARED, {same} identical ({elapsed:.0f} s)")
        return 1
    print(f"SAME OUTPUT: all {same} comparisons identical ({elapsed:.0f} s)")
    return 0


# ---- the self-test ------------------------------------------------------------------


def self_test(args) -> int:
    """The comparison must say identical for one binary against itself, and must catch a
    planted difference of each kind: a changed input byte, a changed output byte, a
    pipeline that cannot run. Uses the quick pipelines (ci, failing, graders)."""
    quick = ["ci", "failing", "graders"]
    checks = []

    def attempt(name, **over):
        ns = argparse.Namespace(**{**vars(args), "after": args.before, "only": quick, "keep": False, "tamper_output": False, "tamper_fixture": False, "discard": True, "quick": True, **over})
        print(f"--- {name}")
        results, elapsed, _ = run_comparison(ns)
        print_results(results)
        print(f"({elapsed:.0f} s)")
        return {(r.label, r.cls): r.status for r in results}

    got = attempt("one binary against itself")
    ran = {k: v for k, v in got.items() if k[1] != "*"}
    checks.append(("every quick pipeline ran and every class of it is identical", ran and all(v == "identical" for v in ran.values()) and {k[0] for k in ran} >= {"ci", "ci --bless", "ci golden churn", "failing", "graders", "graders --bless"}))
    checks.append(("the pipelines left out are NOT COMPARED, not passed", got.get(("agents", "*")) == "NOT COMPARED" and got.get(("agentdojo", "*")) == "NOT COMPARED"))
    for cls in ("run output", "event logs", "run files", "reports", "verify", "report re-render", "show", "goldens", "golden diff", "golden accept"):
        checks.append((f"the class '{cls}' was compared", any(k[1] == cls for k in ran)))

    got = attempt("one output byte changed (--tamper-output)", tamper_output=True)
    checks.append(("a report byte flipped after the run is DIFFERENT in reports", got.get(("ci", "reports")) == "DIFFERENT"))
    checks.append(("...and nothing else of that run differs", got.get(("ci", "event logs")) == "identical" and got.get(("ci", "run output")) == "identical"))

    got = attempt("one input byte changed (--tamper-fixture)", tamper_fixture=True)
    checks.append(("a recording byte changed shows in the event logs", got.get(("ci", "event logs")) == "DIFFERENT"))
    checks.append(("...in the reports and the run output", got.get(("ci", "reports")) == "DIFFERENT" and got.get(("ci", "run output")) == "DIFFERENT"))
    checks.append(("...and in the goldens it blesses", got.get(("ci --bless", "goldens")) == "DIFFERENT"))

    got = attempt("no SDK Python", only=quick + ["agents"], sdk_python=None)
    checks.append(("a pipeline whose agent program is missing is NOT COMPARED", got.get(("agents", "*")) == "NOT COMPARED"))

    sample = b"        PASS [   0.214s] examples/treasury::pay (1 run, 1.900s virtual)\n     Summary [  12.001s] 1/1\n"
    masked, hits = mask("run output/run.stderr", sample)
    checks.append(("the mask hides the wall-clock seconds and nothing else", hits == 2 and b"1.900s virtual" in masked and b"0.214" not in masked))
    checks.append(("...and touches no stdout, log or report", mask("run output/run.stdout", sample)[1] == 0 and mask("x/0.jsonl", sample)[1] == 0))
    agent = b"/tmp/same-output-x/before/frameworks/tree/examples/agents/a.py:61: Warning at /etc/passwd/tree/x\n"
    masked, hits = mask("x/0.stderr", agent)
    checks.append(("the tree-path mask hides the side's tree and nothing else", hits == 1 and masked == b"<TREE>/examples/agents/a.py:61: Warning at /etc/passwd/tree/x\n"))

    print("--- self-test")
    for name, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    failed = sum(not ok for _, ok in checks)
    print(f"self-test: {len(checks) - failed}/{len(checks)} checks hold")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", help="the stateval binary before the change")
    ap.add_argument("after", nargs="?", help="the stateval binary after the change")
    ap.add_argument("--self-test", action="store_true", help="check the comparison itself with one binary (BEFORE): identical against itself, planted differences caught")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="compare only these pipelines (by [pipeline] name); the rest are NOT COMPARED")
    ap.add_argument("--quick", action="store_true", help=f"run the slowest pipelines on a slice of their cases ({', '.join(f'{k}: {v}' for k, v in QUICK_SLICES.items())}); the line says so")
    ap.add_argument("--rev", default="HEAD", help="the commit whose tree both binaries run on (default: HEAD)")
    ap.add_argument("--sdk-python", default=os.environ.get("STATEVAL_SDK_PYTHON"), help="the Python with the SDKs for the external-agent pipelines (default: $STATEVAL_SDK_PYTHON)")
    ap.add_argument("--frameworks-python", default=os.environ.get("STATEVAL_FRAMEWORKS_PYTHON"), help="the Python with the agent frameworks for pipeline/frameworks.toml (default: $STATEVAL_FRAMEWORKS_PYTHON); it also needs examples/agents/node_modules")
    ap.add_argument("--workers", type=int, default=2, help="scenario runs at once, each with --jobs 1 (default: 2, one per binary)")
    ap.add_argument("--work", default=None, help="where the scratch trees go (default: the system temp directory)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch trees (they are kept anyway when something differs)")
    ap.add_argument("--tamper-output", action="store_true", help="(self-test) flip one byte of the after side's first report file")
    ap.add_argument("--tamper-fixture", action="store_true", help="(self-test) change one byte of a recording in the after side's tree")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each scenario run's time on stderr")
    args = ap.parse_args()
    # each side runs in a tree of its own: a binary named relative to here is found there
    # only by its absolute path
    args.before = os.path.abspath(args.before)
    if args.after:
        args.after = os.path.abspath(args.after)
    if args.self_test:
        return self_test(args)
    if not args.after:
        ap.error("BIN_AFTER is required (or --self-test)")
    results, elapsed, kept = run_comparison(args)
    print_results(results)
    if kept:
        print(f"(both sides' trees and command output are kept in {kept}: before/ and after/, one directory per scenario)")
    return verdict(results, elapsed)


if __name__ == "__main__":
    sys.exit(main())
