#!/usr/bin/env bash
# valgrind_check.sh LOG_DIR - reads every valgrind memcheck log in LOG_DIR (one per process,
# vg.PID.log) and fails unless each ended with zero errors and zero bytes definitely lost.
# Prints one line per process and a total. A log without a summary (a process killed before
# it could exit) fails too. Leaks "still reachable" or "possibly lost" are reported, not failed:
# OpenBLAS and libmicrohttpd keep per-thread buffers until exit.
set -u
dir=$1
shopt -s nullglob
logs=("$dir"/vg.*.log)
if [ ${#logs[@]} -eq 0 ]; then
    echo "valgrind_check: no logs in $dir"
    exit 1
fi
bad=0
tot_err=0 tot_def=0 tot_ind=0 tot_pos=0 tot_reach=0
num() { sed -n "s/.*$1: *\([0-9,]*\) bytes.*/\1/p" "$2" | tail -1 | tr -d ,; }
for f in "${logs[@]}"; do
    errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9,]*\) errors.*/\1/p' "$f" | tail -1 | tr -d ,)
    if [ -z "$errs" ]; then
        echo "valgrind_check: $f: no ERROR SUMMARY (the process did not exit normally)"
        bad=1
        continue
    fi
    def=$(num "definitely lost" "$f")
    ind=$(num "indirectly lost" "$f")
    pos=$(num "possibly lost" "$f")
    reach=$(num "still reachable" "$f")
    def=${def:-0} ind=${ind:-0} pos=${pos:-0} reach=${reach:-0}
    tot_err=$((tot_err + errs)) tot_def=$((tot_def + def)) tot_ind=$((tot_ind + ind))
    tot_pos=$((tot_pos + pos)) tot_reach=$((tot_reach + reach))
    if [ "$errs" -ne 0 ] || [ "$def" -ne 0 ]; then
        echo "valgrind_check: $f: $errs errors, $def bytes definitely lost:"
        grep -E -A25 "^==[0-9]+== (Invalid|Conditional|Use of|Syscall|Mismatched|[0-9,]+ bytes in [0-9,]+ blocks are definitely)" "$f" | head -80
        bad=1
    fi
done
echo "valgrind_check: ${#logs[@]} processes: $tot_err errors, $tot_def bytes definitely lost," \
     "$tot_ind indirectly, $tot_pos possibly, $tot_reach still reachable"
exit $bad
