"""`cuda-llm batch SUITE`: optimize many tasks as one job on every GPU, with one budget and one table."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from cuda_llm.agents.errors import LLMConfigError
from cuda_llm.agents.settings import load_settings
from cuda_llm.commands import one_line_errors
from cuda_llm.commands.flags import (
    add_budget_arguments, add_gpu_arguments, add_llm_arguments, add_search_arguments, limits_from_args, llm_cli,
    parse_count, saved_gpus_problem, timing_budget,
)
from cuda_llm.commands.preflight import preflight_ok
from cuda_llm.graph.batch import Batch, BatchBusyError, BatchError, create_batch, load_state, open_batch, resolve_suite_refusing
from cuda_llm.graph.run import RunOptions, chosen_gpus, gpus_text, settings_from_config
from cuda_llm.measure.gpu_pool import local_pool
from cuda_llm.report.batch_report import console_table, write_batch_reports
from cuda_llm.report.formats import fmt_duration, fmt_tokens
from cuda_llm.tools.harness.eval_options import EvalOptions

HELP = "optimize many tasks as one job on every GPU (a suite, a list, a folder), with one budget and one table"
DESCRIPTION = """Run the optimization loop on every task of SUITE, as one job that can run all night:

  suite                    the built-in suite (`cuda-llm tasks`)
  softmax,gelu,sgemm       task names, task folders or PyTorch module files, comma-separated
  my_tasks/                a folder of task folders and/or PyTorch modules (*.py, KernelBench's format)
  tasks.txt                a file naming them, one a line (# comments)

Every task must load before anything starts. Up to --parallel tasks run at once (default: one per GPU), all
measuring on one GPU pool: one evaluation worker per GPU (--gpus, default all; or the GPUs of a Ray cluster
with --ray ADDRESS), a round's candidates side by side, never two timed evaluations on one GPU.

--time-budget and --token-budget are the whole batch's, shared out as tasks start: a task gets the time left
spread over the tasks still to start (in --parallel lanes) and an even share of the tokens not yet given out;
what a task that stops early leaves goes to the later ones. The other budget and stop flags apply to each task.

The batch lives in RUNS_DIR/batches/<batch-id>/ (batch.json, batch.jsonl, table.md, batch.html); each task is
a normal run in RUNS_DIR/<run-id>/ (`cuda-llm report/show/trace RUN_ID`). Ctrl-C stops every run at its next
step; killed (even with kill -9), `cuda-llm batch --resume BATCH_ID` resumes the unfinished runs and starts
the tasks not begun, repeating nothing that finished. `cuda-llm batch --show BATCH_ID` prints the table again
and rewrites the pages. Exit 0: every task finished; 3: some stopped (resumable); 130: interrupted."""

# Test seams: the pool and the models the command uses (tests put a test evaluator's pool and a scripted model
# here; None means the real ones).
make_pool_override: Any = None
model_factory_override: Any = None


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("suite", nargs="?", help="`suite`, task names/folders/modules (comma-separated), a folder, or a list file")
    p.add_argument("--resume", metavar="BATCH_ID", help="continue a stopped or killed batch (an id, a prefix, or latest)")
    p.add_argument("--show", metavar="BATCH_ID", help="print a batch's table and rewrite table.md and batch.html")
    add_llm_arguments(p)
    add_budget_arguments(p, batch=True)
    add_search_arguments(p)
    o = p.add_argument_group("run")
    o.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    add_gpu_arguments(o, resumable=True)
    o.add_argument("--parallel", type=parse_count("tasks"), default=None, metavar="N",
                   help="tasks optimized at once (default: one per GPU of the pool)")
    o.add_argument("--ray", metavar="ADDRESS",
                   help="measure on the GPUs of a Ray cluster (auto, HOST:6379, ray://HOST:10001; local: start one "
                        "here), one actor per GPU; needs pip install -e '.[gpu,ray]' on every node")
    o.add_argument("--no-profile", action="store_true", help="skip Nsight Compute profiling")
    o.add_argument("--no-learn", action="store_true", help="do not update the feature statistics")
    o.add_argument("--quiet", action="store_true", help="no progress lines (the final table is still printed)")
    o.add_argument("--max-rounds", type=parse_count("rounds"), default=None, metavar="N",
                   help="with --resume: end every run after round N at the latest (each gets its final check and "
                        "report), e.g. when the night is over and the results are wanted now")
    o.add_argument("--more-rounds", type=parse_count("rounds"), default=None, metavar="N",
                   help="with --resume: every finished run continues with N rounds more (as `cuda-llm resume RUN "
                        "--rounds +N`), e.g. a batch ended early by --max-rounds given its night back")


def _err(msg: str) -> int:
    print(f"cuda-llm batch: {msg}", file=sys.stderr)
    return 2


def _make_pool(*, ray_address: str | None, gpus: list[int] | None, options: EvalOptions, profile: bool) -> Any:
    if make_pool_override is not None:
        return make_pool_override()
    if ray_address:
        try:
            from cuda_llm.measure.ray_slots import ray_pool   # Ray is optional: imported only for --ray
        except ImportError:
            raise ValueError("--ray needs Ray: pip install -e '.[ray]' (on this machine and every node)") from None
        return ray_pool(ray_address, options=options, profile=profile)
    return local_pool(gpus, options=options, profile=profile)


def _progress(quiet: bool):
    def on_event(ev: dict[str, Any]) -> None:
        if quiet:
            return
        name, task = ev.get("event"), ev.get("task")
        if name == "task_start":
            line = (f"{task}: started run {ev.get('run_id')} ({fmt_duration(ev.get('time_budget_s') or 0)}, "
                    f"{fmt_tokens(ev.get('token_budget'))} tokens)")
        elif name == "task_resume":
            line = f"{task}: resuming run {ev.get('run_id')}"
        elif name == "task_end":
            line = f"{task}: {ev.get('status')}" + (f" ({ev.get('detail')})" if ev.get("detail") else "")
        elif name == "task_skipped":
            line = f"{task}: not run ({ev.get('reason')})"
        else:
            return
        print(f"[batch] {line}", file=sys.stderr, flush=True)

    return on_event


def _show(root: Path, runs_dir: Path) -> list[Any]:
    state = load_state(root)
    rows, md, page = write_batch_reports(root, state, runs_dir)
    print(console_table(rows))
    print(f"batch:       {state.batch_id} ({'finished' if state.finished else 'not finished'})")
    if any(r.scripted for r in rows):
        print("note:        these figures come from a scripted model, not from an LLM")
    print(f"table:       {md}")
    print(f"page:        {page}")
    return rows


def run(args: argparse.Namespace) -> int:
    if args.show:
        try:
            root = open_batch(args.show, args.runs_dir)
        except FileNotFoundError as exc:
            return _err(str(exc))
        _show(root, args.runs_dir)
        return 0
    if bool(args.suite) == bool(args.resume):
        return _err("give a SUITE to start a batch, or --resume BATCH_ID to continue one (see --help)")
    if args.max_rounds is not None and not args.resume:
        return _err("--max-rounds goes with --resume (it ends a resumed batch's runs early); to start a batch, give --rounds")
    if args.more_rounds is not None and not args.resume:
        return _err("--more-rounds goes with --resume (it gives a batch's finished runs more rounds); to start a batch, "
                    "give --rounds")
    if args.more_rounds is not None and args.max_rounds is not None:
        return _err("give --more-rounds or --max-rounds, not both (one lengthens the runs, the other shortens them)")
    if args.resume:
        try:
            root = open_batch(args.resume, args.runs_dir)
        except FileNotFoundError as exc:
            return _err(str(exc))
        state = load_state(root)
        try:
            settings = settings_from_config(state.llm, api_key=args.api_key)
        except LLMConfigError as exc:
            return _err(str(exc))
        ray_address = args.ray or state.ray
        run_options = RunOptions(**{**state.run_options, "runs_dir": args.runs_dir, "limits": state.limits})
        saved_gpus = run_options.gpus          # a batch saved before its GPUs were kept has none: all
    else:
        try:
            settings = load_settings(llm_cli(args))
        except LLMConfigError as exc:
            return _err(str(exc))
        limits = limits_from_args(args)
        if isinstance(limits, str):
            return _err(limits)
        try:
            tasks, refused = resolve_suite_refusing(args.suite)
        except BatchError as exc:
            return _err(str(exc))
        for name, _ref, why in refused:
            print(f"cuda-llm batch: {name}: refused at import ({why})", file=sys.stderr)
        if not tasks:
            return _err(f"every module of {args.suite!r} was refused at import ({len(refused)}); nothing to run")
        ray_address = args.ray
        run_options = RunOptions(limits=limits, runs_dir=args.runs_dir, arch=args.arch, timing_budget=timing_budget(args),
                                 profile=not args.no_profile, learn=not args.no_learn)
        saved_gpus = None
    if not ray_address:
        again = f"cuda-llm batch --resume {state.batch_id}" if args.resume else "cuda-llm batch"
        bad = saved_gpus_problem(saved_gpus, args.gpus, "this batch", again)
        if bad:
            return _err(bad)
    run_options.gpus = chosen_gpus(saved_gpus, args.gpus)
    if args.resume and not ray_address and run_options.gpus != saved_gpus:
        print(f"cuda-llm batch: measuring on GPUs {gpus_text(run_options.gpus)} (--gpus) from now on, not "
              f"{gpus_text(saved_gpus)} as the batch was started", file=sys.stderr)
    checked = None if model_factory_override is not None else settings     # a scripted model has no endpoint
    if make_pool_override is None and not preflight_ok("batch", checked, runs_dir=args.runs_dir,
                                                       arch=run_options.arch, profile=run_options.profile and not ray_address,
                                                       gpu=not ray_address):
        return 2
    try:
        pool = _make_pool(ray_address=ray_address, gpus=run_options.gpus, options=run_options.eval_options(),
                          profile=run_options.profile)
    except ValueError as exc:
        return _err(str(exc))
    try:
        if not args.resume:
            parallel = args.parallel or pool.parallelism
            root, state = create_batch(args.suite, args.runs_dir, run_options.limits, time_budget_s=args.time_budget,
                                       token_budget=args.token_budget, parallel=parallel, gpus=pool.labels, tasks=tasks,
                                       llm=settings.redacted() if settings is not None else {},
                                       run_options=run_options.model_dump(mode="json", exclude={"limits", "runs_dir"}),
                                       ray_address=ray_address, refused=refused)
            print(f"batch {state.batch_id}: {len(tasks)} tasks ({len(refused)} refused at import), {parallel} at a time on "
                  f"{len(pool.labels)} GPU(s); {root}", file=sys.stderr)
        else:
            if state.gpus and list(pool.labels) != state.gpus and state.gpus not in state.gpus_before:
                state.gpus_before.append(list(state.gpus))   # the header names every GPU set the batch measured on
            state.gpus = list(pool.labels)      # a new --gpus: the batch saves it, and in its runs, as it starts
            if args.parallel:
                state.parallel = args.parallel
        if args.max_rounds is not None:
            run_options.limits = run_options.limits.model_copy(
                update={"max_rounds": min(run_options.limits.max_rounds, args.max_rounds)})
        batch = Batch(root, state, pool=pool, run_options=run_options, settings=settings, max_rounds=args.max_rounds,
                      more_rounds=args.more_rounds, model_factory=model_factory_override, on_event=_progress(args.quiet))
        out = _drive(batch)
    except BatchBusyError as exc:
        return _err(str(exc))
    finally:
        pool.close()
    rows = _show(root, args.runs_dir)
    if out.interrupted:
        print(f"interrupted; continue with `cuda-llm batch --resume {out.batch_id}`", file=sys.stderr)
        return 130
    if not out.finished or any(r.status not in ("finished", "not run", "refused") for r in rows):
        print(f"not every task finished; continue with `cuda-llm batch --resume {out.batch_id}`", file=sys.stderr)
        return 3
    return 0


def _drive(batch: Any) -> Any:
    """Run the batch; SIGINT/SIGTERM stop every run at its next step boundary (resumable)."""
    old: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        if batch.stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        batch.stop.set()
        print(f"\n{signal.Signals(signum).name}: stopping every run after its current step; continue later with "
              f"`cuda-llm batch --resume {batch.state.batch_id}`", file=sys.stderr, flush=True)

    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, handler)
    try:
        return batch.run()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
