"""`cuda-llm tune TASK KERNEL.cu` on the CPU: bad input, every point compiled by real nvcc when there is
no device, and the whole search (table, best kernel written) with the harness replaced by a test
evaluator whose times are a known function of the parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parametric_timing_evaluator import ParametricTimingEvaluator, params_of

from cuda_llm.cli import main

HERE = Path(__file__).resolve().parent
REDUCE = (HERE / "fixtures" / "tune" / "reduce_items.cu").read_text()

SMALL = """#include <cuda_runtime.h>
// cuda-llm: tune BLOCK 128 256
#define BLOCK 256
// cuda-llm: tune ITEMS 1 3
#define ITEMS 1
static_assert(BLOCK * ITEMS != 384, "BLOCK 128 with ITEMS 3 is ruled out for this test");
__global__ void k(const float* x, float* out, int n) {
    long long i = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x;
    float v = 0.f;
    for (int j = 0; j < ITEMS; ++j) if (i + j * BLOCK < n) v += x[i + j * BLOCK];
    atomicAdd(out, v);
}
extern "C" void solve(const float* x, float* out, int n) {
    cudaMemsetAsync(out, 0, sizeof(float), 0);
    if (n > 0) k<<<(unsigned)((n + BLOCK * ITEMS - 1) / (BLOCK * ITEMS)), BLOCK>>>(x, out, n);
}
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path_factory.getbasetemp() / "tune-cmd-cache"))


def test_bad_input_is_refused_with_a_clear_error(tmp_path, capsys):
    assert main(["tune", "reduce_sum", str(tmp_path / "missing.cu")]) == 2
    assert "does not exist" in capsys.readouterr().err
    plain = tmp_path / "plain.cu"
    plain.write_text("#define BLOCK 256\n")
    assert main(["tune", "reduce_sum", str(plain)]) == 2
    assert "declares no tunable constants" in capsys.readouterr().err
    broken = tmp_path / "broken.cu"
    broken.write_text("// cuda-llm: tune BLOCK 128 256\nint x;\n")
    assert main(["tune", "reduce_sum", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "broken.cu" in err and "no `#define BLOCK VALUE`" in err
    assert main(["tune", "no_such_task", str(broken)]) == 2
    for flag, value, words in (("--max-evals", "0", "'0' is not a number of points: give 1 or more"),
                               ("--time-budget", "-1", "'-1' is not a duration; write e.g. 600, 45m or 8h")):
        with pytest.raises(SystemExit) as exc:      # worded as optimize words it, in one line
            main(["tune", "reduce_sum", str(broken), flag, value])
        assert exc.value.code == 2 and f"cuda-llm tune: argument {flag}: {words}" in capsys.readouterr().err


def test_without_a_device_every_point_is_compiled_and_listed(tmp_path, capsys, monkeypatch):
    import cuda_llm.tools.device.device_probe as probe

    monkeypatch.setattr(probe, "has_cuda_device", lambda: False)
    kernel = tmp_path / "small.cu"
    kernel.write_text(SMALL)
    assert main(["tune", "reduce_sum", str(kernel), "--jobs", "2"]) == 2
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line[:1].isdigit() and " points compiled" not in line]
    assert len(rows) == 4
    bad = [r for r in rows if "compile_error" in r]
    assert len(bad) == 1 and "128" in bad[0] and "static assertion" in bad[0]
    assert "3 of 4 points compiled" in out and "need a CUDA device" in out
    assert not (tmp_path / "small.tuned.cu").exists()


def _with_test_evaluator(monkeypatch, ev: ParametricTimingEvaluator, gpus: int = 1, judge=None) -> None:
    """The harness (tools.harness.evaluate) and nvcc (tools.compiler.compile.compile_many) answered by the test evaluator, on a
    machine with ``gpus`` visible GPUs; ``judge(loaded, source, candidate, options)`` replaces the harness when
    given (it sees the options, the GPU it is pinned to included)."""
    import cuda_llm.measure.gpu_pool as gpu_pool
    import cuda_llm.tools.compiler.compile as compile_mod
    import cuda_llm.tools.device.device_probe as probe
    import cuda_llm.tools.harness.evaluate as evaluate_mod

    monkeypatch.setattr(gpu_pool, "SLOT_PROCESSES", False)   # the doubles below live in this process only
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(probe, "cuda_device_count", lambda: gpus)
    monkeypatch.setattr(probe, "has_cuda_device", lambda: True)
    monkeypatch.setattr(compile_mod, "compile_many", lambda sources, **kw: ev.compile_batch(list(sources)))
    judge = judge or (lambda loaded, source, candidate, options: ev.result(source, candidate))
    monkeypatch.setattr(evaluate_mod, "evaluate_candidate",
                        lambda loaded, source, *, candidate, options, **kw: judge(loaded, source, candidate, options))


def test_the_search_prints_its_points_and_writes_the_fastest(tmp_path, capsys, monkeypatch):
    # fastest at BLOCK=512, ITEMS_PER_THREAD=8; BLOCK=1024 with 16 items "does not compile"
    ev = ParametricTimingEvaluator(lambda p: 0.5 + abs(p["BLOCK"] - 512) / 1000 + abs(p["ITEMS_PER_THREAD"] - 8) / 20,
                                   valid=lambda p: p["BLOCK"] * p["ITEMS_PER_THREAD"] < 16384)
    _with_test_evaluator(monkeypatch, ev)
    kernel = tmp_path / "reduce.cu"
    kernel.write_text(REDUCE)
    assert main(["tune", "reduce_sum", str(kernel), "--max-evals", "20", "--jobs", "4"]) == 0
    out = capsys.readouterr().out
    best = tmp_path / "reduce.tuned.cu"
    assert params_of(best.read_text()) == {"BLOCK": 512, "ITEMS_PER_THREAD": 8}
    assert "written to" in out and "BLOCK=512 ITEMS_PER_THREAD=8" in out
    star = [line for line in out.splitlines() if line.split() and line.split()[0].endswith("*")]
    assert len(star) == 1 and "512" in star[0] and " 8 " in star[0]
    assert "compile_error" in out and ev.measured and len(set(ev.measured)) == len(ev.measured)
    # the JSON form: every point, and where the best went
    assert main(["tune", "reduce_sum", str(kernel), "--max-evals", "6", "--json", "--out", str(tmp_path / "b.cu")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evaluations"] <= 6 and data["out"] == str(tmp_path / "b.cu") and data["sampler"] == "tpe"
    assert data["points"][0]["params"] == {"BLOCK": "256", "ITEMS_PER_THREAD": "4"}   # the written point first


def test_no_passing_point_exits_1_and_writes_nothing(tmp_path, capsys, monkeypatch):
    ev = ParametricTimingEvaluator(lambda p: 1.0, wrong=lambda p: True)
    _with_test_evaluator(monkeypatch, ev)
    kernel = tmp_path / "reduce.cu"
    kernel.write_text(REDUCE)
    assert main(["tune", "reduce_sum", str(kernel), "--max-evals", "3"]) == 1
    assert "no point passed" in capsys.readouterr().out
    assert not (tmp_path / "reduce.tuned.cu").exists()
