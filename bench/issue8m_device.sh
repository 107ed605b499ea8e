#!/usr/bin/env bash
# Issue 8 on the H200: cp.async's store cost against the row pitch and the lane mapping
# (bench/probes/store_probe.py): LDGSTS wavefronts per variant from Nsight Compute's source
# counters, then each variant timed. Under 2.5 minutes.
#
#     OUT=/some/dir bash bench/issue8m_device.sh
set -u
DEADLINE=${DEADLINE:-150}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 store probe on $(hostname), $(date -Is)"
for v in a_rows_128B a_rows_144B a_blocks_144B a_rows_176B a_blocks_176B b_rows_512B b_rows_528B b_blocks_528B; do
    step "ncu $v" 20 "$OUT/ncu.txt" ncu --section SourceCounters -k "regex:copies_$v" -c 1 \
        -o "$OUT/$v" -f $PY bench/probes/store_probe.py --variant $v --iters 64
    ncu -i "$OUT/$v.ncu-rep" --page source --csv --print-source sass >"$OUT/$v.csv" 2>&1
    $PY bench/probes/wavefronts.py "$OUT/$v.csv" | sed "s|^$OUT/||" >>"$SUMMARY" 2>&1
    rm -f "$OUT/$v.ncu-rep" "$OUT/$v.csv"
done
step "time every variant" 40 "$OUT/time.txt" $PY bench/probes/store_probe.py
cat "$OUT/time.txt" >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
