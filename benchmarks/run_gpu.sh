#!/usr/bin/env bash
# THE GPU script: install the carried wheels, run the GPU tests, the harness benchmark, then the
# profiling and loop benchmarks where they exist; copy everything to $OUT; print a summary table last.
# Run from the repository root on the GPU machine, with carry [".whl"].
set -u
OUT="${OUT:-bench-out/gpu}"
mkdir -p "$OUT" bench-out
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export CUDA_LLM_CACHE="${CUDA_LLM_CACHE:-/tmp/cuda-llm-cache}"
STEPS="${STEPS:-tests harness profile loop}"
summary=()
start=$(date +%s)
step() {  # name, command...
  local name=$1; shift
  local t0=$(date +%s)
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-10s rc=%-3s %5ss' "$name" "$rc" "$(( $(date +%s) - t0 ))")")
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
case " $STEPS " in *" tests "*) step tests python3 -m pytest -m gpu -q -rA ${PYTEST_ARGS:-} ;; esac
case " $STEPS " in *" harness "*) step harness python3 benchmarks/harness_bench.py ${HARNESS_ARGS:-} --out bench-out;
  cp bench-out/harness.md bench-out/harness.json "$OUT/" 2>/dev/null ;; esac
case " $STEPS " in *" profile "*) [ -f benchmarks/profile_bench.py ] && step profile python3 benchmarks/profile_bench.py ;; esac
case " $STEPS " in *" loop "*) [ -f benchmarks/loop_bench.py ] && step loop python3 benchmarks/loop_bench.py ;; esac
cp bench-out/*.md bench-out/*.json "$OUT/" 2>/dev/null
echo "==== pytest tail"; tail -n 25 "$OUT/tests.log" 2>/dev/null
echo "==== harness"; cat bench-out/harness.md 2>/dev/null
echo "==== summary ($(( $(date +%s) - start )) s)"; cat "$OUT/gpu.txt"; printf '%s\n' "${summary[@]}"
