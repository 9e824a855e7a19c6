"""`cuda-llm features`: the feature catalogue beside what runs have learned about each feature."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict
from pathlib import Path

from cuda_llm.commands import one_line_errors
from cuda_llm.commands.confirm import confirm
from cuda_llm.report.formats import render_table
from cuda_llm.runs.rundir import RunNotFoundError

HELP = "show the optimization feature catalogue with the statistics learned by runs"
DESCRIPTION = """Show every GPU optimization feature the planner can ask for, and what past runs measured.

Without --category: one row per feature with the statistics of all task families on the architecture
(tries, compiled, passed, geometric-mean speedup over the parent candidate).
With --category FAMILY: the features that apply to that task family, ranked as the planner would see
them (bandit score and the reason for it; --seed changes the Thompson draw). --task NAME does the same
for one task, also leaving out what its tolerance forbids (reduced precision on a 1e-4 task).
--show ID prints one feature in full (how to apply it, exemplar, detector, statistics).
--run RUN_ID shows which features a run's best kernel was credited with, step by step from the baseline,
and what today's detectors find in it.
--recredit [RUNS_DIR] detects the features of every candidate the statistics were learned from again
(sources and builds kept in the run directories, default ./runs) and rebuilds the statistics: run it
after the detectors changed, so credit follows them.

Statistics live in <cache dir>/feature_stats.sqlite ($CUDA_LLM_FEATURE_DB or --db overrides)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("--arch", help="GPU architecture, e.g. sm_90 (default: $CUDA_LLM_ARCH, the local GPU, else sm_90)")
    p.add_argument("--category", help="task family (e.g. reduction, matmul): rank the features for it")
    p.add_argument("--bound", choices=["memory", "compute"], help="with --category: only features for this bound")
    p.add_argument("--task", help="rank for one task: its family, bound and tolerance (a suite name or a task folder)")
    p.add_argument("--tasks-dir", type=Path, action="append", default=[],
                   help="extra folder of tasks, for --task (as `cuda-llm tasks --tasks-dir`)")
    p.add_argument("--db", type=Path, help="statistics file (default: $CUDA_LLM_FEATURE_DB or the cache directory)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bandit's draw (with --category)")
    p.add_argument("--show", metavar="ID", help="print one feature in full")
    p.add_argument("--run", metavar="RUN_ID", help="the features a run's best kernel was credited with")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept (default ./runs)")
    p.add_argument("--recredit", nargs="?", const=Path("runs"), type=Path, metavar="RUNS_DIR",
                   help="detect the stored candidates again and rebuild the statistics (runs in RUNS_DIR, default ./runs)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--reset", action="store_true", help="delete the learned statistics (asks first; --yes to skip)")
    p.add_argument("--yes", action="store_true", help="with --reset: do not ask")


def _default_arch() -> str:
    try:
        # the compiler: imported on use, off the `--help` start-up
        from cuda_llm.tools.compiler.compile import resolve_arch
    except ImportError:
        return os.environ.get("CUDA_LLM_ARCH") or "sm_90"
    return resolve_arch(None)


def _speedup(st) -> float | None:
    return round(math.exp(st.mean_log_speedup), 3) if st.n_speedups else None


def _reset(path: Path, yes: bool) -> int:
    """Delete the statistics file (and SQLite's side files) after confirmation."""
    # the feature statistics (NumPy): imported on use, off the `--help` start-up
    from cuda_llm.feature_db import StatsStore, StatsStoreError

    if not path.exists():
        print(f"no statistics at {path}: nothing to reset")
        return 0
    try:
        n = StatsStore(path).n_events()
    except StatsStoreError:
        n = "an unreadable number of"
    if not confirm(f"Delete the feature statistics learned from {n} measured candidates ({path})?", yes=yes,
                   command="features --reset"):
        return 1
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        p.unlink(missing_ok=True)
    print(f"deleted {path}; runs start learning again from nothing")
    return 0


def _show_run(args: argparse.Namespace) -> int:
    """What a run's best kernel was credited with, along its lineage."""
    # re-crediting (NumPy): imported on use, off the `--help` start-up
    from cuda_llm.feature_db.recredit import best_credit

    try:
        bc = best_credit(args.runs_dir, args.run)
    except RunNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**asdict(bc), "credited": bc.credited}, indent=2))
        return 0
    if bc.best is None or bc.best == "baseline":
        print(f"run {bc.run_id}: no candidate beat the baseline; nothing was credited to a best kernel")
        return 0
    ms = f" ({bc.best_ms:.4g} ms)" if bc.best_ms else ""
    print(f"run {bc.run_id}: best kernel {bc.best}{ms}, credited with {', '.join(bc.credited) or 'nothing'}")
    for s in bc.lineage:
        closed = f"closed {s.headroom_closed:.2f} of the headroom" if s.headroom_closed is not None else "not timed"
        print(f"  {s.candidate} (parent {s.parent}): {', '.join(s.credited) or '-'}; {closed}")
    print(f"detected in it by today's detectors: {', '.join(bc.detected_now) or 'nothing'}")
    return 0


def _recredit(path: Path, runs_dir: Path, as_json: bool) -> int:
    """Detect every stored candidate again and rebuild the statistics file."""
    # the statistics and re-crediting (NumPy): imported on use, off the `--help` start-up
    from cuda_llm.feature_db import StatsStore, StatsStoreError
    from cuda_llm.feature_db.recredit import recredit

    if not path.exists():
        print(f"no statistics at {path}: nothing to re-credit")
        return 0
    try:
        report = recredit(StatsStore(path), runs_dir)
    except StatsStoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(asdict(report), indent=2) if as_json else f"re-credited {path} from {runs_dir}: {report.summary()}")
    return 0


def run(args: argparse.Namespace) -> int:
    # the feature catalogue and statistics (NumPy): imported on use, off the `--help` start-up
    from cuda_llm.feature_db import (
        StatsStore, StatsStoreError, default_path, get_feature, load_catalogue, normalize_arch, rank_features, supports,
    )
    from cuda_llm.feature_db.model import KNOWN_FAMILIES
    from cuda_llm.feature_db.stats import FeatureStats, pooled

    try:
        arch = normalize_arch(args.arch or _default_arch())
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tolerance, float_inputs = None, None
    if args.task:
        # the tasks (NumPy): imported on use
        from cuda_llm.commands.task_kernel import ArgumentProblem, load_task_argument
        from cuda_llm.feature_db import task_float_inputs, task_tolerance

        try:
            task = load_task_argument(args.task, args.tasks_dir).task
        except ArgumentProblem as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        args.category = args.category or task.family
        args.bound = args.bound or task.bound
        tolerance, float_inputs = task_tolerance(task), task_float_inputs(task)
    if args.category is not None and args.category not in KNOWN_FAMILIES:
        print(f"error: unknown task family {args.category!r}; known: {', '.join(sorted(KNOWN_FAMILIES))}", file=sys.stderr)
        return 2

    path = args.db if args.db is not None else default_path()
    if args.db is not None and not args.db.exists():
        print(f"error: no statistics file at {args.db}; runs create it when they record results, "
              f"or leave out --db to use {default_path()}", file=sys.stderr)
        return 2
    if args.reset:
        return _reset(path, args.yes)
    if args.run:
        return _show_run(args)
    if args.recredit is not None:
        return _recredit(path, args.recredit, args.json)
    n_events = 0
    try:
        if path.exists():
            store = StatsStore(path)
            rows, n_events = store.all(), store.n_events()
        else:
            rows = []
    except StatsStoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    catalogue = load_catalogue()

    if args.show:
        try:
            f = get_feature(args.show)
        except KeyError as exc:
            print(f"error: {exc.args[0]}", file=sys.stderr)
            return 2
        mine = [r for r in rows if r.feature == f.id]
        if args.json:
            print(json.dumps({"feature": f.model_dump(mode="json"), "stats": [r.model_dump() for r in mine]}, indent=2))
            return 0
        print(f"{f.id}: {f.name}  [{f.category}, {f.min_arch}+, supported on {arch}: {'yes' if supports(f, arch) else 'no'}]")
        print(f"bottleneck: {f.bottleneck}")
        print(f"applies to: {', '.join(f.applies_to)}; bounds: {', '.join(f.bounds)}"
              + (f"; needs tolerance >= {f.min_tolerance:g}" if f.min_tolerance else ""))
        print(f"\nhow:\n{f.how}\n\nexemplar:\n{f.exemplar.strip()}\n")
        if mine:
            print(render_table(["category", "arch", "tries", "compiled", "passed", "speedup"],
                               [[r.category, r.arch, r.tries, r.compiled, r.passed, _speedup(r)] for r in mine]))
        else:
            print("no statistics yet")
        return 0

    if args.category:
        ranked = rank_features(catalogue, rows, arch=arch, category=args.category, bound=args.bound,
                               tolerance=tolerance, float_inputs=float_inputs, seed=args.seed)
        if args.json:
            print(json.dumps([{"id": r.feature.id, "kind": r.feature.category, "score": r.score,
                               "expected_value": r.expected_value, "reason": r.reason,
                               "stats": r.stats.model_dump()} for r in ranked], indent=2))
            return 0
        table = [[i + 1, r.feature.id, r.feature.category, r.feature.min_arch, round(r.score, 3), r.stats.tries,
                  r.stats.compiled, r.stats.passed, _speedup(r.stats), r.reason] for i, r in enumerate(ranked)]
        print(f"features for {args.task or args.category} on {arch}" + (f" ({args.bound}-bound)" if args.bound else "")
              + (f", tolerance {tolerance:g}" if tolerance is not None else "")
              + f", ranked by the bandit (seed {args.seed}); statistics: {path}")
        print(render_table(["rank", "feature", "kind", "min arch", "score", "tries", "compiled", "passed", "speedup",
                            "reason"], table, align="rllrrrrrrl"))
        return 0

    on_arch = [r for r in rows if r.arch == arch]
    out = []
    for f in catalogue:
        mine = [r for r in on_arch if r.feature == f.id]
        st = pooled(mine, f.id, "*", arch) if mine else FeatureStats(feature=f.id, category="*", arch=arch)
        per_cat = ", ".join(f"{r.category} {_speedup(r) or '-'}x/{r.tries}" if r.n_speedups else f"{r.category} -/{r.tries}"
                            for r in sorted(mine, key=lambda r: -r.tries))
        out.append((f, st, per_cat))
    if args.json:
        print(json.dumps([{"id": f.id, "name": f.name, "kind": f.category, "min_arch": f.min_arch,
                           "supported": supports(f, arch), "stats": st.model_dump(),
                           "by_category": [r.model_dump() for r in on_arch if r.feature == f.id]}
                          for f, st, _ in out], indent=2))
        return 0
    table = [[f.id, f.category, f.min_arch, "yes" if supports(f, arch) else "no", st.tries, st.compiled, st.passed,
              _speedup(st), per_cat or "-"] for f, st, per_cat in out]
    n_learned = sum(1 for _, st, _ in out if st.tries)
    print(f"{len(catalogue)} features on {arch}; {n_learned} with statistics from {n_events} recorded candidates ({path}"
          + ("" if path.exists() else ", not created yet") + ")")
    print(render_table(["feature", "kind", "min arch", "on " + arch, "tries", "compiled", "passed", "speedup",
                        "by category (speedup/tries)"], table, align="lllrrrrrl"))
    return 0
