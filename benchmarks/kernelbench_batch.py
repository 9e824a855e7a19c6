"""KernelBench's fast_p table from one resumable `cuda-llm batch` whose coder is a model playing the manual
provider (the pending prompt files and nothing else), the feature bandit as planner and the rule diagnosis
as critic, 2 rounds x 2 candidates, one evaluation worker per GPU.

    python benchmarks/kernelbench_batch.py copy --from KernelBench/ [--runs-dir kb-runs]   # CPU: the published files
    python benchmarks/kernelbench_batch.py start [--runs-dir kb-runs] [--gpus 0,1,2,3]     # on the GPU machine
    python benchmarks/kernelbench_batch.py pending [--runs-dir kb-runs]                    # CPU: the prompts to answer
    python benchmarks/kernelbench_batch.py step [--runs-dir kb-runs]                       # GPU: resume the batch
    python benchmarks/kernelbench_batch.py table [--runs-dir kb-runs] [--out FILE]         # CPU: the tables

`copy` puts KernelBench's level1/ and level2/ files (as published, unmodified) into RUNS_DIR/kernelbench/;
the runs folder then holds all the batch needs and travels between the GPU machine and the place where the
answers are written as one tar (`--out DIR` of start and step writes DIR/kb-runs.tar.gz).

`start` applies the sample rule of docs/kernelbench-results.md (cuda_llm/tasks/kernelbench_sample.py): the
estimates on the meta device, then the importer on the files the rule reaches (several at once; a refused
file is counted and the rule takes the next number), into RUNS_DIR/imported/ ($CUDA_LLM_IMPORTED, so the
imported tasks travel with the runs); it writes RUNS_DIR/sample.txt (the chosen files and the refused ones)
and RUNS_DIR/sample.json, and starts `cuda-llm batch RUNS_DIR/sample.txt --coder manual ...`. Each run stops
when its coder prompts are pending (RUNS_DIR/<run>/pending/coder-*.md; the answer goes to
RUNS_DIR/<run>/answers/<name>.md, a ```cuda block with the whole file). `step` runs `cuda-llm batch --resume`:
every answered run continues to its next wait or its end, the others wait on. Both stop the batch cleanly
(SIGTERM: every run at its next step, resumable) when --deadline-s runs out, and pack the runs folder.

`table` rewrites the batch's table.md, batch.html and kernelbench.json (`cuda-llm batch --show`) and adds
what a candidate cost inside the batch (from the runs' traces): the first candidate of each problem and the
later ones, against the 20 s target.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_llm.tasks import kernelbench_sample as rule  # noqa: E402

DEFAULT_RUNS = Path("kb-runs")
WAITING = 3          # `cuda-llm batch` exit code: not every task finished (some wait on prompts)
ROLES = ["--coder", "manual", "--planner", "rules", "--critic", "rules"]
PACK_SKIP = (".so", ".o", ".ncu-rep", ".cubin", ".ptx", ".lock", "report.html")


CACHE_GB = "120"     # the benchmark data of the sample (4 input sets and references per problem) is ~45 GB:
                     # the default 20 GB cap would evict one problem's sets while another's are made


def env_for(runs: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "CUDA_LLM_IMPORTED": str(runs / "imported"), "CUDA_LLM_FEATURE_DB": str(runs / "feature_stats.sqlite"),
            "CUDA_LLM_CACHE_MAX_GB": os.environ.get("CUDA_LLM_CACHE_MAX_GB", CACHE_GB)}


# ------------------------------------------------------------------------------------------- copy
def cmd_copy(a: argparse.Namespace) -> int:
    if a.git:
        return _copy_git(a)
    src = Path(a.src)
    if (src / "KernelBench").is_dir():
        src = src / "KernelBench"
    n = 0
    for level in ("level1", "level2"):
        files = sorted((src / level).glob("*.py"))
        if not files:
            print(f"kernelbench_batch: no {level}/*.py under {src}", file=sys.stderr)
            return 2
        dest = a.runs_dir / "kernelbench" / level
        dest.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copyfile(f, dest / f.name)
            n += 1
    print(f"{n} files in {a.runs_dir / 'kernelbench'}")
    return 0


def _copy_git(a: argparse.Namespace) -> int:
    """The files from a git directory of KernelBench (a mirror without a work tree), at its HEAD."""
    git = ["git", "--git-dir", str(a.git)]
    n = 0
    for level in ("level1", "level2"):
        names = subprocess.run(git + ["ls-tree", "--name-only", "HEAD", f"KernelBench/{level}/"], text=True,
                               capture_output=True, check=True).stdout.split()
        dest = a.runs_dir / "kernelbench" / level
        dest.mkdir(parents=True, exist_ok=True)
        for name in names:
            if name.endswith(".py"):
                data = subprocess.run(git + ["show", f"HEAD:{name}"], capture_output=True, check=True).stdout
                (dest / Path(name).name).write_bytes(data)
                n += 1
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], text=True, capture_output=True).stdout.strip()
    print(f"{n} files of KernelBench {head} in {a.runs_dir / 'kernelbench'}")
    return 0 if n else 2


# ------------------------------------------------------------------------------------------ sample
def sample(runs: Path, *, do_import: bool = True, workers: int | None = None) -> list[rule.Pick]:
    """The rule over RUNS/kernelbench/level{1,2}; writes RUNS/sample.txt and RUNS/sample.json."""
    os.environ["CUDA_LLM_IMPORTED"] = str((runs / "imported").resolve())
    picks: list[rule.Pick] = []
    refused_files: list[str] = []
    for level in (1, 2):
        folder = runs / "kernelbench" / f"level{level}"
        files = rule.level_files(folder)
        if not files:
            raise SystemExit(f"kernelbench_batch: no files in {folder}; run `copy --from KernelBench/` first")
        est = rule.estimates_of(folder)
        if do_import:      # the first choices, imported several at once; replacements one by one below
            first = rule.choose(level, files, est, lambda f: None)
            _import_many([folder / p.file for p in first if p.file], workers)

        def refused(name: str, folder: Path = folder) -> str | None:
            if not do_import:
                return None
            reason = _import_reason(folder / name)
            if reason is not None:
                refused_files.append(f"kernelbench/level{folder.name[-1]}/{name}")
            return reason

        picks += rule.choose(level, files, est, refused)
    if not do_import:      # a preview: the batch's list is written only once the importer has decided
        return picks
    chosen = [f"kernelbench/level{p.level}/{p.file}" for p in picks if p.file]
    (runs / "sample.txt").write_text("# the sample rule of docs/kernelbench-results.md; refused files last\n"
                                     + "\n".join(chosen + refused_files) + "\n")
    (runs / "sample.json").write_text(json.dumps([p.model_dump() for p in picks], indent=1))
    return picks


def _import_many(paths: list[Path], workers: int | None) -> None:
    # local: the batch's own import-ahead (several files at once, in child processes)
    from cuda_llm.graph.batch import _import_ahead

    _import_ahead([str(p) for p in paths], workers)


def _import_reason(path: Path) -> str | None:
    """None when the importer takes the file (imported now or before), else its reason."""
    from cuda_llm.tasks.torch_import import ImportMemoryError, import_cached
    from cuda_llm.tasks.torch_source import ModuleFileError

    try:
        import_cached(path)
    except ImportMemoryError:
        raise
    except ModuleFileError as exc:
        return str(exc).removeprefix(f"{path}: ")
    return None


def cmd_sample(a: argparse.Namespace) -> int:
    picks = sample(a.runs_dir, do_import=not a.no_import)
    for p in picks:
        print(f"level {p.level} target {p.target:3d}: {p.file or '-'}")
        for why in p.passed_over:
            print(f"    passed over {why}")
    if not a.no_import:
        print(f"{a.runs_dir / 'sample.txt'}")
    return 0


# --------------------------------------------------------------------------------- the batch
def batch_cli(runs: Path, args: list[str], deadline_s: float | None, kill_after_s: float | None = None) -> int:
    """`cuda-llm batch ...` in a child, stopped with SIGTERM (resumable) when the deadline comes; with
    ``kill_after_s``, killed with SIGKILL then (as an out-of-memory killer or a lost machine would)."""
    cmd = [sys.executable, "-m", "cuda_llm.cli", "batch", *args, "--runs-dir", rel(runs)]
    t0 = time.monotonic()
    print(f"$ cuda-llm batch {' '.join(args)}", flush=True)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env_for(runs))
    if kill_after_s is not None and (deadline_s is None or kill_after_s < deadline_s):
        try:
            rc = proc.wait(timeout=kill_after_s)
            print(f"# exit {rc} before the kill, {time.monotonic() - t0:.1f} s", flush=True)
            return rc
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            print(f"kernelbench_batch: killed the batch with SIGKILL after {kill_after_s:.0f} s", flush=True)
            return -9
    try:
        rc = proc.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        print(f"kernelbench_batch: deadline ({deadline_s:.0f} s): stopping the batch (resumable)", flush=True)
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
    print(f"# exit {rc}, {time.monotonic() - t0:.1f} s", flush=True)
    return rc


def rel(path: Path) -> str:
    """A path inside the checkout relative to it (the batch runs there): the runs record their tasks' module
    files by it, so the runs folder can move with the checkout to another machine."""
    path = Path(path).resolve()
    return os.path.relpath(path, ROOT) if path.is_relative_to(ROOT) else str(path)


def _deadline(a: argparse.Namespace, t0: float) -> float | None:
    return None if a.deadline_s is None else max(30.0, a.deadline_s - (time.monotonic() - t0))


def cmd_start(a: argparse.Namespace) -> int:
    t0 = time.monotonic()
    runs = a.runs_dir
    if latest_batch(runs) is not None:
        print(f"a batch was already started in {runs}: use `step`", file=sys.stderr)
        return 2
    if not (runs / "sample.txt").is_file():
        sample(runs, workers=a.import_workers)
        print(f"sample: {runs / 'sample.txt'} ({time.monotonic() - t0:.0f} s with the imports)", flush=True)
    args = [rel(runs / "sample.txt"), *ROLES, "--rounds", str(a.rounds), "--candidates", str(a.candidates),
            "--plateau-rounds", str(a.rounds), "--time-budget", a.time_budget, "--token-budget", "100M",
            "--eval-time", str(a.eval_time), "--quiet"]
    if a.gpus:
        args += ["--gpus", a.gpus]
    if a.no_profile:
        args.append("--no-profile")
    rc = batch_cli(runs, args, _deadline(a, t0))
    cmd_pending(a)
    pack(a)
    return 0 if rc in (0, WAITING) else rc


def cmd_step(a: argparse.Namespace) -> int:
    t0 = time.monotonic()
    if latest_batch(a.runs_dir) is None:
        print(f"no batch in {a.runs_dir}: use `start`", file=sys.stderr)
        return 2
    args = ["--resume", "latest", "--quiet"] + (["--gpus", a.gpus] if a.gpus else []) + \
        (["--max-rounds", str(a.max_rounds)] if a.max_rounds else []) + \
        (["--more-rounds", str(a.more_rounds)] if a.more_rounds else []) + \
        (["--parallel", str(a.parallel)] if a.parallel else [])
    if a.kill_after_s is not None:               # the kill-and-resume check: SIGKILL mid-way, then resume
        done_before = finished_jobs(a.runs_dir)
        if batch_cli(a.runs_dir, args, _deadline(a, t0), kill_after_s=a.kill_after_s) == -9:
            killed_at = finished_jobs(a.runs_dir)
            time.sleep(5)
            rc = batch_cli(a.runs_dir, args, _deadline(a, t0))
            print(repeat_report(done_before, killed_at, finished_jobs(a.runs_dir)), flush=True)
            cmd_pending(a)
            pack(a)
            return 0 if rc in (0, WAITING) else rc
    rc = batch_cli(a.runs_dir, args, _deadline(a, t0))
    cmd_pending(a)
    pack(a)
    return 0 if rc in (0, WAITING) else rc


def finished_jobs(runs: Path) -> list[tuple[str, str, str]]:
    """Every finished GPU job of every run, as (run, kind, candidate), in trace order (repeats kept)."""
    out = []
    for trace in sorted(runs.glob("*/trace.jsonl")):
        for line in trace.read_text().splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") == "gpu_job" and ev.get("status") == "done":
                out.append((trace.parent.name, str(ev.get("kind")), str(ev.get("candidate"))))
    return out


def repeat_report(before: list, at_kill: list, after: list) -> str:
    """What the kill cost: jobs finished before it that ran again after the resume (should be none)."""
    from collections import Counter
    done_at_kill, done_after = Counter(at_kill), Counter(after)
    repeated = sorted(j for j, n in done_after.items() if done_at_kill.get(j) and n > done_at_kill[j])
    new = sum(done_after.values()) - sum(done_at_kill.values())
    lines = [f"kill and resume: {sum(done_at_kill.values()) - len(before)} GPU jobs had finished in this step before "
             f"the SIGKILL; {new} finished after the resume; repeated after the resume: {len(repeated)}"]
    lines += [f"  repeated: {run} {kind} {cand}" for run, kind, cand in repeated]
    return "\n".join(lines)


def pack(a: argparse.Namespace) -> None:
    """RUNS -> OUT/kb-runs.tar.gz (builds and profiler reports left out: they are remade where needed)."""
    if not a.out:
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    dest = out / "kb-runs.tar.gz"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if info.name.endswith(PACK_SKIP) or "/work/" in info.name else info

    with tarfile.open(dest, "w:gz") as tar:
        tar.add(a.runs_dir, arcname="kb-runs", filter=keep)
    for name in ("table.md", "batch.html", "kernelbench.json", "kernelbench-cost.md"):
        b = latest_batch(a.runs_dir)
        if b is not None and (b / name).is_file():
            shutil.copyfile(b / name, out / name)
    print(f"packed {dest} ({dest.stat().st_size / 2**20:.1f} MiB); unpack in the checkout with "
          f"`rm -rf kb-runs && tar xzf kb-runs.tar.gz`")


# ------------------------------------------------------------------------------------ CPU side
def latest_batch(runs: Path) -> Path | None:
    root = runs / "batches"
    found = sorted(d for d in root.iterdir() if (d / "batch.json").is_file()) if root.is_dir() else []
    return found[-1] if found else None


def batch_runs(runs: Path) -> list[tuple[str, str, Path | None]]:
    """(task, status, run folder) of every task of the latest batch."""
    b = latest_batch(runs)
    if b is None:
        return []
    state = json.loads((b / "batch.json").read_text())
    return [(t["name"], t["status"], runs / t["run_id"] if t.get("run_id") else None) for t in state["tasks"]]


def cmd_pending(a: argparse.Namespace) -> int:
    from cuda_llm.graph.manual import pending_prompts

    waiting = 0
    for task, status, root in batch_runs(a.runs_dir):
        if root is None or not root.is_dir():
            print(f"{task}: {status}")
            continue
        prompts = pending_prompts(root)
        waiting += len(prompts)
        for w in prompts:
            print(f"{task}: {w.prompt}  ->  {w.answer}")
        if not prompts:
            print(f"{task}: {status}, nothing waiting")
    print(f"{waiting} prompt(s) waiting")
    return 0


def cmd_table(a: argparse.Namespace) -> int:
    b = latest_batch(a.runs_dir)
    if b is None:
        print(f"no batch in {a.runs_dir}", file=sys.stderr)
        return 2
    proc = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "batch", "--show", b.name, "--runs-dir",
                           str(a.runs_dir)], cwd=ROOT, env=env_for(a.runs_dir), text=True, capture_output=True)
    print(proc.stdout)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    from cuda_llm.report.candidate_cost import cost_table, candidate_costs

    costs = candidate_costs([root for _, _, root in batch_runs(a.runs_dir) if root is not None and root.is_dir()])
    text = cost_table(costs)
    (b / "kernelbench-cost.md").write_text(text)
    print(text)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text((b / "table.md").read_text() + "\n" + text)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("copy", "sample", "start", "pending", "step", "table"):
        s = sub.add_parser(name)
        s.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS)
        if name == "copy":
            s.add_argument("--from", dest="src", help="KernelBench's checkout (or its KernelBench/)")
            s.add_argument("--git", help="or a git directory of KernelBench without a work tree (a mirror)")
        if name == "sample":
            s.add_argument("--no-import", action="store_true", help="the rule before any import (the estimates only)")
        if name in ("start", "step"):
            s.add_argument("--gpus", help="e.g. 0,1,2,3 (default: every GPU)")
            s.add_argument("--out", help="where kb-runs.tar.gz and the tables go (e.g. $OUT)")
            if name == "step":
                s.add_argument("--max-rounds", type=int, default=None,
                               help="end every run after this round at the latest (batch --max-rounds)")
                s.add_argument("--parallel", type=int, default=None,
                               help="runs at a time from now on (batch --parallel), e.g. 1 on a machine of one GPU")
                s.add_argument("--more-rounds", type=int, default=None,
                               help="every finished run goes on with this many rounds more (batch --more-rounds)")
                s.add_argument("--kill-after-s", type=float, default=None,
                               help="SIGKILL the batch after this many seconds, then resume it and report "
                                    "which finished GPU jobs ran again (none should)")
            s.add_argument("--deadline-s", type=float, default=None,
                           help="stop the batch (resumable) after this many seconds, then pack")
        if name == "start":
            s.add_argument("--rounds", type=int, default=2)
            s.add_argument("--candidates", type=int, default=2)
            s.add_argument("--eval-time", type=float, default=2.0)
            s.add_argument("--time-budget", default="8h")
            s.add_argument("--no-profile", action="store_true")
            s.add_argument("--import-workers", type=int, default=None)
        if name == "table":
            s.add_argument("--out", help="also write the tables to this file")
    a = p.parse_args(argv)
    a.runs_dir = a.runs_dir.resolve()
    return {"copy": cmd_copy, "sample": cmd_sample, "start": cmd_start, "pending": cmd_pending, "step": cmd_step,
            "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
