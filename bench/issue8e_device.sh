#!/usr/bin/env bash
# Issue 8 on the H200, final round: compute-sanitizer (racecheck, synccheck) on the tuned
# kernels whose barrier moved (fragment_buffers 2) and on the mma.sync path, then every GPU
# test of the suite. Under 8 minutes.
#
#     OUT=/some/dir bash bench/issue8e_device.sh
set -u
DEADLINE=${DEADLINE:-470}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 final round on $(hostname), $(date -Is), $(nproc) cores"
nvidia-smi -L | tee -a "$SUMMARY"
for f in examples/tuned/mma_f32acc.tile examples/tuned/wmma_f16acc.tile; do
    step "sanitize $(basename "$f")" 100 "$OUT/sanitize.txt" $PY -m tiledsl.cli run "$f" \
        --size 512x512x256 --size 300x200x100 --seed 3 --sanitize racecheck --sanitize synccheck
done
grep -E "racecheck|synccheck|PASS$|FAIL$|^[a-z_0-9]+: " "$OUT/sanitize.txt" | head -30 >>"$SUMMARY"
step "pytest -m gpu (whole suite)" 400 "$OUT/pytest.txt" $PY -m pytest -q -rs -m gpu --durations=10 tests/
tail -25 "$OUT/pytest.txt" >>"$SUMMARY"
# If time is left: the block swizzle's group size around the two tuned WMMA schedules.
for f in wmma_f16acc wmma_f32acc; do
    sed -e 's/swizzle \+grouped 8/swizzle grouped {4, 8, 16}/' "examples/tuned/$f.tile" >"/tmp/${f}_swz.tile"
    step "tune swizzle group, $f" 60 "$OUT/tune.txt" $PY -m tiledsl.cli tune "/tmp/${f}_swz.tile" \
        --size 4096x4096x4096 --record "$OUT/tune-record.jsonl" -o "/tmp/${f}_swz.best.tile"
done
grep -E "^(tune:|  [0-9])" "$OUT/tune.txt" >>"$SUMMARY" 2>/dev/null
note "done in $(($(date +%s) - START)) s"
