#!/usr/bin/env bash
# The GitHub Action's commands (action.yml), one per `command` input. Inputs arrive as
# INPUT_* variables; the artifact to upload is written to GITHUB_OUTPUT. The test suite
# runs this file with the inputs of examples/scale-out/github-actions.yml.
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
      stateval run "${pipeline[@]}"
    fi
    ;;
  merge)
    shards="${INPUT_SHARDS:-stateval-shards}"
    upload stateval-reports "$reports"
    merge_pipeline=()
    [ -n "${INPUT_PIPELINE:-}" ] && merge_pipeline=(--pipeline "$INPUT_PIPELINE")
    # every shard artifact downloaded; a missing one is named by the merge itself
    stateval merge "${merge_pipeline[@]}" --plan "$plan" "$shards"/stateval-shard-*
    ;;
  install) ;;
  *)
    echo "error: the action's command input is '$command'; expected plan, run, merge or install" >&2
    exit 2
    ;;
esac
