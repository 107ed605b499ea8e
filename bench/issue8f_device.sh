#!/usr/bin/env bash
# Issue 8 on the H200: the wgmma path (`mma m64nNk16`). Its GPU tests, the tuned example
# checked at odd sizes and under compute-sanitizer, the two wgmma tuning spaces, then
# bench/best.py (every tuned schedule against cuBLAS at 4096³ and 8192³). Under 9 minutes.
#
#     OUT=/some/dir bash bench/issue8f_device.sh
set -u
DEADLINE=${DEADLINE:-560}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 wgmma round on $(hostname), $(date -Is), $(nproc) cores"
nvidia-smi -L | tee -a "$SUMMARY"
step "pytest -m gpu tests/test_wgmma.py" 120 "$OUT/pytest.txt" $PY -m pytest -q -rs -m gpu tests/test_wgmma.py
tail -5 "$OUT/pytest.txt" >>"$SUMMARY"
step "run tuned/wgmma_f32acc" 90 "$OUT/run.txt" $PY -m tiledsl.cli run examples/tuned/wgmma_f32acc.tile \
    --size 4096x4096x4096 --size 1000x1032x520 --size 67x45x50 --seed 5
grep -E "TFLOP|PASS|FAIL|oracle" "$OUT/run.txt" | head -20 >>"$SUMMARY"
step "sanitize tuned/wgmma_f32acc" 120 "$OUT/sanitize.txt" $PY -m tiledsl.cli run examples/tuned/wgmma_f32acc.tile \
    --size 512x512x512 --size 300x200x100 --seed 3 --sanitize racecheck --sanitize synccheck
grep -E "racecheck|synccheck|PASS$|FAIL$" "$OUT/sanitize.txt" | head -12 >>"$SUMMARY"
for space in wgmma_n256_space wgmma_space; do
    step "tune $space" 150 "$OUT/tune.txt" $PY -m tiledsl.cli tune "bench/tune/$space.tile" \
        --size 4096x4096x4096 --record "$OUT/tune-record.jsonl" -o "$OUT/$space.best.tile"
done
grep -E "^(tune:|  [0-9])|best" "$OUT/tune.txt" | head -30 >>"$SUMMARY" 2>/dev/null
BEST_FILES=$(ls "$OUT"/*.best.tile 2>/dev/null)
step "best.py 4096 8192" 200 "$OUT/best.txt" $PY bench/best.py --size 4096x4096x4096 \
    --size 8192x8192x8192 --out "$OUT/best.json" $BEST_FILES
tail -30 "$OUT/best.txt" >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
