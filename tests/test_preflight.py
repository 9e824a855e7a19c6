"""Preflight (`cuda-llm doctor`, and the checks optimize and resume make first): the fake OpenAI server
for the endpoint (down, 401, 404, an HTML page, slow), and this machine, which has no GPU."""

from __future__ import annotations

import json

import pytest

from fake_openai_server import FakeOpenAIServer, Reply

from cuda_llm.agents.settings import RoleSettings
from cuda_llm.cli import main
from cuda_llm.commands import preflight
from cuda_llm.tools.device.device_probe import has_cuda_device

no_gpu = pytest.mark.skipif(has_cuda_device(), reason="checks the machine without a GPU")


def endpoint(srv: FakeOpenAIServer, model: str = "m1", timeout_s: float = 5.0) -> preflight.Check:
    return preflight.check_endpoint(RoleSettings(model=model, base_url=srv.base_url, api_key="k"), ["coder"],
                                    timeout_s=timeout_s)


def test_endpoint_ok_sends_one_request():
    with FakeOpenAIServer(models=["m1", "m2"]) as srv:
        c = endpoint(srv)
    assert c.level == "ok" and "model listed" in c.detail
    assert srv.statuses == [200] and srv.requests[0].path.endswith("/models")


def test_endpoint_down():
    c = preflight.check_endpoint(RoleSettings(model="m1", base_url="http://127.0.0.1:9/v1"), timeout_s=2)
    assert c.level == "fail" and "cannot connect" in c.detail and "--base-url" in c.detail


@pytest.mark.parametrize("status,words", [(401, "API key was rejected (HTTP 401)"), (403, "may not use this model")])
def test_endpoint_key_rejected_is_named_and_sent_once(status, words):
    with FakeOpenAIServer(models_reply=Reply(status=status, error="bad key")) as srv:
        c = endpoint(srv)
    assert c.level == "fail" and words in c.detail and "retr" not in c.detail
    assert srv.statuses == [status]                                  # no retries


def test_endpoint_unknown_model_listed_or_404():
    with FakeOpenAIServer(models=["llama-3"]) as srv:
        c = endpoint(srv, model="gpt-4.1")
    assert c.level == "fail" and "'gpt-4.1' is not served" in c.detail and "llama-3" in c.detail
    with FakeOpenAIServer(script=[Reply(status=404, error="The model `m1` does not exist")]) as srv:   # no /models
        c = endpoint(srv)
    assert c.level == "fail" and "not found (HTTP 404)" in c.detail and "--model" in c.detail
    assert srv.statuses == [404, 404]


def test_endpoint_without_models_route_gets_a_one_token_completion():
    with FakeOpenAIServer(script=[Reply(content="p", completion_tokens=1)]) as srv:
        c = endpoint(srv)
    assert c.level == "ok" and "model answered" in c.detail
    assert srv.requests[-1].body["max_tokens"] == 1


def test_endpoint_html_page_and_slow_server():
    with FakeOpenAIServer(models_reply=Reply(status=200, body=b"<!doctype html><html><body>Login</body></html>")) as srv:
        c = endpoint(srv)
    assert c.level == "fail" and "not OpenAI JSON" in c.detail and "/v1" in c.detail
    with FakeOpenAIServer(models=["m1"], models_reply=Reply(status=200, delay_s=3)) as srv:
        c = endpoint(srv, timeout_s=0.5)
    assert c.level == "fail" and "no answer within 0.5 s" in c.detail


@no_gpu
def test_gpu_check_without_a_gpu_says_what_to_do():
    c = preflight.check_gpu()
    assert c.level == "fail" and "nvidia-smi" in c.detail


FAKE_DRIVER = {
    "missing": None,
    "no_libcuda": "raise ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')\n",
    "no_device": "def init():\n    raise RuntimeError('cuInit failed: no CUDA-capable device is detected')\n",
    "ok": ("def init():\n    pass\n\ndef get_driver_version():\n    return 12080\n\n"
           "class Device:\n    @staticmethod\n    def count():\n        return 2\n"),
}


@pytest.mark.parametrize("case, level, words", [
    ("missing", "fail", "pycuda is not installed (the GPU worker needs it): pip install -e '.[gpu]' (where its build "
                        "says cuda.h is not found, put the toolkit's own nvcc first: PATH="),
    ("no_libcuda", "fail", "pycuda is installed but does not load (ImportError: libcuda.so.1: cannot open"),
    ("no_device", "fail", "pycuda loads but cannot start the driver (RuntimeError: cuInit failed: no CUDA-capable"),
    ("ok", "ok", "pycuda 2099.1, driver supports CUDA 12.8, 2 device(s)"),
])
def test_pycuda_check_says_what_to_do(tmp_path, monkeypatch, case, level, words):
    """The probe runs in a child interpreter (the GPU worker's way); a stand-in pycuda on its path plays each case."""
    if case == "missing":
        (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['pycuda'] = None\n")
    else:
        (tmp_path / "pycuda").mkdir()
        (tmp_path / "pycuda" / "__init__.py").write_text("VERSION_TEXT = '2099.1'\n")
        (tmp_path / "pycuda" / "driver.py").write_text(FAKE_DRIVER[case])
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    c = preflight.check_pycuda()
    assert (c.name, c.level) == ("pycuda", level) and words in c.detail, c.detail
    assert "\n" not in c.line()


def test_the_toolkit_root_is_where_cuda_h_is(tmp_path, monkeypatch):
    kit = tmp_path / "cuda-99.0"
    (kit / "include").mkdir(parents=True)
    (kit / "include" / "cuda.h").write_text("")
    monkeypatch.setenv("CUDA_ROOT", str(kit))
    assert preflight.cuda_toolkit_root() == kit
    monkeypatch.setenv("CUDA_ROOT", str(tmp_path / "nothing"))
    root = preflight.cuda_toolkit_root()
    assert root is None or (root / "include" / "cuda.h").is_file()


def test_ncu_counter_permission_explained(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho 'NVIDIA (R) Nsight Compute Command Line Profiler'\necho 'Version 2025.3.1.0 (build 1)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CUDA_LLM_NCU", str(fake))
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    c = preflight.check_ncu(params=params, euid=1000)
    assert c.level == "fail" and "ERR_NVGPUCTRPERM" in c.detail and "NVreg_RestrictProfilingToAdminUsers=0" in c.detail
    assert preflight.check_ncu(params=params, euid=0).level == "ok"           # root may profile
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert preflight.check_ncu(params=params, euid=1000).level == "ok"
    monkeypatch.setenv("CUDA_LLM_NCU", "none")
    assert preflight.check_ncu(params=params).level == "fail"


def test_disk_check(tmp_path):
    assert preflight.check_disk({"runs": tmp_path / "not" / "yet"}).level in ("ok", "warn")
    c = preflight.check_disk({"runs": tmp_path}, min_free=1 << 62)
    assert c.level == "fail" and "free at least" in c.detail


@no_gpu
def test_doctor_on_a_machine_without_gpu(capsys, tmp_path):
    with FakeOpenAIServer(models=["m1"]) as srv:
        rc = main(["doctor", "--model", "m1", "--base-url", srv.base_url, "--runs-dir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert rc == 1
    lines = {ln.split()[1]: ln.split()[0] for ln in out.splitlines() if ln[:4] in ("ok  ", "warn", "FAIL")}
    assert lines["gpu"] == "FAIL" and lines["nvcc"] == "ok" and lines["endpoint"] == "ok" and lines["disk"] == "ok"
    assert lines["pycuda"] == "FAIL"          # not installed, or no driver for it to load


def test_doctor_json_and_missing_model(capsys, monkeypatch, tmp_path):
    for k in ("CUDA_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "CUDA_LLM_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)
    rc = main(["doctor", "--json"])
    checks = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert any(c["name"] == "endpoint" and c["level"] == "fail" and "--model" in c["detail"] for c in checks)


@no_gpu
def test_optimize_refuses_before_creating_a_run_or_calling_the_llm(capsys, tmp_path):
    with FakeOpenAIServer(models=["m1"]) as srv:
        rc = main(["optimize", "softmax", "--model", "m1", "--base-url", srv.base_url,
                   "--runs-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and "FAIL  gpu" in err and "nothing was started" in err
    assert not (tmp_path / "runs").exists()
    assert all(r.path.endswith("/models") for r in srv.requests)      # no completion was paid for


@no_gpu
def test_resume_without_gpu_spends_nothing_and_keeps_the_run_resumable(capsys, tmp_path, monkeypatch):
    from fake_gpu_evaluator import FakeGpuEvaluator

    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits
    from cuda_llm.runs.run_info import run_info
    from cuda_llm.runs.rundir import RunDir

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))
    with FakeOpenAIServer(models=["m1"]) as srv:
        from cuda_llm.agents.settings import load_settings

        settings = load_settings({"model": "m1", "base_url": srv.base_url, "api_key": "k"})
        out = start_run("softmax", settings, RunOptions(limits=Limits(n_candidates=1), runs_dir=tmp_path / "runs",
                                                        learn=False),
                        evaluator=FakeGpuEvaluator({"baseline": "wrong_answer"}), handle_signals=False)
        assert out.halt == "baseline_failed"
        before = (out.root / "trace.jsonl").read_text()
        rc = main(["resume", out.run_id, "--runs-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and "FAIL  gpu" in err
    assert (out.root / "trace.jsonl").read_text() == before           # not even a resume event
    assert [r.path for r in srv.requests if not r.path.endswith("/models")] == []
    assert run_info(RunDir(out.root)).resumable
