"""The stateval command, installed from a wheel.

The wheel's real content is the compiled ``stateval`` binary, which pip or uv puts in
the environment's scripts directory (``bin/`` or ``Scripts\\``) beside ``python``.
This package only finds that binary, for ``python -m stateval`` and for tools that want
its path; it never reimplements anything.
"""

import os
import sys
import sysconfig

__all__ = ["find_binary", "BinaryNotFound"]

_EXE = "stateval.exe" if os.name == "nt" else "stateval"


class BinaryNotFound(RuntimeError):
    """The wheel's binary is not where an installation puts it."""


def _candidates():
    """Directories an installation of this wheel may have put the binary in, in order."""
    seen = []
    schemes = [None]  # the environment's own scheme first (a venv, uv's tool env)
    if sys.version_info >= (3, 10):
        schemes.append(sysconfig.get_preferred_scheme("user"))  # `pip install --user`
    else:
        schemes.append("nt_user" if os.name == "nt" else "posix_user")
    for scheme in schemes:
        try:
            path = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if path and path not in seen:
            seen.append(path)
    # `pip install --target DIR`: the scripts land in DIR/bin beside the package
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target_bin = os.path.join(here, "bin")
    if target_bin not in seen:
        seen.append(target_bin)
    return seen


def find_binary():
    """The path of the ``stateval`` binary this wheel installed.

    Raises ``BinaryNotFound`` naming every directory looked in when it is absent (a
    broken or partial install, or a wheel built without the binary).
    """
    looked = _candidates()
    for directory in looked:
        path = os.path.join(directory, _EXE)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise BinaryNotFound(
        "the stateval binary is not installed beside this Python package: looked for {} in {}; "
        "reinstall the wheel (pip install --force-reinstall stateval)".format(_EXE, ", ".join(looked))
    )
