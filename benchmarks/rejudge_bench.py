"""Every kernel the project keeps, judged again by today's judge: the suite's naive and library baselines,
the recorded demo runs' candidates, the model-written answers of the agent bench and the manual runs, the
profiled fixture kernels. Written when the judge's contract grew (inputs scaled to the ends of their
magnitudes, every timed call checked): which kept kernels now fail, and why.

    python benchmarks/rejudge_bench.py [--gpus 0,1,2,3] [--tasks a,b] [--out bench-out/rejudge.md]

Needs a CUDA device. One thread per GPU, each evaluation pinned to its GPU (EvalOptions.gpu); a short
timing budget (every timed call is still checked). Prints the table last and writes it to --out.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from queue import Queue

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_llm.tasks import load_task  # noqa: E402
from cuda_llm.tools.harness.eval_options import EvalOptions  # noqa: E402
from cuda_llm.tools.harness.evaluate import evaluate_candidate  # noqa: E402
from cuda_llm.tools.harness.failure_text import note  # noqa: E402
from cuda_llm.tools.harness.timing_budget import TimingBudget  # noqa: E402

QUICK = TimingBudget(time_budget_s=1.0, min_time_s=0.1, max_reps=60)
CUDA_BLOCK = re.compile(r"```(?:cuda|cpp|c\+\+|cu)?\s*\n(.*?)```", re.S)


@dataclass
class Kept:
    origin: str          # where the kernel is kept (a path relative to the repository)
    task: str
    source: str
    library: bool = False


def kept_kernels(tasks: set[str] | None, baselines: bool = True) -> list[Kept]:
    """Every kernel the repository keeps for a built-in task (``baselines``: the suite's naive and library
    kernels too, which the GPU tests judge anyway)."""
    out: list[Kept] = []
    suite = ROOT / "cuda_llm" / "tasks" / "suite"
    for folder in sorted(suite.iterdir()) if baselines else []:
        for name, lib in (("naive.cu", False), ("library.cu", True)):
            if (folder / name).is_file():
                out.append(Kept(str((folder / name).relative_to(ROOT)), folder.name, (folder / name).read_text(), lib))
    for run in sorted((ROOT / "cuda_llm" / "runs" / "recorded").iterdir()):
        for cu in sorted((run / "candidates").glob("r*c*.cu")):
            out.append(Kept(str(cu.relative_to(ROOT)), run.name, cu.read_text()))
    for folder in sorted((ROOT / "benchmarks" / "agent_answers").iterdir()):
        for md in sorted((folder / "answers").glob("coder-*.md")):
            blocks = CUDA_BLOCK.findall(md.read_text())
            if blocks:
                out.append(Kept(str(md.relative_to(ROOT)), folder.name, max(blocks, key=len)))
    for folder in sorted((ROOT / "benchmarks" / "manual_answers").iterdir()):
        for cu in sorted(folder.glob("*.cu")):
            out.append(Kept(str(cu.relative_to(ROOT)), folder.name, cu.read_text()))
    for cu in sorted((ROOT / "tests" / "fixtures" / "ncu" / "kernels").glob("*.cu")):
        task = cu.stem.split("_")[0]
        out.append(Kept(str(cu.relative_to(ROOT)), task, cu.read_text()))
    return [k for k in out if tasks is None or k.task in tasks]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0", help="comma-separated GPU indices, one evaluation thread each")
    ap.add_argument("--tasks", help="only these tasks (comma-separated)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "rejudge.md")
    ap.add_argument("--work", type=Path, default=ROOT / "bench-out" / "rejudge-work")
    ap.add_argument("--no-baselines", action="store_true", help="leave out the suite's naive and library kernels")
    args = ap.parse_args(argv)
    kernels = kept_kernels(set(args.tasks.split(",")) if args.tasks else None, baselines=not args.no_baselines)
    gpus = [int(g) for g in args.gpus.split(",")]
    free: Queue[int] = Queue()
    for g in gpus:
        free.put(g)
    t0 = time.perf_counter()

    def judge(k: Kept) -> tuple[Kept, str, str, str]:
        gpu = free.get()
        try:
            opts = EvalOptions(gpu=gpu, budget=QUICK, seed=11, allow_libraries=k.library)
            work = args.work / re.sub(r"[^A-Za-z0-9_.-]", "_", k.origin)
            res = evaluate_candidate(load_task(k.task), k.source, candidate=Path(k.origin).stem, options=opts,
                                     work_dir=work)
            checked = "" if res.timing is None else ("yes" if res.timing.every_call_checked else "no")
            print(f"[rejudge] {k.origin}: {res.status.value} ({time.perf_counter() - t0:.0f} s)", flush=True)
            return k, res.status.value, checked, note(res, 200)
        except Exception as exc:          # a row, never a crash of the table
            return k, "error", "", f"{type(exc).__name__}: {exc}"[:200]
        finally:
            free.put(gpu)

    with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
        rows = list(pool.map(judge, kernels))
    lines = ["| kernel | task | verdict | every call checked | note |", "|---|---|---|---|---|"]
    lines += [f"| {k.origin} | {k.task} | {status} | {checked} | {text.replace('|', '/')} |"
              for k, status, checked, text in rows]
    failed = [r for r in rows if r[1] != "ok"]
    lines.append(f"\n{len(rows)} kernels judged in {time.perf_counter() - t0:.0f} s on GPUs {args.gpus}: "
                 f"{len(rows) - len(failed)} ok, {len(failed)} not ok.")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
