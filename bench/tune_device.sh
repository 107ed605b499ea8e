#!/usr/bin/env bash
# Issue 8, item 1 on a GPU machine (the H200): `tiledsl tune` over bench/tune/hgemm_space.tile
# at 4096³ in three runs that share one record, then the winner run on its own, then
# tests/test_tune.py (its GPU test included). One call, under 9 minutes.
#
#     OUT=/some/dir bash bench/tune_device.sh
#
# 1. --budget 40: prune (96 points -> 72), NVRTC on every core into a fresh kernel cache,
#    check and time 40 of the 72 (a fixed sample), record them;
# 2. no budget: the 40 are reused from the record, the other 32 timed;
# 3. again: all 72 reused, nothing timed (the record's reuse, end to end);
# then `tiledsl run` of the written best file and of examples/hgemm.tile (checked, against
# cuBLAS), and pytest tests/test_tune.py.
#
# Run from anywhere, with tiledsl importable (PYTHONPATH=repo:/tmp/site; lark and graphviz
# are installed from .whl/ into /tmp/site when missing). Each step runs under `timeout`,
# capped so that the script ends within DEADLINE seconds; a failed step does not stop the
# next. $OUT gets 6 files: summary.txt tune.txt tune-record.jsonl hgemm.best.tile run.txt
# pytest.txt.
set -u
DEADLINE=${DEADLINE:-530}
. "$(dirname "$0")/device_steps.sh"  # OUT, the repo root, PY, SUMMARY, note, step
# A fresh kernel cache, so that run 1 really compiles every candidate with NVRTC.
TILEDSL_CACHE_DIR=$(mktemp -d /tmp/tiledsl-tune-cache.XXXX)
export TILEDSL_CACHE_DIR
note "tiledsl tune on $(hostname), $(date -Is), git $(git rev-parse --short HEAD 2>/dev/null || echo '(none)'), $(nproc) CPU cores"
nvidia-smi -L 2>&1 | sed 's/^/  /' | tee -a "$SUMMARY"

SPACE=bench/tune/hgemm_space.tile
TUNE=(
    $PY -m tiledsl.cli tune "$SPACE" --size 4096x4096x4096
    --record "$OUT/tune-record.jsonl" -o "$OUT/hgemm.best.tile"
)
step "tune 1: --budget 40" 240 "$OUT/tune.txt" "${TUNE[@]}" --budget 40
step "tune 2: the other 32" 200 "$OUT/tune.txt" "${TUNE[@]}"
step "tune 3: all reused" 60 "$OUT/tune.txt" "${TUNE[@]}"
grep -E "^(tune:|reused|fastest|  [0-9])|cuBLAS\)" "$OUT/tune.txt" | sed 's/^/  /' >>"$SUMMARY"
grep -c '"status": "ok"' "$OUT/tune-record.jsonl" 2>/dev/null |
    sed 's/^/  record: ok lines: /' >>"$SUMMARY"

if [ -f "$OUT/hgemm.best.tile" ]; then
    step "run: the best point" 90 "$OUT/run.txt" \
        $PY -m tiledsl.cli run "$OUT/hgemm.best.tile" --seed 1
fi
step "run: examples/hgemm.tile" 90 "$OUT/run.txt" $PY -m tiledsl.cli run examples/hgemm.tile --seed 1
grep -E "^[a-z_0-9]+: |time .* ms|^  (PASS|FAIL)$" "$OUT/run.txt" | sed 's/^/  /' >>"$SUMMARY"

step "pytest tests/test_tune.py" 120 "$OUT/pytest.txt" $PY -m pytest -q -rs tests/test_tune.py
tail -3 "$OUT/pytest.txt" | sed 's/^/  /' >>"$SUMMARY"
note "done in $(($(date +%s) - START)) s"
