#!/usr/bin/env bash
# Issue 15 on the H200: the GPU tests after the hostile-input fixes (outputs all or none,
# names, 32-bit limits, the oracles' IEEE overflow), the main job, a bench with its JSON
# written through tiledsl.files, and the GPU-side refusals. Under 9 minutes.
#
#     OUT=/some/dir bash bench/issue15_device.sh
set -u
DEADLINE=${DEADLINE:-540}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 15 GPU checks on $(hostname), $(date -Is)"
export TILEDSL_CACHE_DIR=/tmp/tiledsl-cache
step "gpu tests" 330 "$OUT/gpu-tests.txt" $PY -m pytest -q -m gpu -p no:cacheprovider tests
tail -5 "$OUT/gpu-tests.txt" >>"$SUMMARY"
step "run hgemm (main job)" 60 "$OUT/run.txt" $PY -m tiledsl run examples/hgemm.tile
step "bench wgmma --json" 90 "$OUT/bench.txt" $PY -m tiledsl bench examples/tuned/wgmma_f32acc.tile \
    --size 4096x4096x4096 --json "$OUT/bench.json" --no-cache
grep -E "TFLOP|wgmma|cuBLAS|Triton|wrote" "$OUT/bench.txt" | head -8 >>"$SUMMARY"
cp examples/hgemm.tile /tmp/h.tile
step "bench --json over its input (refused)" 30 "$OUT/refusals.txt" $PY -m tiledsl bench /tmp/h.tile --json /tmp/h.tile
step "run past 32-bit M (refused)" 30 "$OUT/refusals.txt" $PY -m tiledsl run /tmp/h.tile --size 2147483600x128x64
sed 's/alpha 0.5/alpha 3e4/' examples/epilogue.tile >/tmp/e.tile
step "run epilogue alpha 3e4 (f16 overflow)" 60 "$OUT/run.txt" $PY -m tiledsl run /tmp/e.tile --size 1024x1024x1024
grep -E "oracle|PASS|FAIL|error" "$OUT/refusals.txt" "$OUT/run.txt" | head -20 >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
