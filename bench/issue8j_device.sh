#!/usr/bin/env bash
# Issue 8 on the H200: which instructions of the tuned WMMA kernel make Nsight Compute's
# "excessive shared wavefronts" (24% of all, last run): the SASS source page with its
# per-instruction counters, and the Source Counters tables. Under 5 minutes.
#
#     OUT=/some/dir bash bench/issue8j_device.sh
set -u
DEADLINE=${DEADLINE:-300}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 WMMA shared wavefronts on $(hostname), $(date -Is)"
step "ncu tuned wmma_f16acc (report)" 200 "$OUT/ncu.txt" ncu --set full --import-source yes \
    -k regex:tuned_wmma_f16acc -c 1 -o "$OUT/wmma" -f \
    $PY -m tiledsl.cli run examples/tuned/wmma_f16acc.tile --size 4096x4096x4096 --seed 1
step "ncu source page" 60 "$OUT/source.csv" ncu -i "$OUT/wmma.ncu-rep" --page source --csv \
    --print-source sass
step "ncu details (all)" 60 "$OUT/details.txt" ncu -i "$OUT/wmma.ncu-rep" --page details \
    --print-details all --section SourceCounters --section MemoryWorkloadAnalysis_Tables
head -3 "$OUT/source.csv" | cut -c1-600 >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
