"""How the graph measures candidates: an Evaluator protocol, the real GPU one, and a run-directory cache.

The graph never talks to the GPU tools directly; it calls an Evaluator. ``GpuEvaluator`` is the real one
(nvcc, the GPU worker, Nsight Compute); tests substitute their own double. ``CachedEvaluator`` wraps either
and stores every result in the run directory by source hash, so a resumed run never measures a source
twice (and a candidate that repeats an earlier source costs nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cuda_llm.results import DeviceInfo, EvalResult


def content_hash(source: str, *parts: str) -> str:
    """sha256 of the source (and any extra parts), 16 hex digits: the key of every cached artefact."""
    h = hashlib.sha256(source.encode())
    for p in parts:
        h.update(b"\0" + p.encode())
    return h.hexdigest()[:16]


@runtime_checkable
class Evaluator(Protocol):
    """What the graph needs measured. Implementations never raise for a bad kernel: they return a result."""

    arch: str
    device: DeviceInfo | None

    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> EvalResult:
        """Static check, compile, validate on every case, time at the benchmark shape."""

    def baseline(self, loaded: Any) -> EvalResult:
        """The task's naive kernel, measured the same way."""

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Any:
        """A ProfileResult (Nsight Compute) for a passing candidate, or None when profiling is not possible."""

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[EvalResult, EvalResult]:
        """(candidate, naive baseline) validated on fresh inputs and timed back to back in one go."""


class GpuEvaluator:
    """The real evaluator: cuda_llm.tools.evaluate (compile, GPU worker) and tools.ncu for profiles."""

    def __init__(self, *, arch: str | None = None, time_budget_s: float = 10.0, final_seed: int = 20_251_123,
                 profile: bool = True, profile_timeout_s: float = 120.0):
        from cuda_llm.tools.compile import resolve_arch
        from cuda_llm.tools.device_info import get_device_info

        self.arch = resolve_arch(arch)
        self.device = get_device_info()
        self.time_budget_s = time_budget_s
        self.final_seed = final_seed
        self.do_profile = profile
        self.profile_timeout_s = profile_timeout_s

    def _options(self, **kw: Any) -> Any:
        from cuda_llm.tools.evaluate import EvalOptions

        return EvalOptions(arch=self.arch, time_budget_s=self.time_budget_s, **kw)

    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> EvalResult:
        from cuda_llm.tools.evaluate import evaluate_candidate

        return evaluate_candidate(loaded, source, candidate=candidate_id, options=self._options(), work_dir=work_dir)

    def baseline(self, loaded: Any) -> EvalResult:
        from cuda_llm.tools.evaluate import baseline_result, evaluate_candidate

        res = baseline_result(loaded, "naive", self._options())
        if res is None:  # no cached baseline and none computable the cached way: measure it directly
            src = Path(loaded.task.baseline_path).read_text()
            res = evaluate_candidate(loaded, src, candidate="baseline", options=self._options())
        if getattr(loaded.task, "torch", None) is not None and res.timing is not None:
            lib = baseline_result(loaded, "library", self._options())      # torch.compile, the yardstick
            if lib is not None and lib.status.passed and lib.timing is not None:
                res = res.model_copy(update={"library_ms": lib.timing.median_ms})
        return res

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Any:
        if not self.do_profile or result.compile is None or not result.compile.so_path:
            return None
        from cuda_llm.tools.ncu import profile_candidate

        return profile_candidate(loaded, result.compile.so_path, out_dir=Path(work_dir), timeout_s=self.profile_timeout_s)

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[EvalResult, EvalResult]:
        from cuda_llm.tools.evaluate import evaluate_candidate

        opts = self._options(seed=self.final_seed)
        cand = evaluate_candidate(loaded, source, candidate=candidate_id, options=opts, work_dir=Path(work_dir) / "final")
        if getattr(loaded.task, "torch", None) is not None:     # a PyTorch task: eager, timed again now
            from cuda_llm.tools.torch_baseline import torch_baseline

            base = torch_baseline(loaded, "eager", opts, fresh=True)
        else:
            naive = Path(loaded.task.baseline_path).read_text()
            base = evaluate_candidate(loaded, naive, candidate="baseline", options=opts,
                                      work_dir=Path(work_dir) / "final-baseline", baseline_ms=None)
        if base.timing is not None:
            cand = cand.model_copy(update={"baseline_ms": base.timing.median_ms})
        return cand, base


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@dataclass
class Cached:
    """A result and whether it was measured now (False: read back from the run directory)."""

    value: Any
    fresh: bool


class CachedEvaluator:
    """An Evaluator whose answers are kept in ``<run>/cache/`` by (kind, source hash)."""

    def __init__(self, inner: Evaluator, cache_dir: Path):
        self.inner = inner
        self.cache_dir = Path(cache_dir)
        self.arch = getattr(inner, "arch", "sm_90")
        self.device = getattr(inner, "device", None)

    def _path(self, kind: str, key: str) -> Path:
        return self.cache_dir / kind / f"{key}.json"

    def _load(self, kind: str, key: str, model: Any = EvalResult) -> Any:
        from cuda_llm.runs.rundir import read_json

        data = read_json(self._path(kind, key))    # None also for a file torn by a kill: measure again
        if data is None:
            return None
        return data if model is None else model.model_validate(data)

    def stored(self, kind: str, source_hash: str) -> EvalResult | None:
        """A result already measured for this source hash (None if there is none)."""
        return self._load(kind, source_hash)

    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, *, kind: str = "eval") -> Cached:
        key = content_hash(source)
        hit = self._load(kind, key)
        if hit is not None:
            return Cached(hit.model_copy(update={"candidate": candidate_id}), False)
        res = self.inner.evaluate(loaded, source, candidate_id, work_dir)
        _atomic_write(self._path(kind, key), res.model_dump_json())
        return Cached(res, True)

    def baseline(self, loaded: Any) -> Cached:
        hit = self._load("baseline", "naive")
        if hit is not None:
            return Cached(hit, False)
        res = self.inner.baseline(loaded)
        _atomic_write(self._path("baseline", "naive"), res.model_dump_json())
        return Cached(res, True)

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Cached:
        from cuda_llm.tools.profile_models import ProfileResult

        key = content_hash(source)
        hit = self._load("profile", key, ProfileResult)
        if hit is not None:
            return Cached(hit, False)
        prof = self.inner.profile(loaded, source, candidate_id, work_dir, result)
        if prof is None:
            prof = ProfileResult(available=False, reason="profiling is not available with this evaluator")
        _atomic_write(self._path("profile", key), prof.model_dump_json())
        return Cached(prof, True)

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> Cached:
        key = content_hash(source)
        hit = self._load("final", key, None)
        if hit is not None:
            return Cached((EvalResult.model_validate(hit["candidate"]), EvalResult.model_validate(hit["baseline"])), False)
        cand, base = self.inner.final_check(loaded, source, candidate_id, work_dir)
        _atomic_write(self._path("final", key), json.dumps({"candidate": cand.model_dump(mode="json"),
                                                            "baseline": base.model_dump(mode="json")}))
        return Cached((cand, base), True)
