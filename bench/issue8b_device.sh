#!/usr/bin/env bash
# Issue 8 on the H200, round 2 (after copy loops got constant trip counts): the mma.sync
# GPU tests again, then every tuning space in full at 4096³ (mma.sync f32 acc, WMMA f16
# acc, WMMA f32 acc), best points written out. One call, under 9.5 minutes.
#
#     OUT=/some/dir bash bench/issue8b_device.sh
set -u
DEADLINE=${DEADLINE:-560}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 round 2 on $(hostname), $(date -Is), $(nproc) cores"
nvidia-smi -L | tee -a "$SUMMARY"
step "pytest mma.sync on the GPU" 120 "$OUT/pytest.txt" $PY -m pytest -q -x -rs -m gpu tests/test_mma_sync.py
tail -2 "$OUT/pytest.txt" >>"$SUMMARY"
for space in mma_space wmma_f16acc_space hgemm_space; do
    step "tune $space" 150 "$OUT/tune.txt" $PY -m tiledsl.cli tune "bench/tune/$space.tile" \
        --size 4096x4096x4096 --record "$OUT/tune-record.jsonl" -o "$OUT/$space.best.tile"
done
grep -E "^(tune:|fastest|  [0-9])" "$OUT/tune.txt" >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
