#!/usr/bin/env bash
# Issue 8 on the H200: the wide WMMA f16-accumulation space again, now that the register
# check counts f16 fragments packed (64 x 128 warp tiles were refused before), then
# bench/best.py with its winner beside examples/tuned/. Under 9.5 minutes.
#
#     OUT=/some/dir bash bench/issue8i_device.sh
set -u
DEADLINE=${DEADLINE:-560}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
TILEDSL_CACHE_DIR=$(mktemp -d /tmp/tiledsl-cache.XXXX)
export TILEDSL_CACHE_DIR
note "issue 8 wide WMMA on $(hostname), $(date -Is), $(nproc) cores"
nvidia-smi -L | tee -a "$SUMMARY"
step "tune wmma_f16acc_wide_space" 300 "$OUT/wide-tune.txt" $PY -m tiledsl.cli tune \
    bench/tune/wmma_f16acc_wide_space.tile --size 4096x4096x4096 \
    --record "$OUT/wide-tune-record.jsonl" -o "$OUT/wide.best.tile"
tail -14 "$OUT/wide-tune.txt" >>"$SUMMARY"
step "best.py 4096 8192 + wide winner" 220 "$OUT/best.txt" $PY bench/best.py \
    --size 4096x4096x4096 --size 8192x8192x8192 --out "$OUT/best.json" "$OUT/wide.best.tile"
tail -12 "$OUT/best.txt" >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
