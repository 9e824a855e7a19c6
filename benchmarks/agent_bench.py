"""What the loop adds to a strong model after its first answer: runs whose coder is a model playing the
manual provider, 3 rounds x 2 candidates, the feature bandit as planner and the rule diagnosis as critic, or
(`--planner manual --critic manual`) the planner and the critic played by a model too, each pending prompt
answered from its file alone.

    python benchmarks/agent_bench.py start --tasks softmax,hgemm,conv2d [--runs-dir agent-runs]   # on the GPU
    python benchmarks/agent_bench.py start --tasks ... --planner manual --critic manual --runs-dir agent-runs-model
    python benchmarks/agent_bench.py pending [--runs-dir agent-runs]     # the prompts that wait for a coder
    python benchmarks/agent_bench.py step [--runs-dir agent-runs]        # on the GPU: resume every answered run
    python benchmarks/agent_bench.py table [--runs-dir agent-runs] [--out docs/agent_bench.md]
    python benchmarks/agent_bench.py keep --into benchmarks/agent_answers  # prompts and answers, for the record

`start` begins one run per task (`cuda-llm optimize TASK --coder manual --planner rules --critic rules`);
each stops, waiting, with its coder prompts in RUNS_DIR/<run>/pending/. A model writes each answer from the
prompt file alone (RUNS_DIR/<run>/answers/<name>.md: a ```cuda block with the whole file). `step` resumes
every unfinished run whose prompts are all answered, until it waits again or finishes. Where the answers are
written there may be no GPU: there `step` takes the runs through their answered turns (with the planner and
the critic played by a model, its review, its plan, the next coder prompts) and each halts at its next
measurement, which `step` on the GPU machine makes; so a round of a model-played run costs one GPU call. The GPU machine and the place
where the answers are written may differ: the runs folder travels between them (`tar`), with the feature
statistics the planner learns from (RUNS_DIR/feature_stats.sqlite).

`table` reads each run's report data (`cuda-llm report RUN --json`; cuda_llm/report/round_table.py): per
task and round, the best passing time so far, its % of speed of light (the one bound the run reports for
that kernel), the ratio to the task's library yardstick where it has one, and the gain of rounds 2-3 over
round 1 (round 1's best over the final best), and per run which roles played the planner and the critic and
where its new bests came from (a candidate faster than every earlier one: from an assigned slot, one with
features, or from the free slot). Run it on a rules-roles folder and a model-roles folder to set the two side
by side. Needs no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WAITING = 4          # optimize/resume exit code: a manual role has prompts to answer
DEFAULT_RUNS = ROOT / "agent-runs"


def _env(runs_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "CUDA_LLM_FEATURE_DB": str(runs_dir / "feature_stats.sqlite")}


def cli(runs_dir: Path, *args: str, capture: bool = False) -> subprocess.CompletedProcess:
    """One `cuda-llm` command with the bench's runs folder and statistics; its time and exit code printed."""
    cmd = [sys.executable, "-m", "cuda_llm.cli", *args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(runs_dir), text=True,
                          capture_output=capture)
    print(f"$ cuda-llm {' '.join(args)}   # exit {proc.returncode}, {time.monotonic() - t0:.1f} s", flush=True)
    return proc


def runs_of(runs_dir: Path) -> dict[str, Path]:
    """task name -> its run folder (the newest run of each task in the folder)."""
    from cuda_llm.runs.rundir import recent_runs

    out: dict[str, Path] = {}
    for run_id in recent_runs(runs_dir, limit=1000):
        root = runs_dir / run_id
        try:
            task = json.loads((root / "config.json").read_text()).get("task")
        except (OSError, ValueError):
            continue
        name = Path(str(task)).name if task else run_id
        out.setdefault(name, root)
    return out


def cmd_start(a: argparse.Namespace) -> int:
    a.runs_dir.mkdir(parents=True, exist_ok=True)
    have = runs_of(a.runs_dir)
    rc = 0
    for task in a.tasks.split(","):
        if task in have:
            print(f"{task}: already started ({have[task].name})")
            continue
        proc = cli(a.runs_dir, "optimize", task, "--coder", "manual", "--planner", a.planner, "--critic", a.critic,
                   "--rounds", str(a.rounds), "--candidates", str(a.candidates), "--plateau-rounds", str(a.rounds),
                   "--eval-time", str(a.eval_time), "--runs-dir", str(a.runs_dir), "--quiet")
        if proc.returncode not in (0, WAITING):
            rc = 1
    return rc | cmd_pending(a)


def cmd_pending(a: argparse.Namespace) -> int:
    from cuda_llm.graph.manual import pending_prompts

    for task, root in sorted(runs_of(a.runs_dir).items()):
        waiting = pending_prompts(root)
        for w in waiting:
            print(f"{task}: {w.prompt}  ->  {w.answer}")
        if not waiting:
            print(f"{task}: nothing waiting")
    return 0


def cmd_step(a: argparse.Namespace) -> int:
    """Resume each unfinished run that waits on no unanswered prompt (its answers are in, or it halted where
    the answers were written, at a measurement: a resume without a GPU goes on until one); stop at the next wait
    or the end."""
    from cuda_llm.graph.manual import pending_prompts
    from cuda_llm.runs.run_info import run_info
    from cuda_llm.runs.rundir import RunDir

    rc = 0
    for task, root in sorted(runs_of(a.runs_dir).items()):
        if run_info(RunDir(root)).state == "finished":
            print(f"{task}: finished")
            continue
        if pending_prompts(root):
            print(f"{task}: still waiting for {', '.join(w.name for w in pending_prompts(root))}")
            continue
        proc = cli(a.runs_dir, "resume", root.name, "--runs-dir", str(a.runs_dir), "--quiet")
        if proc.returncode not in (0, WAITING):
            rc = 1
    cmd_pending(a)
    return rc


def _report(runs_dir: Path, root: Path) -> dict[str, Any]:
    proc = cli(runs_dir, "report", root.name, "--runs-dir", str(runs_dir), "--json", capture=True)
    if proc.returncode != 0:
        raise RuntimeError(f"cuda-llm report {root.name}: exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


def new_bests(data: dict[str, Any]) -> dict[str, int]:
    """Where a run's new bests came from: the passing candidates faster than every earlier one (the naive
    baseline first), by round order, counted as from an assigned slot (it had features) or from the free slot;
    ``after_round_1`` counts those of rounds 2 and later. Pure: reads a report's JSON."""
    best = (data.get("summary") or {}).get("baseline_ms")
    out = {"new_bests": 0, "assigned": 0, "free": 0, "after_round_1": 0, "assigned_after_round_1": 0}
    cands = sorted(data.get("candidates") or [], key=lambda c: (int(c.get("round") or 0), str(c.get("id") or "")))
    for c in cands:
        ms = c.get("median_ms")
        if c.get("status") != "ok" or not ms or (best is not None and ms >= best):
            continue
        best = ms
        kind = "assigned" if c.get("features") else "free"
        out["new_bests"] += 1
        out[kind] += 1
        if int(c.get("round") or 0) >= 2:
            out["after_round_1"] += 1
            out["assigned_after_round_1"] += kind == "assigned"
    return out


def roles_of(root: Path) -> str:
    """'planner rules, critic rules' (or manual, or a model): who played the two roles in a run."""
    try:
        llm = json.loads((root / "config.json").read_text()).get("llm") or {}
    except (OSError, ValueError):
        return "?"
    def who(role: str) -> str:
        r = llm.get(role) or {}
        return str(r.get("provider") or "?") + (f" ({r['model']})" if r.get("model") else "")
    return f"planner {who('planner')}, critic {who('critic')}"


def cmd_table(a: argparse.Namespace) -> int:
    from cuda_llm.report.round_table import round_rows, round_table

    reports = {task: _report(a.runs_dir, root) for task, root in sorted(runs_of(a.runs_dir).items())}
    per_task = {task: round_rows(data) for task, data in reports.items()}
    text = round_table(per_task)
    lines = ["| task | roles | new bests | new bests from assigned slots | after round 1 | from assigned after round 1 |",
             "|---|---|---|---|---|---|"]
    tot = {"new_bests": 0, "assigned": 0, "after_round_1": 0, "assigned_after_round_1": 0}
    for task, data in reports.items():
        nb = new_bests(data)
        for k in tot:
            tot[k] += nb[k]
        lines.append(f"| {task} | {roles_of(runs_of(a.runs_dir)[task])} | {nb['new_bests']} | {nb['assigned']} | "
                     f"{nb['after_round_1']} | {nb['assigned_after_round_1']} |")
    share = (f"{100 * tot['assigned'] / tot['new_bests']:.0f}%" if tot["new_bests"] else "-")
    lines.append(f"| all | | {tot['new_bests']} | {tot['assigned']} ({share}) | {tot['after_round_1']} | "
                 f"{tot['assigned_after_round_1']} |")
    text = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    return 0


def cmd_keep(a: argparse.Namespace) -> int:
    """Every coder prompt and answer of the runs, per task, so the record outlives the runs folder."""
    for task, root in sorted(runs_of(a.runs_dir).items()):
        dest = a.into / task
        for sub in ("prompts", "answers"):
            for f in sorted((root / sub).glob("coder-*.md")):
                (dest / sub).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dest / sub / f.name)
        for f in ("report.md",):   # the best kernel is in the report's run folder and in `cuda-llm demo`'s recording
            if (root / f).is_file():
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / f, dest / f)
        print(f"{task}: kept in {dest}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("start", "pending", "step", "table", "keep"):
        s = sub.add_parser(name)
        s.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS)
        if name == "start":
            s.add_argument("--tasks", required=True, help="built-in tasks, comma-separated")
            s.add_argument("--rounds", type=int, default=3)
            s.add_argument("--candidates", type=int, default=2)
            s.add_argument("--eval-time", type=float, default=3.0)
            s.add_argument("--planner", choices=("rules", "manual"), default="rules",
                           help="who plans: the bandit, or a model answering the pending planner prompts")
            s.add_argument("--critic", choices=("rules", "manual"), default="rules",
                           help="who reviews: the rule diagnosis, or a model answering the pending critic prompts")
        if name == "table":
            s.add_argument("--out", type=Path)
        if name == "keep":
            s.add_argument("--into", type=Path, default=ROOT / "benchmarks" / "agent_answers")
    a = p.parse_args(argv)
    a.runs_dir = a.runs_dir.resolve()
    return {"start": cmd_start, "pending": cmd_pending, "step": cmd_step, "table": cmd_table, "keep": cmd_keep}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
