"""Cache growth over many evaluations (GPU machine): the disk an overnight run needs.

    python benchmarks/cache_bench.py [--task gelu] [--evals 100] [--time-budget 0.5] [--out bench-out]

Evaluates the task's naive kernel --evals times (each with its own seed, as an optimization run does) and
writes OUT/cache.md and OUT/cache.json: the cache's size per kind before, after the first evaluation and
after the last, and how many benchmark-data entries the run added (at most one per input set: 4).
The cache is $CUDA_LLM_CACHE (run_gpu.sh sets it); the cap applies as in any run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_llm.paths import cache_dir  # noqa: E402
from cuda_llm.tasks import load_task  # noqa: E402
from cuda_llm import cache_store  # noqa: E402
from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate  # noqa: E402
from cuda_llm.tools.harness.timing_budget import TimingBudget  # noqa: E402


def snapshot() -> dict[str, list[int]]:
    return {k: [n, b] for k, (n, b) in sorted(cache_store.usage(cache_dir()).items())}


def table(rows: list[tuple[str, dict[str, list[int]]]]) -> str:
    kinds = sorted({k for _, s in rows for k in s})
    out = ["| cache | " + " | ".join(kinds) + " | total |", "|---|" + "---:|" * (len(kinds) + 1)]
    for label, s in rows:
        cells = [f"{s[k][0]} / {s[k][1] / 1e6:.1f} MB" if k in s else "-" for k in kinds]
        out.append(f"| {label} | " + " | ".join(cells) + f" | {sum(v[1] for v in s.values()) / 1e9:.3f} GB |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="gelu")
    ap.add_argument("--evals", type=int, default=100)
    ap.add_argument("--time-budget", type=float, default=0.5)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    loaded = load_task(args.task)
    src = loaded.task.baseline_path.read_text()
    rows = [("before", snapshot())]
    seconds, statuses = [], {}
    for i in range(args.evals):
        t0 = time.perf_counter()
        res = evaluate_candidate(loaded, src, candidate=f"naive-{i}",
                                 options=EvalOptions(budget=TimingBudget(time_budget_s=args.time_budget, min_time_s=0.1), seed=1000 + i))
        seconds.append(time.perf_counter() - t0)
        statuses[res.status.value] = statuses.get(res.status.value, 0) + 1
        if i == 0:
            rows.append(("after 1 evaluation", snapshot()))
        print(f"[cache-bench] {i + 1}/{args.evals}: {res.status.value} in {seconds[-1]:.2f} s", file=sys.stderr, flush=True)
    rows.append((f"after {args.evals} evaluations", snapshot()))
    added = rows[-1][1].get("benchdata", [0, 0])[0] - rows[0][1].get("benchdata", [0, 0])[0]
    md = [f"# Cache growth: {args.evals} evaluations of {args.task}'s naive kernel", "",
          f"Cache {cache_dir()}, cap {cache_store.max_bytes() / 1e9:.0f} GB. Entries / size per kind:", "",
          table(rows), "",
          f"Benchmark-data entries added: {added} (at most 4: one per input set). Statuses: {statuses}. "
          f"Median evaluation {statistics.median(seconds):.2f} s (the first, which made the data: {seconds[0]:.1f} s)."]
    (args.out / "cache.md").write_text("\n".join(md) + "\n")
    (args.out / "cache.json").write_text(json.dumps({"rows": rows, "added_benchdata": added, "seconds": seconds,
                                                     "statuses": statuses}, indent=1))
    print("\n".join(md))
    return 0 if added <= 4 else 1


if __name__ == "__main__":
    sys.exit(main())
