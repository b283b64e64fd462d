#!/usr/bin/env bash
# The GitHub Action's commands (action.yml), one per `command` input. Inputs arrive as
# INPUT_* variables; the artifact to upload is written to GITHUB_OUTPUT. The test suite
# runs this file with the inputs of examples/scale-out/github-actions.yml.
#
# The signing key never reaches a step that runs the project's code: `run` and `merge`
# run without it and write the root their summary printed to GITHUB_OUTPUT (`root`);
# `sign`, in a job of its own, signs the run only once it verifies against that root.
set -euo pipefail
command="${INPUT_COMMAND:-run}"
plan="${INPUT_PLAN:-plan.json}"
out="${INPUT_OUT:-stateval-out}"
reports="${INPUT_REPORTS:-reports}"
pipeline=()
[ -n "${INPUT_PIPELINE:-}" ] && pipeline=("$INPUT_PIPELINE")

# what the upload step takes: an artifact name and a path, written before the command
# runs so that a failed gate still uploads its reports
upload() { printf 'artifact=%s\npath=%s\n' "$1" "$2" >>"${GITHUB_OUTPUT:-/dev/null}"; }

# Run stateval, showing its output, and write the root its summary printed last
# (`root blake3:… (unsigned)`) as the step's `root` output; exit as stateval did, so a
# failed gate still fails the step (its run can still be signed: the signature says
# what the verdict was).
with_root() {
  local log status=0
  log="$(mktemp)"
  "$@" | tee "$log" || status=$?
  sed -n 's/^root \(blake3:[0-9a-f]*\).*/root=\1/p' "$log" | tail -n 1 >>"${GITHUB_OUTPUT:-/dev/null}"
  rm -f "$log"
  return "$status"
}

if [ -n "${STATEVAL_SIGNING_KEY:-}" ] && [ "$command" != sign ]; then
  echo "error: STATEVAL_SIGNING_KEY is set for '$command': keep the key out of every step that runs the project's code, and sign in a job of its own (command: sign)" >&2
  exit 2
fi

case "$command" in
  plan)
    upload stateval-plan "$plan"
    stateval plan "${pipeline[@]}" -o "$plan"
    ;;
  run)
    if [ -n "${INPUT_SHARD:-}" ]; then
      upload "stateval-shard-${INPUT_SHARD//\//-of-}" "$out"
      STATEVAL_SHARD="$INPUT_SHARD" stateval run "${pipeline[@]}" --shard-from-env --plan "$plan" --out "$out"
    else
      upload stateval-reports "$reports"
      with_root stateval run "${pipeline[@]}"
    fi
    ;;
  merge)
    shards="${INPUT_SHARDS:-stateval-shards}"
    upload stateval-reports "$reports"
    merge_pipeline=()
    [ -n "${INPUT_PIPELINE:-}" ] && merge_pipeline=(--pipeline "$INPUT_PIPELINE")
    # every shard artifact downloaded; a missing one is named by the merge itself
    with_root stateval merge "${merge_pipeline[@]}" --plan "$plan" "$shards"/stateval-shard-*
    ;;
  sign)
    # the store downloaded from the run or merge job (stateval-run); the root from that
    # job's output, never from the artifact
    store="${INPUT_STORE:-.stateval}"
    if [ -z "${INPUT_ROOT:-}" ]; then
      echo "error: the sign command needs the root input: the root output of the run or merge step" >&2
      exit 2
    fi
    upload stateval-signed-run "$store"
    stateval sign "$store" --root "$INPUT_ROOT"
    ;;
  install) ;;
  *)
    echo "error: the action's command input is '$command'; expected plan, run, merge, sign or install" >&2
    exit 2
    ;;
esac
