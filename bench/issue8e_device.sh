#!/usr/bin/env bash
# Issue 8 on the H200, final round: compute-sanitizer (racecheck, synccheck) on the tuned
# kernels whose barrier moved (fragment_buffers 2) and on the mma.sync path, then every GPU
# test of the suite. Under 8 minutes.
#
#     OUT=/some/dir bash bench/issue8e_device.sh
set -u
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
START=$(date +%s)
DEADLINE=${DEADLINE:-470}
PY=${PY:-python3}
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
step() {
    local name=$1 cap=$2 log=$3
    shift 3
    local left=$((DEADLINE - ($(date +%s) - START)))
    local limit=$((cap < left ? cap : left))
    if [ "$limit" -lt 15 ]; then note "SKIPPED $name (only ${left}s left)"; return 0; fi
    local t0=$(date +%s)
    echo "\$ $* (timeout ${limit}s)" >>"$log"
    timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1
    local rc=$?
    echo "(exit $rc)" >>"$log"
    note "$(printf '%-40s exit %-3s %4ss' "$name" "$rc" "$(($(date +%s) - t0))")"
    return $rc
}
note "issue 8 final round on $(hostname), $(date -Is), $(nproc) cores"
nvidia-smi -L | tee -a "$SUMMARY"
for f in examples/tuned/mma_f32acc.tile examples/tuned/wmma_f16acc.tile; do
    step "sanitize $(basename "$f")" 100 "$OUT/sanitize.txt" $PY -m tiledsl.cli run "$f" \
        --size 512x512x256 --size 300x200x100 --seed 3 --sanitize racecheck --sanitize synccheck
done
grep -E "racecheck|synccheck|PASS$|FAIL$|^[a-z_0-9]+: " "$OUT/sanitize.txt" | head -30 >>"$SUMMARY"
step "pytest -m gpu (whole suite)" 400 "$OUT/pytest.txt" $PY -m pytest -q -rs -m gpu --durations=10 tests/
tail -25 "$OUT/pytest.txt" >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
# If time is left: the block swizzle's group size around the two tuned WMMA schedules.
for f in wmma_f16acc wmma_f32acc; do
    sed -e 's/swizzle \+grouped 8/swizzle grouped {4, 8, 16}/' "examples/tuned/$f.tile" >"/tmp/${f}_swz.tile"
    step "tune swizzle group, $f" 60 "$OUT/tune.txt" $PY -m tiledsl.cli tune "/tmp/${f}_swz.tile" \
        --size 4096x4096x4096 --record "$OUT/tune-record.jsonl" -o "/tmp/${f}_swz.best.tile"
done
grep -E "^(tune:|  [0-9])" "$OUT/tune.txt" >>"$SUMMARY" 2>/dev/null
note "done in $(($(date +%s) - START)) s"
