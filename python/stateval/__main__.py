"""``python -m stateval ARGS``: run the wheel's binary with ARGS, its exit code kept."""

import os
import subprocess
import sys

from stateval import BinaryNotFound, find_binary


def main():
    try:
        binary = find_binary()
    except BinaryNotFound as missing:
        sys.stderr.write("error: {}\n".format(missing))
        return 2  # the same code stateval gives a setting it cannot honour
    args = [binary] + sys.argv[1:]
    if os.name == "nt":
        # no exec on Windows: wait for the child and pass its code on
        return subprocess.call(args)
    os.execv(binary, args)
    return 0  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main())
