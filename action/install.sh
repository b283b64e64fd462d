#!/usr/bin/env bash
# The GitHub Action's install step: stateval's wheel into a venv of its own, its bin/ on
# PATH. A wheel, not a build: pip picks the platform's wheel in seconds, and every
# GitHub-hosted runner has Python; building from source costs minutes per job.
set -euo pipefail
venv="${RUNNER_TEMP:-/tmp}/stateval-venv"
case "${STATEVAL_VERSION:-latest}" in
  latest) spec=stateval ;;
  /*.whl) spec="$STATEVAL_VERSION" ;;
  *.whl) spec="$STATEVAL_WORKSPACE/$STATEVAL_VERSION" ;;
  *) spec="stateval==$STATEVAL_VERSION" ;;
esac
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$spec"
if [ ! -x "$venv/bin/stateval" ]; then
  echo "error: installing $spec put no stateval binary in $venv/bin" >&2
  exit 2
fi
# External agents and custom graders run isolated under bubblewrap (docs/security.md):
# on a Linux runner without it, install it from the distribution's packages; where that
# cannot be done, stateval runs them unisolated, says so, and signs nothing
if [ "$(uname -s)" = Linux ] && ! command -v bwrap >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo -n"
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
      || { $sudo apt-get update -qq >/dev/null 2>&1 && $sudo apt-get install -y -qq bubblewrap >/dev/null 2>&1; } \
      || echo "warning: could not install bubblewrap: external agents and custom graders will run unisolated" >&2
  else
    echo "warning: bubblewrap (bwrap) is not installed: external agents and custom graders will run unisolated" >&2
  fi
fi
echo "$venv/bin" >>"${GITHUB_PATH:-/dev/null}"
"$venv/bin/stateval" --version
