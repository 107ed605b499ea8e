#!/usr/bin/env bash
# Issue 8 on the H200: does the pad's size (8, 24, 40, 56 elements: an odd number of 16-byte
# chunks, conflict-free for WMMA's fragment loads) change what cp.async's stores into the
# padded rows cost? Nsight Compute's shared-memory wavefronts for three pads, then
# `tiledsl tune` over the 16 pad pairs. Under 6 minutes.
#
#     OUT=/some/dir bash bench/issue8l_device.sh
set -u
DEADLINE=${DEADLINE:-360}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 pads on $(hostname), $(date -Is)"
SPACE=bench/tune/wmma_f16acc_pad_space.tile
for pad in 8 24 40 56; do
    f="$OUT/pad$pad.tile"
    sed "s/pad        A {8, 24, 40, 56}, B {8, 24, 40, 56}/pad        A $pad, B $pad/" $SPACE >"$f"
    step "ncu pad $pad" 60 "$OUT/ncu-pad$pad.txt" ncu --section SourceCounters -k regex:wmma_f16acc_pads \
        -c 1 -o "$OUT/pad$pad" -f $PY -m tiledsl.cli run "$f" --size 4096x4096x4096 --seed 1
    ncu -i "$OUT/pad$pad.ncu-rep" --page source --csv --print-source sass >"$OUT/pad$pad.csv" 2>&1
    $PY bench/probes/wavefronts.py "$OUT/pad$pad.csv" >>"$SUMMARY" 2>&1
    rm -f "$OUT/pad$pad.ncu-rep" "$OUT/pad$pad.csv" "$f"
done
step "tune pad space" 150 "$OUT/tune.txt" $PY -m tiledsl.cli tune $SPACE --size 4096x4096x4096 \
    --record "$OUT/tune-record.jsonl" -o "$OUT/pads.best.tile"
tail -8 "$OUT/tune.txt" >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
