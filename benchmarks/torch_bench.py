"""PyTorch benchmark (GPU machine, torch with CUDA): for each sample module, the time to import it, PyTorch
eager's and torch.compile's latency at the file's sizes (timed by the harness's rules, in their own
process), % of speed of light, and for the modules with a hand-written kernel its verdict, latency, speedup
over eager and over torch.compile, and the time one evaluation takes.

    python benchmarks/torch_bench.py [--modules swish,softmax_rows] [--no-compile] [--out bench-out]
    python benchmarks/torch_bench.py --set kernelbench --out $OUT     # five real KernelBench files

--modules defaults to $MODULES (comma-separated), else every module of the set. The sample set is
examples/torch/modules; the kernelbench set is five unmodified KernelBench files at their real sizes
(copied into tests/fixtures/kernelbench/modules: its README names them; they are not kept here) with a
hand-written kernel each (kernels/<task>.cu).
Writes OUT/torch.md and OUT/torch.json after every module, so a run cut short still leaves its table.
torch.compile's first call compiles in a fresh process for every module (20-60 s each): split long runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_llm.report.formats import render_table  # noqa: E402
from cuda_llm.tasks import load_task_folder  # noqa: E402
from cuda_llm.tasks.torch_import import import_file  # noqa: E402
from cuda_llm.tools.compiler.compile import compile_source  # noqa: E402
from cuda_llm.tools.harness.device_info import get_device_info  # noqa: E402
from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate  # noqa: E402
from cuda_llm.tools.harness.timing_budget import TimingBudget  # noqa: E402
from cuda_llm.tools.harness.torch_baseline import torch_baseline  # noqa: E402

SAMPLE = ROOT / "examples" / "torch" / "modules"
KERNELS = ROOT / "examples" / "torch" / "kernels"
KB_MODULES = ROOT / "tests" / "fixtures" / "kernelbench" / "modules"
KB_KERNELS = ROOT / "tests" / "fixtures" / "kernelbench" / "kernels"
HAND_WRITTEN = {"swish": "swish.cu", "softmax_rows": "softmax_rows.cu", "conv_bias_relu": "conv_bias_relu.cu",
                "row_stats": "row_stats.cu", "cumsum_rows": "cumsum_rows_wrong.cu", "embedding_bag": "embedding_bag.cu",
                "argmax_rows": "argmax_rows.cu"}


def log(msg: str) -> None:
    print(f"[torch-bench] {msg}", file=sys.stderr, flush=True)


def _ms(res) -> float | None:
    return res.timing.median_ms if res is not None and res.status.passed and res.timing is not None else None


def bench_module(name: str, out_root: Path, args) -> dict:
    row: dict = {"module": name}
    t0 = time.perf_counter()
    folder, _ = import_file(args.source / f"{name}.py", out_root, force=True)
    row["import_s"] = time.perf_counter() - t0
    loaded = load_task_folder(folder)
    task = loaded.task
    row["entry"] = task.signature
    row["sizes"] = ", ".join(f"{k}={v}" for k, v in task.benchmark.items() if k in {p.name for p in task.params})
    opts = EvalOptions(budget=TimingBudget(time_budget_s=args.time_budget), seed=1)
    eager = torch_baseline(loaded, "eager", opts, fresh=True)
    row["eager_ms"], row["eager_status"] = _ms(eager), eager.status.value
    row["eager_pct_sol"] = eager.timing.pct_of_sol if eager.timing else None
    row["eager_s"] = eager.seconds
    if eager.status.value != "ok":
        row["note"] = eager.message
    if not args.no_compile:
        comp = torch_baseline(loaded, "compile", opts, fresh=True)
        row["compile_ms"], row["compile_status"] = _ms(comp), comp.status.value
        row["compile_s"] = comp.seconds
        if comp.status.value != "ok":
            row["note"] = (row.get("note", "") + " " + comp.message).strip()
    kernel = HAND_WRITTEN.get(name) if args.set == "sample" else f"{task.name}.cu"
    if kernel and (args.kernels / kernel).is_file():
        row["cases"] = f"{len(task.shapes)} + {len(task.held_out)} held out"
        src = (args.kernels / kernel).read_text()
        compile_source(src)                            # the compile is not part of "evaluate one candidate"
        t0 = time.perf_counter()
        res = evaluate_candidate(loaded, src, candidate=kernel, options=opts)
        row["eval_s"] = time.perf_counter() - t0
        row["kernel"], row["kernel_status"] = kernel, res.status.value
        row["kernel_ms"] = res.timing.median_ms if res.timing else None
        row["kernel_pct_sol"] = res.timing.pct_of_sol if res.timing else None
        if row["kernel_ms"] and row.get("eager_ms"):
            row["vs_eager"] = row["eager_ms"] / row["kernel_ms"]
        if row["kernel_ms"] and row.get("compile_ms"):
            row["vs_compile"] = row["compile_ms"] / row["kernel_ms"]
    return row


def _f(v, fmt: str = "{:.4f}") -> str:
    return "-" if v is None else fmt.format(v)


def write_table(rows: list[dict], out: Path, device: str) -> None:
    head = ["module", "sizes", "import s", "eager ms", "eager %SOL", "compile ms", "compile s", "kernel", "verdict",
            "kernel ms", "x eager", "x compile", "kernel %SOL", "eval s"]
    table = [[r["module"], r.get("sizes", ""), _f(r.get("import_s"), "{:.1f}"), _f(r.get("eager_ms")),
              _f(r.get("eager_pct_sol"), "{:.1f}"), _f(r.get("compile_ms")), _f(r.get("compile_s"), "{:.0f}"),
              r.get("kernel", "-"), r.get("kernel_status", "-"), _f(r.get("kernel_ms")), _f(r.get("vs_eager"), "{:.2f}"),
              _f(r.get("vs_compile"), "{:.2f}"), _f(r.get("kernel_pct_sol"), "{:.1f}"), _f(r.get("eval_s"), "{:.1f}")]
             for r in rows]
    notes = [f"- {r['module']}: {r['note']}" for r in rows if r.get("note")]
    notes += [f"- {r['module']}: the kernel was checked on {r['cases']} cases" for r in rows if r.get("cases")]
    text = "\n".join([f"# PyTorch modules on {device}", "",
                      "Eager is speedup 1.0; torch.compile the yardstick. Both timed at the file's sizes with the L2 "
                      "flushed and the device synchronized before every call (tools/harness/torch_timer.py), TF32 off. "
                      "'eval s': one evaluation of the hand-written kernel, compile excluded. "
                      "cumsum_rows_wrong.cu (sample set) is wrong on purpose.", "",
                      render_table(head, table, align="llrrrrrllrrrrr"), "", *notes, ""])
    (out / "torch.md").write_text(text)
    (out / "torch.json").write_text(json.dumps({"device": device, "rows": rows}, indent=1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", default=os.environ.get("MODULES", ""), help="comma-separated (default: all)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (it compiles for each module)")
    ap.add_argument("--set", choices=["sample", "kernelbench"], default="sample",
                    help="the project's sample modules, or five real KernelBench files at their sizes")
    ap.add_argument("--time-budget", type=float, default=3.0, help="timing seconds per measurement (default 3)")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    args = ap.parse_args(argv)
    args.source, args.kernels = (SAMPLE, KERNELS) if args.set == "sample" else (KB_MODULES, KB_KERNELS)
    known = sorted(f.stem for f in args.source.glob("*.py"))
    if not known:
        log(f"no modules in {args.source}: KernelBench's files are not kept in this repository; copy the five that "
            f"{KB_KERNELS.parent / 'README.md'} names there")
        return 2
    names = [m for m in args.modules.split(",") if m] or known
    unknown = [m for m in names if m not in known]
    if unknown:
        log(f"unknown modules {unknown}; the sample has: {', '.join(known)}")
        return 2
    from cuda_llm.tools.device.device_probe import has_cuda_device

    if not has_cuda_device():
        log("needs a CUDA device (and PyTorch with CUDA); the driver reports none here")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    info = get_device_info()
    device = info.name if info else "unknown device"
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="torch-bench-") as tmp:
        for name in names:
            log(f"{name} ...")
            t0 = time.perf_counter()
            try:
                rows.append(bench_module(name, Path(tmp), args))
            except Exception as exc:  # noqa: BLE001 - one module's failure is a row, not the end of the table
                rows.append({"module": name, "note": f"{type(exc).__name__}: {exc}"})
            log(f"{name}: {time.perf_counter() - t0:.1f} s: {rows[-1]}")
            write_table(rows, args.out, device)
    print((args.out / "torch.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
