"""How the graph measures and builds candidates: the Evaluator seam, the real GPU one, and a run-directory cache.

The graph measures and builds only through an Evaluator: to measure (``evaluate``, ``baseline``,
``library``, ``profile``, ``final_check``, and ``head_to_head``: a challenger and the champion in turns in
one job), to build a source for the coder's compile-fix turns and the tuner's points (``build``), to turn a
profile into a roofline point and a diagnosis (``analyze``) and to say how candidates are built
(``toolchain``); the protocol also says how many measurements run at once (``parallelism``), on which GPUs
(``gpu_labels``), whether this machine needs a CUDA device (``needs_local_device``), where a pool records its jobs
(``bind_trace``) and how it is released (``close``). ``GpuEvaluator`` is the real one (nvcc, the GPU worker,
Nsight Compute); ``ToolsMixin`` gives an evaluator (and a test double) the tools' ``build``, ``analyze``,
``toolchain``, head-to-heads as legs in turns, and the defaults of the rest. ``CachedEvaluator`` wraps any and stores every
measurement in the run directory by source hash, so a resumed run never measures a source twice (and a
candidate that repeats an earlier source costs nothing).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Collection, Iterator, Sequence
from typing import Any, Callable, Protocol, runtime_checkable

from cuda_llm.halts import NO_DEVICE, RunHalted
from cuda_llm.paths import atomic_write
from cuda_llm.results import CHALLENGER, HEAD_TO_HEAD_ORDER, DeviceInfo, EvalResult, HeadToHead, Status
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.runs.rundir import read_json
from cuda_llm.tools.device import device_probe
from cuda_llm.tools.harness.device_info import get_device_info


JOB_KINDS = ("evaluate", "baseline", "library", "profile", "final_check", "head_to_head")   # the measuring methods
PROTOCOL_MEMBERS = ("arch", "device", "evaluate", "baseline", "library", "profile", "final_check", "head_to_head",
                    "build", "analyze", "toolchain", "parallelism", "gpu_labels", "needs_local_device", "bind_trace", "close")


def content_hash(source: str, *parts: str) -> str:
    """sha256 of the source (and any extra parts), 16 hex digits: the key of every cached artefact."""
    h = hashlib.sha256(source.encode())
    for p in parts:
        h.update(b"\0" + p.encode())
    return h.hexdigest()[:16]


EventFn = Callable[..., None]


@dataclass
class Analysis:
    """What a profile means: the roofline point (None without measured peaks) and the rule-based diagnosis."""

    roofline: Any
    diagnosis: Any


@runtime_checkable
class Evaluator(Protocol):
    """What the graph needs measured and built. Implementations never raise for a bad kernel: they return a result."""

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

    def head_to_head(self, loaded: Any, challenger: str, champion: str, challenger_id: str, champion_id: str,
                     work_dir: Path) -> HeadToHead:
        """The two sources timed in turns (HEAD_TO_HEAD_ORDER) in one job on one GPU, each leg a whole evaluation."""

    def build(self, loaded: Any, source: str, candidate_id: str) -> EvalResult:
        """Static check and compile only (no device): status static_error, compile_error, or ok (it builds)."""

    def analyze(self, loaded: Any, result: EvalResult, profile: Any,
                allowed_features: Collection[str] | None = None) -> Analysis:
        """The roofline point of a timed result and the rule-based diagnosis of its profile (None: no profile),
        suggesting only ``allowed_features`` (the catalogue features that apply to the task) when given."""

    def library(self, loaded: Any) -> EvalResult | None:
        """The task's library yardstick, measured like the baseline; None when there is none to measure."""

    def toolchain(self) -> dict[str, str]:
        """How candidates are built: cuda_version, ptx_isa, command (the nvcc line) and rules (text)."""

    @property
    def parallelism(self) -> int:
        """How many measurements run at once (a pool's live GPUs; 1 for one evaluator)."""

    @property
    def gpu_labels(self) -> list[str] | None:
        """The labels of the pool's GPUs the measurements run on, as the trace records them; None: no pool."""

    @property
    def needs_local_device(self) -> bool:
        """Whether measuring needs a CUDA device on this machine (a run halts at once without one)."""

    def bind_trace(self, on_event: EventFn) -> None:
        """Record each measurement job (its GPU, from when to when) through ``on_event``; a no-op without a pool."""

    def close(self) -> None:
        """Release what the evaluator holds (a pool's workers); a no-op for most."""


def interleaved(evaluate: Any, challenger: str, champion: str, challenger_id: str, champion_id: str,
                work_dir: Path) -> HeadToHead:
    """A head-to-head made of ``evaluate(source, id, work_dir)`` calls in HEAD_TO_HEAD_ORDER, one after another
    in the caller's thread (so on the caller's GPU). Leg ids are ``<id>-h2h<leg>``."""
    legs = []
    for i, who in enumerate(HEAD_TO_HEAD_ORDER):
        source, cid = (challenger, challenger_id) if who == CHALLENGER else (champion, champion_id)
        leg = f"{cid}-h2h{i + 1}"
        legs.append(evaluate(source, leg, Path(work_dir) / leg))
    return HeadToHead(challenger=challenger_id, champion=champion_id, order=list(HEAD_TO_HEAD_ORDER), legs=legs)


class ToolsMixin:
    """``build``, ``analyze`` and ``toolchain`` from cuda_llm.tools, head-to-heads as ``evaluate`` legs in turns,
    and the rest of the protocol's defaults (no library yardstick, one measurement at a time, no pool, no local
    device needed, nothing to record or release), for an evaluator with ``arch`` and ``device``."""

    arch: str
    device: DeviceInfo | None
    needs_local_device: bool = False

    def library(self, loaded: Any) -> EvalResult | None:
        return None

    @property
    def parallelism(self) -> int:
        return 1

    @property
    def gpu_labels(self) -> list[str] | None:
        return None

    def bind_trace(self, on_event: EventFn) -> None:
        return None

    def close(self) -> None:
        return None

    def build(self, loaded: Any, source: str, candidate_id: str) -> EvalResult:
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.compiler.compile import compile_source, source_hash
        from cuda_llm.tools.compiler.static_check import check_source

        res = EvalResult(task=loaded.task.name, candidate=candidate_id, source_hash=source_hash(source), status=Status.ok)
        issues = check_source(source, loaded.task)
        if issues:
            return res.model_copy(update={"status": Status.static_error, "static_issues": issues})
        comp = compile_source(source, arch=self.arch)
        return res.model_copy(update={"compile": comp, "status": Status.ok if comp.ok else Status.compile_error})

    def analyze(self, loaded: Any, result: EvalResult, profile: Any,
                allowed_features: Collection[str] | None = None) -> Analysis:
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.profile.diagnosis import diagnose
        from cuda_llm.tools.profile.roofline import roofline_point

        roof = None
        sass = result.compile.sass if result.compile is not None else None
        if self.device is not None and result.timing is not None and result.timing.median_ms > 0:
            try:   # the units of the build's SASS, as the judge's speed of light reads them
                roof = roofline_point(loaded.task, result.timing.sizes, result.timing.median_ms, self.device,
                                      sass=sass)
            except Exception:  # noqa: BLE001 - a formula the roofline cannot evaluate: judged without it
                roof = None
        return Analysis(roofline=roof, diagnosis=diagnose(profile, roof, result.compile,
                                                          allowed_features=allowed_features))

    def head_to_head(self, loaded: Any, challenger: str, champion: str, challenger_id: str, champion_id: str,
                     work_dir: Path) -> HeadToHead:
        """The legs in turns through this evaluator's own ``evaluate``: one GPU, one job, nothing else between."""
        return interleaved(lambda src, cid, work: self.evaluate(loaded, src, cid, work),  # type: ignore[attr-defined]
                           challenger, champion, challenger_id, champion_id, work_dir)

    def toolchain(self) -> dict[str, str]:
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.compiler import compile as comp

        out = {"cuda_version": "", "ptx_isa": "", "command": "", "rules": ""}
        try:
            nvcc = comp.nvcc_path()
            out["cuda_version"] = comp.nvcc_version(nvcc)
            out["ptx_isa"] = comp.ptx_isa_version(nvcc, self.arch)
            out["command"] = " ".join(comp.build_command(Path("candidate.cu"), Path("candidate.so"), self.arch))
        except Exception:  # noqa: BLE001 - no nvcc: the prompt says the toolchain is unknown
            return out
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.tune.tuning import CODER_TUNABLES_HINT

        try:   # the compile tool's own text (what needs sm_90a, guards, links), and what the tune stage reads
            out["rules"] = comp.build_rules(self.arch) + "\n" + CODER_TUNABLES_HINT
        except Exception:  # noqa: BLE001
            out["rules"] = CODER_TUNABLES_HINT
        return out


class GpuEvaluator(ToolsMixin):
    """The real evaluator: cuda_llm.tools.harness.evaluate (compile, GPU worker) and tools.profile.ncu for profiles.

    ``gpu`` is the index of its device among the visible ones (default the first): every worker it starts is
    pinned to that device and holds that device's lock, and ``device`` holds that device's measured facts.
    The GPU pool (measure/gpu_pool.py) keeps one per GPU. ``options``: the EvalOptions of every measurement,
    passed whole (the build arch, the timing budget; `cuda-llm tune` sets its timeout, input seed and held-out
    shapes this way); its ``gpu`` is this evaluator's ``gpu``."""

    needs_local_device = True

    def __init__(self, *, options: EvalOptions | None = None, final_seed: int = 20_251_123, profile: bool = True,
                 profile_timeout_s: float = 120.0, gpu: int | None = None):
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.compiler.compile import resolve_arch

        base = options or EvalOptions()
        self.arch = resolve_arch(base.arch)
        self.gpu = gpu
        self.options = base.model_copy(update={"arch": self.arch, "gpu": gpu})
        self.device = get_device_info(gpu=gpu)
        self.final_seed = final_seed
        self.do_profile = profile
        self.profile_timeout_s = profile_timeout_s

    def _options(self, **kw: Any) -> EvalOptions:
        return self.options.model_copy(update=kw) if kw else self.options

    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> EvalResult:
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.harness.evaluate import evaluate_candidate

        return evaluate_candidate(loaded, source, candidate=candidate_id, options=self._options(), work_dir=work_dir)

    def baseline(self, loaded: Any) -> EvalResult:
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.harness.evaluate import baseline_result, evaluate_candidate

        res = baseline_result(loaded, "naive", self._options())
        if res is None:  # no cached baseline and none computable the cached way: measure it directly
            src = Path(loaded.task.baseline_path).read_text()
            res = evaluate_candidate(loaded, src, candidate="baseline", options=self._options())
        if getattr(loaded.task, "torch", None) is not None and res.timing is not None:
            lib = baseline_result(loaded, "library", self._options())      # torch.compile, the yardstick
            if lib is not None and lib.status.passed and lib.timing is not None:
                res = res.model_copy(update={"library_ms": lib.timing.median_ms})
        return res

    def library(self, loaded: Any) -> EvalResult | None:
        """The task's library yardstick (library.cu), measured like the baseline; None when the task has none."""
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.harness.evaluate import baseline_result

        return baseline_result(loaded, "library", self._options())

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Any:
        if not self.do_profile or result.compile is None or not result.compile.so_path:
            return None
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.profile.ncu import profile_candidate

        return profile_candidate(loaded, result.compile.so_path, out_dir=Path(work_dir), timeout_s=self.profile_timeout_s,
                                 gpu=self.gpu)

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[EvalResult, EvalResult]:
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.harness.evaluate import evaluate_candidate

        opts = self._options(seed=self.final_seed)
        cand = evaluate_candidate(loaded, source, candidate=candidate_id, options=opts, work_dir=Path(work_dir) / "final")
        if getattr(loaded.task, "torch", None) is not None:     # a PyTorch task: eager, timed again now
            # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
            from cuda_llm.tools.harness.torch_baseline import torch_baseline

            base = torch_baseline(loaded, "eager", opts, fresh=True)
            # torch.compile too, on this GPU in this job (its warm-up outside the timing, as always): the
            # kernel's speedup over each is then one GPU's figures, never two GPUs' compared
            lib = torch_baseline(loaded, "compile", opts, fresh=True)
            if lib.status.passed and lib.timing is not None:
                base = base.model_copy(update={"library_ms": lib.timing.median_ms})
        else:
            naive = Path(loaded.task.baseline_path).read_text()
            base = evaluate_candidate(loaded, naive, candidate="baseline", options=opts,
                                      work_dir=Path(work_dir) / "final-baseline", baseline_ms=None)
        if base.timing is not None:
            cand = cand.model_copy(update={"baseline_ms": base.timing.median_ms})
        return cand, base


@dataclass
class Cached:
    """A result and whether it was measured now (False: read back from the run directory)."""

    value: Any
    fresh: bool


class CachedEvaluator:
    """An Evaluator whose answers are kept in ``<run>/cache/`` by (kind, source hash).

    It is an Evaluator like any other: the protocol's methods return the protocol's types, so a cache can stand
    wherever an evaluator does. The graph also records whether each answer was measured now or read back (the
    trace's ``cached``, a head-to-head's legs counted as evaluations only when run): it asks for that by name,
    through the ``*_cached`` methods and ``evaluate_each``, which return ``Cached`` wrappers. Wrapping every
    evaluator's answers instead would make each implementation (and the pool's and slots' wire) carry a
    freshness flag only the cache can know. ``build``, ``analyze`` and ``toolchain`` are the inner evaluator's;
    the inner evaluator must implement the whole protocol (``ToolsMixin`` gives the defaults)."""

    def __init__(self, inner: Evaluator, cache_dir: Path):
        self.inner = require_evaluator(inner)
        self.cache_dir = Path(cache_dir)
        self.arch = inner.arch
        self.device = inner.device
        self._lock = threading.Lock()
        self._toolchain: dict[str, str] | None = None

    def _path(self, kind: str, key: str) -> Path:
        return self.cache_dir / kind / f"{key}.json"

    def _load(self, kind: str, key: str, model: Any = EvalResult) -> Any:
        data = read_json(self._path(kind, key))    # None also for a file torn by a kill: measure again
        if data is None:
            return None
        return data if model is None else model.model_validate(data)

    def stored(self, kind: str, source_hash: str) -> EvalResult | None:
        """A result already measured for this source hash (None if there is none)."""
        return self._load(kind, source_hash)

    # ------------------------------------------------------------------ what the protocol's callers see
    @property
    def parallelism(self) -> int:
        """How many measurements the inner evaluator runs at once (the GPU pool's live GPUs; else 1)."""
        return max(1, int(self.inner.parallelism))

    @property
    def gpu_labels(self) -> list[str] | None:
        return self.inner.gpu_labels

    @property
    def needs_local_device(self) -> bool:
        return self.inner.needs_local_device

    def bind_trace(self, on_event: EventFn) -> None:
        self.inner.bind_trace(on_event)

    def close(self) -> None:
        self.inner.close()

    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> EvalResult:
        return self.evaluate_cached(loaded, source, candidate_id, work_dir).value

    def baseline(self, loaded: Any) -> EvalResult:
        return self.baseline_cached(loaded).value

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Any:
        return self.profile_cached(loaded, source, candidate_id, work_dir, result).value

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[EvalResult, EvalResult]:
        return self.final_check_cached(loaded, source, candidate_id, work_dir).value

    def head_to_head(self, loaded: Any, challenger: str, champion: str, challenger_id: str, champion_id: str,
                     work_dir: Path) -> HeadToHead:
        return self.head_to_head_cached(loaded, challenger, champion, challenger_id, champion_id, work_dir).value

    def library(self, loaded: Any) -> EvalResult | None:
        """The library yardstick, when the inner evaluator measures one (kept once it passed)."""
        hit = self._load("baseline", "library")
        if hit is not None:
            return hit
        res = self.inner.library(loaded)
        if res is not None and res.status.passed:
            atomic_write(self._path("baseline", "library"), res.model_dump_json())
        return res

    def build(self, loaded: Any, source: str, candidate_id: str) -> EvalResult:
        """Not cached here: the compile tool keeps every build on disk by source and flags already."""
        return self.inner.build(loaded, source, candidate_id)

    def analyze(self, loaded: Any, result: EvalResult, profile: Any,
                allowed_features: Collection[str] | None = None) -> Analysis:
        return self.inner.analyze(loaded, result, profile, allowed_features)

    def toolchain(self) -> dict[str, str]:
        with self._lock:
            if self._toolchain is None:
                self._toolchain = dict(self.inner.toolchain())
            return dict(self._toolchain)

    # ------------------------------------------------------------ with whether each was measured now
    def evaluate_cached(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, *,
                        kind: str = "eval") -> Cached:
        key = content_hash(source)
        hit = self._load(kind, key)
        if hit is not None:
            return Cached(hit.model_copy(update={"candidate": candidate_id}), False)
        res = self.inner.evaluate(loaded, source, candidate_id, work_dir)
        if res.status != Status.no_device:   # measured on a GPU machine later, not read back as "no device"
            atomic_write(self._path(kind, key), res.model_dump_json())
        return Cached(res, True)

    def evaluate_each(self, loaded: Any, jobs: Sequence[tuple[str, str, Path]], *, kind: str = "eval") -> Iterator[Cached]:
        """Evaluate (source, candidate id, work dir) jobs, yielding their results in the order given.

        With one worker (a plain evaluator) they run one after another, each when its turn comes, as they always
        did: a consumer that stops early (no device) leaves the rest unmeasured. With a pool they are all
        submitted at once (twice as many in flight as GPUs, so the next ones compile while the GPUs time) and
        each is stored as it finishes, so a kill loses none that finished. A source given twice is measured
        once; its second candidate gets the stored result, as a later round's repeat would."""
        width = self.parallelism
        if width <= 1 or len(jobs) <= 1:
            for source, cid, work in jobs:
                yield self.evaluate_cached(loaded, source, cid, work, kind=kind)
            return
        from concurrent.futures import ThreadPoolExecutor

        first: dict[str, int] = {}
        for i, (source, _, _) in enumerate(jobs):
            first.setdefault(content_hash(source), i)
        with ThreadPoolExecutor(max_workers=min(len(first), 2 * width), thread_name_prefix="evaluate") as ex:
            futs = {i: ex.submit(self.evaluate_cached, loaded, *jobs[i], kind=kind) for i in sorted(first.values())}
            for i, (source, cid, _) in enumerate(jobs):
                j = first[content_hash(source)]
                got = futs[j].result()
                yield got if j == i else Cached(got.value.model_copy(update={"candidate": cid}), False)

    def head_to_head_cached(self, loaded: Any, challenger: str, champion: str, challenger_id: str, champion_id: str,
                            work_dir: Path) -> Cached:
        """The inner evaluator's head-to-head (one job on one GPU), kept by the pair of sources: a resumed run
        reads the verdict back."""
        key = content_hash(challenger, champion)
        hit = self._load("h2h", key, HeadToHead)
        if hit is not None:
            return Cached(hit, False)
        got = self.inner.head_to_head(loaded, challenger, champion, challenger_id, champion_id, work_dir)
        if all(r.status != Status.no_device for r in got.legs):
            atomic_write(self._path("h2h", key), got.model_dump_json())
        return Cached(got, True)

    def baseline_cached(self, loaded: Any) -> Cached:
        hit = self._load("baseline", "naive")
        if hit is not None:
            return Cached(hit, False)
        res = self.inner.baseline(loaded)
        if res.status.passed:   # a failing baseline halts the run: measure it again once it is fixed
            atomic_write(self._path("baseline", "naive"), res.model_dump_json())
        return Cached(res, True)

    def profile_cached(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Cached:
        # local: `cuda-llm --help` loads this module; the compiler, judge and profiler are needed only to measure
        from cuda_llm.tools.profile.profile_models import ProfileResult

        key = content_hash(source)
        hit = self._load("profile", key, ProfileResult)
        if hit is not None:
            return Cached(hit, False)
        prof = self.inner.profile(loaded, source, candidate_id, work_dir, result)
        if prof is None:
            prof = ProfileResult(available=False, reason="profiling is not available with this evaluator")
        atomic_write(self._path("profile", key), prof.model_dump_json())
        return Cached(prof, True)

    def final_check_cached(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> Cached:
        key = content_hash(source)
        hit = self._load("final", key, None)
        if hit is not None:
            return Cached((EvalResult.model_validate(hit["candidate"]), EvalResult.model_validate(hit["baseline"])), False)
        cand, base = self.inner.final_check(loaded, source, candidate_id, work_dir)
        atomic_write(self._path("final", key), json.dumps({"candidate": cand.model_dump(mode="json"),
                                                            "baseline": base.model_dump(mode="json")}))
        return Cached((cand, base), True)


def device_missing(evaluator: Evaluator) -> bool:
    """The evaluator measures on this machine's GPU and this machine has none: every measurement would be
    wasted (the run halts before spending anything)."""
    return evaluator.needs_local_device and not device_probe.has_cuda_device()


def missing_members(evaluator: Any) -> list[str]:
    """The Evaluator protocol's members that ``evaluator`` lacks (empty: it has them all)."""
    return [name for name in PROTOCOL_MEMBERS if not hasattr(evaluator, name)]


def require_evaluator(evaluator: Any) -> Evaluator:
    """``evaluator`` itself when it has the whole protocol, else a TypeError naming what it lacks."""
    missing = missing_members(evaluator)
    if missing:
        raise TypeError(f"{type(evaluator).__name__} is not an Evaluator: it lacks {', '.join(missing)} "
                        "(cuda_llm.measure.evaluator.ToolsMixin gives the tools' own and the defaults)")
    return evaluator


def run_job(evaluator: Evaluator, kind: str, args: Sequence[Any]) -> Any:
    """One measuring job by name (a pool's and a slot server's wire names the method): ``kind`` is one of
    ``JOB_KINDS``."""
    if kind == "evaluate":
        return evaluator.evaluate(*args)
    if kind == "baseline":
        return evaluator.baseline(*args)
    if kind == "library":
        return evaluator.library(*args)
    if kind == "profile":
        return evaluator.profile(*args)
    if kind == "final_check":
        return evaluator.final_check(*args)
    if kind == "head_to_head":
        return evaluator.head_to_head(*args)
    raise ValueError(f"unknown job kind {kind!r}; one of {', '.join(JOB_KINDS)}")



class MeasureLater:
    """The evaluator of a resumed run whose roles spend nothing (answers written by hand, rules) on a machine
    without a GPU: the run goes on through its planner, coder and critic turns, and halts, resumable, at the
    first measurement it has not made before (``CachedEvaluator`` still reads back every stored one). So the
    prompts of a run played by hand are answered and moved on where the answers are written, and only the
    measurements travel to the GPU machine."""

    needs_local_device = False      # nothing is measured here: the halt comes at the first measurement

    def __init__(self, inner: Evaluator, run_id: str):
        self.inner = require_evaluator(inner)
        self.run_id = run_id
        self.arch = inner.arch
        self.device = inner.device

    def _halt(self, what: str) -> Any:
        raise RunHalted(NO_DEVICE, f"the run needs the GPU to {what}, and this machine has none",
                        f"run `cuda-llm resume {self.run_id}` on a machine with an NVIDIA GPU (nothing was spent)")

    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> EvalResult:
        return self._halt(f"evaluate {candidate_id}")

    def baseline(self, loaded: Any) -> EvalResult:
        return self._halt("measure the baseline")

    def library(self, loaded: Any) -> EvalResult | None:
        return self._halt("measure the library yardstick")

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Any:
        return self._halt(f"profile {candidate_id}")

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[EvalResult, EvalResult]:
        return self._halt(f"check {candidate_id} a last time")

    def head_to_head(self, loaded: Any, challenger: str, champion: str, challenger_id: str, champion_id: str,
                     work_dir: Path) -> HeadToHead:
        return self._halt(f"time {challenger_id} against {champion_id}")

    def build(self, loaded: Any, source: str, candidate_id: str) -> EvalResult:
        return self.inner.build(loaded, source, candidate_id)

    def analyze(self, loaded: Any, result: EvalResult, profile: Any,
                allowed_features: Collection[str] | None = None) -> Any:
        return self.inner.analyze(loaded, result, profile, allowed_features)

    def toolchain(self) -> dict[str, str]:
        return self.inner.toolchain()

    @property
    def parallelism(self) -> int:
        return 1

    @property
    def gpu_labels(self) -> list[str] | None:
        return None

    def bind_trace(self, on_event: EventFn) -> None:
        self.inner.bind_trace(on_event)

    def close(self) -> None:
        self.inner.close()
