"""`cuda-llm check-task DIR`: is a task folder ready for a run?"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.results import Status
from cuda_llm.tools.harness import failure_text

HELP = "check a task folder: task.toml, the reference on the CPU for every shape, naive.cu compiled"
DESCRIPTION = """Check a task folder (task.toml, reference.py, naive.cu) before spending GPU or LLM time on it.
TASK is a folder, or a task's name as `cuda-llm optimize` takes it (`cuda-llm tasks` lists them):

  - task.toml and reference.py load (every field validated; errors name the file and the field)
  - the reference runs on the CPU for every correctness shape, every held-out shape and the benchmark
    shape: it returns every output with the declared number of elements, numbers, finite values, and the
    same answer twice on the same inputs
  - naive.cu passes the static checks and compiles (and on a GPU machine passes every case)
  - a warning when the benchmark shape is too small to fill a GPU

Exit code 1 when something must be fixed. Held-out shapes are named only as such.

Examples:
  cuda-llm check-task my_tasks/swish
  cuda-llm check-task softmax --no-benchmark"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("folder", metavar="TASK", help="the task folder (holding task.toml), or a task's name")
    p.add_argument("--tasks-dir", type=Path, action="append", default=[],
                   help="extra folder of tasks, searched for TASK by name (as `cuda-llm tasks --tasks-dir`)")
    p.add_argument("--arch", help="compile for this architecture (default: the device's, else sm_90)")
    p.add_argument("--no-benchmark", action="store_true", help="skip the reference at the (large) benchmark shape")
    p.add_argument("--no-compile", action="store_true", help="skip compiling naive.cu")


def compile_baseline(loaded, arch: str | None = None) -> tuple[bool, str]:
    """naive.cu through the harness (static checks and nvcc; the tests and timing too where there is a GPU)."""
    # the judge (NumPy): imported on use, off the `--help` start-up
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate

    source = loaded.task.baseline_path.read_text()
    res = evaluate_candidate(loaded, source, candidate="naive", options=EvalOptions(arch=arch))
    if res.status == Status.no_device:
        return True, "compiled and passed the static checks (no GPU here: not run)"
    if res.status.passed:
        return True, res.message
    return False, failure_text.describe(res, full=True)


def run(args: argparse.Namespace) -> int:
    # the tasks (NumPy): imported on use, off the `--help` start-up
    from cuda_llm.tasks import TaskError, list_task_names, load_task_folder
    from cuda_llm.tasks.check import benchmark_size_warning, check_reference
    from cuda_llm.tasks.loader import task_folder

    folder = Path(args.folder)
    try:
        if not folder.is_dir():
            named = task_folder(args.folder, args.tasks_dir)
            if named is None:
                print(f"cuda-llm check-task: {args.folder}: no such folder and no task of that name "
                      f"(known: {', '.join(list_task_names(args.tasks_dir))})", file=sys.stderr)
                return 2
            folder = named
    except TaskError as exc:        # a --tasks-dir or $CUDA_LLM_TASKS folder that does not exist
        print(f"cuda-llm check-task: {exc}", file=sys.stderr)
        return 2
    try:
        loaded = load_task_folder(folder)
    except TaskError as exc:
        print(f"FAIL  task.toml/reference.py: {exc}")
        return 1
    print(f"ok    {loaded.task.name}: task.toml and reference.py load; {loaded.task.signature}")
    bad = 0
    for c in check_reference(loaded, benchmark=not args.no_benchmark):
        bad += not c.ok
        print(f"{'ok  ' if c.ok else 'FAIL'}  reference at {c.label} ({c.seconds:.2f} s)" + (f": {c.problem}" if c.problem else ""))
    warning = benchmark_size_warning(loaded)
    if warning:
        print(f"warn  {warning}")
    if not args.no_compile:
        try:
            ok, text = compile_baseline(loaded, args.arch)
        except Exception as exc:  # noqa: BLE001 - no nvcc, a bad --arch: say so, as a failure of this check
            ok, text = False, f"{type(exc).__name__}: {exc}"
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'}  naive.cu: " + text.replace("\n", "\n      "))
    print(f"\n{bad} problem(s) to fix" if bad else "\nready: `cuda-llm optimize " + str(args.folder) + "`")
    return 1 if bad else 0
