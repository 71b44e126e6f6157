#!/usr/bin/env bash
# Which deliberate breakages of the modules that decide figures the tests
# miss: cargo-mutants over the judge, the reports, the statistics, the mix,
# the plan and the scenario compiler. Slow (a build and a test run per
# mutant), so a bench, not part of `cargo test`. Prints cargo-mutants'
# summary; the survivors are in mutants.out/missed.txt.
#   benches/mutants.sh                 # every module below
#   benches/mutants.sh src/rpc/judge.rs  # one file
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null || cargo install --locked cargo-mutants
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  FILES=(src/rpc/judge.rs src/rpc/skim.rs 'src/report/*.rs' 'src/stats/*.rs' src/plan/mix.rs src/plan/load.rs src/engine/schedule.rs src/scenario/compile.rs)
fi
ARGS=()
for f in "${FILES[@]}"; do ARGS+=(-f "$f"); done
# The library's unit tests and the integration tests that check figures
# end to end; the others (TLS, listeners, the dashboard) cannot see these.
# Ignored files stay behind (a fuzz corpus that grows during the copy
# fails it).
cargo mutants "${ARGS[@]}" --gitignore true --timeout 180 --output mutants.out -- \
  --lib --test figures --test scenario_runs --test server_counts --test bad_answers \
  --test report_details --test newcomer --test ci_gating --test hlog --test properties \
  --test targets --test compare --test shards
