"""Any agent or person can play a role: a whole run with a manual coder and rule-based planner and critic
(no endpoint, no key), driven by this test answering the pending prompt files, killed with SIGKILL and
resumed in between; `cuda-llm answer` stores answers and lists what a run waits on.

Each session of the run is a separate process (this file, run as a script), so the kill is real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

HERE = Path(__file__).resolve().parent
TIMINGS = {"baseline": 10.0, "v5": 5.0, "v6": 6.0, "v3": 3.0, "v7": 7.0}
NO_ENDPOINT_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CUDA_LLM_MODEL"))}


def drive(mode: str, work: Path, run_id: str, delay_s: float) -> dict:
    from fake_gpu_evaluator import FakeGpuEvaluator

    from cuda_llm.agents.settings import load_settings
    from cuda_llm.graph.run import RunOptions, resume_run, settings_from_config, start_run
    from cuda_llm.graph.state import Limits
    from cuda_llm.runs.rundir import RunDir

    ev = FakeGpuEvaluator(TIMINGS, log_path=work / "evals.log", delay_s=delay_s)
    if mode == "start":
        settings = load_settings({"coder_provider": "manual", "planner_provider": "rules", "critic_provider": "rules"},
                                 env={})
        opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=2, plateau_rounds=5, compile_fix_turns=1),
                          runs_dir=work / "runs", stats_path=work / "stats.sqlite")
        out = start_run("softmax", settings, opts, evaluator=ev)
    else:   # as `cuda-llm resume` does: the run's own saved settings
        settings = settings_from_config(RunDir.open(run_id, work / "runs").load_config()["llm"])
        out = resume_run(run_id, work / "runs", settings=settings, evaluator=ev)
    return out.model_dump(mode="json", exclude={"table"})


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    mode, work, run_id, delay = sys.argv[1], Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    print("OUTCOME " + json.dumps(drive(mode, work, run_id, delay)), flush=True)
    sys.exit(0)


# ------------------------------------------------------------------ the test
def _env(work: Path) -> dict[str, str]:
    env = dict(NO_ENDPOINT_ENV, CUDA_LLM_CACHE=str(work / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent)])
    return env


def _spawn(mode: str, work: Path, run_id: str = "-", delay_s: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), mode, str(work), run_id, str(delay_s)],
                            env=_env(work), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _outcome(proc: subprocess.Popen, timeout: float = 180) -> dict:
    out, err = proc.communicate(timeout=timeout)
    line = next((ln for ln in out.splitlines() if ln.startswith("OUTCOME ")), None)
    assert line is not None, f"no outcome (rc {proc.returncode}):\n{out[-2000:]}\n{err[-4000:]}"
    return json.loads(line[len("OUTCOME "):])


def _answer(work: Path, run_id: str, name: str, text: str) -> subprocess.CompletedProcess:
    f = work / f"{name}.answer.md"
    f.write_text(text)
    return subprocess.run([sys.executable, "-m", "cuda_llm.cli", "answer", run_id, name, str(f), "--runs-dir",
                           str(work / "runs")], capture_output=True, text=True, timeout=120, env=_env(work))


def _events(trace: Path) -> list[dict]:
    out = []
    for line in trace.read_text().splitlines() if trace.is_file() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def _evals(work: Path) -> list[tuple[str, str]]:
    path = work / "evals.log"
    return [(e["kind"], e["candidate"]) for e in map(json.loads, path.read_text().splitlines())] if path.is_file() else []


@pytest.fixture
def work(tmp_path, tmp_path_factory):
    shared = tmp_path_factory.getbasetemp() / "graph-compile-cache"
    shared.mkdir(exist_ok=True)
    (tmp_path / "cache").symlink_to(shared)
    return tmp_path


def test_a_run_played_by_a_person_with_rules_killed_and_resumed(work):
    from fake_gpu_evaluator import coder_answer, softmax_source

    from cuda_llm.graph.manual import write_answer

    # 1. a new run asks the (manual) coder for round 1's two candidates and waits: no endpoint, no key
    first = _outcome(_spawn("start", work))
    run_id = first["run_id"]
    root = work / "runs" / run_id
    assert not first["finished"] and not first["error"]
    assert [w["name"] for w in first["waiting"]] == ["coder-r1c0", "coder-r1c1"]
    from cuda_llm.runs.run_info import run_info
    from cuda_llm.runs.rundir import RunDir

    info = run_info(RunDir(root))
    assert info.state == "waiting" and info.resumable and "cuda-llm answer" in info.detail
    prompt = (root / "pending" / "coder-r1c0.md").read_text()
    assert f"cuda-llm answer {run_id} coder-r1c0 FILE" in prompt and str(root / "answers" / "coder-r1c0.md") in prompt
    assert "Write candidate `r1c0`" in prompt and 'extern "C" void solve(const float* x' in prompt
    assert "Review of `baseline` by the rule-based diagnosis" in prompt       # set-up reviewed the baseline
    assert "Parent kernel `baseline`" in prompt and "rows=5, cols=33" not in prompt   # never a held-out size
    config = json.loads((root / "config.json").read_text())["llm"]
    assert (config["planner"]["provider"], config["coder"]["provider"], config["critic"]["provider"]) == \
        ("rules", "manual", "rules")
    listed = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "answer", run_id, "--runs-dir", str(work / "runs")],
                            capture_output=True, text=True, timeout=120, env=_env(work))
    assert listed.returncode == 0 and "coder-r1c0: read" in listed.stdout and "coder-r1c1: read" in listed.stdout

    # 2. answers: one good kernel through `cuda-llm answer`, one that does not build written by hand
    done = _answer(work, run_id, "coder-r1c0", coder_answer(softmax_source("v5")))
    assert done.returncode == 0 and "still waiting on coder-r1c1" in done.stdout, done.stderr
    bad = _answer(work, run_id, "coder-r9c9", "x")
    assert bad.returncode == 2 and "no pending prompt 'coder-r9c9'" in bad.stderr and "coder-r1c1" in bad.stderr
    (root / "answers" / "coder-r1c1.md").write_text(coder_answer(softmax_source("v6", broken=True)))
    second = _outcome(_spawn("resume", work, run_id))
    assert [w["name"] for w in second["waiting"]] == ["coder-r1c1-2"]        # its compile-fix turn
    fix = (root / "pending" / "coder-r1c1-2.md").read_text()
    assert "does not build" in fix and "undefined_symbol" in fix and _evals(work) == [("baseline", "baseline")]
    write_answer(root, "coder-r1c1-2", coder_answer(softmax_source("v6")))   # what `cuda-llm answer` does

    # 3. resumed with slow measurements, killed in the middle of round 1's evaluations
    proc = _spawn("resume", work, run_id, delay_s=0.5)
    t0 = time.monotonic()
    while not any(e.get("event") == "evaluation" and e.get("candidate") == "r1c0" for e in _events(root / "trace.jsonl")):
        assert time.monotonic() - t0 < 120 and proc.poll() is None, "the resumed run never evaluated r1c0"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)

    # 4. resumed again: round 1 ends (nothing measured twice), round 2's prompts wait
    third = _outcome(_spawn("resume", work, run_id))
    assert [w["name"] for w in third["waiting"]] == ["coder-r2c0", "coder-r2c1"]
    assert third["best"]["id"] == "r1c0"
    round2 = (root / "pending" / "coder-r2c0.md").read_text()
    assert "Parent kernel `r1c0`" in round2 and "r1c1" in round2              # the new parent and the history
    write_answer(root, "coder-r2c0", coder_answer(softmax_source("v3")))
    write_answer(root, "coder-r2c1", coder_answer(softmax_source("v7")))
    last = _outcome(_spawn("resume", work, run_id))
    assert last["finished"] and last["stop_reason"] == "max_rounds" and last["best"]["id"] == "r2c0"
    assert not last["waiting"] and not list((root / "pending").glob("*.md"))

    evals = [e for e in _evals(work) if e[0] == "evaluate"]
    assert len(evals) == len(set(evals)) and {c for _, c in evals} == {"r1c0", "r1c1", "r2c0", "r2c1"}
    events = _events(root / "trace.jsonl")
    assert not [e for e in events if e.get("event") == "llm_call" and e.get("role") != "coder"]   # rules: no calls
    waits = [e for e in events if e.get("event") == "node_end" and e.get("waiting")]
    assert waits and not any("error" in e for e in waits)         # waiting for an answer is not a failure
    crit = [e for e in events if e.get("event") == "decision" and e.get("kind") == "critique"]
    assert crit and all(e["rule_based"] for e in crit)
    plans = [e for e in events if e.get("event") == "decision" and e.get("kind") == "features"]
    assert plans and all(e["by"] == "bandit (rules planner)" for e in plans)


@pytest.mark.skipif(__import__("cuda_llm.tools.device.device_probe", fromlist=["x"]).has_cuda_device(),
                    reason="checks the no-device stop, which comes after the settings")
def test_optimize_with_a_manual_coder_and_rules_asks_for_no_model_or_key(tmp_path):
    env = dict(NO_ENDPOINT_ENV, PYTHONPATH=str(HERE.parent))
    env.pop("CUDA_LLM_CONFIG", None)
    proc = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "optimize", "softmax", "--coder", "manual",
                           "--planner", "rules", "--critic", "rules", "--runs-dir", str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    # past the settings (nothing to configure), stopped by the preflight's GPU check, with no endpoint to check
    assert proc.returncode == 2 and "FAIL  gpu" in proc.stderr and "endpoint" not in proc.stderr
    assert "No LLM model" not in proc.stderr and "API key" not in proc.stderr
    bad = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "optimize", "softmax", "--coder", "rules"],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "invalid choice: 'rules'" in bad.stderr
