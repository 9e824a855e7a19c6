"""The PyTorch baselines' timer: a child process, like the GPU worker, that times a task's module run by
PyTorch eager or torch.compile at the benchmark shape by the harness's rules.

    python -m cuda_llm.tools.harness.torch_timer --request REQ.json --result RES.json

Same inputs as a candidate gets (the task's make_inputs at the benchmark shape), the output checked
against the reference with the task's tolerances, then event timing: the L2 flushed (a write of twice its
size) and the whole device synchronized before every call, the stop event and then the whole device
synchronized after it, until the relative standard error reaches the target or the budget is spent. TF32
is off for matmuls and convolutions unless asked for: the candidate is held to fp32 accuracy, and so is
the baseline it is compared with. This module imports torch and runs only trusted code (the user's module).
"""

from __future__ import annotations

import argparse
import faulthandler
import sys
import time
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from cuda_llm.paths import atomic_write
from cuda_llm.results import CaseResult, TimingResult
from cuda_llm.tools.harness.timing_budget import TimingBudget
from cuda_llm.tools.harness.worker_protocol import dump_json
from cuda_llm.tasks import load_task_folder
from cuda_llm.tasks.formulas import evaluate
from cuda_llm.tasks.inputs import make_case_inputs, reference_outputs
from cuda_llm.tasks.torch_reference import TorchReference
from cuda_llm.tools.harness import timing_stats, validate

Which = Literal["eager", "compile"]


class TorchTimeRequest(BaseModel):
    """What to time, and the timing budget (when to stop, warm-up) whole."""

    task_folder: str
    which: Which = "eager"
    seed: int = 0
    sizes: dict[str, int] | None = None          # default: the task's benchmark shape
    budget: TimingBudget = Field(default_factory=TimingBudget)   # the evaluation's, as it was given
    compile_mode: str | None = None               # torch.compile(mode=...): None is PyTorch's default
    allow_tf32: bool = False


class TorchTimeResponse(BaseModel):
    device: str | None = None
    torch_version: str = ""
    timing: TimingResult | None = None
    check: CaseResult | None = None               # the first call's output against the reference
    first_call_s: float = 0.0                     # the first call (torch.compile compiles here)
    hidden_median_ms: float | None = None
    error: str | None = None
    seconds: float = 0.0


def _progress(msg: str) -> None:
    print(f"[gpu-worker] torch: {msg}", file=sys.stderr, flush=True)   # the runner reports the last line


def time_module(req: TorchTimeRequest) -> TorchTimeResponse:
    import torch

    t_all = time.perf_counter()
    resp = TorchTimeResponse(torch_version=torch.__version__)
    if not torch.cuda.is_available():
        resp.error = "PyTorch sees no CUDA device (a CPU-only build of PyTorch, or no GPU)"
        return resp
    dev = torch.device("cuda")
    resp.device = torch.cuda.get_device_name(dev)
    torch.backends.cuda.matmul.allow_tf32 = req.allow_tf32
    torch.backends.cudnn.allow_tf32 = req.allow_tf32
    loaded = load_task_folder(Path(req.task_folder))
    task = loaded.task
    sizes = dict(req.sizes or task.benchmark)
    _progress(f"inputs and reference at the benchmark shape ({req.which})")
    inputs = make_case_inputs(loaded, sizes, np.random.default_rng([req.seed, 0xBE4C]))
    expected = reference_outputs(loaded, inputs, sizes)
    model, args = TorchReference(Path(req.task_folder)).model_with(inputs, sizes, device="cuda")
    fn = model if req.which == "eager" else torch.compile(model, mode=req.compile_mode)
    outputs = task.torch.outputs if task.torch else [p.name for p in task.outputs]
    with torch.no_grad():
        t0 = time.perf_counter()
        got = fn(*args)
        torch.cuda.synchronize()
        resp.first_call_s = time.perf_counter() - t0
        outs = list(got) if isinstance(got, (tuple, list)) else [got]
        for name, out in zip(outputs, outs):
            param = next(p for p in task.outputs if p.name == name)
            tol = task.tolerance_for(param)
            fields = validate.compare_output(name, out.detach().cpu().contiguous().numpy(), expected[name],
                                             (float(evaluate(tol.atol, sizes)), float(evaluate(tol.rtol, sizes))),
                                             is_float=param.dtype.is_float)
            resp.check = CaseResult(sizes=sizes, **fields)
            if not fields["passed"]:
                break
        _progress("first call checked; warming up")
        for _ in range(max(0, req.budget.warmup - 1)):
            fn(*args)
        l2 = int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or (50 << 20))
        flush = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device=dev)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples: list[float] = []
        host: list[float] = []
        hidden: list[float] = []
        reason = None
        t_loop = time.perf_counter()
        _progress("measuring")
        while reason is None:
            flush.fill_(len(samples) & 0xFF)           # evict the L2 (>= twice its size)
            torch.cuda.synchronize()                     # the host clock starts with an idle device
            h0 = time.perf_counter()
            start.record()
            fn(*args)
            stop.record()
            stop.synchronize()
            h1 = time.perf_counter()
            torch.cuda.synchronize()                     # the whole device: work on other streams too
            h2 = time.perf_counter()
            samples.append(start.elapsed_time(stop))
            host.append((h2 - h0) * 1e3)
            hidden.append((h2 - h1) * 1e3)
            reason = timing_stats.should_stop(samples, elapsed_s=time.perf_counter() - t_loop, budget=req.budget)
    s = timing_stats.summarize(samples)
    resp.timing = TimingResult(sizes=sizes, median_ms=s["median"], min_ms=s["min"], mean_ms=s["mean"], iqr_ms=s["iqr"],
                               rse=s["rse"], samples_ms=samples, host_median_ms=float(np.median(host)),
                               repetitions=len(samples), stop_reason=reason, seconds=time.perf_counter() - t_all)
    resp.hidden_median_ms = float(np.median(hidden))
    return resp


def main(argv: list[str] | None = None) -> int:
    faulthandler.enable(file=sys.stderr)
    ap = argparse.ArgumentParser(prog="python -m cuda_llm.tools.harness.torch_timer")
    ap.add_argument("--request", required=True)
    ap.add_argument("--result", required=True)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        resp = time_module(TorchTimeRequest.model_validate_json(Path(args.request).read_text()))
    except Exception as exc:  # noqa: BLE001 - reported to the parent as the baseline's failure
        resp = TorchTimeResponse(error=f"{type(exc).__name__}: {exc}")
    resp.seconds = time.perf_counter() - t0
    atomic_write(Path(args.result), dump_json(resp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
