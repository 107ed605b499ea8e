#!/usr/bin/env bash
# Issue 7 on the H200: edge tiles and types through `tiledsl run`, a random GPU sweep of
# shapes x layouts x types, and the fast path's time before/after the edge twin.
#
#     OUT=/some/dir bash bench/issue7_device.sh [OLD.cu]
set -u
OUT=${OUT:?set OUT}
cd "$(dirname "$0")/.."
python3 -c "import lark, graphviz" 2>/dev/null ||
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH="$PWD:/tmp/site"
export TILEDSL_CACHE_DIR=/tmp/tiledsl-cache
OLD=${1:-bench/candidates/hgemm_before_edges.cu}

{
    for f in examples/hgemm.tile examples/hgemm_nt.tile examples/hgemm_f16.tile \
        examples/types.tile examples/ladder/v7.tile; do
        for s in 1x1x1 127x61x37 1x4096x4096 4095x4097x4099 3000x5000x1000 4096x11008x4096; do
            timeout 120 python3 -m tiledsl.cli run "$f" --size "$s" --seed 1
            echo "exit $? $f $s"
        done
    done
} >"$OUT/run-sweep.txt" 2>&1
echo "run sweep: $(grep -c '^  PASS$' "$OUT/run-sweep.txt") PASS, $(grep -c '^  FAIL$' "$OUT/run-sweep.txt") FAIL, $(grep -c '^exit [^0]' "$OUT/run-sweep.txt") nonzero exits" | tee "$OUT/summary7.txt"

timeout 240 python3 bench/any_shape.py --count 60 --json "$OUT/any-shape.json" >"$OUT/any-shape.txt" 2>&1
echo "any_shape exit $?: $(tail -1 "$OUT/any-shape.txt")" | tee -a "$OUT/summary7.txt"

timeout 150 python3 bench/edge_overhead.py "$OLD" >"$OUT/edge-overhead.txt" 2>&1
echo "edge_overhead exit $?" | tee -a "$OUT/summary7.txt"
cat "$OUT/edge-overhead.txt" | tail -20
