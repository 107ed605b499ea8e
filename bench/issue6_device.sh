#!/usr/bin/env bash
# Issue 6 on a GPU machine (the H200): doctor, the kernel cache, compute-sanitizer over every
# CUDA example, bench against cuBLAS and Triton, and the GPU tests. One call, under 10 minutes.
#
#     OUT=/some/dir bash bench/issue6_device.sh
#
# Run from the repository root, with tiledsl importable (PYTHONPATH=repo:/tmp/site; lark and
# graphviz are installed from .whl/ into /tmp/site when they are missing). Every step runs
# under `timeout`, capped so that the whole script ends within DEADLINE seconds, and logs to
# $OUT (8 files at most): summary.txt doctor.txt cache.txt sanitize.txt bench.txt bench.json
# bench.png pytest.txt. A failed step does not stop the next; summary.txt has each status.
set -u
DEADLINE=${DEADLINE:-570}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
export TILEDSL_CACHE_DIR=/tmp/tiledsl-cache  # shared by the steps below (not the cache check)
note "tiledsl issue 6 on $(hostname), $(date -Is), git $(git rev-parse --short HEAD 2>/dev/null || echo '(none)')"

# 1. doctor ---------------------------------------------------------------------------------
step "doctor" 60 "$OUT/doctor.txt" $PY -m tiledsl.cli doctor

# 2. the kernel cache: a fresh folder, the same run twice (miss, then hit), then --no-cache --
CACHE_LOG="$OUT/cache.txt"
FRESH=$(mktemp -d /tmp/tiledsl-cache-check.XXXX)
for run in first second; do
    TILEDSL_CACHE_DIR=$FRESH step "cache: $run run" 90 "$CACHE_LOG" \
        $PY -m tiledsl.cli run examples/hgemm.tile --size 1024x1024x1024 --seed 1
done
TILEDSL_CACHE_DIR=$FRESH step "cache: --no-cache" 90 "$CACHE_LOG" \
    $PY -m tiledsl.cli run examples/hgemm.tile --size 1024x1024x1024 --seed 1 --no-cache
CACHE_LINES=$(grep -h "kernel cache:" "$CACHE_LOG")
{
    echo "--- kernel cache lines, in order (want: miss, hit, off)"
    echo "$CACHE_LINES"
    echo "--- $FRESH (the kernel, and the timing's hold kernel)"
    ls -l "$FRESH"
    cat "$FRESH"/*.json 2>/dev/null | head -40
} >>"$CACHE_LOG"
echo "$CACHE_LINES" | sed 's/^ */  /' >>"$SUMMARY"

# 3. compute-sanitizer ----------------------------------------------------------------------
SAN_LOG="$OUT/sanitize.txt"
SAN_DIR=$(mktemp -d /tmp/tiledsl-sanitize-logs.XXXX)
# 3a. the tool's own output on a kernel with a missing barrier and on the fixed one, read by
#     tiledsl's parser: proves the summaries are read as CUDA 13's tools print them.
cat >"$SAN_DIR/probe.py" <<'EOF'
import sys

import cupy as cp

barrier = "__syncthreads();" if sys.argv[1] == "fixed" else ""
src = (
    'extern "C" __global__ void probe(float* out) {\n'
    "    __shared__ float s[256];\n"
    "    s[threadIdx.x] = threadIdx.x;\n"
    f"    {barrier}\n"
    "    out[threadIdx.x] = s[255 - threadIdx.x];\n"
    "}\n"
)
out = cp.zeros(256, cp.float32)
cp.RawKernel(src, "probe")((1,), (256,), (out,))
cp.cuda.Device().synchronize()
print("probe ran:", sys.argv[1], float(out[0]))
EOF
CS=$($PY -c "from tiledsl.sanitize import find_compute_sanitizer as f; print(f() or '')")
probe() {  # probe TOOL racy|fixed
    local raw="$SAN_DIR/probe-$1-$2.txt"
    timeout 120 "$CS" --tool "$1" --error-exitcode 86 \
        $PY "$SAN_DIR/probe.py" "$2" >"$raw" 2>&1
    local rc=$?
    $PY - "$1" "$rc" "$raw" "$2" <<'EOF' >>"$SAN_LOG"
import sys
from tiledsl.sanitize import findings, judge
tool, rc, raw, kind = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read(), sys.argv[4]
ok, verdict, summary = judge(tool, rc, raw)
want = kind == "fixed"
print(f"probe {tool:<9} {kind:<5} exit {rc:<3} judged {'PASS' if ok else 'FAIL'} "
      f"({'as expected' if ok == want else 'UNEXPECTED'}): {verdict}")
for line in findings(raw)[:3]:
    print("    |" + line)
if ok != want:
    print(raw[-3000:])
EOF
}
if [ -n "$CS" ]; then
    echo "=== probes: a kernel without its barrier, and with it ($CS)" >>"$SAN_LOG"
    "$CS" --version >>"$SAN_LOG" 2>&1
    probe racecheck racy
    probe racecheck fixed
    probe memcheck fixed
    probe synccheck fixed
    grep "^probe" "$SAN_LOG" | sed 's/^/  /' >>"$SUMMARY"
else
    note "compute-sanitizer not found: no probes"
fi
# 3b. every CUDA example, each tool, at the default sanitize size (2 x 3 block tiles, 3 K
#     steps); four files at a time (each its own processes), logs gathered afterwards.
sanitize_one() {  # FILE [extra args]
    local f=$1
    shift
    local log="$SAN_DIR/$(echo "$f" | tr '/' '_')$(echo "$*" | tr ' ' '_').log"
    $PY -m tiledsl.cli run "$f" --sanitize racecheck --sanitize memcheck --sanitize synccheck \
        --seed 1 "$@" >"$log" 2>&1
    echo "exit $? for $f $*" >>"$log"
}
export -f sanitize_one
export PY SAN_DIR
CUDA_EXAMPLES=$(for f in $(find examples -name '*.tile' | sort); do
    grep -Eq '^\s*target\s+musa' "$f" || echo "$f"
done)
echo "=== every CUDA example: $(echo $CUDA_EXAMPLES | wc -w) files" >>"$SAN_LOG"
step "sanitize: every CUDA example" 240 "$SAN_LOG" \
    bash -c 'printf "%s\n" $0 | xargs -P 4 -I{} bash -c "sanitize_one {}"' "$CUDA_EXAMPLES"
# 3c. sizes off the block tile (the guarded edge twin), for the pipelined examples.
step "sanitize: edge sizes" 120 "$SAN_LOG" bash -c '
    for f in examples/hgemm.tile examples/hgemm_nt.tile examples/hgemm_f16.tile; do
        sanitize_one "$f" --size 200x312x136 &
    done; wait'
LOGS=$(ls "$SAN_DIR"/*.log 2>/dev/null)
if [ -n "$LOGS" ]; then
    cat $LOGS >>"$SAN_LOG"
    {
        echo "--- verdicts"
        grep -hE "under compute-sanitizer|^  (PASS|FAIL)  |^exit " $LOGS
    } >>"$SAN_LOG"
    note "  sanitize: $(cat $LOGS | grep -c '^  PASS  ') PASS, $(cat $LOGS | grep -c '^  FAIL  ') FAIL (3 tools x each file, the edge sizes included)"
    grep -hE "under compute-sanitizer|^  FAIL  |^exit [^0]" $LOGS | grep -B1 -E "FAIL|^exit" |
        sed 's/^/    /' >>"$SUMMARY"
fi

# 4. bench ----------------------------------------------------------------------------------
step "bench" 240 "$OUT/bench.txt" $PY -m tiledsl.cli bench examples/hgemm.tile \
    --size 2048x2048x2048 --size 4096x4096x4096 --size 8192x8192x8192 \
    --json "$OUT/bench.json" --plot "$OUT/bench.png"
sed -n '/^size /,/^note/p' "$OUT/bench.txt" 2>/dev/null | sed 's/^/  /' >>"$SUMMARY"

# 5. the GPU tests (the files that hold `gpu`-marked tests) ----------------------------------
GPU_TESTS=$(grep -l "mark.gpu" tests/test_*.py)
step "pytest -m gpu" 600 "$OUT/pytest.txt" $PY -m pytest -m gpu -q -x -p no:cacheprovider \
    $GPU_TESTS
tail -3 "$OUT/pytest.txt" 2>/dev/null | sed 's/^/  /' >>"$SUMMARY"

note "total $(($(date +%s) - START))s"
