"""Durability: a run killed with SIGKILL in the middle of a round resumes without asking the LLM again
or measuring a kernel twice, and ends with the same best as a run that was never interrupted; SIGTERM
stops at a step boundary and leaves the run resumable.

The run under test is a separate process (this file, run as a script), so the kill is real.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

HERE = Path(__file__).resolve().parent
N = 3
# r2c1 is new (measured, not read from the cache): a kill right after r2c0's measurement lands in the
# middle of the evaluate step, which the resumed run replays
KERNELS = {"r1c0": "v5", "r1c1": "v6", "r1c2": "v3", "r2c0": "v2", "r2c1": "v7", "r2c2": "v3",
           "r3c0": "v199", "r3c1": "v6", "r3c2": "v3"}
TIMINGS = {"baseline": 10.0, "v5": 5.0, "v6": 6.0, "v2": 2.0, "v199": 1.99, "v3": 3.0, "v7": 7.0}


# ------------------------------------------------------------------ the run, as a separate process
def _model(llm_log: Path) -> Any:
    from fake_gpu_evaluator import coder_answer, critic_answer, plan_answer, softmax_source
    from scripted_chat_model import ScriptedChatModel, detect_role
    from test_graph_loop import candidate_of, offered_ids

    def respond(messages: list[Any]) -> str:
        role = detect_role(messages)
        key = hashlib.sha256("\n".join(str(m.content) for m in messages).encode()).hexdigest()[:16]
        cid = candidate_of(messages) if role == "coder" else None
        with open(llm_log, "a") as f:
            f.write(json.dumps({"role": role, "prompt": key, "candidate": cid, "pid": os.getpid()}) + "\n")
        if role == "planner":
            return plan_answer(N, features=offered_ids(messages))
        if role == "critic":
            return critic_answer()
        return coder_answer(softmax_source(KERNELS.get(cid, "v6")))

    return ScriptedChatModel(respond=respond)


def _options(runs: Path) -> Any:
    from cuda_llm.graph.run import RunOptions
    from cuda_llm.graph.state import Limits

    return RunOptions(limits=Limits(n_candidates=N, max_rounds=3, plateau_rounds=5), runs_dir=runs,
                      stats_path=runs.parent / "stats.sqlite")


def drive(mode: str, work: Path, run_id: str | None, delay_s: float) -> dict:
    from fake_gpu_evaluator import FakeGpuEvaluator

    from cuda_llm.graph.run import resume_run, start_run

    ev = FakeGpuEvaluator(TIMINGS, log_path=work / "evals.log", delay_s=delay_s)
    model = _model(work / "llm.log")
    if mode == "start":
        out = start_run("softmax", None, _options(work / "runs"), evaluator=ev, model_factory=lambda r: model)
    else:                     # "resume", or "resume-N": end after round N at the latest
        cap = int(mode.split("-")[1]) if "-" in mode else None
        out = resume_run(run_id, work / "runs", evaluator=ev, model_factory=lambda r: model, max_rounds=cap)
    return out.model_dump(mode="json", exclude={"table"})


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    mode, work, run_id, delay = sys.argv[1], Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    print("OUTCOME " + json.dumps(drive(mode, work, run_id, delay)), flush=True)
    sys.exit(0)


# ------------------------------------------------------------------ the tests
@pytest.fixture
def work(tmp_path, tmp_path_factory):
    from test_graph_loop import shared_cache

    (tmp_path / "cache").symlink_to(shared_cache(tmp_path_factory))
    return tmp_path


def _spawn(mode: str, work: Path, run_id: str, delay_s: float) -> subprocess.Popen:
    env = dict(os.environ, CUDA_LLM_CACHE=str(work / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), mode, str(work), run_id, str(delay_s)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _outcome(proc: subprocess.Popen, timeout: float = 120) -> dict:
    out, err = proc.communicate(timeout=timeout)
    line = next((ln for ln in out.splitlines() if ln.startswith("OUTCOME ")), None)
    assert line is not None, f"no outcome (rc {proc.returncode}):\n{out[-2000:]}\n{err[-4000:]}"
    return json.loads(line[len("OUTCOME "):])


def _events(trace: Path) -> list[dict]:
    if not trace.is_file():
        return []
    out = []
    for line in trace.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line cut by the kill
    return out


def _wait_for(runs: Path, pred, timeout: float = 90) -> Path:
    """The run's folder, once its trace satisfies ``pred``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        for trace in runs.glob("*/trace.jsonl"):
            if pred(_events(trace)):
                return trace.parent
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting on the trace in {runs}")


def _info(root: Path) -> Any:
    from cuda_llm.runs.run_info import run_info
    from cuda_llm.runs.rundir import RunDir

    return run_info(RunDir(root))


def _assert_partial_report(work: Path, run_id: str, state: str) -> None:
    """`cuda-llm report` and `cuda-llm runs` on a run that did not finish: the rounds so far, how to go on."""
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    rep = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "report", run_id[:20], "--runs-dir", str(work / "runs")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert rep.returncode == 0, rep.stderr
    assert f"state:       {state}" in rep.stdout and f"cuda-llm resume {run_id}" in rep.stdout
    text = (work / "runs" / run_id / "report.md").read_text()
    assert "not finished" in text and "r1c2" in text and "in progress" in text and "best_so_far.cu" in text
    runs = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "runs", "--runs-dir", str(work / "runs")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert runs.returncode == 0, runs.stderr
    row = next(line for line in runs.stdout.splitlines() if line.startswith(run_id))
    assert state in row and "softmax" in row and "r1c2" in row
    assert f"cuda-llm resume {run_id}" in runs.stdout


def _log(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def _reference(tmp_path: Path) -> dict:
    """The same run, never interrupted (in this process)."""
    ref = tmp_path / "ref"
    ref.mkdir()
    old = os.environ.get("CUDA_LLM_CACHE")
    os.environ["CUDA_LLM_CACHE"] = str(tmp_path / "cache")
    try:
        return drive("start", ref, None, 0.0)
    finally:
        if old is None:
            os.environ.pop("CUDA_LLM_CACHE", None)
        else:
            os.environ["CUDA_LLM_CACHE"] = old


def test_kill_mid_round_then_resume_repeats_nothing(work, tmp_path):
    proc = _spawn("start", work, "-", 0.25)
    # kill once the second round's first candidate has been measured (the others are still to come)
    root = _wait_for(work / "runs", lambda ev: any(e.get("event") == "evaluation" and e.get("candidate") == "r2c0" for e in ev))
    run_id, trace = root.name, root / "trace.jsonl"
    assert _info(root).state == "running" and _info(root).detail == f"pid {proc.pid}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    killed = _info(root)
    assert killed.state == "killed" and killed.resumable and killed.rounds == 2
    assert killed.best_id == "r1c2" and killed.task == "softmax"      # v3: the best of round 1
    _assert_partial_report(work, run_id, "killed")
    evals_before = _log(work / "evals.log")
    llm_before = _log(work / "llm.log")
    assert any(e["candidate"] == "r2c0" for e in evals_before)
    assert not any(e["candidate"] == "r2c2" for e in evals_before)      # killed in the middle of the round

    out = _outcome(_spawn("resume", work, run_id, 0.0))
    assert out["finished"] and out["stop_reason"] == "max_rounds"

    llm = _log(work / "llm.log")
    prompts = [e["prompt"] for e in llm]
    assert len(prompts) == len(set(prompts)), "an LLM call was repeated after resume"
    assert len(llm) > len(llm_before)                                   # the resumed run did go on
    evals = _log(work / "evals.log")
    keys = [(e["kind"], e["candidate"]) for e in evals]
    assert len(keys) == len(set(keys)), f"an evaluation was repeated after resume: {keys}"
    resumed = [e for e in _events(trace) if e.get("event") == "run_resume"]
    assert resumed, "no run_resume event in the trace"

    ref = _reference(tmp_path)
    assert out["best"]["id"] == ref["best"]["id"] == "r2c0"
    assert out["final"]["ms"] == pytest.approx(ref["final"]["ms"])
    # the feature statistics count every candidate once, as in the run that was never interrupted
    from cuda_llm.feature_db.stats import StatsStore

    learned = {(r.feature, r.tries, r.passed, r.n_speedups) for r in StatsStore(work / "stats.sqlite").all()}
    assert learned and learned == {(r.feature, r.tries, r.passed, r.n_speedups)
                                   for r in StatsStore(tmp_path / "ref" / "stats.sqlite").all()}
    print(f"\nkilled after {len(evals_before)} evaluations and {len(llm_before)} LLM calls; resumed run added "
          f"{len(evals) - len(evals_before)} evaluations and {len(llm) - len(llm_before)} LLM calls; best {out['best']['id']}")


def test_sigterm_stops_at_a_step_boundary_and_resumes(work):
    proc = _spawn("start", work, "-", 0.25)
    root = _wait_for(work / "runs", lambda ev: any(e.get("event") == "evaluation" and e.get("candidate") == "r1c1" for e in ev))
    run_id, trace = root.name, root / "trace.jsonl"
    proc.send_signal(signal.SIGTERM)
    first = _outcome(proc)
    assert proc.returncode == 0 and not first["finished"] and first["interrupted"]
    ends = [e for e in _events(trace) if e.get("event") == "run_end"]
    assert ends and ends[-1]["interrupted"] is True
    n_evals = len(_log(work / "evals.log"))
    assert n_evals >= 3                   # the evaluate step was finished (r1c2 measured) before stopping
    assert (root / "report.md").is_file(), "a stopped run writes the report of its rounds so far"
    assert _info(root).state == "stopped" and _info(root).resumable
    out = _outcome(_spawn("resume", work, run_id, 0.0))
    assert out["finished"] and out["best"]["id"] == "r2c0"
    keys = [(e["kind"], e["candidate"]) for e in _log(work / "evals.log")]
    assert len(keys) == len(set(keys))


def test_a_stopped_run_resumed_with_max_rounds_ends_after_that_round_with_its_final_check(work):
    """The night is over: a run stopped in round 1 of 3 and resumed with max_rounds=1 finishes round 1 (its
    measured candidates kept), stops by the max-rounds rule and runs its final check; no round 2 is planned."""
    proc = _spawn("start", work, "-", 0.25)
    root = _wait_for(work / "runs", lambda ev: any(e.get("event") == "evaluation" and e.get("candidate") == "r1c0" for e in ev))
    proc.send_signal(signal.SIGTERM)
    first = _outcome(proc)
    assert not first["finished"]
    out = _outcome(_spawn("resume-1", work, root.name, 0.0))
    assert out["finished"] and out["stop_reason"] == "max_rounds", out
    events = _events(root / "trace.jsonl")
    assert any(e.get("event") == "decision" and e.get("kind") == "cap_rounds" and e["after"]["max_rounds"] == 1
               for e in events)
    assert not any(str(e.get("candidate", "")).startswith("r2") for e in _log(work / "evals.log"))
    assert out["best"]["id"].startswith("r1") and out["final"]["ms"] is not None
    assert json.loads((root / "config.json").read_text())["limits"]["max_rounds"] == 1


def test_a_run_cannot_be_driven_by_two_processes(tmp_path):
    from cuda_llm.graph.run import _RunLock

    probe = ("import sys; from pathlib import Path; from cuda_llm.graph.run import _RunLock, RunBusyError\n"
             "try:\n    _RunLock(Path(sys.argv[1])).__enter__(); print('FREE')\n"
             "except RunBusyError as e:\n    print('BUSY', e)\n")
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    with _RunLock(tmp_path):
        held = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, env=env)
        assert "BUSY" in held.stdout and f"pid {os.getpid()}" in held.stdout, held.stderr
    free = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, env=env)
    assert "FREE" in free.stdout, free.stderr
