#!/usr/bin/env bash
# The proof of the demos on a CUDA GPU: every check in one run of at most
# GPU_CHECK_BUDGET seconds (360 by default), written to $OUT as it goes (benchmarks/ when
# OUT is unset), so what finished survives a timeout. docs/GPU_CHECK.md says what it checks
# and how to run it (and how to bring the packages to a GPU machine without PyPI: .whl/,
# made by benchmarks/gpu_wheels.sh).
#
#   OUT=/tmp/gpucheck bash benchmarks/gpu_check.sh          # dry run on a CPU: CUDA steps skip
#   GPU_CHECK_STEPS="bench dtypes" bash benchmarks/gpu_check.sh   # only these steps (a rerun)
#
# Steps: environment (and the carried wheels), cuda-tests, bench, bench-criteria, dtypes,
# layer-shape, faults, pages, suite. Each is timed and capped with `timeout`; a failed step
# does not stop the others. A summary table ends the output; exit 1 if any step failed.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUDGET=${GPU_CHECK_BUDGET:-360}
START=$(date +%s)
LOG=$OUT/gpu-check.log
SUMMARY=$OUT/gpu-check-summary.md
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3; fi

NAMES=() STATUSES=() SECONDS_TAKEN=()
printf '| step | status | seconds |\n|---|---|---:|\n' >"$SUMMARY"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
record() {
    NAMES+=("$1") STATUSES+=("$2") SECONDS_TAKEN+=("$3")
    printf '| %s | %s | %s |\n' "$1" "$2" "$3" >>"$SUMMARY"
    echo "=== $1: $2 (${3}s)"
}
wanted() { [ -z "${GPU_CHECK_STEPS:-}" ] || [[ " $GPU_CHECK_STEPS " == *" $1 "* ]]; }
skip() { echo; record "$1" "skipped: $2" 0; }

# step NAME SECONDS COMMAND...: run it under `timeout` (capped by what is left of the budget)
step() {
    local name=$1 limit=$2 left rc status t0
    shift 2
    wanted "$name" || return 0
    left=$((START + BUDGET - $(date +%s)))
    if ((left < 10)); then skip "$name" "out of time (budget ${BUDGET}s)"; return 0; fi
    ((limit > left)) && limit=$left
    echo
    echo "=== $name (at most ${limit}s): $*"
    t0=$(now)
    timeout --kill-after=10 "$limit" "$@"
    rc=$?
    case $rc in
        0) status=ok ;;
        124 | 137) status="TIMEOUT at ${limit}s" ;;
        *) status="FAILED (exit $rc)" ;;
    esac
    record "$name" "$status" "$(since "$t0")"
}

# --- 0. environment: the GPU, Python and torch; the carried wheels -------------------------
echo "=== environment: $(date -u '+%F %T UTC'), $(uname -srm), OUT=$OUT, budget ${BUDGET}s"
t0=$(now)
env_status=ok
if command -v nvidia-smi >/dev/null; then
    timeout 30 nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version \
        --format=csv || env_status="FAILED (nvidia-smi)"
else
    echo "nvidia-smi: not found"
fi
PY_VERSION=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if compgen -G ".whl/*.whl" >/dev/null && [ "$PY_VERSION" != 3.12 ]; then
    # The wheels are for the GPU image's Python 3.12: here only check that they would install.
    timeout 60 "$PY" -m pip install -q --dry-run --no-index --no-deps --python-version 3.12 \
        --only-binary=:all: --target /tmp/gpu-check-dry .whl/*.whl \
        && echo "the carried wheels would install on Python 3.12 (this is $PY_VERSION: not installed)" \
        || env_status="FAILED (the carried wheels would not install)"
elif compgen -G ".whl/*.whl" >/dev/null; then
    SITE=${GPU_CHECK_SITE:-/tmp/gpu-check-site}
    if timeout 180 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$SITE" .whl/*.whl; then
        export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
        echo "installed $(compgen -G '.whl/*.whl' | wc -l) carried wheels into $SITE"
    else
        env_status="FAILED (installing .whl)"
    fi
fi
if ! "$PY" -c "import playwright.sync_api" 2>/dev/null; then
    STUBS=/tmp/gpu-check-stubs
    "$PY" benchmarks/gpu_check.py stub-playwright "$STUBS" >/dev/null \
        && export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$STUBS"
    echo "playwright is not installed: an import stand-in in $STUBS (no browser test runs)"
fi
"$PY" benchmarks/gpu_check.py env || env_status="FAILED (imports)"
CUDA=$("$PY" -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)
record environment "$env_status" "$(since "$t0")"
NO_CUDA="no CUDA"

# pytest, whatever the device: no browser, no plugin cache, a cap per test.
PYTEST=("$PY" -m pytest -p no:cacheprovider -q -rfEs --timeout=120 -m "not browser")

# --- 1. the CUDA-only tests (on a CPU: their CPU-sized twins; the suite runs elsewhere) ------
step cuda-tests 120 "${PYTEST[@]}" tests/demos/test_cuda.py tests/demos/test_cuda_checks.py \
    tests/demo_pages/test_gpu_pages.py

if [ "$CUDA" = 1 ]; then
    # --- 2. the engine's benchmark on CUDA, then the criteria on its figures ---------------
    step bench 180 "$PY" -m demos bench --device cuda --out "$OUT/results-cuda.json"
    step bench-criteria 30 "$PY" benchmarks/gpu_check.py --out "$OUT" verify-bench \
        "$OUT/results-cuda.json"
    # --- 2b. fp32 and bf16 with offload; 3. the 2B-class layer --------------------------------
    step dtypes 120 "$PY" benchmarks/gpu_check.py --out "$OUT" dtypes
    step layer-shape 90 "$PY" benchmarks/gpu_check.py --out "$OUT" layer-shape
else
    for name in bench bench-criteria dtypes layer-shape; do wanted "$name" && skip "$name" "$NO_CUDA"; done
fi

# --- 4. faults: over the limit, out of memory (CUDA), two runs at once ----------------------
step faults 90 "$PY" benchmarks/gpu_check.py --out "$OUT" faults

if [ "$CUDA" = 1 ]; then
    # --- 5. the demo pages under AppTest; then the rest of the suite with the time left -----
    step pages 150 "${PYTEST[@]}" tests/demo_pages
    step suite 600 "${PYTEST[@]}" --ignore=tests/browser --ignore=tests/test_make_run.py \
        --ignore=tests/demo_pages --ignore=tests/demos/test_cuda.py \
        --ignore=tests/demos/test_cuda_checks.py ${GPU_CHECK_PYTEST_ARGS:-}
else
    for name in pages suite; do
        wanted "$name" && skip "$name" "$NO_CUDA (the CPU suite: make test)"
    done
fi

# --- summary ---------------------------------------------------------------------------------
failed=0
echo
echo "=== summary ($(since "$START") s in all, budget ${BUDGET}s; CUDA=$CUDA; files in $OUT)"
printf '%-16s %-48s %8s\n' step status seconds
for i in "${!NAMES[@]}"; do
    printf '%-16s %-48s %8s\n' "${NAMES[$i]}" "${STATUSES[$i]}" "${SECONDS_TAKEN[$i]}"
    case ${STATUSES[$i]} in ok | skipped*) ;; *) failed=1 ;; esac
done
printf '\nTotal %s s; CUDA %s.\n' "$(since "$START")" "$CUDA" >>"$SUMMARY"
ls -l "$OUT" | grep -E 'gpu-check|results-' || true
[ -f "$OUT/results-cuda-checks.md" ] && sed -n '/^## Verdict/,$p' "$OUT/results-cuda-checks.md"
exit $failed
