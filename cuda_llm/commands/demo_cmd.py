"""`cuda-llm demo`: a finished run to look at, on any machine (no GPU, no endpoint, nothing is run)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.runs.replay import (
    DEFAULT_RECORDING, RecordingError, find_recording, install, installed_copy, recording_dirs, recording_summary,
    replay_line, roles_text,
)
from cuda_llm.runs.run_info import run_info

HELP = "install a recorded run (measured on an H100) as a new run, to try runs, report, show, trace and export"
DESCRIPTION = """Copy a run recorded on a real GPU (shipped with cuda-llm) into --runs-dir under a new id ending
in -replay-XXXX, then try every command that reads runs on it: no GPU, no LLM endpoint, no compiler.

NAME picks the recording (default conv2d); --list shows each one with who played each role (a model, the
rules, hand-written answers) and what it is. NAME may also be the path of a recorded run folder, and
$CUDA_LLM_DEMOS adds folders of them (benchmarks/record_demo.py makes one from a run folder).

The run is marked as a replay in config.json, and `runs`, `report` (Markdown and HTML), `show`, `trace`
and `export` say so: nothing in it was measured on this machine. recording.json in the run folder says
what was recorded and where each figure comes from. Delete it like any run: `cuda-llm runs rm RUN_ID`.

Running `demo` again does not install a second, identical copy: it names the copy already in --runs-dir
(--again installs another, e.g. to try `runs rm` on it).

--live plays the run's progress display back from its recorded events, as it looked while the run went
on (the live status bar in a terminal, plain lines otherwise), --speed times faster than it happened.

Examples:
  cuda-llm demo --list
  cuda-llm demo softmax
  cuda-llm demo --live --speed 20"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("name", nargs="?", metavar="NAME", help="the recording (default conv2d; see --list)")
    p.add_argument("--list", action="store_true", help="list the recordings: who played each role, what each is")
    p.add_argument("--live", action="store_true", help="play the run's progress display back from its events")
    p.add_argument("--speed", type=_speed, default=20.0, metavar="X",
                   help="with --live: this many times faster than the run went (default 20)")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--again", action="store_true",
                   help="install a new copy even when --runs-dir already holds one of this recording")
    p.add_argument("--recording", default=None, help=argparse.SUPPRESS)   # the older spelling of NAME


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; e.g. --speed 20") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the speed must be above 0; e.g. --speed 20")
    return value


def _list() -> int:
    found = recording_dirs()
    if not found:
        print("no recorded runs in this installation")
        return 0
    for name, folder in sorted(found.items()):
        default = " (default)" if name == DEFAULT_RECORDING else ""
        print(f"{name}{default}\n  {roles_text(folder)}\n  {recording_summary(folder)}")
    print("\ninstall one: cuda-llm demo NAME")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    t0 = time.monotonic()
    name = args.name or args.recording or DEFAULT_RECORDING
    try:
        folder = find_recording(name)
    except RecordingError as exc:
        print(f"cuda-llm demo: {exc}", file=sys.stderr)
        return 2
    # A recording is the same run every time: a second copy would add a row of identical figures to
    # `runs` and nothing else, so a repeated `demo` shows the copy already there (--again for another).
    existing = None if args.again else installed_copy(args.runs_dir, name)
    try:
        rundir = existing or install(args.runs_dir, name)
    except (RecordingError, OSError) as exc:
        print(f"cuda-llm demo: {exc}", file=sys.stderr)
        return 2
    rid, flag = rundir.run_id, "" if args.runs_dir == Path("runs") else f" --runs-dir {args.runs_dir}"
    if args.live:
        _play(rundir, args.speed)
    if existing:
        print(f"the {folder.name} demo is already installed as run {rid} in {args.runs_dir}/ (--again installs "
              f"another copy)")
    else:
        print(f"installed run {rid} in {args.runs_dir}/ in {time.monotonic() - t0:.1f} s")
    print(replay_line(rundir))
    print(f"Roles: {roles_text(folder)}")
    best = run_info(rundir).best_id or "baseline"
    print("\nTry:")
    for cmd in (f"cuda-llm runs{flag}", f"cuda-llm report {rid}{flag} --html", f"cuda-llm show {rid} {best}{flag}",
                f"cuda-llm trace {rid}{flag}", f"cuda-llm demo {folder.name} --live{flag}",
                f"cuda-llm export {rid} --torch exported/demo{flag}   (needs nvcc)"):
        print(f"  {cmd}")
    print(f"\nThe HTML report: {rundir.root / 'report.html'} (after `report --html`)")
    return 0


def _play(rundir, speed: float) -> None:
    """The recorded run's progress display, from its trace, on stderr (as a run shows it)."""
    # the display (rich) and the trace reader: imported on use, off the `--help` start-up
    from cuda_llm.report.progress import ConsoleProgress, LiveProgress
    from cuda_llm.report.progress_replay import RecordedClock, replay
    from cuda_llm.runs.trace import read_trace

    clock = RecordedClock()
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        from rich.console import Console

        progress: ConsoleProgress = LiveProgress(Console(file=sys.stderr), clock=clock)
    else:
        progress = ConsoleProgress(sys.stderr, clock=clock)
    print(f"# {replay_line(rundir)}\n# its progress display, {speed:g}x faster than it went:", file=sys.stderr)
    try:
        replay(read_trace(rundir.trace_path), progress, clock, speed=speed, run_id=rundir.run_id)
    except KeyboardInterrupt:
        pass
    finally:
        progress.close()
    print("", file=sys.stderr)
