#!/usr/bin/env bash
# Issue 7, second pass on the H200: epilogues, batches and types through `tiledsl run`,
# the random sweep (now with epilogues and batches), compute-sanitizer on the new examples,
# the GPU tests, and the ladder refreshed with the new timing.   OUT=dir bash bench/issue7b_device.sh
set -u
OUT=${OUT:?set OUT}
cd "$(dirname "$0")/.."
python3 -c "import lark, graphviz" 2>/dev/null ||
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH="$PWD:/tmp/site" TILEDSL_CACHE_DIR=/tmp/tiledsl-cache
{
    for f in examples/epilogue.tile examples/batched.tile examples/types.tile; do
        for s in 4096x4096x4096 127x61x37 1x4096x4096 4095x4097x4099 1000x3000x2000; do
            timeout 120 python3 -m tiledsl.cli run "$f" --size "$s" --seed 3 --batch 1 2>/dev/null ||
            timeout 120 python3 -m tiledsl.cli run "$f" --size "$s" --seed 3
            echo "exit $? $f $s"
        done
    done
    timeout 120 python3 -m tiledsl.cli run examples/batched.tile --size 1024x1024x1024 --batch 16 --seed 4
    echo "exit $? batched 16"
    timeout 120 python3 -m tiledsl.cli run examples/batched.tile --size 333x257x100 --batch 5 --seed 4
    echo "exit $? batched 5 odd"
} >"$OUT/run7b.txt" 2>&1
echo "run: $(grep -c '^  PASS$' "$OUT/run7b.txt") PASS, $(grep -c '^  FAIL$' "$OUT/run7b.txt") FAIL" | tee "$OUT/summary7b.txt"
timeout 200 python3 bench/any_shape.py --count 80 --seed 11 --json "$OUT/any-shape-b.json" >"$OUT/any-shape-b.txt" 2>&1
echo "any_shape exit $?: $(tail -1 "$OUT/any-shape-b.txt")" | tee -a "$OUT/summary7b.txt"
for f in examples/epilogue.tile examples/batched.tile examples/types.tile; do
    timeout 150 python3 -m tiledsl.cli run "$f" --sanitize racecheck --sanitize memcheck --sanitize synccheck --size 200x312x136
    echo "exit $? sanitize $f"
done >"$OUT/sanitize7b.txt" 2>&1
echo "sanitize: $(grep -c '^  PASS  ' "$OUT/sanitize7b.txt") PASS lines, $(grep -c '^  FAIL  ' "$OUT/sanitize7b.txt") FAIL lines, exits: $(grep '^exit' "$OUT/sanitize7b.txt" | cut -d' ' -f2 | tr '\n' ' ')" | tee -a "$OUT/summary7b.txt"
timeout 200 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_gpu.py tests/test_bench.py tests/test_sanitize.py >"$OUT/pytest7b.txt" 2>&1
echo "pytest -m gpu exit $?: $(tail -1 "$OUT/pytest7b.txt")" | tee -a "$OUT/summary7b.txt"
timeout 120 python3 bench/ladder.py --out "$OUT/ladder.json" >"$OUT/ladder.txt" 2>&1
echo "ladder exit $?" | tee -a "$OUT/summary7b.txt"
tail -16 "$OUT/ladder.txt"
