"""A run whose coder is a person: `cuda-llm optimize softmax --coder manual --planner rules --critic rules`,
answered from hand-written kernels, resumed until it finishes; prints the run's table.

    python benchmarks/manual_run.py [--task softmax] [--answers benchmarks/manual_answers/softmax]
                                    [--rounds 3] [--candidates 1] [--out bench-out]

Each round the run writes the coder's prompt to runs/<id>/pending/coder-r<N>c<K>.md and stops (exit code 4);
this script answers it with ANSWERS/r<N>c<K>.cu, else ANSWERS/r<N>.cu (a ```cuda block around the file),
through `cuda-llm answer`, and runs `cuda-llm resume`. The planner is the feature bandit and the critic the
rule-based diagnosis, so no LLM endpoint is used at all. A prompt it has no answer for (a compile-fix
turn: the kernel did not build) stops the script with the prompt's path. Needs a CUDA device (optimize
measures every candidate on the GPU). Writes OUT/manual_run.md (the commands, the prompts answered, the
final table) and the run's readable files (report, trace, prompts, answers, candidates) to OUT/manual-run/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WAITING = 4          # optimize/resume: a manual role has prompts to answer


def cli(*args: str, log: list[str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "cuda_llm.cli", *args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
    log.append(f"$ cuda-llm {' '.join(args)}   # exit {proc.returncode}, {time.monotonic() - t0:.1f} s")
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="softmax")
    p.add_argument("--answers", type=Path, default=ROOT / "benchmarks" / "manual_answers" / "softmax")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--candidates", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "bench-out")
    p.add_argument("--max-steps", type=int, default=20, help="resumes at most (a guard against a loop)")
    p.add_argument("--runs-dir", type=Path, help="where the run is kept (default: a new temporary folder; its "
                   "readable files are copied to OUT/manual-run/)")
    args = p.parse_args(argv)

    from cuda_llm.runs.answer_folder import answer_file, coder_answer
    from cuda_llm.graph.manual import pending_prompts
    from cuda_llm.runs.rundir import recent_runs

    args.out.mkdir(parents=True, exist_ok=True)
    runs_dir = (args.runs_dir or Path(tempfile.mkdtemp(prefix="cuda-llm-manual-runs-"))).resolve()
    log: list[str] = []
    answered: list[str] = []
    proc = cli("optimize", args.task, "--coder", "manual", "--planner", "rules", "--critic", "rules",
               "--rounds", str(args.rounds), "--candidates", str(args.candidates), "--plateau-rounds", str(args.rounds),
               "--no-learn", "--runs-dir", str(runs_dir), log=log)
    ids = recent_runs(runs_dir, limit=1)
    if not ids:
        print(f"manual_run: no run was created (exit {proc.returncode})", file=sys.stderr)
        return 1
    run_id = ids[0]
    root = runs_dir / run_id
    steps = 0
    while proc.returncode == WAITING and steps < args.max_steps:
        steps += 1
        for w in pending_prompts(root):
            src = answer_file(args.answers, w.name)
            if src is None:
                print(f"manual_run: no hand-written answer for {w.name}; its prompt is {w.prompt}", file=sys.stderr)
                _write(args.out, log, answered, root, "stopped: no answer for " + w.name)
                return 2
            text = coder_answer(src.name, src.read_text())
            ans = root / "work" / f"{w.name}.answer.md"
            ans.parent.mkdir(parents=True, exist_ok=True)
            ans.write_text(text)
            if cli("answer", run_id, w.name, str(ans), "--runs-dir", str(runs_dir), log=log).returncode != 0:
                return 2
            answered.append(f"{w.name} <- {src.relative_to(ROOT) if src.is_relative_to(ROOT) else src}")
        proc = cli("resume", run_id, "--runs-dir", str(runs_dir), log=log)
    report = cli("report", run_id, "--runs-dir", str(runs_dir), log=log)
    status = "finished" if proc.returncode == 0 else f"exit {proc.returncode}"
    _write(args.out, log, answered, root, status, report.stdout)
    return 0 if proc.returncode == 0 else 1


KEPT = ("report.md", "trace.jsonl", "config.json", "best.cu", "candidates/*.cu", "candidates/*.json",
        "critiques/*.json", "profiles/*.json", "prompts/*.md", "answers/*.md", "rounds/**/*.json")


def _keep(root: Path, dest: Path) -> None:
    """The run's readable files (not its caches, builds or Nsight Compute reports) to ``dest``."""
    for pattern in KEPT:
        for f in root.glob(pattern):
            if f.is_file():
                target = dest / f.relative_to(root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, target)


def _write(out: Path, log: list[str], answered: list[str], root: Path, status: str, table: str = "") -> None:
    _keep(root, out / "manual-run")
    text = ["# A manual-coder run (answers written by hand; planner: the feature bandit; critic: the rule-based "
            "diagnosis)", "", f"run: {root}", f"status: {status}", "", "## Commands", "", "```", *log, "```", "",
            "## Prompts answered", "", *[f"- {a}" for a in answered], "", "## The run's table", "", "```",
            table.rstrip(), "```", ""]
    (out / "manual_run.md").write_text("\n".join(text))
    print(f"\nwrote {out / 'manual_run.md'}")


if __name__ == "__main__":
    sys.exit(main())
