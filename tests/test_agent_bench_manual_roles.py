"""The agent bench's CPU machinery with every role played by hand (`--planner manual --critic manual` beside a
manual coder): a run whose planner, critic and coder prompts are answered from their pending files alone,
measured by the fake evaluator, to its end; the planner's answer is fitted to each slot's parent, the critic's
picks reach the next plan, and `benchmarks/agent_bench.py table` reads the finished run (its rows say where
each new best came from: an assigned slot or the free one)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow     # a whole graph run

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TIMINGS = {"baseline": 10.0, "v5": 5.0, "v6": 6.0, "v3": 3.0, "v4": 4.0, "v2": 2.0, "v7": 7.0}


def _offered(prompt: str) -> list[str]:
    part = prompt.split("Offered features", 1)[1] if "Offered features" in prompt else prompt
    return re.findall(r"^- `(\w+)`", part, re.M)


def _planner_answer(prompt: str) -> str:
    offered = _offered(prompt)
    assert offered, prompt[-2000:]
    plans = [{"features": offered[:1], "idea": "apply it to the row loop"}, {"features": [], "idea": "free"}]
    return "```json\n" + json.dumps({"rationale": "the first offered feature on the assigned slot",
                                     "candidates": plans}) + "\n```"


def _critic_answer(prompt: str) -> str:
    ids = re.findall(r"^- (\w+): ", prompt.split("feature catalogue", 1)[-1], re.M) or ["vector_loads"]
    return "```json\n" + json.dumps({"bottleneck": "memory-bound", "evidence": ["DRAM busy"],
                                     "next_features": ids[:1], "change": f"apply {ids[0]}",
                                     "expected_gain": "1.2x", "summary": "memory-bound"}) + "\n```"


def test_a_run_with_manual_planner_critic_and_coder_goes_to_its_end(tmp_path):
    sys.path.insert(0, str(HERE))
    from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, softmax_source

    from cuda_llm.agents.settings import load_settings
    from cuda_llm.graph.manual import pending_prompts, write_answer
    from cuda_llm.graph.run import RunOptions, resume_run, settings_from_config, start_run
    from cuda_llm.graph.state import Limits
    from cuda_llm.runs.rundir import RunDir

    ev = FakeGpuEvaluator(TIMINGS)
    settings = load_settings({"coder_provider": "manual", "planner_provider": "manual", "critic_provider": "manual"},
                             env={})
    runs = tmp_path / "runs"
    opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=2, plateau_rounds=5, compile_fix_turns=1, free_slots=1),
                      runs_dir=runs, stats_path=tmp_path / "stats.sqlite")
    out = start_run("softmax", settings, opts, evaluator=ev)
    versions = iter(["v5", "v6", "v3", "v4", "v2", "v7"])
    roles: list[str] = []
    for _ in range(20):
        if out.finished or out.error:
            break
        root = runs / out.run_id
        for w in pending_prompts(root):
            prompt = Path(w.prompt).read_text()
            roles.append(w.name.split("-")[0])
            if w.name.startswith("planner"):
                write_answer(root, w.name, _planner_answer(prompt))
            elif w.name.startswith("critic"):
                write_answer(root, w.name, _critic_answer(prompt))
            else:
                write_answer(root, w.name, coder_answer(softmax_source(next(versions))))
        saved = settings_from_config(RunDir.open(out.run_id, runs).load_config()["llm"])
        out = resume_run(out.run_id, runs, settings=saved, evaluator=ev)
    assert out.finished and not out.error and out.stop_reason == "max_rounds", out
    assert {"planner", "critic", "coder"} <= set(roles)
    root = runs / out.run_id
    events = [json.loads(x) for x in (root / "trace.jsonl").read_text().splitlines()]
    plans = [e for e in events if e.get("event") == "decision" and e.get("kind") == "features"]
    assert plans and not any(e.get("by") == "bandit (rules planner)" for e in plans)    # the manual planner's plans
    crit = [e for e in events if e.get("event") == "decision" and e.get("kind") == "critique"]
    assert crit and not all(e.get("rule_based") for e in crit)                             # ... and critiques

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    table = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "agent_bench.py"), "table", "--runs-dir",
                            str(runs)], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert table.returncode == 0, table.stderr[-2000:]
    assert "softmax" in table.stdout and "new bests from assigned slots" in table.stdout, table.stdout
    row = next(x for x in table.stdout.splitlines() if x.startswith("| softmax | planner manual, critic manual |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # r1c0 (5 ms, assigned), r2c0 (3 ms, assigned; r2c1 at 4 ms is no new best): both new bests from assigned slots
    assert cells[2:] == ["2", "2", "1", "1"], row
