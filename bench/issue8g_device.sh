#!/usr/bin/env bash
# Issue 8 on the H200, wgmma round 2: compute-sanitizer (racecheck, synccheck) on the tuned
# wgmma kernel and its guarded twin, every GPU test of the suite, then bench/best.py over
# examples/tuned/ (the tuned wgmma schedule included) at 4096³ and 8192³. Under 9 minutes.
#
#     OUT=/some/dir bash bench/issue8g_device.sh
set -u
DEADLINE=${DEADLINE:-560}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 wgmma round 2 on $(hostname), $(date -Is), $(nproc) cores"
nvidia-smi -L | tee -a "$SUMMARY"
step "sanitize tuned/wgmma_f32acc" 120 "$OUT/sanitize.txt" $PY -m tiledsl.cli run examples/tuned/wgmma_f32acc.tile \
    --size 512x512x512 --size 300x200x100 --seed 3 --sanitize racecheck --sanitize synccheck
grep -a -E "racecheck|synccheck|PASS$|FAIL$|under compute" "$OUT/sanitize.txt" | head -16 >>"$SUMMARY"
step "pytest -m gpu (whole suite)" 300 "$OUT/pytest.txt" $PY -m pytest -q -rs -m gpu --durations=5 tests/
tail -25 "$OUT/pytest.txt" >>"$SUMMARY"
step "best.py 4096 8192" 150 "$OUT/best.txt" $PY bench/best.py --size 4096x4096x4096 \
    --size 8192x8192x8192 --out "$OUT/best.json"
tail -30 "$OUT/best.txt" >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
