"""The baselines of a PyTorch task: PyTorch eager (speedup 1.0) and torch.compile (the yardstick column).

Each is timed in a child process (tools/harness/torch_timer.py) holding the same per-device lock as the GPU worker,
so it never shares the GPU with a timed candidate, and comes back as an EvalResult like any baseline's:
the graph, ``cuda-llm eval`` and the reports read it without knowing it was PyTorch. Results are cached
per task, module, device and kind, as the naive baselines are. No torch here.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from cuda_llm.paths import cache_dir
from cuda_llm.results import EvalResult, Status, ValidationResult
from cuda_llm.tools.bounds import speed_of_light
from cuda_llm.tools.compiler.compile import source_hash
from cuda_llm.tools.device import device_probe
from cuda_llm.tools.harness.device_info import get_device_info
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.tools.harness import runner
from cuda_llm.tools.harness.torch_timer import TorchTimeRequest, TorchTimeResponse

LABELS = {"eager": "pytorch-eager", "compile": "torch.compile"}
COMPILE_TIMEOUT_S = 900.0        # torch.compile's first call compiles (Inductor, Triton autotuning)


def _cache_path(loaded: Any, which: str, device: str) -> Path:
    folder = Path(loaded.task.folder)
    key = source_hash((folder / "task.toml").read_text(), which)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
    return cache_dir() / "baselines" / f"{loaded.task.name}-torch-{which}-{key}-{slug}.json"


def torch_baseline(loaded: Any, which: str = "eager", options: Any = None, *, fresh: bool = False) -> EvalResult:
    """PyTorch ``which`` ("eager" or "compile") timed at the benchmark shape, as an EvalResult."""
    if which not in LABELS:
        raise ValueError(f"which must be 'eager' or 'compile', not {which!r}")
    task = loaded.task
    if task.torch is None:
        raise ValueError(f"task {task.name} has no PyTorch module")
    opts = options or EvalOptions()
    res = EvalResult(task=task.name, candidate=LABELS[which], source_hash=task.torch.module_sha256[:16],
                     status=Status.no_device)
    if not device_probe.has_cuda_device():
        res.message = "timing PyTorch needs a CUDA device; the driver reports none here"
        return res
    device = _device_info(opts.gpu)
    cache = _cache_path(loaded, which, device.name) if device else None
    if cache is not None and cache.is_file() and not fresh:
        try:
            return EvalResult.model_validate_json(cache.read_text())
        except ValueError:
            pass
    result = _measure(loaded, which, opts, device)
    if cache is not None and result.status == Status.ok and result.timing is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(result.model_dump(mode="json"), indent=1))
    return result


def _device_info(gpu: int | None = None) -> Any:
    try:
        return get_device_info(gpu=gpu)
    except Exception:  # noqa: BLE001 - without peaks there is no % of speed of light, nothing else changes
        return None


def _measure(loaded: Any, which: str, opts: Any, device: Any) -> EvalResult:
    task = loaded.task
    res = EvalResult(task=task.name, candidate=LABELS[which], source_hash=task.torch.module_sha256[:16],
                     status=Status.ok, device=device.name if device else None)
    req = TorchTimeRequest(task_folder=str(task.folder), which=which, seed=(opts.seed or 0) & 0x7FFFFFFF,
                           budget=opts.budget)
    timeout = max(opts.timeout_s, COMPILE_TIMEOUT_S if which == "compile" else 300.0)
    evals = cache_dir() / "evals"
    evals.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="torch-", dir=evals) as tmp:
        req_path, res_path = Path(tmp) / "request.json", Path(tmp) / "result.json"
        req_path.write_text(req.model_dump_json())
        out = runner.run_worker([sys.executable, "-m", "cuda_llm.tools.harness.torch_timer", "--request", str(req_path),
                          "--result", str(res_path)], timeout_s=timeout, gpu=opts.gpu)
        resp = TorchTimeResponse.model_validate_json(res_path.read_text()) if res_path.is_file() else None
    res.seconds = out.seconds
    if out.timed_out:
        res.status, res.message = Status.timeout, f"PyTorch {which} did not finish within {timeout:g} s"
        return res
    if resp is None or resp.error:
        why = resp.error if resp is not None else f"exit code {out.rc}: {out.stderr_tail(6)}"
        res.status, res.message = Status.runtime_error, f"PyTorch {which} could not be timed: {why}"
        return res
    res.device = resp.device or res.device
    if resp.check is not None:
        res.validation = ValidationResult(passed=resp.check.passed, cases=[resp.check])
        if not resp.check.passed:
            res.status = Status.wrong_answer
            res.message = (f"PyTorch {which}'s own output is outside the task's tolerance of the reference: "
                           f"{resp.check.reason}. Loosen the tolerance in task.toml if this is rounding")
            return res
    t = resp.timing
    if t is not None:
        b = speed_of_light.bound(task, t.sizes, device, library=True)   # PyTorch's kernels: a vendor library
        t.sol_ms = b.ms if b is not None else None
        t.pct_of_sol, t.sol_basis = speed_of_light.pct_of_sol(t.sol_ms, t.median_ms), b.basis if b is not None else None
        res.timing = t
        extra = f", first call {resp.first_call_s:.1f} s" if which == "compile" else ""
        pct = f", {t.pct_of_sol:.0f}% of speed of light" if t.pct_of_sol is not None else ""
        res.message = f"PyTorch {which} (torch {resp.torch_version}): median {t.median_ms:.4g} ms{pct}{extra}"
    return res
