"""The program database survives kill -9: a run killed in the middle of round 2 and resumed ends with
the same archive, chooses the same parents and inspirations as a run never interrupted, and repeats no
LLM call or evaluation. Real SQLite checkpointer, real nvcc, scripted LLM, measurements set by the test.

The run under test is a separate process (this file, run as a script), so the kill is real.
"""

from __future__ import annotations

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
N = 2
KERNELS = {"r1c0": ("plain", "v3"), "r1c1": ("shfl", "v305"), "r2c0": ("plain", "v2"), "r2c1": ("shfl", "v205"),
           "r3c0": ("plain", "v6"), "r3c1": ("shfl", "v7")}
TIMINGS = {"baseline": 10.0, "v3": 3.0, "v305": 3.05, "v2": 2.0, "v205": 2.05, "v6": 6.0, "v7": 7.0}


def _source(cid: str) -> str:
    from fake_gpu_evaluator import softmax_source

    kind, variant = KERNELS.get(cid, ("plain", "v6"))
    src = softmax_source(variant)
    if kind == "shfl":
        src = src.replace("for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);",
                          "for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);\n"
                          "    s += __shfl_xor_sync(0xffffffffu, 0.0f, 16);")
    return src


def drive(mode: str, work: Path, run_id: str | None, delay_s: float) -> dict:
    import hashlib

    from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, plan_answer
    from scripted_chat_model import ScriptedChatModel, detect_role
    from test_graph_loop import candidate_of, offered_ids

    from cuda_llm.graph.run import RunOptions, resume_run, start_run
    from cuda_llm.graph.state import Limits

    def respond(messages: list[Any]) -> str:
        role = detect_role(messages)
        key = hashlib.sha256("\n".join(str(m.content) for m in messages).encode()).hexdigest()[:16]
        with open(work / "llm.log", "a") as f:
            f.write(json.dumps({"role": role, "prompt": key}) + "\n")
        if role == "planner":
            return plan_answer(N, features=offered_ids(messages))
        if role == "critic":
            return critic_answer()
        return coder_answer(_source(candidate_of(messages)))

    model = ScriptedChatModel(respond=respond)
    ev = FakeGpuEvaluator(TIMINGS, log_path=work / "evals.log", delay_s=delay_s)
    if mode == "start":
        opts = RunOptions(limits=Limits(n_candidates=N, max_rounds=3, plateau_rounds=5), runs_dir=work / "runs",
                          learn=False)
        out = start_run("softmax", None, opts, evaluator=ev, model_factory=lambda r: model)
    else:
        out = resume_run(run_id, work / "runs", evaluator=ev, model_factory=lambda r: model)
    return out.model_dump(mode="json", exclude={"table"})


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    mode, work, run_id, delay = sys.argv[1], Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    print("OUTCOME " + json.dumps(drive(mode, work, run_id, delay)), flush=True)
    sys.exit(0)


def _spawn(mode: str, work: Path, run_id: str, delay_s: float) -> subprocess.Popen:
    env = dict(os.environ, CUDA_LLM_CACHE=str(work / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), mode, str(work), run_id, str(delay_s)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _outcome(proc: subprocess.Popen, timeout: float = 180) -> dict:
    out, err = proc.communicate(timeout=timeout)
    line = next((ln for ln in out.splitlines() if ln.startswith("OUTCOME ")), None)
    assert line is not None, f"no outcome (rc {proc.returncode}):\n{out[-2000:]}\n{err[-4000:]}"
    return json.loads(line[len("OUTCOME "):])


def _events(trace: Path) -> list[dict]:
    out = []
    for line in trace.read_text().splitlines() if trace.is_file() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass   # a line cut by the kill
    return out


def _log(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def _archive(root: Path) -> list[tuple]:
    from cuda_llm.graph.program_db import ProgramDB

    return [(p.id, p.round, p.hash, p.ms, tuple(p.detected)) for p in ProgramDB(root / "programs.sqlite").all()]


def _parents(root: Path) -> list[dict]:
    """The parent decisions of each round (the last one written, since a replayed plan writes it again)."""
    by_round = {e["round"]: e["candidates"] for e in _events(root / "trace.jsonl")
                if e.get("event") == "decision" and e.get("kind") == "parents"}
    return [by_round[r] for r in sorted(by_round)]


def test_the_archive_survives_kill_9_and_resume(tmp_path, tmp_path_factory):
    from test_graph_loop import shared_cache

    work, ref = tmp_path / "killed", tmp_path / "ref"
    for w in (work, ref):
        w.mkdir()
        (w / "cache").symlink_to(shared_cache(tmp_path_factory))
    proc = _spawn("start", work, "-", 0.25)
    t0 = time.monotonic()
    root = None
    while time.monotonic() - t0 < 120 and root is None:
        for trace in (work / "runs").glob("*/trace.jsonl"):
            if any(e.get("event") == "evaluation" and e.get("candidate") == "r2c0" for e in _events(trace)):
                root = trace.parent
        time.sleep(0.05)
    assert root is not None, "the run never reached round 2"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert {p[0] for p in _archive(root)} == {"baseline", "r1c0", "r1c1"}     # round 2 not selected yet
    llm_before, evals_before = _log(work / "llm.log"), _log(work / "evals.log")

    out = _outcome(_spawn("resume", work, root.name, 0.0))
    assert out["finished"] and out["stop_reason"] == "max_rounds"
    reference = _outcome(_spawn("start", ref, "-", 0.0))
    ref_root = Path(reference["root"])

    assert _archive(root) == _archive(ref_root)
    assert {p[0] for p in _archive(root)} == {"baseline", "r1c0", "r1c1", "r2c0", "r2c1", "r3c0", "r3c1"}
    assert _parents(root) == _parents(ref_root)
    r3 = _parents(root)[2]
    assert r3["r3c0"]["parent"] == "r2c0" and r3["r3c1"] == {**r3["r3c1"], "parent": "r2c1", "kind": "stepping stone"}
    assert out["best"]["id"] == reference["best"]["id"] == "r2c0"
    prompts = [e["prompt"] for e in _log(work / "llm.log")]
    assert len(prompts) == len(set(prompts)) and len(prompts) > len(llm_before), "an LLM call was repeated"
    keys = [(e["kind"], e["candidate"]) for e in _log(work / "evals.log")]
    assert len(keys) == len(set(keys)) and len(keys) > len(evals_before), f"an evaluation was repeated: {keys}"
