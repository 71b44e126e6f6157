#!/usr/bin/env bash
# The action's comparison: `volley compare BASELINE CURRENT` with the
# compare-args given; its JUnit and Markdown in OUT_DIR. The step never
# fails: `result` says what compare found, `regressed` whether the run
# regressed (true, false, or unknown when compare could not tell).
#
# Environment: VOLLEY, BASELINE, CURRENT, COMPARE_ARGS (shell words),
# OUT_DIR, GITHUB_OUTPUT.
set -euo pipefail

out=${OUT_DIR:?out-dir is empty}
args=(compare "${BASELINE:?}" "${CURRENT:?}" --junit "$out/compare-junit.xml" --summary-md "$out/compare.md")
if [ -n "${COMPARE_ARGS:-}" ]; then
  mapfile -d '' -t words < <(printf '%s' "$COMPARE_ARGS" | xargs printf '%s\0')
  args+=("${words[@]}")
fi

code=0
"${VOLLEY:?}" "${args[@]}" | tee "$out/compare.txt" || code=${PIPESTATUS[0]}

# compare's last line says what it found: "result: REGRESSION", ...
line=$(grep '^result: ' "$out/compare.txt" | tail -n 1 || true)
case "$line" in
  "result: REGRESSION"*) result=regression regressed=true ;;
  "result: no regression"*) result=no-regression regressed=false ;;
  "result: INCONCLUSIVE"*) result=inconclusive regressed=unknown ;;
  "result: CANNOT COMPARE"*) result=cannot-compare regressed=unknown ;;
  *) result=error regressed=unknown ;;
esac
{
  echo "exit-code=$code"
  echo "result=$result"
  echo "regressed=$regressed"
} >> "$GITHUB_OUTPUT"
