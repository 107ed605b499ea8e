#!/usr/bin/env bash
# Issue 8 on the H200, first round: the mma.sync path checked on the GPU, benchmarked,
# and its tuning space searched; the WMMA f16-accumulation space beside it; SASS
# instruction counts of the WMMA and mma.sync kernels. One call, under 9.5 minutes.
#
#     OUT=/some/dir bash bench/issue8_device.sh
set -u
DEADLINE=${DEADLINE:-560}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 round 1 on $(hostname), $(date -Is), git $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cores"
nvidia-smi -L | tee -a "$SUMMARY"

step "pytest mma.sync on the GPU" 150 "$OUT/pytest.txt" $PY -m pytest -q -x -rs -m gpu tests/test_mma_sync.py
tail -3 "$OUT/pytest.txt" >>"$SUMMARY"

step "bench hgemm_mma" 90 "$OUT/bench.txt" $PY -m tiledsl.cli bench examples/hgemm_mma.tile \
    --size 4096x4096x4096 --size 8192x8192x8192 --json "$OUT/bench.json"
grep -E "^[0-9]" "$OUT/bench.txt" >>"$SUMMARY"

step "tune mma space" ${TUNE_CAP:-240} "$OUT/tune.txt" $PY -m tiledsl.cli tune bench/tune/mma_space.tile \
    --size 4096x4096x4096 --budget ${BUDGET:-32} --record "$OUT/tune-record.jsonl" -o "$OUT/mma.best.tile"
step "tune wmma f16acc space" ${TUNE2_CAP:-120} "$OUT/tune.txt" $PY -m tiledsl.cli tune \
    bench/tune/wmma_f16acc_space.tile --size 4096x4096x4096 --budget ${BUDGET2:-12} \
    --record "$OUT/tune-record.jsonl" -o "$OUT/wmma_f16acc.best.tile"
grep -E "^(tune:|fastest|  [0-9])|cuBLAS\)" "$OUT/tune.txt" >>"$SUMMARY"

# SASS: what the main loop is made of.
for f in examples/hgemm.tile examples/hgemm_mma.tile; do
    n=$(basename "$f" .tile)
    $PY -m tiledsl.cli compile "$f" -o "/tmp/$n.cu" >/dev/null 2>&1
    nvcc -cubin -arch=sm_90 -o "/tmp/$n.cubin" "/tmp/$n.cu" 2>>"$OUT/sass.txt"
    echo "== $n (first kernel)" >>"$OUT/sass.txt"
    cuobjdump -sass -fun "$n" "/tmp/$n.cubin" 2>>"$OUT/sass.txt" |
        grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+[A-Z0-9_.]+' | awk '{print $2}' | sed 's/\..*//' |
        sort | uniq -c | sort -rn | head -20 >>"$OUT/sass.txt"
done
note "done in $(($(date +%s) - START)) s"
