"""`cuda-llm batch` end to end on the CPU: a scripted model writes each task's kernels, a pool of two test GPUs
(SleepingGpuEvaluator) measures them; the table, the pages, the runs inspectable one by one, and a batch killed
with SIGKILL in the middle of a task that resumes without repeating what finished.

The batch under the kill test is a separate process (this file, run as a script), so the kill is real.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

HERE = Path(__file__).resolve().parent
TASKS = "softmax,gelu,layernorm"


# ------------------------------------------------------------------ the test doubles, shared with the script
def ms_of(variant: str) -> float:
    """Later rounds are faster: r1 5.0/5.5 ms, r2 3.0/3.5 ms (the naive baselines take 10 ms)."""
    m = re.search(r"r(\d+)c(\d+)", variant)
    if not m:
        return 8.0
    r, c = int(m.group(1)), int(m.group(2))
    return {1: 5.0, 2: 3.0}.get(r, 2.0) + 0.5 * c


def model(llm_log: Path | None = None) -> Any:
    from fake_gpu_evaluator import coder_answer, critic_answer, plan_answer
    from scripted_chat_model import ScriptedChatModel, detect_role
    from test_graph_loop import candidate_of

    from cuda_llm.tasks import load_task

    def respond(messages: list[Any]) -> str:
        role = detect_role(messages)
        text = "\n".join(str(m.content) for m in messages)
        task = re.search(r"Task `([\w.-]+)`", text)
        if llm_log is not None:
            with open(llm_log, "a") as f:
                f.write(json.dumps({"role": role, "task": task.group(1) if task else None, "pid": os.getpid()}) + "\n")
        if role == "planner":
            return plan_answer(2)
        if role == "critic":
            return critic_answer()
        name = task.group(1) if task else "softmax"
        naive = Path(load_task(name).task.baseline_path).read_text()
        return coder_answer(f"// variant: {name}-{candidate_of(messages)}\n{naive}")

    return ScriptedChatModel(respond=respond)


def pool(work: Path, sleep_s: float = 0.15, n_gpus: int = 2) -> Any:
    from sleeping_gpu_evaluator import SleepingGpuEvaluator

    from cuda_llm.measure.gpu_pool import EvaluatorSlot, GpuPool

    slots = [EvaluatorSlot(SleepingGpuEvaluator(str(i), {"baseline": 10.0}, span_log=work / "spans.jsonl",
                                                sleep_s=sleep_s, ms_of=ms_of), str(i)) for i in range(n_gpus)]
    return GpuPool(slots, arch="sm_90", device=None)


def cli(work: Path, *argv: str, sleep_s: float = 0.15, n_gpus: int = 2) -> int:
    """`cuda-llm batch ...` in this process, on the test pool and the scripted model."""
    from cuda_llm import cli as cli_mod
    from cuda_llm.commands import batch_cmd

    batch_cmd.make_pool_override = lambda: pool(work, sleep_s, n_gpus)
    batch_cmd.model_factory_override = (lambda m: (lambda role: m))(model(work / "llm.log"))
    try:
        return cli_mod.main(["batch", *argv, "--runs-dir", str(work / "runs"), "--model", "scripted-model",
                             "--base-url", "http://127.0.0.1:9/v1", "--quiet", "--no-learn"])
    finally:
        batch_cmd.make_pool_override = None
        batch_cmd.model_factory_override = None


BUDGET = ["--rounds", "2", "--candidates", "2", "--plateau-rounds", "5", "--time-budget", "2h", "--token-budget", "3M"]

if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    work, sleep = Path(sys.argv[1]), float(sys.argv[2])
    sys.exit(cli(work, *sys.argv[3:], sleep_s=sleep))


# ----------------------------------------------------------------------------------------------- tests
def test_batch_runs_a_list_of_tasks_and_writes_one_table(tmp_path, capsys):
    from sleeping_gpu_evaluator import intervals, overlaps_per_gpu, read_spans

    from cuda_llm.graph.batch import load_state, open_batch

    assert cli(tmp_path, "softmax,gelu", *BUDGET, "--parallel", "2") == 0
    out = capsys.readouterr().out
    root = open_batch("latest", tmp_path / "runs")
    state = load_state(root)
    assert [t.name for t in state.tasks] == ["softmax", "gelu"] and all(t.status == "finished" for t in state.tasks)
    assert state.gpus == ["0", "1"] and state.parallel == 2 and state.finished
    # the table: one row per task, naive 10 ms, best r2c0 at 3.02 ms over 10.08 ms (the double adds 0.8% to each median): 3.33x
    rows = [ln for ln in out.splitlines() if ln.startswith(("softmax", "gelu"))]
    assert len(rows) == 2
    for ln in rows:
        assert re.search(r"\s10\.\d+\s+-\s+3\.0\d+\s+3\.33x\s+-\s+-\s+finished \(max_rounds\)\s+2$", ln), ln
    md = (root / "table.md").read_text()
    assert "scripted model" in md and "| softmax |" in md and "naive or eager ms" in md
    page = (root / "batch.html").read_text()
    for t in state.tasks:   # every task's run is a normal run, its report linked from the batch page
        assert f'href="../../{t.run_id}/report.html"' in page
        assert (tmp_path / "runs" / t.run_id / "report.html").is_file()
        assert (tmp_path / "runs" / t.run_id / "best.cu").is_file()
    assert 'id="scripted"' in page and 'id="speedup-plot"' in page
    # the two tasks ran at once on the two GPUs, never two measurements on one GPU
    ivs = intervals(read_spans(tmp_path / "spans.jsonl"))
    assert overlaps_per_gpu(ivs) == [] and {iv[0] for iv in ivs} == {"0", "1"}
    by_task = {t: [iv for iv in ivs if iv[2].startswith("r")] for t in ("softmax", "gelu")}
    assert all(by_task.values())
    # the existing commands see the runs
    from cuda_llm import cli as cli_mod

    assert cli_mod.main(["runs", "--runs-dir", str(tmp_path / "runs")]) == 0
    listed = capsys.readouterr().out
    assert all(t.run_id in listed for t in state.tasks)
    assert cli_mod.main(["report", state.tasks[1].run_id, "--runs-dir", str(tmp_path / "runs")]) == 0
    assert "gelu" in capsys.readouterr().out
    # --show prints the same table again
    assert cli(tmp_path, "--show", state.batch_id) == 0
    again = capsys.readouterr().out
    assert [ln for ln in again.splitlines() if ln.startswith(("softmax", "gelu"))] == rows


def _spawn(work: Path, *argv: str, sleep_s: float) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), str(work), str(sleep_s), *argv],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _state(work: Path) -> Any:
    from cuda_llm.graph.batch import load_state, open_batch

    try:
        return load_state(open_batch("latest", work / "runs"))
    except (FileNotFoundError, ValueError):
        return None


def test_batch_killed_mid_task_resumes_as_a_whole(tmp_path):
    from sleeping_gpu_evaluator import read_spans

    proc = _spawn(tmp_path, TASKS, *BUDGET, "--parallel", "1", sleep_s=0.4)
    deadline = time.monotonic() + 240
    state = None
    try:   # kill once the first task finished and the second has measured a candidate of its own
        while time.monotonic() < deadline:
            state = _state(tmp_path)
            if state is not None and state.tasks[0].status == "finished" and state.tasks[1].run_id:
                done = [s for s in read_spans(tmp_path / "spans.jsonl")
                        if s["phase"] == "end" and s["task"] == state.tasks[1].name and s["kind"] == "evaluate"]
                if done:
                    break
            if proc.poll() is not None:
                pytest.fail(f"the batch ended before it could be killed: {proc.communicate()}")
            time.sleep(0.1)
        else:
            pytest.fail("the batch never reached its second task")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    killed = _state(tmp_path)
    first, second, third = killed.tasks
    assert first.status == "finished" and second.status == "running" and third.status == "pending"
    assert third.run_id is None and not killed.finished
    runs = tmp_path / "runs"
    kept = {p.stem for p in (runs / second.run_id / "candidates").glob("r*.json")}   # measured and recorded
    first_files = sorted(p.name for p in (runs / first.run_id / "candidates").iterdir())
    spans_before = len(read_spans(tmp_path / "spans.jsonl"))

    res = _spawn(tmp_path, "--resume", killed.batch_id, sleep_s=0.05)
    out, err = res.communicate(timeout=300)
    assert res.returncode == 0, err[-3000:]
    state = _state(tmp_path)
    assert state.finished and [t.status for t in state.tasks] == ["finished"] * 3
    assert state.tasks[1].run_id == second.run_id                    # the same run, resumed
    assert state.sessions == 2
    new = read_spans(tmp_path / "spans.jsonl")[spans_before:]
    # nothing of the finished task was measured again, nor any candidate of the second that was recorded
    assert not [s for s in new if s["task"] == first.name]
    again = {s["candidate"] for s in new if s["task"] == second.name and s["kind"] == "evaluate"}
    assert not (again & kept), again & kept
    assert sorted(p.name for p in (runs / first.run_id / "candidates").iterdir()) == first_files
    # one table for the whole batch, from both sessions
    rows = [ln for ln in out.splitlines() if ln.startswith(tuple(TASKS.split(",")))]
    assert len(rows) == 3 and all("finished" in r for r in rows)
    assert "3.33x" in rows[1]
    events = [json.loads(ln) for ln in (tmp_path / "runs" / "batches" / state.batch_id / "batch.jsonl").read_text().splitlines() if ln.strip()]
    assert [e["event"] for e in events].count("batch_resume") == 1
    assert any(e["event"] == "task_resume" and e["task"] == second.name for e in events)


def test_the_suite_as_given_and_what_is_refused(tmp_path):
    import shutil

    from cuda_llm.graph.batch import BatchError, resolve_suite
    from cuda_llm.tasks.loader import SUITE_DIR

    everything = resolve_suite("suite")
    assert len(everything) == 20 and everything[0] == ("attention", "attention")
    assert resolve_suite("gelu, softmax") == [("gelu", "gelu"), ("softmax", "softmax")]
    mine = tmp_path / "mine"
    for name in ("gelu", "relu_like"):
        shutil.copytree(SUITE_DIR / "gelu", mine / name)
    toml = (mine / "relu_like" / "task.toml").read_text()
    (mine / "relu_like" / "task.toml").write_text(toml.replace('name = "gelu"', 'name = "relu_like"'))
    got = resolve_suite(str(mine))
    assert [n for n, _ in got] == ["gelu", "relu_like"] and got[1][1] == str((mine / "relu_like").resolve())
    listing = tmp_path / "tasks.txt"
    listing.write_text("# overnight\nsoftmax\nmine/relu_like   # a folder beside this file\n")
    assert [n for n, _ in resolve_suite(str(listing))] == ["softmax", "relu_like"]
    with pytest.raises(BatchError) as info:
        resolve_suite("softmax,no_such_task,gelu")
    assert "1 task(s)" in str(info.value) and "no_such_task" in str(info.value) and "nothing was started" in str(info.value)
    with pytest.raises(BatchError, match="a second task named 'gelu'"):
        resolve_suite(f"gelu,{mine / 'gelu'}")
    with pytest.raises(BatchError, match="names no task"):
        resolve_suite(" , ")


def test_budget_shares():
    from cuda_llm.graph.batch import BatchState, BatchTask, time_share, token_share
    from cuda_llm.graph.state import Limits

    assert time_share(8 * 3600, 20, 4) == pytest.approx(8 * 3600 / 5)      # five tasks per lane
    assert time_share(3600, 3, 4) == 3600                                   # the last ones share it whole
    assert time_share(-5, 3, 1) == 0
    tasks = [BatchTask(name="a", ref="a", status="finished", tokens_used=100_000),
             BatchTask(name="b", ref="b", status="running", token_budget=300_000),
             BatchTask(name="c", ref="c"), BatchTask(name="d", ref="d")]
    state = BatchState(batch_id="x", suite="s", created="now", limits=Limits(), time_budget_s=3600, token_budget=1_000_000,
                       tasks=tasks)
    assert token_share(1_000_000, state, tasks[2]) == (1_000_000 - 100_000 - 300_000) // 2


def test_bad_invocations_are_refused_with_what_to_do(tmp_path, capsys):
    assert cli(tmp_path) == 2
    assert "give a SUITE" in capsys.readouterr().err
    assert cli(tmp_path, "--resume", "nope") == 2
    assert "no batch 'nope'" in capsys.readouterr().err
    assert cli(tmp_path, "softmax,bogus") == 2
    err = capsys.readouterr().err
    assert "bogus" in err and "nothing was started" in err
    assert not (tmp_path / "runs" / "batches").exists()
    assert cli(tmp_path, "softmax", "--time-budget", "60", "--reserve", "120") == 2
    assert "--reserve" in capsys.readouterr().err


def test_a_finished_batch_given_more_rounds_continues_every_run(tmp_path, capsys):
    """`batch --resume ID --more-rounds N`: the runs ended (here by --rounds 1) continue from their best with N new
    rounds each, in the same runs, measuring nothing twice."""
    from sleeping_gpu_evaluator import read_spans

    from cuda_llm.graph.batch import load_state, open_batch

    one_round = ["--rounds", "1"] + BUDGET[2:]
    assert cli(tmp_path, "softmax,gelu", *one_round, "--parallel", "2") == 0
    first = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("softmax", "gelu"))]
    assert len(first) == 2 and all(re.search(r"\s5\.0\d+\s.*finished \(max_rounds\)\s+1$", ln) for ln in first), first
    state = load_state(open_batch("latest", tmp_path / "runs"))
    runs = {t.name: t.run_id for t in state.tasks}
    measured = len(read_spans(tmp_path / "spans.jsonl"))

    # resumed on another machine, of one GPU
    assert cli(tmp_path, "--resume", state.batch_id, "--more-rounds", "1", "--parallel", "2", n_gpus=1) == 0
    after = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("softmax", "gelu"))]
    assert len(after) == 2 and all(re.search(r"\s3\.0\d+\s+3\.33x.*finished \(max_rounds\)\s+2$", ln) for ln in after), after
    state = load_state(open_batch("latest", tmp_path / "runs"))
    assert {t.name: t.run_id for t in state.tasks} == runs and all(t.status == "finished" for t in state.tasks)
    assert state.gpus == ["0"] and state.gpus_before == [["0", "1"]]
    assert "- GPUs: 0 (earlier sessions: 0, 1)" in (open_batch("latest", tmp_path / "runs") / "table.md").read_text()
    spans = read_spans(tmp_path / "spans.jsonl")[measured:]
    cands = [str(s.get("candidate", "")) for s in spans]
    assert any(re.search(r"r2c\d$", c) for c in cands) and not any(re.search(r"r1c\d$", c) for c in cands), cands
    assert cli(tmp_path, "softmax", "--more-rounds", "1") == 2
    assert "--more-rounds goes with --resume" in capsys.readouterr().err
