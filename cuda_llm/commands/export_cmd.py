"""`cuda-llm export RUN --torch DIR`: a run's best kernel as something a PyTorch model can call."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.runs.replay import replay_line
from cuda_llm.runs.run_info import read_values
from cuda_llm.runs.rundir import RunDir, RunNotFoundError

HELP = "write a run's best kernel as a PyTorch module (ModelNew, or a function) with a test"
DESCRIPTION = """Export RUN's best kernel for PyTorch into DIR:

  kernel.cu, kernel.so     the kernel and its build (nvcc, the harness's flags, --arch)
  <task>_ext.py            for a task imported from a PyTorch module: ModelNew, a subclass of its Model (the
                           same constructor, parameters and forward) whose forward calls the kernel through
                           a torch.library custom op; for any other task: a function taking tensors
  <task>_test.py           pytest: the export against the reference on fresh inputs (needs a CUDA device)
  README.md                how to use it, test it and rebuild it

RUN is a run id in --runs-dir, a unique prefix, "latest", or a run folder. The kernel is the run's
best.cu (written by its final check), else best_so_far.cu; --kernel exports another file instead.

Examples:
  cuda-llm export latest --torch exported/swish
  pytest -q exported/swish/swish_test.py"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("run_id", help="run id, unique prefix, 'latest', or a run folder")
    p.add_argument("--torch", dest="out", type=Path, required=True, metavar="DIR",
                   help="folder to write the PyTorch export into (created; files in it are replaced)")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--kernel", type=Path, help="export this .cu instead of the run's best")
    p.add_argument("--arch", help="GPU architecture for nvcc (default: the local GPU's, else sm_90)")


def _err(msg: str) -> int:
    print(f"cuda-llm export: {msg}", file=sys.stderr)
    return 2


def _best_source(rundir, values: dict) -> tuple[str, str] | None:
    """(source, where) of the run's best kernel, or None when no kernel passed."""
    best, final = values.get("best") or {}, values.get("final") or {}
    if final and final.get("status") in ("ok", "suspect") and Path(rundir.best_path).is_file():
        return Path(rundir.best_path).read_text(), f"{best.get('id') or final.get('candidate')} (best.cu)"
    so_far = Path(rundir.root) / "best_so_far.cu"
    if best.get("id") not in (None, "baseline") and so_far.is_file():
        return so_far.read_text(), f"{best['id']} (best_so_far.cu; the run's final check has not passed it yet)"
    return None


def run(args: argparse.Namespace) -> int:
    # the tasks (NumPy): imported on use, off the `--help` start-up
    from cuda_llm.tasks import TaskError, load_task

    try:
        rundir = RunDir.open(args.run_id, args.runs_dir)
    except RunNotFoundError as exc:
        return _err(str(exc))
    try:
        config = rundir.load_config()
        loaded = load_task(config["task"])
    except (FileNotFoundError, ValueError, KeyError, TaskError) as exc:
        return _err(f"cannot load run {rundir.run_id}'s task: {exc}")
    task = loaded.task
    if args.kernel is not None:
        if not args.kernel.is_file():
            return _err(f"{args.kernel} is not a file")
        source, where = args.kernel.read_text(), str(args.kernel)
    else:
        got = _best_source(rundir, read_values(rundir))
        if got is None:
            return _err(f"run {rundir.run_id} has no kernel that passed (its best is still the baseline); "
                        f"nothing to export. Pass --kernel FILE.cu to export a kernel of your own")
        source, where = got

    # the exporter, compiler and static checks: imported on use, off the `--help` start-up
    from cuda_llm.tasks.torch_export import export_files
    from cuda_llm.tools.compiler.compile import CompileSetupError, build_target, compile_source, resolve_arch
    from cuda_llm.tools.compiler.static_check import check_source

    issues = check_source(source, task)
    if issues:
        return _err("the kernel does not meet the task's contract: " + "; ".join(i.message for i in issues[:3]))
    try:
        arch = resolve_arch(args.arch)
        comp = compile_source(source, arch=arch)
    except (ValueError, CompileSetupError) as exc:
        return _err(str(exc))
    if not comp.ok or not comp.so_path:
        return _err(f"the kernel does not compile for {arch}: {comp.errors or comp.log[-2000:]}")
    out: Path = args.out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _err(f"cannot create {out}: {exc.strerror}")
    command = " ".join(shlex.quote(c) for c in rebuild_command(comp.command))
    built = build_target(arch)       # what the machine code is for: sm_90a where sm_90 was asked

    replay = replay_line(rundir)
    origin = f"run {rundir.run_id}, kernel {where}, task {task.name}" + (f" ({replay})" if replay else "")
    try:
        export = export_files(task, arch=built, command=command, origin=origin)
    except ValueError as exc:
        return _err(str(exc))
    (out / "kernel.cu").write_text(source)
    shutil.copyfile(comp.so_path, out / "kernel.so")
    if task.torch is not None:
        shutil.copyfile(Path(task.folder) / task.torch.module, out / "reference_module.py")
    else:
        dst = out / "task" / task.name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(Path(task.folder), dst)
    for name, text in export.files.items():
        (out / name).write_text(text)
    print(f"exported {where} of run {rundir.run_id} ({task.name}) to {out}/")
    if replay:
        print(replay)
    for name in ["kernel.cu", "kernel.so", *export.files]:
        print(f"  {out / name}")
    print(f"use it:  see {out / 'README.md'}\ntest it: pytest -q {out / (task.name + '_test.py')}")
    return 0


def rebuild_command(cmd: list[str]) -> list[str]:
    """nvcc's command as the compiler ran it, made to run in the exported folder alone: the file names as
    the folder has them, ``nvcc`` from PATH, and without ``-keep -keep-dir`` (the harness keeps the
    intermediate files in its cache's build folder for its static rules; a user's rebuild needs none, and
    the folder would not exist on their machine)."""
    out: list[str] = []
    skip = False
    for i, c in enumerate(cmd):
        if skip:
            skip = False
        elif c == "-keep-dir":
            skip = True
        elif c == "-keep":
            continue
        elif i == 0 and Path(c).name == "nvcc":
            out.append("nvcc")
        elif c.endswith(".cu"):
            out.append("kernel.cu")
        elif c.endswith(".so"):
            out.append("kernel.so")
        else:
            out.append(c)
    return out
