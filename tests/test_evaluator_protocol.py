"""Every Evaluator the package and its tests build has the whole protocol, with the protocol's parameters:
what the graph, the pool and the slots call is there, so nothing reaches an evaluator through getattr."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from fake_gpu_evaluator import FakeGpuEvaluator
from parametric_timing_evaluator import ParametricTimingEvaluator
from sleeping_gpu_evaluator import SleepingGpuEvaluator

from cuda_llm.measure.evaluator import (PROTOCOL_MEMBERS, CachedEvaluator, Evaluator, GpuEvaluator, ToolsMixin,
                                        missing_members, require_evaluator)
from cuda_llm.measure.gpu_pool import EvaluatorSlot, GpuPool, PoolClient


def _methods(cls: type) -> dict[str, inspect.Signature]:
    """The protocol's methods (not its attributes and properties) with their signatures on ``cls``."""
    out = {}
    for name in PROTOCOL_MEMBERS:
        attr = inspect.getattr_static(cls, name, None)
        if callable(attr) and not isinstance(attr, property):
            out[name] = inspect.signature(attr)
    return out


PROTOCOL = _methods(Evaluator)


def test_the_protocol_lists_its_members():
    """PROTOCOL_MEMBERS (what ``missing_members`` checks) is the protocol's own list, nothing more or less."""
    declared = {n for n in dir(Evaluator) if not n.startswith("_")} | set(Evaluator.__annotations__)
    assert declared == set(PROTOCOL_MEMBERS)
    assert {"library", "parallelism", "gpu_labels", "bind_trace", "close", "needs_local_device"} <= declared


@pytest.fixture
def evaluators(tmp_path: Path) -> dict[str, Any]:
    fake = FakeGpuEvaluator({})
    pool = GpuPool([EvaluatorSlot(FakeGpuEvaluator({}), "0")], arch="sm_90", device=None)
    gpu = GpuEvaluator.__new__(GpuEvaluator)       # its class, no device probe: the members are what is checked
    gpu.arch, gpu.device = "sm_90", None
    yield {"GpuEvaluator": gpu, "PoolClient": pool.client(), "CachedEvaluator": CachedEvaluator(fake, tmp_path),
           "FakeGpuEvaluator": fake, "ParametricTimingEvaluator": ParametricTimingEvaluator(lambda p: 1.0),
           "SleepingGpuEvaluator": SleepingGpuEvaluator("0")}
    pool.close()


@pytest.mark.parametrize("name", ["GpuEvaluator", "PoolClient", "CachedEvaluator", "FakeGpuEvaluator",
                                  "ParametricTimingEvaluator", "SleepingGpuEvaluator"])
def test_each_evaluator_has_the_whole_protocol_with_its_parameters(evaluators, name):
    ev = evaluators[name]
    assert isinstance(ev, Evaluator) and missing_members(ev) == []
    assert require_evaluator(ev) is ev
    for method, want in PROTOCOL.items():
        got = inspect.signature(getattr(type(ev), method))
        names = [p.name for p in got.parameters.values() if p.kind is not p.KEYWORD_ONLY]
        assert names == list(want.parameters), f"{name}.{method}{got} is not the protocol's {method}{want}"
    assert isinstance(ev.parallelism, int) and ev.parallelism >= 1
    assert ev.gpu_labels is None or all(isinstance(g, str) for g in ev.gpu_labels)
    assert isinstance(ev.needs_local_device, bool)


def test_the_cache_returns_the_protocols_types_and_names_its_wrappers(evaluators, tmp_path):
    """The protocol's methods of the cache return what the protocol says (an EvalResult, not a wrapper); the
    freshness the graph records comes from the ``*_cached`` methods."""
    from cuda_llm.measure.evaluator import Cached
    from cuda_llm.results import EvalResult
    from cuda_llm.tasks import load_task

    fake = ParametricTimingEvaluator(lambda p: 2.0)
    cache = CachedEvaluator(fake, tmp_path / "cache")
    loaded = load_task("softmax")
    first = cache.baseline_cached(loaded)
    assert isinstance(first, Cached) and first.fresh and isinstance(first.value, EvalResult)
    again = cache.baseline(loaded)
    assert isinstance(again, EvalResult) and again == first.value
    assert cache.baseline_cached(loaded).fresh is False


def test_a_partial_evaluator_is_refused_naming_what_it_lacks():
    class OnlyEvaluate(ToolsMixin):
        arch, device = "sm_90", None

        def evaluate(self, loaded, source, candidate_id, work_dir):
            raise AssertionError("not called")

    with pytest.raises(TypeError, match="OnlyEvaluate is not an Evaluator: it lacks baseline, profile, final_check"):
        require_evaluator(OnlyEvaluate())
    assert not isinstance(PoolClient, Evaluator)      # a class is not an instance: the check is on objects
