#!/usr/bin/env bash
# The action's run: `volley run` with the scenario, target, thresholds and
# args given, and --require-valid; its results, JUnit and Markdown in
# OUT_DIR. The step itself never fails: its outputs say how the run went,
# and the action's last step fails the job, after the results are uploaded.
#
# With BASELINE_TARGET, the run is A/B rounds: the baseline's server and
# the candidate's (TARGET), both started by earlier steps, ROUNDS rounds
# each in a balanced order; exit 2 on a regression.
#
# Environment: VOLLEY (the binary), SCENARIO, TARGET, BASELINE_TARGET,
# ROUNDS, THRESHOLDS (one a line), ARGS (shell words, quotes honoured,
# nothing expanded), OUT_DIR, GITHUB_OUTPUT. volley appends its Markdown to
# $GITHUB_STEP_SUMMARY itself.
set -euo pipefail

out=${OUT_DIR:?out-dir is empty}
result="$out/run"
mkdir -p "$out"

args=(run)
[ -n "${SCENARIO:-}" ] && args+=("$SCENARIO")
if [ -n "${BASELINE_TARGET:-}" ]; then
  if [ -z "${TARGET:-}" ]; then
    echo "baseline-target needs target: the candidate's endpoint" >&2
    echo "exit-code=1" >> "$GITHUB_OUTPUT"
    exit 0
  fi
  if [ -n "${BASELINE:-}" ]; then
    echo "baseline-target (A/B rounds) and baseline (a stored run) are two ways to compare: give one" >&2
    echo "exit-code=1" >> "$GITHUB_OUTPUT"
    exit 0
  fi
  args+=(--target "$BASELINE_TARGET" --target "$TARGET" --rounds "${ROUNDS:-8}")
elif [ -n "${TARGET:-}" ]; then
  args+=(--target "$TARGET")
fi
while IFS= read -r threshold; do
  threshold=${threshold#"${threshold%%[![:space:]]*}"}
  [ -n "$threshold" ] && args+=(--threshold "$threshold")
done <<< "${THRESHOLDS:-}"
if [ -n "${ARGS:-}" ]; then
  # xargs splits shell words, quotes and all, without running anything.
  mapfile -d '' -t words < <(printf '%s' "$ARGS" | xargs printf '%s\0')
  args+=("${words[@]}")
fi
args+=(--out "$result" --junit "$out/junit.xml" --summary-md "$out/summary.md" --no-tui)
# A gate never passes figures that cannot be trusted: an invalid verdict
# exits 2 with or without thresholds (given once: clap refuses it twice).
case " ${args[*]} " in
  *" --require-valid "*) ;;
  *) args+=(--require-valid) ;;
esac

code=0
"${VOLLEY:?}" "${args[@]}" || code=$?

# The run's own verdict, from summary.json; "unknown" where there is none
# to read (the run could not start) or no jq to read it.
verdict=unknown
if [ -f "$result/summary.json" ] && command -v jq >/dev/null; then
  # A/B rounds: valid when every round of every target is.
  case "$(jq -r 'if .ab then ([.targets[].rounds[].valid] | all) else .summary.verdict.valid end' "$result/summary.json")" in
    true) verdict=valid ;;
    false) verdict=invalid ;;
  esac
fi
{
  echo "exit-code=$code"
  echo "verdict=$verdict"
  echo "result-dir=$result"
} >> "$GITHUB_OUTPUT"
echo "volley run exited $code; its verdict: $verdict; its results: $result"
