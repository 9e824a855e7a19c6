#!/usr/bin/env bash
# THE GPU script: install the carried wheels, run the GPU tests, the harness benchmark, then the
# profiling and loop benchmarks where they exist, and the feature table; copy bench-out/ to $OUT; print a
# summary table LAST. Run from the repository root on the GPU machine, with carry [".whl"].
# A failing step never stops the others: every step's exit code and time go into the summary.
#
# Environment:
#   SKIP_TESTS=1        skip the pytest -m gpu run (the judge's GPU tests)
#   TASKS=a,b           only these tasks in the harness and profiling benchmarks
#   STEPS="doctor tests long harness profile loop tune features report audit manual record diagnosis detector torch"
#                       the steps to run (default: all these)
#                       tests: `pytest -m gpu` (the judge, 5 minutes); long: `pytest -m gpu_long` (end-to-end
#                       runs, Nsight Compute, torch.compile, tuning, the pool, every exemplar, Hopper builds;
#                       LONG_ARGS names files or -k); hopper, exemplars, pool: one file of the long tests each
#                       doctor: `cuda-llm doctor --no-llm` (bench-out/doctor.txt); report: the loop step's straight
#                       run as report.html + report.json (bench-out/; screenshot it with benchmarks/report_shot.py)
#                       audit: benchmarks/prompt_audit.py with the GPU's own timings and profiles (--evaluator gpu);
#                       manual: benchmarks/manual_run.py, a 3-round softmax run whose coder answers are hand-written
#                       demo (only when named): the manual softmax run kept whole, trimmed by
#                       benchmarks/record_demo.py from-run into bench-out/recorded-demo/ (what `cuda-llm demo` ships:
#                       copy it over cuda_llm/runs/recorded/softmax/)
#                       hopper (only when named): tensor peaks with wgmma, the wgmma hgemm and the TMA transpose
#                       through the harness, cuBLAS below 100% of speed of light
#                       transport (only when named): the CPU transport measurement; cache (only when named):
#                       cache growth over 100 evaluations, ~5 min
#                       torch: benchmarks/torch_bench.py on the sample modules (MODULES=a,b; TORCH_ARGS)
#                       tune: benchmarks/tune_bench.py, the search's best point against the exhaustive best
#                       exemplars: every catalogue exemplar built and checked on the GPU;
#                       record: Nsight Compute recordings of the known kernels (tests/fixtures/ncu/record.py)
#                       into bench-out/ncu-rec; diagnosis: the verdict table on the fixtures with those
#                       recordings merged in; detector: precision and recall of the detectors (CPU only)
#                       throughput (only when named): benchmarks/throughput_bench.py, candidates per GPU-hour of
#                       today's path, the GPU pool on one GPU, on every GPU, and through Ray where installed
#                       (THROUGHPUT_ARGS, e.g. "--candidates 24 --passes 2 --modes pool-1,pool-N"); pool: the
#                       pool's GPU tests and a 2-task `cuda-llm batch` with the scripted model on every GPU
#                       (tests/test_gpu_pool_gpu.py)
#                       scale (only when named): issue #35 in one step: throughput_bench.py --mix (slow kernels, a
#                       hang, a compile error) over pool-1,pool-2,pool-4,ray-1,ray-2,ray-4 (SCALE_MODES, SCALE_CANDIDATES;
#                       carry .raylite/ for Ray), then the fault tests (tests/test_scale_faults_gpu.py)
#                       kbstart / kbstep (only when named): benchmarks/kernelbench_batch.py start / step on
#                       kb-runs/ (carry it; KB_GPUS=0,1,2,3), the runs folder back as bench-out/kb-runs.tar.gz
#   MODULES=a,b         only these sample modules in the torch step (benchmarks/torch_bench.py)
#   TORCH_ARGS=...      extra torch_bench.py arguments (e.g. "--no-compile")
#   PYTEST_ARGS=...     extra pytest arguments of the tests step (e.g. "-k adversarial")
#   LONG_ARGS=...       extra pytest arguments of the long step (e.g. "tests/test_torch_gpu.py")
#   HARNESS_ARGS=...    extra harness_bench.py arguments (e.g. "--repeats 3 --eval-time 1")
#   CACHE_ARGS=...      extra cache_bench.py arguments (e.g. "--evals 50")
#   TUNE_ARGS=...       extra tune_bench.py arguments (e.g. "--budget 8 --seeds 10 --tasks reduce_sum")
#   OUT=dir             where the results are copied (the device runner sets it)
#   INSTALL_WHEELS=0    use the current Python environment instead of the carried .whl/ wheels
#   DEADLINE_S=540      seconds for the whole script: each step is stopped (timeout) when they run out,
#                       so that the summary and the copy to $OUT still happen inside a 10-minute device
#                       command. A full run does not fit in one: split it with STEPS / PYTEST_ARGS.
set -u
cd "$(dirname "$0")/.." || exit 1
if [ "${INSTALL_WHEELS:-1}" = "1" ] && ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
  [ -f .raylite/ray-lite.tar.xz ] && tar xJf .raylite/ray-lite.tar.xz -C /tmp/site   # carried Ray (ray-bundle.sh)
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
export CUDA_LLM_CACHE="${CUDA_LLM_CACHE:-/tmp/cuda-llm-cache}"
STEPS="${STEPS:-doctor tests long harness profile loop tune features report audit manual record diagnosis detector torch}"
[ "${SKIP_TESTS:-0}" = "1" ] && STEPS="${STEPS//tests/}"
BENCH="${BENCH:-bench-out}"     # two instances side by side (on different GPUs) need two folders
rm -rf "$BENCH"    # a summary must never show the logs of an earlier call (they went to that call's $OUT)
mkdir -p "$BENCH"
summary=()
start=$(date +%s)

DEADLINE_S="${DEADLINE_S:-540}"
sync_out() {  # results so far to $OUT: a command stopped from outside still returns what was done
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT" && cp -r "$BENCH"/. "$OUT"/ 2>/dev/null
    rm -rf "$OUT/harness-work" 2>/dev/null   # request files and reports of single runs: not results
  fi
}
step() {  # name, log file, command...  (output to the log and to this console)
  local name=$1 log=$2; shift 2
  local t0 rc left
  t0=$(date +%s)
  left=$(( DEADLINE_S - (t0 - start) ))
  if [ "$left" -lt 20 ]; then
    summary+=("$(printf '%-10s %-6s %5ss  (not run: DEADLINE_S=%s spent)' "$name" "skip" 0 "$DEADLINE_S")")
    return
  fi
  echo "==== $name (at most ${left}s): $*" >&2
  timeout -k 10 "$left" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local note=""
  [ "$rc" = "124" ] && note="  (stopped at the deadline)"
  summary+=("$(printf '%-10s rc=%-3s %5ss%s' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$note")")
  sync_out
}
wants() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$BENCH/gpu.txt" 2>&1

# PYTEST_ARGS / HARNESS_ARGS are parsed like a shell line, so quotes work: PYTEST_ARGS="-k 'not slow'"
pytest_args=(); long_args=(); harness_args=(); cache_args=(); tune_args=(); torch_args=(); throughput_args=()
[ -n "${THROUGHPUT_ARGS:-}" ] && eval "throughput_args=(${THROUGHPUT_ARGS})"
[ -n "${PYTEST_ARGS:-}" ] && eval "pytest_args=(${PYTEST_ARGS})"
[ -n "${LONG_ARGS:-}" ] && eval "long_args=(${LONG_ARGS})"
[ -n "${TORCH_ARGS:-}" ] && eval "torch_args=(${TORCH_ARGS})"
[ -n "${HARNESS_ARGS:-}" ] && eval "harness_args=(${HARNESS_ARGS})"
[ -n "${CACHE_ARGS:-}" ] && eval "cache_args=(${CACHE_ARGS})"
[ -n "${TUNE_ARGS:-}" ] && eval "tune_args=(${TUNE_ARGS})"
if wants doctor; then
  step doctor "$BENCH/doctor.txt" python3 -m cuda_llm.cli doctor --no-llm --runs-dir "$BENCH/doctor-runs"
fi
if wants tests; then
  step tests "$BENCH/gpu-tests.log" python3 -m pytest -m gpu -q -rA --durations=25 ${pytest_args[@]+"${pytest_args[@]}"}
fi
if wants long; then
  step long "$BENCH/gpu-long.log" python3 -m pytest -m gpu_long -q -rA --durations=25 ${long_args[@]+"${long_args[@]}"}
fi
if wants harness; then
  step harness "$BENCH/harness.log" python3 benchmarks/harness_bench.py --out "$BENCH" ${harness_args[@]+"${harness_args[@]}"}
fi
if wants profile && [ -f benchmarks/profile_bench.py ]; then
  step profile "$BENCH/profile.log" python3 benchmarks/profile_bench.py --out "$BENCH" ${TASKS:+--tasks "$TASKS"}
fi
if wants loop && [ -f benchmarks/loop_bench.py ]; then
  step loop "$BENCH/loop.log" python3 benchmarks/loop_bench.py --out "$BENCH"
fi
if wants transport; then
  step transport "$BENCH/transport.log" python3 benchmarks/transport_bench.py --out "$BENCH"
fi
if wants cache; then
  step cache "$BENCH/cache.log" python3 benchmarks/cache_bench.py --out "$BENCH" ${cache_args[@]+"${cache_args[@]}"}
fi
if wants tune && [ -f benchmarks/tune_bench.py ]; then
  step tune "$BENCH/tune.log" python3 benchmarks/tune_bench.py --out "$BENCH" ${tune_args[@]+"${tune_args[@]}"}
fi
if wants features; then
  step features "$BENCH/features.txt" python3 -m cuda_llm.cli features --arch sm_90
fi
if wants report && [ -d "$BENCH/loop-runs/straight/runs" ]; then
  run_dir=$(ls -d "$BENCH"/loop-runs/straight/runs/*/ 2>/dev/null | tail -n 1)
  step report "$BENCH/report.log" sh -c "python3 -m cuda_llm.cli report '$run_dir' --html && \
    python3 -m cuda_llm.cli report '$run_dir' --json > '$BENCH/report.json' && cp '$run_dir/report.html' '$BENCH/report.html'"
fi
if wants audit && [ -f benchmarks/prompt_audit.py ]; then
  step audit "$BENCH/audit.log" python3 benchmarks/prompt_audit.py --evaluator gpu --rounds 2 --out "$BENCH"
fi
if wants manual && [ -f benchmarks/manual_run.py ]; then
  step manual "$BENCH/manual.log" python3 benchmarks/manual_run.py --out "$BENCH"
fi
if wants demo; then
  rm -rf /tmp/cuda-llm-demo-runs
  step demo "$BENCH/demo.log" sh -c "python3 benchmarks/manual_run.py --out '$BENCH/demo-manual' \
    --runs-dir /tmp/cuda-llm-demo-runs && python3 benchmarks/record_demo.py from-run \
    \"\$(ls -d /tmp/cuda-llm-demo-runs/*/ | tail -n 1)\" --out '$BENCH/recorded-demo'"
fi
if wants hopper; then
  step hopper "$BENCH/hopper.log" python3 -m pytest -m gpu_long -q -rA -s tests/test_hopper_gpu.py
fi
if wants exemplars; then
  step exemplars "$BENCH/exemplars.log" python3 -m pytest -m gpu_long -q -rA tests/test_exemplars_gpu.py
fi
if wants record; then
  step record "$BENCH/record.log" python3 tests/fixtures/ncu/record.py record --out "$BENCH/ncu-rec" \
    --tasks "${RECORD_TASKS:-sgemm_cublas,hgemm_cublas,gemv_cublas,reduce_sum_cub,prefix_sum_cub,softmax_tuned,sgemm_tiled,sgemm}"
fi
if wants diagnosis; then
  rm -rf /tmp/ncu-fixtures && cp -r tests/fixtures/ncu /tmp/ncu-fixtures
  [ -f "$BENCH/ncu-rec/summary.json" ] && python3 tests/fixtures/ncu/record.py merge --replace --from "$BENCH/ncu-rec" --into /tmp/ncu-fixtures
  step diagnosis "$BENCH/diagnosis.log" python3 benchmarks/diagnosis_bench.py --out "$BENCH" --fixtures /tmp/ncu-fixtures
fi
if wants detector; then
  step detector "$BENCH/detector.log" python3 benchmarks/detector_bench.py --out "$BENCH"
fi
if wants torch; then
  step torch "$BENCH/torch.log" python3 benchmarks/torch_bench.py --out "$BENCH" ${torch_args[@]+"${torch_args[@]}"}
fi
if wants throughput; then
  step throughput "$BENCH/throughput.log" python3 benchmarks/throughput_bench.py --out "$BENCH" \
    ${throughput_args[@]+"${throughput_args[@]}"}
fi
if wants kbstart; then     # KernelBench batch (docs/kernelbench-results.md), carry kb-runs/: start it
  step kbstart "$BENCH/kbstart.log" python3 benchmarks/kernelbench_batch.py start --runs-dir kb-runs \
    --gpus "${KB_GPUS:-0,1,2,3}" --deadline-s "$(( DEADLINE_S - 40 - ($(date +%s) - start) ))" --out "$BENCH"
fi
if wants kbstep; then      # ... and resume every answered run of it
  # the batch's own deadline leaves 150 s: a stopped batch lets each run finish its current evaluation (up to a
  # minute and a half at KernelBench's sizes), writes its pages, and the runs folder is packed for $OUT
  step kbstep "$BENCH/kbstep.log" python3 benchmarks/kernelbench_batch.py step --runs-dir kb-runs \
    --deadline-s "$(( DEADLINE_S - 150 - ($(date +%s) - start) ))" --out "$BENCH" ${KB_GPUS:+--gpus "$KB_GPUS"} \
    ${KB_KILL_AFTER:+--kill-after-s "$KB_KILL_AFTER"} ${KB_MAX_ROUNDS:+--max-rounds "$KB_MAX_ROUNDS"} \
    ${KB_MORE_ROUNDS:+--more-rounds "$KB_MORE_ROUNDS"}
fi
if wants agentstart || wants agentstep; then   # issue #36: benchmarks/agent_bench.py, carry agent-runs/
  # AGENT_SETS="model:0,1 rules:2,3": each set's runs folder agent-runs/<set> on its own GPUs, side by side
  for spec in ${AGENT_SETS:-model:0,1 rules:2,3}; do
    set_name=${spec%%:*}; set_gpus=${spec#*:}
    if wants agentstart; then
      roles=(); [ "$set_name" = "model" ] && roles=(--planner manual --critic manual)
      CUDA_VISIBLE_DEVICES=$set_gpus step "agent-$set_name" "$BENCH/agent-$set_name.log" python3 benchmarks/agent_bench.py \
        start --tasks "${AGENT_TASKS:-conv2d,cross_entropy,kmeans_assign}" --runs-dir "agent-runs/$set_name" "${roles[@]}" &
    else
      CUDA_VISIBLE_DEVICES=$set_gpus step "agent-$set_name" "$BENCH/agent-$set_name.log" python3 benchmarks/agent_bench.py \
        step --runs-dir "agent-runs/$set_name" &
    fi
  done
  wait
  tar -czf "$BENCH/agent-runs.tar.gz" --exclude='*/report.html' --exclude='*/work' agent-runs && sync_out
fi
if wants scale; then       # issue #35: 1/2/4 GPUs, pool and Ray, a mixed queue; then the fault tests
  step scale "$BENCH/scale.log" python3 benchmarks/throughput_bench.py --out "$BENCH" --mix \
    --candidates "${SCALE_CANDIDATES:-16}" --modes "${SCALE_MODES:-pool-1,pool-2,pool-4,ray-1,ray-2,ray-4}" ${throughput_args[@]+"${throughput_args[@]}"}
  step faults "$BENCH/faults.log" python3 -m pytest -m gpu_long -q -rA -s tests/test_scale_faults_gpu.py
fi
if wants harnesscost; then  # the judge's cost against the version in .before/ (git archive of it), same GPU
  step hcbefore "$BENCH/harness-before.log" env PYTHONPATH="${PYTHONPATH/$PWD/$PWD/.before}" python3 .before/benchmarks/harness_bench.py \
    --out "$BENCH/before" --ncu-tasks "" --repeats 1 ${TASKS:+--tasks "$TASKS"} ${harness_args[@]+"${harness_args[@]}"}
  step hcafter "$BENCH/harness-after.log" python3 benchmarks/harness_bench.py --out "$BENCH/after" --ncu-tasks "" \
    --repeats 1 --against "$BENCH/before/harness.json" ${TASKS:+--tasks "$TASKS"} ${harness_args[@]+"${harness_args[@]}"}
fi
if wants range; then       # issue #32: range-limited kernels, memo rates, the hang (tests/test_judge_range_gpu.py)
  step range "$BENCH/range.log" python3 -m pytest -m gpu_long -q -rA -s tests/test_judge_range_gpu.py
fi
if wants rejudge; then     # every kept kernel judged again by today's judge
  step rejudge "$BENCH/rejudge.log" python3 benchmarks/rejudge_bench.py --gpus "${REJUDGE_GPUS:-0}" --out "$BENCH/rejudge.md" ${REJUDGE_ARGS:-}
fi
if wants pool; then
  step pool "$BENCH/pool.log" python3 -m pytest -m gpu_long -q -rA -s tests/test_gpu_pool_gpu.py
fi

sync_out

# ------------------------------------------------------------------ summary (last thing printed)
echo
echo "==== pytest failures"
cat "$BENCH/gpu-tests.log" "$BENCH/gpu-long.log" "$BENCH/hopper.log" "$BENCH/exemplars.log" "$BENCH/pool.log" "$BENCH/range.log" 2>/dev/null \
  | grep -E "^(FAILED|ERROR) " | head -n 40
echo "==== harness"
cat "$BENCH/harness.md" "$BENCH/after/harness-cost.md" 2>/dev/null
[ -f "$BENCH/rejudge.md" ] && grep -vE "\| ok \|" "$BENCH/rejudge.md"
echo "==== torch"
cat "$BENCH/torch.md" 2>/dev/null
echo
echo "==================== SUMMARY ($(( $(date +%s) - start )) s) ===================="
cat "$BENCH/gpu.txt" 2>/dev/null
printf '%s\n' "${summary[@]}"
if [ -f "$BENCH/gpu-tests.log" ]; then
  echo "tests:    $(grep -E '[0-9]+ (passed|failed|errors?|skipped|deselected)' "$BENCH/gpu-tests.log" | tail -n 1 | tr -d '=')"
fi
[ -f "$BENCH/harness.md" ] && echo "harness:  $(grep -E '^Naive baselines ok' "$BENCH/harness.md")" \
  && echo "          $(grep -E '^Median evaluation' "$BENCH/harness.md" | cut -c1-220)"
[ -f "$BENCH/profile.md" ] && echo "profile:  $(grep -m1 -iE 'median|seconds per' "$BENCH/profile.md" | cut -c1-200)"
[ -f "$BENCH/loop.md" ] && echo "loop:     $(grep -m1 -iE 'stop|speedup' "$BENCH/loop.md" | cut -c1-200)"
[ -f "$BENCH/transport.md" ] && echo "transport: $(grep -E '^\| (npy-write-mmap-read|pipe) ' "$BENCH/transport.md" | tr '\n' ' ')"
[ -f "$BENCH/cache.md" ] && echo "cache:    $(grep -E '^Benchmark-data entries added' "$BENCH/cache.md" | cut -c1-200)"
[ -f "$BENCH/tune.md" ] && echo "tune:" && grep -E '^\| (sgemm|reduce_sum|transpose) ' "$BENCH/tune.md"
[ -f "$BENCH/torch.md" ] && echo "torch:    $(awk '/^-+  /{t=1; next} t && NF==0{exit} t{n++} END{print n+0}' "$BENCH/torch.md") modules in torch.md"
[ -f "$BENCH/features.txt" ] && echo "features: $(grep -cE '^[a-z_]+ ' "$BENCH/features.txt") rows in features.txt"
[ -f "$BENCH/doctor.txt" ] && echo "doctor:   $(grep -E '^(ok|warn|FAIL) ' "$BENCH/doctor.txt" | awk '{print $2"="$1}' | tr '\n' ' ')"
[ -f "$BENCH/report.html" ] && echo "report:   report.html $(wc -c < "$BENCH/report.html") bytes"
[ -f "$BENCH/prompt_audit.md" ] && echo "audit:    $(grep -c '| NO |' "$BENCH/prompt_audit.md") checklist items missing (prompt_audit.md)"
[ -f "$BENCH/manual_run.md" ] && echo "manual:   $(grep -m1 '^status:' "$BENCH/manual_run.md")"
[ -f "$BENCH/hopper.log" ] && grep -E '^(device |cuBLAS hgemm|hgemm_wgmma |transpose_tma )' "$BENCH/hopper.log" | sed 's/^/hopper:   /' \
  && echo "hopper:   $(grep -E '[0-9]+ (passed|failed)' "$BENCH/hopper.log" | tail -n 1 | tr -d '=')"
[ -f "$BENCH/exemplars.log" ] && echo "exemplars: $(grep -E '[0-9]+ (passed|failed)' "$BENCH/exemplars.log" | tail -n 1 | tr -d '=')"
[ -f "$BENCH/diagnosis.md" ] && echo "diagnosis: $(sed -n 3p "$BENCH/diagnosis.md" | cut -c1-200)"
[ -f "$BENCH/detector.md" ] && echo "detector: $(sed -n 3p "$BENCH/detector.md" | cut -c1-200)"
[ -f "$BENCH/throughput.md" ] && echo "throughput:" && grep -E '^(\| (today|pool-[0-9N]+|pool-N-threads|ray(-[0-9]+)?) |- )' "$BENCH/throughput.md"
[ -f "$BENCH/kbstart.log" ] && echo "kbstart:  $(grep -E 'prompt\(s\) waiting|^# exit|^packed' "$BENCH/kbstart.log" | tr '\n' ' ')"
[ -f "$BENCH/kbstep.log" ] && echo "kbstep:   $(grep -E 'prompt\(s\) waiting|^# exit|^packed' "$BENCH/kbstep.log" | tr '\n' ' ')"
[ -f "$BENCH/faults.log" ] && echo "faults:   $(grep -E '[0-9]+ (passed|failed)' "$BENCH/faults.log" | tail -n 1 | tr -d '=')" \
  && grep -E '^pool-gpu-(fault|missing|resume|ray): ' "$BENCH/faults.log"
[ -f "$BENCH/pool.log" ] && echo "pool:     $(grep -E '[0-9]+ (passed|failed)' "$BENCH/pool.log" | tail -n 1 | tr -d '=')" \
  && grep -E '^pool-gpu: ' "$BENCH/pool.log"
exit 0
