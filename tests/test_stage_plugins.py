"""Tool stages as plugins: examples/stage_plugin/ (a package of its own) declares `register_budget` in the
`cuda_llm.stages` entry-point group; the real importlib.metadata lookup finds it, `cuda-llm stages` lists it,
a run started with it (scripted model, real nvcc, timings set by the test) runs it, saves it, and a resume
rebuilds it, or refuses in one line once it cannot be imported."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fake_gpu_evaluator import FakeGpuEvaluator, softmax_source
from test_graph_loop import TIMINGS, scripted, shared_cache, trace

from cuda_llm.cli import main
from cuda_llm.graph.run import Extension, RunOptions, resume_run, start_run
from cuda_llm.graph.stage_plugins import StageError, installed_stages, parse_stage_spec, with_plugins
from cuda_llm.graph.state import Limits

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "stage_plugin"


def install_as_dist_info(site: Path, project: Path) -> None:
    """What an installer leaves for importlib.metadata: the module and a dist-info folder whose
    entry_points.txt says what the project's pyproject.toml declares."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    site.mkdir(parents=True, exist_ok=True)
    for module in project.glob("*.py"):
        shutil.copy(module, site / module.name)
    info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    groups = meta["entry-points"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in groups.items()))


def _forget_module(name: str) -> None:
    sys.modules.pop(name, None)
    importlib.invalidate_caches()


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    install_as_dist_info(site, EXAMPLE)
    monkeypatch.syspath_prepend(str(site))
    _forget_module("register_budget")
    yield site
    _forget_module("register_budget")


def test_the_entry_point_lookup_finds_the_example(plugin_site):
    ep = installed_stages()["register_budget"]
    assert ep.value == "register_budget:RegisterBudget" and ep.dist.name == "cuda-llm-register-budget"
    names = [s.name for s in with_plugins(["register_budget:evaluate"])]
    assert names == ["evaluate", "register_budget", "tune", "profile"]
    assert [s.name for s in with_plugins(["register_budget"])][-1] == "register_budget"      # default: last
    assert [s.name for s in with_plugins(["register_budget:0"])][0] == "register_budget"
    for spec, words in (("register_budget:9", "position 9 is outside the stage list 0..3"),
                        ("register_budget:nope", "no stage 'nope' to follow; the stages are evaluate, tune, profile"),
                        ("nope", "no tool stage named 'nope' is installed (installed: register_budget")):
        with pytest.raises(StageError, match=re.escape(words)):
            with_plugins([spec])
    with pytest.raises(StageError, match="write a stage as NAME or NAME:POSITION"):
        parse_stage_spec("two words")


def _run(tmp_path, **limits):
    model = scripted({"r1c0": softmax_source("v5"), "r1c1": softmax_source("v6"), "*": softmax_source("v2")}, n=2)
    opts = RunOptions(limits=Limits(n_candidates=2, **limits), runs_dir=tmp_path / "runs", learn=False,
                      stages=["register_budget:evaluate"])
    out = start_run("softmax", None, opts, evaluator=FakeGpuEvaluator(TIMINGS), model_factory=lambda role: model,
                    handle_signals=False)
    return out, model


def test_a_plugin_stage_runs_is_saved_and_survives_a_resume(plugin_site, tmp_path, tmp_path_factory, monkeypatch,
                                                            capsys):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(shared_cache(tmp_path_factory)))
    monkeypatch.setenv("CUDA_LLM_REGISTER_BUDGET", "16")           # these kernels use 31 registers: all rejected
    out, model = _run(tmp_path, max_rounds=1)
    assert out.finished and out.best["id"] == "baseline"
    events = trace(out)
    nodes = [e["node"] for e in events if e["event"] == "node_start"]
    assert nodes.index("evaluate") < nodes.index("register_budget") < nodes.index("tune")
    rejects = {e["candidate"]: e["reason"] for e in events if e.get("kind") == "reject"}
    assert set(rejects) == {"r1c0", "r1c1"} and "31 registers > 16" in rejects["r1c0"]
    import json

    config = json.loads((out.root / "config.json").read_text())
    assert config["stages"] == ["evaluate", "register_budget", "tune", "profile"]
    assert config["options"]["stages"] == ["register_budget:evaluate"]

    # resumed with one more round: the stage is rebuilt from the saved config, not given again
    monkeypatch.setenv("CUDA_LLM_REGISTER_BUDGET", "64")
    again = resume_run(out.run_id, tmp_path / "runs", evaluator=FakeGpuEvaluator(TIMINGS),
                       model_factory=lambda role: model, handle_signals=False, extend=Extension(rounds=(True, 1)))
    assert again.finished and again.best["id"].startswith("r2")       # nothing rejected under the new budget
    later = trace(again)[len(events):]
    assert any(e["event"] == "node_start" and e["node"] == "register_budget" for e in later)

    # uninstalled: resume refuses in one line before anything runs (the command) or is built (the API)
    sys.path.remove(str(plugin_site))
    _forget_module("register_budget")
    with pytest.raises(StageError, match="register_budget"):
        resume_run(out.run_id, tmp_path / "runs", evaluator=FakeGpuEvaluator(TIMINGS),
                   model_factory=lambda role: model, handle_signals=False, extend=Extension(rounds=(True, 1)))
    capsys.readouterr()
    assert main(["resume", out.run_id, "--runs-dir", str(tmp_path / "runs"), "--rounds", "+1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"cuda-llm resume: run {out.run_id} was started with")
    assert "no tool stage named 'register_budget' is installed" in err and "install it again to resume" in err
    assert len(trace(again)) == len(trace(out))                     # nothing was run


def test_optimize_refuses_a_stage_it_cannot_import_before_creating_anything(tmp_path, capsys):
    rc = main(["optimize", "softmax", "--planner", "rules", "--critic", "rules", "--coder", "manual",
               "--stage", "nope:evaluate", "--runs-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("cuda-llm optimize: --stage: no tool stage named 'nope' is installed")
    assert len(err.splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_stages_command_lists_installed_and_broken_plugins(tmp_path):
    site = tmp_path / "site"
    install_as_dist_info(site, EXAMPLE)
    broken = tmp_path / "broken"
    (broken / "src").mkdir(parents=True)
    (broken / "pyproject.toml").write_text('[project]\nname = "broken-stage"\nversion = "1.0"\n'
                                           '[project.entry-points."cuda_llm.stages"]\nbroken = "broken_stage:Stage"\n')
    (broken / "broken_stage.py").write_text("import not_a_module_anywhere\n")
    install_as_dist_info(site, broken)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "stages"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "built-in, in order: evaluate -> tune -> profile" in proc.stdout
    assert "register_budget  register_budget:RegisterBudget from cuda-llm-register-budget 0.1.0  ok" in proc.stdout
    assert ("tool stage 'broken' (broken_stage:Stage from broken-stage 1.0) cannot be imported: "
            "ModuleNotFoundError: No module named 'not_a_module_anywhere'") in proc.stdout


@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="pip builds the example with setuptools")
def test_the_example_installs_with_pip(tmp_path):
    """The example's pyproject.toml as pip reads it (a copy is built: the checkout gets no build files)."""
    src = tmp_path / "src"
    shutil.copytree(EXAMPLE, src)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(tmp_path / "site"), str(src)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "stages"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0 and "register_budget:RegisterBudget from cuda-llm-register-budget 0.1.0  ok" in proc.stdout
