#!/usr/bin/env bash
# Issue 8 on the H200, round 4: the mma.sync and fragment-buffering GPU tests (B
# fragments now loaded in pairs), the mma.sync space again around its best region,
# then bench/best.py (examples/tuned/ and the fresh mma.sync winner, 4096³ and 8192³,
# cuBLAS beside), then the GPU example tests of the new examples. Under 9.5 minutes.
#
#     OUT=/some/dir bash bench/issue8d_device.sh
set -u
DEADLINE=${DEADLINE:-560}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 round 4 on $(hostname), $(date -Is), $(nproc) cores"
nvidia-smi -L | tee -a "$SUMMARY"
step "pytest mma.sync + fragments (GPU)" 150 "$OUT/pytest.txt" $PY -m pytest -q -x -rs -m gpu \
    tests/test_mma_sync.py tests/test_fragment_buffering.py
tail -2 "$OUT/pytest.txt" >>"$SUMMARY"
# The mma.sync space narrowed to double-buffered fragments and 64-wide warp rows.
sed -e 's/fragment_buffers {1, 2}/fragment_buffers 2/' -e 's/coarsen {2, 4} x {4, 8}/coarsen 4 x {4, 8}/' \
    bench/tune/mma_space.tile >/tmp/mma_narrow.tile
step "tune mma space (narrowed)" 150 "$OUT/tune.txt" $PY -m tiledsl.cli tune /tmp/mma_narrow.tile \
    --size 4096x4096x4096 --record "$OUT/tune-record.jsonl" -o /tmp/mma_fresh.tile
grep -E "^(tune:|fastest|  [0-9])" "$OUT/tune.txt" >>"$SUMMARY"
sed -i 's/kernel hgemm_mma /kernel fresh_mma_f32acc /' /tmp/mma_fresh.tile
cp /tmp/mma_fresh.tile "$OUT/mma_fresh.tile" 2>/dev/null
step "bench/best.py" 200 "$OUT/best.txt" $PY bench/best.py /tmp/mma_fresh.tile --out "$OUT/best.json"
sed -n '/^size .*class/,$p' "$OUT/best.txt" >>"$SUMMARY"
step "pytest examples on the GPU" 120 "$OUT/pytest_examples.txt" $PY -m pytest -q -rs -m gpu \
    tests/test_gpu.py -k "tuned or hgemm_mma"
tail -2 "$OUT/pytest_examples.txt" >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
