#!/usr/bin/env python3
"""Build a stateval binary optimised with the profile of its own work (PGO).

    python3 tools/pgo/build.py [--out FILE]

Three steps, all under target/pgo/ (nothing in the repository changes):

1. an instrumented release build (`-Cprofile-generate`) of the binary, then of the
   `synth` example that writes the training suites;
2. that binary runs the training work below, each command required to succeed, and
   every process leaves its counts; `llvm-profdata merge` folds them into one profile;
3. a release build that uses the profile (`-Cprofile-use`), copied to FILE
   (target/pgo/stateval by default).

The training work is what the speed figures measure, at other sizes than the measured
suites (the synthetic ones keep `synth`'s default seed, 7, as the measured ones do): synthetic suites (long-horizon turns, memory, policy, several tools),
one long case, a suite of identical small cases, the repository's own default pipeline,
`verify` of a run, and a batch of every metric family. The optimised binary writes the
same bytes as any other build of the same source (`tools/same-output/compare.py`); only
its speed differs (docs/speed.md).

It needs `llvm-profdata` of the LLVM that rustc is built on (`rustc -vV` names it): set
LLVM_PROFDATA, or `rustup component add llvm-tools`, or install your distribution's
llvm-<major> package. The builds are release builds with flags of their own: about
twenty minutes in all on two cores. Python 3.11+ standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
USAGE_ERROR = 2


def fail(message: str) -> None:
    print(f"tools/pgo/build.py: {message}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


def rustc_llvm_major() -> tuple[str, str]:
    """rustc's LLVM major version and its host triple, from `rustc -vV`."""
    try:
        out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"cannot run `rustc -vV`: {e}")
    llvm = re.search(r"^LLVM version: (\d+)\.", out, re.M)
    host = re.search(r"^host: (\S+)$", out, re.M)
    if not llvm or not host:
        fail(f"`rustc -vV` names no LLVM version or host:\n{out}")
    return llvm.group(1), host.group(1)


def profdata_major(path: str) -> str | None:
    """The LLVM major version `path --version` reports; None if it reports none (LLVM 14's
    has no `--version`) or does not run."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"LLVM version (\d+)\.", out)
    return found.group(1) if found else None


def find_profdata(major: str, host: str) -> str:
    """An llvm-profdata of rustc's LLVM major version: profiles written by one LLVM are
    read by its own version's tools, not reliably by another's."""
    candidates: list[tuple[str, str]] = []
    if os.environ.get("LLVM_PROFDATA"):
        candidates.append(("LLVM_PROFDATA", os.environ["LLVM_PROFDATA"]))
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True).stdout.strip()
    if sysroot:
        candidates.append(("rustup's llvm-tools", str(Path(sysroot) / "lib" / "rustlib" / host / "bin" / "llvm-profdata")))
    for name in (f"llvm-profdata-{major}", f"/usr/lib/llvm-{major}/bin/llvm-profdata", "llvm-profdata"):
        found = shutil.which(name)
        if found:
            candidates.append((name, found))
    seen = []
    for origin, path in candidates:
        version = profdata_major(path)
        if version == major:
            return path
        if origin == "LLVM_PROFDATA":
            shown = f"LLVM {version}" if version else "of no version it reports"
            fail(f"LLVM_PROFDATA={path} is {shown}, and rustc is built on LLVM {major}")
        if version is not None:
            seen.append(f"{path} (LLVM {version})")
    also = f"; found only {', '.join(seen)}" if seen else ""
    fail(
        f"no llvm-profdata of LLVM {major}, the LLVM rustc is built on{also}. "
        f"Run `rustup component add llvm-tools`, install llvm-{major} (Debian and Ubuntu: "
        f"`apt-get install llvm-{major}`), or set LLVM_PROFDATA"
    )
    raise AssertionError("unreachable")


def encoded_rustflags(extra: str) -> str:
    """The caller's rustflags with `extra` added, in cargo's encoded form (a path with a
    space in it stays one flag)."""
    if os.environ.get("CARGO_ENCODED_RUSTFLAGS"):
        flags = os.environ["CARGO_ENCODED_RUSTFLAGS"].split("\x1f")
    else:
        flags = os.environ.get("RUSTFLAGS", "").split()
    return "\x1f".join([*flags, extra])


def cargo_build(target_dir: Path, flag: str, targets: list[str]) -> None:
    env = dict(os.environ, CARGO_TARGET_DIR=str(target_dir), CARGO_ENCODED_RUSTFLAGS=encoded_rustflags(flag))
    env.pop("RUSTFLAGS", None)
    command = ["cargo", "build", "--release", "--locked", *targets]
    print(f"tools/pgo/build.py: {' '.join(command)}  ({flag})", flush=True)
    if subprocess.run(command, cwd=REPO, env=env).returncode != 0:
        fail(f"`{' '.join(command)}` with {flag} failed")


class Trainer:
    """Runs the instrumented binary over the training work; each process writes its
    counts into `profiles`."""

    def __init__(self, built: Path, profiles: Path, scratch: Path):
        self.stateval = built / "stateval"
        self.synth = built / "examples" / "synth"
        self.scratch = scratch
        self.env = dict(os.environ, LLVM_PROFILE_FILE=str(profiles / "stateval-%p-%m.profraw"))
        # a run from the repository's own environment would be told it runs in CI and
        # could ask for goldens it is not meant to check here
        for name in ("CI", "STATEVAL_SIGNING_KEY"):
            self.env.pop(name, None)

    def run(self, args: list[str], cwd: Path, stdin: Path | None = None, counted: bool = True) -> None:
        env = self.env if counted else dict(self.env, LLVM_PROFILE_FILE=str(self.scratch / "uncounted-%p.profraw"))
        with open(stdin, "rb") if stdin else open(os.devnull, "rb") as given:
            done = subprocess.run(args, cwd=cwd, env=env, stdin=given, capture_output=True, text=True)
        if done.returncode != 0:
            fail(
                f"training step `{' '.join(map(str, args))}` in {cwd} exited {done.returncode}:\n"
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )

    def suite_runs(self, suite: Path, pipeline: str, times: int, extra: list[str] | None = None) -> Path:
        """`stateval run` `times` times, each in a fresh copy of `suite`; the last copy."""
        for i in range(times):
            copy = self.scratch / f"{suite.name}-{i}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(suite, copy)
            self.run([str(self.stateval), "run", pipeline, "--quiet", *(extra or [])], cwd=copy)
        return copy

    def train(self) -> None:
        made = self.scratch / "suites"
        made.mkdir()
        # synthetic suites: sizes of their own (the measured ones are 220 x 50 and 1 x 11,000),
        # the default seed
        self.run([str(self.synth), str(made / "synth"), "--cases", "60", "--turns", "40", "--seed", "7"],
                 cwd=made, counted=False)
        self.run([str(self.synth), str(made / "long"), "--cases", "1", "--turns", "2000", "--seed", "7"],
                 cwd=made, counted=False)
        self.run([sys.executable, str(REPO / "benches" / "inputs" / "gen_same_shape.py"), str(made / "same"),
                  "30", "50", "--fixture", "per-case"], cwd=made, counted=False)
        self.run([sys.executable, str(REPO / "benches" / "inputs" / "gen_perf_batches.py"), str(made / "batches"),
                  "--scale", "0.05"], cwd=made, counted=False)
        # the repository's own default pipeline, as a newcomer's first run has it
        own = made / "own"
        own.mkdir()
        for part in ("pipeline", "datasets", "fixtures", "goldens"):
            shutil.copytree(REPO / part, own / part)

        synth = self.suite_runs(made / "synth", "pipeline/synth.toml", 3)
        self.suite_runs(made / "synth", "pipeline/synth.toml", 1, ["--jobs", "1"])
        self.suite_runs(made / "long", "pipeline/synth.toml", 2)
        self.suite_runs(made / "same", "pipeline/same.toml", 3)
        self.suite_runs(own, "pipeline/ci.toml", 2)
        for run in sorted((synth / ".stateval" / "runs").iterdir()):
            if run.is_dir() and not run.name.startswith("."):
                self.run([str(self.stateval), "verify", str(run)], cwd=synth)
        for batch in sorted((made / "batches").glob("*.jsonl")):
            self.run([str(self.stateval), "metric", batch.stem, "--batch"], cwd=made, stdin=batch)


def main() -> None:
    parser = argparse.ArgumentParser(prog="tools/pgo/build.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "target" / "pgo" / "stateval",
                        help="where the optimised binary is copied (default: target/pgo/stateval)")
    args = parser.parse_args()

    major, host = rustc_llvm_major()
    profdata = find_profdata(major, host)
    root = REPO / "target" / "pgo"
    profiles = root / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)

    generate = root / "generate"
    flag = f"-Cprofile-generate={profiles}"
    # the binary on its own, exactly as the optimised build will build it: built with the
    # example, the example's dev-dependencies turn on features of crates the binary shares
    # (cargo unifies them), which changes those crates' symbol names and every crate's
    # after them, and a profile is matched to functions by name: most of it went unused
    # (docs/speed.md, twenty-first round)
    cargo_build(generate, flag, ["--bin", "stateval"])
    cargo_build(generate, flag, ["--example", "synth"])
    # emptied only now: the build scripts the builds ran were instrumented too, and left
    # their counts here
    shutil.rmtree(profiles, ignore_errors=True)
    profiles.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="train-", dir=root) as scratch:
        Trainer(generate / "release", profiles, Path(scratch)).train()
    counted = sorted(profiles.glob("*.profraw"))
    if not counted:
        fail(f"the training left no profile in {profiles}")
    merging = root / "merging.profdata"
    merge = [profdata, "merge", "-o", str(merging), *map(str, counted)]
    if subprocess.run(merge).returncode != 0:
        fail(f"`{profdata} merge` failed")
    # named by its content: cargo tracks the flag, not the file it names, and would keep
    # crates optimised with an earlier profile
    digest = hashlib.sha256(merging.read_bytes()).hexdigest()[:16]
    for old in root.glob("stateval-*.profdata"):
        old.unlink()
    merged = root / f"stateval-{digest}.profdata"
    merging.rename(merged)
    print(f"tools/pgo/build.py: {len(counted)} processes' counts merged into {merged.relative_to(REPO)}", flush=True)

    cargo_build(root / "use", f"-Cprofile-use={merged}", ["--bin", "stateval"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "use" / "release" / "stateval", args.out)
    print(f"tools/pgo/build.py: wrote {args.out}")


if __name__ == "__main__":
    main()
