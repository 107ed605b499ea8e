#!/usr/bin/env bash
# Issue 8 on the H200: cp.async's shared-memory stores against the row pitch. The tuned
# WMMA kernel's LDGSTS took 2.62x their ideal wavefronts (pad 8 + 8); here the same
# schedule (3 stages, so that a 128-byte pad fits) under other pads, and the XOR-swizzled mma.sync kernel, through Nsight
# Compute's source counters, then each one timed. Under 9 minutes.
#
#     OUT=/some/dir bash bench/issue8k_device.sh
set -u
DEADLINE=${DEADLINE:-540}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 cp.async store wavefronts on $(hostname), $(date -Is)"
VARIANTS=("pad8:A 8, B 8" "none:none" "pad64:A 64, B 64" "a8b64:A 8, B 64" "a64b8:A 64, B 8")
FILES=()
for v in "${VARIANTS[@]}"; do
    name=${v%%:*} pad=${v#*:}
    sed -e "s/pad        auto/pad        $pad/" -e "s/stages     4/stages     3/" examples/tuned/wmma_f16acc.tile \
        >"$OUT/wmma_$name.tile"
    FILES+=("$OUT/wmma_$name.tile")
done
FILES+=(examples/tuned/mma_f32acc.tile)
for f in "${FILES[@]}"; do
    n=$(basename "$f" .tile)
    step "ncu $n" 60 "$OUT/ncu-$n.txt" ncu --section SourceCounters -k regex:tuned_ -c 1 \
        -o "$OUT/$n" -f $PY -m tiledsl.cli run "$f" --size 4096x4096x4096 --seed 1
    ncu -i "$OUT/$n.ncu-rep" --page source --csv --print-source sass >"$OUT/$n.csv" 2>&1
    $PY bench/probes/wavefronts.py "$OUT/$n.csv" >>"$SUMMARY" 2>&1
    rm -f "$OUT/$n.ncu-rep"
done
for f in "${FILES[@]}"; do
    n=$(basename "$f" .tile)
    step "bench $n" 60 "$OUT/bench.txt" $PY -m tiledsl.cli bench "$f" --size 4096x4096x4096 \
        --size 8192x8192x8192 --no-triton --repeat 30
done
grep -a -E "^\S+ +[0-9]+x" "$OUT/bench.txt" >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
