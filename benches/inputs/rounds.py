#!/usr/bin/env python3
"""Run whole pipelines with builds taking turns, and the floors over the same logs.

usage: rounds.py ROUNDS SUITE PIPELINE [--jobs N] [--scratch DIR] [--floor FLOOR [--budget]] [--rerun] -- BUILD...

Each round runs `BUILD run PIPELINE [--jobs N]` once per build, each in a fresh copy of the
SUITE directory made under DIR (a new temporary directory by default; give one on tmpfs to
keep the disk out of the figures), the builds' order reversed every other round. With
--floor, each round then runs `FLOOR canon-hash LOG...` and `FLOOR hash-write LOG...` over
the case logs the first build wrote in the first round (the floor's copies are removed).
With --budget too, each round also runs `BUILD plan PIPELINE` for the first build (it
validates every input once and writes no log) and `FLOOR canon-hash INPUT...` over the
suite's own JSON and JSON Lines files (datasets, recordings, tool manifests; a JSON file
over several lines as a one-line copy, since the floor reads JSON Lines), and prints
where the first build's CPU goes against the floor's: what validating the inputs costs,
what hashing and writing the logs costs, and what is left for the cases themselves.

Per command it prints CPU (user + system of that child alone), wall and peak RSS, least and
median; then the first build's figures over each other build's, and every build's CPU
over each floor's: the median of the per-round ratios, and least over least. A
build that fails stops the rounds (exit 1): a failed run's time is no figure.

A SUITE that holds a store (the pipeline's `store`, `.stateval` by default) is refused:
every copy would hold that earlier run, and each measured run would first replace it
(the same inputs give the same run id), which on the 50-case suite added 13 ms of wall
to a 40 ms run. Remove the store, or give --rerun to measure exactly that.
"""
import argparse, glob, json, os, shutil, statistics, subprocess, sys, tempfile, time, tomllib


def parse():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: rounds.py ROUNDS SUITE PIPELINE [--jobs N] [--scratch DIR] [--floor FLOOR [--budget]] [--rerun] "
                 "-- BUILD...")
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="rounds.py")
    p.add_argument("rounds", type=int)
    p.add_argument("suite")
    p.add_argument("pipeline")
    p.add_argument("--jobs", type=int)
    p.add_argument("--scratch")
    p.add_argument("--floor")
    p.add_argument("--budget", action="store_true")
    p.add_argument("--rerun", action="store_true")
    args = p.parse_args(argv[:cut])
    if args.budget and not args.floor:
        sys.exit("rounds.py: --budget needs --floor FLOOR")
    args.builds = argv[cut + 1:]
    if args.rounds < 1 or not args.builds:
        sys.exit("rounds.py: ROUNDS must be at least 1 and at least one BUILD follows --")
    if not os.path.isfile(os.path.join(args.suite, args.pipeline)):
        sys.exit(f"rounds.py: no pipeline {args.pipeline} in {args.suite}")
    store = store_of(args.suite, args.pipeline)
    if os.path.exists(store) and not args.rerun:
        sys.exit(f"rounds.py: {args.suite} holds a store ({os.path.relpath(store, os.path.abspath(args.suite))}) "
                 "from an earlier run: "
                 "each measured run would first replace that run, which is not the fresh run the figures are "
                 "of; remove it, or give --rerun to measure a run that replaces an earlier one")
    return args


def store_of(suite, pipeline):
    """Where a run of `pipeline` in `suite` keeps its store: its `store` (`.stateval` when it
    names none), relative to the project, which is the directory above a pipeline kept
    in `pipeline/` and the pipeline file's own directory otherwise (as stateval reads it)."""
    path = os.path.join(suite, pipeline)
    try:
        with open(path, "rb") as f:
            store = tomllib.load(f).get("pipeline", {}).get("store", ".stateval")
    except (OSError, tomllib.TOMLDecodeError) as e:
        sys.exit(f"rounds.py: cannot read {path}: {e}")
    base = os.path.dirname(os.path.abspath(path))
    if os.path.basename(base) == "pipeline":
        base = os.path.dirname(base)
    return os.path.join(base, store)


def measure(cmd, cwd):
    """(CPU s, wall s, peak RSS KiB) of `cmd` run in `cwd`, its output discarded."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        try:
            child = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        except OSError as e:
            sys.exit(f"rounds.py: cannot run {cmd[0]}: {e.strerror}")
        # wait4 gives this child's own usage; RUSAGE_CHILDREN would mix in every earlier one
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            text = err.read().decode(errors="replace")
            shown = " ".join(cmd[:4] + ([f"… ({len(cmd) - 4} more)"] if len(cmd) > 4 else []))
            sys.exit(f"rounds.py: `{shown}` in {cwd} exited {code}:\n{text}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss


def main():
    args = parse()
    scratch = args.scratch or tempfile.mkdtemp(prefix="rounds-")
    os.makedirs(scratch, exist_ok=True)
    names = [f"build {i + 1}" for i in range(len(args.builds))]
    floors = ["canon-hash", "hash-write"] if args.floor else []
    figures = {name: [] for name in names + [f"floor {m}" for m in floors]}
    inputs = suite_inputs(args.suite, scratch) if args.budget else []
    if args.budget:
        if not inputs:
            sys.exit(f"rounds.py: --budget found no .json or .jsonl inputs in {args.suite}")
        figures["build 1 plan"] = []
        figures["floor canon-hash inputs"] = []
    logs = []
    for r in range(args.rounds):
        order = list(range(len(args.builds)))
        if r % 2:
            order.reverse()
        for i in order:
            work = os.path.join(scratch, "suite")
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(args.suite, work, symlinks=True)
            cmd = [args.builds[i], "run", args.pipeline] + (["--jobs", str(args.jobs)] if args.jobs else [])
            figures[names[i]].append(measure(cmd, work))
            if args.floor and not logs and i == 0:
                kept = os.path.join(scratch, "logs")
                shutil.rmtree(kept, ignore_errors=True)
                for n, log in enumerate(sorted(glob.glob(os.path.join(work, ".stateval/runs/*/*/*.jsonl")))):
                    dest = os.path.join(kept, str(n))
                    os.makedirs(dest)
                    logs.append(shutil.copy(log, dest))
                if not logs:
                    sys.exit("rounds.py: the first build wrote no case logs under .stateval/runs/ "
                             "for the floor to read (a pipeline with another store is not supported)")
            if args.budget and i == 0:
                # in a fresh copy too: the plan reads what a run reads, and finds no store
                shutil.rmtree(work)
                shutil.copytree(args.suite, work, symlinks=True)
                figures["build 1 plan"].append(measure([args.builds[0], "plan", args.pipeline], work))
            shutil.rmtree(work)
        if args.budget:
            figures["floor canon-hash inputs"].append(measure([args.floor, "canon-hash"] + inputs, scratch))
        for mode in floors:
            figures[f"floor {mode}"].append(measure([args.floor, mode] + logs, scratch))
            for log in logs:
                if os.path.exists(log + ".floor"):
                    os.remove(log + ".floor")
    if not args.scratch:
        shutil.rmtree(scratch)

    ms = lambda s: f"{s * 1000:8.1f}"
    print(f"{args.rounds} rounds of {args.pipeline} in {args.suite}"
          + (f", --jobs {args.jobs}" if args.jobs else ""))
    print(f"{'':24} {'CPU ms least':>13} {'median':>8} {'wall ms least':>14} {'median':>8} {'peak KiB':>10}")
    for name, runs in figures.items():
        cpu, wall = [c for c, _, _ in runs], [w for _, w, _ in runs]
        print(f"{name:24} {ms(min(cpu)):>13} {ms(statistics.median(cpu))} "
              f"{ms(min(wall)):>14} {ms(statistics.median(wall))} {max(k for _, _, k in runs):>10}")
    pairs = [(names[0], other, what) for other in names[1:] for what in ("CPU", "wall")]
    pairs += [(name, f"floor {m}", "CPU") for name in names for m in floors]
    for one, other, what in pairs:
        at = 0 if what == "CPU" else 1
        a, b = figures[one], figures[other]
        per_round = [x[at] / y[at] for x, y in zip(a, b)]
        least = min(x[at] for x in a) / min(y[at] for y in b)
        print(f"{one} / {other}, {what}: per-round median {statistics.median(per_round):.3f} "
              f"(quartiles {quartiles(per_round)}), least / least {least:.3f}")
    if args.budget:
        budget(figures, names[0])


def suite_inputs(suite, scratch):
    """The suite's JSON and JSON Lines files, but for what a run left in it: the inputs a
    plan validates (datasets, recordings, tool manifests). The floor reads JSON Lines, so a
    JSON file spread over several lines is handed over as a one-line copy in SCRATCH."""
    found = []
    for root, dirs, files in os.walk(suite):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = os.path.abspath(os.path.join(root, name))
            if name.endswith(".jsonl"):
                found.append(path)
            elif name.endswith(".json"):
                try:
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                    if len([l for l in text.splitlines() if l.strip()]) <= 1:
                        found.append(path)
                        continue
                    one_line = json.dumps(json.loads(text), ensure_ascii=False) + "\n"
                except (OSError, ValueError) as e:
                    sys.exit(f"rounds.py: --budget cannot read {path} as JSON: {e}")
                copy = os.path.join(scratch, "inputs", os.path.relpath(path, os.path.abspath(suite)))
                os.makedirs(os.path.dirname(copy), exist_ok=True)
                with open(copy, "w", encoding="utf-8") as f:
                    f.write(one_line)
                found.append(copy)
    return found


def budget(figures, first):
    """The first build's CPU set against the floor's, by the least of the rounds: the part
    spent validating the inputs (its own plan), the part hashing and writing the logs
    would take at the floor's speed, and the rest, the cases' own work."""
    least = {name: min(c for c, _, _ in runs) for name, runs in figures.items()}
    run, plan, floor = least[first], least["build 1 plan"], least["floor canon-hash"]
    write, inputs = least["floor hash-write"], least["floor canon-hash inputs"]
    ms = lambda s: f"{s * 1000:.1f} ms"
    share = lambda s: f"{s / floor:.3f}"
    print(f"budget, by the least of the rounds, against floor canon-hash over the logs ({ms(floor)}):")
    print(f"  the run: {ms(run)}, {share(run)}; 0.6 of the floor is {ms(0.6 * floor)}")
    print(f"  its plan (every input validated once): {ms(plan)}, {share(plan)}; "
          f"floor canon-hash over the same inputs: {ms(inputs)}, {share(inputs)}")
    print(f"  floor hash-write over the logs: {ms(write)}, {share(write)}")
    rest = run - plan - write
    print(f"  left for the cases' own work (run - plan - hash-write): {ms(rest)}, {share(rest)}")
    room = 0.6 * floor - plan - write
    print(f"  room 0.6 of the floor leaves them beside this plan and hash-write: {ms(room)}, {share(room)}")


def quartiles(xs):
    if len(xs) < 4:
        return "n/a"
    q = statistics.quantiles(xs, n=4)
    return f"{q[0]:.3f}-{q[2]:.3f}"


if __name__ == "__main__":
    main()
