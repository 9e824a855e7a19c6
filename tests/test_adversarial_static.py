"""CPU side of the adversarial suite: candidates refused before the GPU get the right status here, the
others reach the GPU (they compile and pass the static checks, so the GPU tests judge their trick), and
`cuda-llm eval` without a device compiles, checks, says testing needs a CUDA device and exits 2.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from cuda_llm.tasks import load_task
from cuda_llm.tools.device.device_probe import has_cuda_device
from cuda_llm.results import EvalResult, Status
from adversarial_kernels import ADV, ALL, expected, header

REQUIRED_COMMANDS = {"tasks", "eval", "optimize", "resume", "features", "profile"}


BEFORE_GPU = [p for p in ALL if expected(p) <= {Status.static_error, Status.compile_error}]
ON_GPU = [p for p in ALL if p not in BEFORE_GPU]


def test_every_adversarial_kernel_names_its_task_trick_and_status():
    assert len(ALL) >= 15, [p.name for p in ALL]
    for p in ALL:
        h = header(p)
        assert {"task", "expect", "trick"} <= set(h), f"{p.name}: header lacks task/expect/trick: {h}"
        load_task(h["task"])                       # the task exists
        assert expected(p), p.name                 # every status name is a Status
        assert Status.ok not in expected(p), f"{p.name}: an adversarial kernel must never be expected to pass"
    # the GPU side covers every trick the harness issue lists
    names = {p.stem for p in ON_GPU}
    for trick in ("writes_nothing", "off_by_one", "cached_result", "side_stream_no_sync", "mutates_input",
                  "nan_output", "infinite_loop", "oob_write", "timing_skip", "shape_memo"):
        assert trick in names, trick


@pytest.mark.parametrize("path", BEFORE_GPU, ids=lambda p: p.stem)
def test_refused_before_the_gpu(path: Path, tmp_path):
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate

    h = header(path)
    loaded = load_task(h["task"])
    res = evaluate_candidate(loaded, path.read_text(), candidate=path.name,
                             options=EvalOptions(arch="sm_90"), work_dir=tmp_path)
    assert res.status in expected(path), (res.status, res.message)
    assert res.message, "a refused kernel must say why"
    assert res.validation is None and res.timing is None
    if res.status is Status.static_error:
        assert res.compile is None, "a statically refused kernel must not cost a compile"
        assert h["rule"] in {i.rule for i in res.static_issues}, res.static_issues
        assert all(i.line for i in res.static_issues if i.rule != "missing-entry")
    else:
        assert res.compile is not None and not res.compile.ok
        assert "line" in res.message or re.search(r":\d+:", res.message), res.message


def test_gpu_side_kernels_compile_and_pass_the_static_checks():
    """Otherwise the GPU tests would see a static or compile error instead of the trick under test: the
    raw-text rules, the preprocessed-source rules and the symbol check all pass them."""
    from cuda_llm.tools.compiler.compile import compile_many
    from cuda_llm.tools.compiler.static_check import check_source

    for p in ON_GPU:
        assert check_source(p.read_text(), load_task(header(p)["task"]).task) == [], p.name
    from cuda_llm.tools.compiler.symbols import check_build

    results = compile_many([p.read_text() for p in ON_GPU], arch="sm_90", filenames=[p.name for p in ON_GPU])
    for p, r in zip(ON_GPU, results):
        assert r.ok, f"{p.name}: {r.errors}"
        assert check_build(r) == [], f"{p.name}: refused after compiling: {check_build(r)}"


@pytest.mark.skipif(has_cuda_device(), reason="checks the behaviour without a CUDA device")
def test_good_kernel_without_device_is_no_device(tmp_path):
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate

    loaded = load_task("gelu")
    res = evaluate_candidate(loaded, loaded.task.baseline_path.read_text(), options=EvalOptions(arch="sm_90"),
                             work_dir=tmp_path)
    assert res.status is Status.no_device
    assert res.compile is not None and res.compile.ok and res.compile.kernels
    assert "CUDA device" in res.message
    assert not res.status.passed


# ------------------------------------------------------------------------------------------ the eval command
def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from cuda_llm.cli import main

    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.mark.skipif(has_cuda_device(), reason="checks the behaviour without a CUDA device")
def test_eval_without_device_compiles_then_exits_2(capsys):
    naive = load_task("gelu").task.baseline_path
    rc, out, err = _cli(["eval", "gelu", str(naive), "--arch", "sm_90"], capsys)
    assert rc == 2
    assert "no_device" in out and "needs a CUDA device" in out
    assert "gelu_kernel" in out and "registers" in out          # the compile facts are shown
    assert "[eval]" in err                                         # progress goes to stderr, not stdout


@pytest.mark.skipif(has_cuda_device(), reason="checks the behaviour without a CUDA device")
def test_eval_json_without_device(capsys):
    naive = load_task("gelu").task.baseline_path
    rc, out, _ = _cli(["eval", "gelu", str(naive), "--arch", "sm_90", "--json"], capsys)
    assert rc == 2
    res = EvalResult.model_validate(json.loads(out))
    assert res.status is Status.no_device and res.compile.ok


def test_eval_refused_kernel_exits_1_with_advice(capsys):
    rc, out, _ = _cli(["eval", "gelu", str(ADV / "system_call.cu"), "--arch", "sm_90"], capsys)
    assert rc == 1
    assert "static_error" in out and "host-trick" in out and "what to do" in out
    assert 'extern "C" void solve(const float* x, float* y, int n)' in out


def test_eval_json_compile_error(capsys):
    rc, out, _ = _cli(["eval", "gelu", str(ADV / "compile_error.cu"), "--arch", "sm_90", "--json"], capsys)
    assert rc == 1
    data = json.loads(out)
    assert data["status"] == "compile_error" and "kSqrt2OverPi" in data["message"]


def test_eval_unknown_task_lists_the_tasks(capsys, tmp_path):
    k = tmp_path / "k.cu"
    k.write_text("// empty\n")
    rc, out, err = _cli(["eval", "no_such_task", str(k)], capsys)
    assert rc == 2 and out == ""
    assert "no_such_task" in err and "gelu" in err and "softmax" in err


def test_eval_missing_kernel_file(capsys, tmp_path):
    rc, out, err = _cli(["eval", "gelu", str(tmp_path / "missing.cu")], capsys)
    assert rc == 2 and out == ""
    assert "missing.cu" in err and "does not exist" in err and "solve(const float* x" in err


def test_eval_table_shows_speedup_library_ratio_and_sol():
    """Rendering from a measured result (numbers made up here; the GPU tests produce real ones)."""
    from cuda_llm.commands.eval_cmd import render_result, summarize
    from cuda_llm.results import (
        CaseResult, CompileResult, KernelResources, TimingResult, ValidationResult,
    )

    task = load_task("sgemm").task
    cases = [CaseResult(sizes=s, held_out=h, passed=True) for s, h in task.all_cases()]
    timing = TimingResult(sizes=task.benchmark, median_ms=2.0, min_ms=1.9, mean_ms=2.0, iqr_ms=0.05, rse=0.004,
                          samples_ms=[2.0] * 20, repetitions=20, stop_reason="rse", sol_ms=1.0, pct_of_sol=50.0)
    res = EvalResult(task="sgemm", candidate="k.cu", source_hash="x", status=Status.ok,
                     compile=CompileResult(ok=True, arch="sm_90", source_hash="x", kernels=[
                         KernelResources(name="gemm_tiled", registers=96, shared_bytes=8192, spill_store_bytes=16)]),
                     validation=ValidationResult(passed=True, cases=cases), timing=timing)
    naive = res.model_copy(update={"timing": timing.model_copy(update={"median_ms": 10.0})})
    lib = res.model_copy(update={"timing": timing.model_copy(update={"median_ms": 1.0})})
    summary = summarize(res, {"naive": naive, "library": lib}, task)
    assert summary["speedup"] == pytest.approx(5.0) and summary["library_ratio"] == pytest.approx(0.5)
    text = render_result(res, summary, task)
    n, held = len(cases), sum(h for _, h in task.all_cases())
    assert f"{n}/{n} ({held}/{held} held-out)" in text
    assert "5.00x" in text and "0.50x" in text and "50.0%" in text
    assert "gemm_tiled" in text and "96" in text and "SPILLS" in text
    assert "what to do" not in text


@pytest.mark.parametrize("name", sorted(__import__("cuda_llm.cli", fromlist=["COMMANDS"]).COMMANDS))
def test_every_command_has_help(name, capsys):
    from cuda_llm.cli import COMMANDS, main

    try:
        importlib.import_module(COMMANDS[name])
    except ModuleNotFoundError as exc:
        if exc.name == COMMANDS[name] and name not in REQUIRED_COMMANDS:
            pytest.skip(f"optional command module {COMMANDS[name]} is not installed")
        raise
    with pytest.raises(SystemExit) as ei:
        main([name, "--help"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    assert f"cuda-llm {name}" in out and "usage" in out.lower()


def test_eval_table_for_a_wrong_answer_hides_held_out_sizes():
    from cuda_llm.commands.eval_cmd import render_result, summarize
    from cuda_llm.results import CaseResult, CompileResult, ValidationResult

    task = load_task("gelu").task
    visible = [CaseResult(sizes=s, passed=True) for s in task.shapes]
    held = task.held_out[-1]
    bad = CaseResult(sizes=held, held_out=True, passed=False, reason="y: 1 element not written (still the poison)",
                     kind="unwritten",
                     first_bad_index=[held["n"] - 1], expected=0.5, got=float("nan"))
    res = EvalResult(task="gelu", candidate="k.cu", source_hash="x", status=Status.wrong_answer,
                     message="correctness: failed on a held-out shape (not shown)",
                     compile=CompileResult(ok=True, arch="sm_90", source_hash="x"),
                     validation=ValidationResult(passed=False, cases=[*visible, bad]))
    text = render_result(res, summarize(res, {}, task), task)
    total = len(task.all_cases())
    assert f"{len(visible)}/{total}" in text and "held-out" in text
    assert "never written" in text and "what to do" in text
    assert "1 element" not in text, "a held-out case says the kind of failure, not its counts"
    assert str(held["n"]) not in text and str(held["n"] - 1) not in text, "held-out sizes must not be printed"
    assert "speedup" not in text and "median latency" not in text
