#!/usr/bin/env bash
# Issue 8 on the H200, the WMMA ceiling: how fast HMMA itself goes (mma.sync with no memory
# traffic), how fast the tuned WMMA/mma.sync kernels go with their global copies removed,
# Nsight Compute's view of the tuned WMMA kernel, and its SASS. Under 9 minutes.
#
#     OUT=/some/dir bash bench/issue8h_device.sh
set -u
DEADLINE=${DEADLINE:-540}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
note "issue 8 WMMA ceiling on $(hostname), $(date -Is), $(nproc) cores"
nvidia-smi -L | tee -a "$SUMMARY"
step "hmma probe" 200 "$OUT/hmma-probe.txt" $PY bench/probes/hmma_probe.py \
    --tile examples/tuned/wmma_f16acc.tile --tile examples/tuned/mma_f32acc.tile \
    --size 4096 --size 8192 --json "$OUT/hmma-probe.json"
cat "$OUT/hmma-probe.txt" >>"$SUMMARY"
$PY -m tiledsl.cli compile examples/tuned/wmma_f16acc.tile -o "$OUT/wmma_f16acc.cu" >/dev/null
nvcc -cubin -arch=sm_90 -O3 -std=c++17 -o /tmp/wmma.cubin "$OUT/wmma_f16acc.cu" &&
    cuobjdump -sass /tmp/wmma.cubin >"$OUT/wmma_f16acc.sass"
step "ncu tuned wmma_f16acc" 240 "$OUT/ncu.txt" ncu --set full -k regex:tuned_wmma_f16acc -c 1 \
    $PY -m tiledsl.cli run examples/tuned/wmma_f16acc.tile --size 4096x4096x4096 --seed 1
grep -a -E "Throughput|Pipe|Stall|Warp Cycles|Issue|Bank|Occupancy|Registers|Duration|Eligible|SM Busy|Executed Ipc|Tensor" "$OUT/ncu.txt" | head -80 >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
