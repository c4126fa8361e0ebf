#!/usr/bin/env bash
# run_fuzz.sh - runs one libFuzzer target for a fixed time and prints a one-line summary.
#
# Usage: run_fuzz.sh NAME BINARY SECONDS WORKDIR SEEDS DICT [LIBFUZZER_FLAG...]
#
# The corpus grows in WORKDIR/corpus/NAME (kept between runs); SEEDS is read only. A crash, leak,
# timeout or FUZZ_CHECK failure leaves its input in WORKDIR/artifacts/NAME/ and fails (exit 1)
# with the end of the log; copy the input to tests/fuzz/regressions/NAME/ once it is fixed, so
# that `make test` replays it. The full log is WORKDIR/logs/NAME.log.
set -euo pipefail
name=$1 bin=$2 secs=$3 work=$4 seeds=$5 dict=$6
shift 6
mkdir -p "$work/corpus/$name" "$work/artifacts/$name" "$work/logs"
log=$work/logs/$name.log
start=$(date +%s)
set +e
"$bin" -max_total_time="$secs" -print_final_stats=1 -dict="$dict" -timeout=25 \
    -rss_limit_mb=2048 -artifact_prefix="$work/artifacts/$name/" "$@" \
    "$work/corpus/$name" "$seeds" >"$log" 2>&1
rc=$?
set -e
took=$(($(date +%s) - start))
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
last=$(grep -E '^#[0-9]+.*cov:' "$log" | tail -1 || true)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
printf 'fuzz %-12s %4ss  %9s execs  %6s exec/s  cov %s  ft %s  corpus %s\n' "$name" "$took" \
    "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
if [ "$rc" -ne 0 ]; then
    echo "fuzz $name: FAILED (exit $rc); the input is in $work/artifacts/$name/:"
    ls -l "$work/artifacts/$name/"
    tail -60 "$log"
    exit 1
fi
