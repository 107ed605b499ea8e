# Sourced by the bench/*_device.sh scripts (one call of the device tool each):
#
#     DEADLINE=${DEADLINE:-560}   # optional: seconds the whole script may take
#     . "$(dirname "$0")/device_steps.sh"
#
# Checks $OUT, goes to the repository root, makes tiledsl (and lark/graphviz from .whl/)
# importable, empties $OUT/summary.txt, and defines:
#   note TEXT...              echo TEXT and append it to summary.txt
#   step NAME CAP LOG CMD...  run CMD under timeout (CAP s, less if the deadline is nearer),
#                             appending to LOG; its status and time go to summary.txt. A
#                             failed step does not stop the script; one with < 15 s left is
#                             skipped and says so.
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
START=$(date +%s)
DEADLINE=${DEADLINE:-560}
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
    if [ "$limit" -lt 15 ]; then
        note "SKIPPED $name (only ${left}s left)"
        return 0
    fi
    local t0=$(date +%s)
    echo "\$ $* (timeout ${limit}s)" >>"$log"
    timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1
    local rc=$?
    echo "(exit $rc)" >>"$log"
    note "$(printf '%-40s exit %-3s %4ss' "$name" "$rc" "$(($(date +%s) - t0))")$([ "$rc" = 124 ] && echo '  TIMED OUT')"
    return $rc
}

if ! $PY -c "import lark, graphviz" 2>/dev/null; then
    $PY -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >>"$SUMMARY" 2>&1 ||
        note "could not install lark/graphviz from .whl/"
fi
