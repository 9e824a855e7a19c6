"""`cuda-llm cache`: how much the cache directory holds, per kind, and clearing it."""

from __future__ import annotations

import argparse
import json
import sys

from cuda_llm.commands import one_line_errors
from cuda_llm.paths import cache_dir
from cuda_llm.report.formats import render_table

HELP = "show the cache's size per kind (builds, benchmark data, baselines...), or clear it"
DESCRIPTION = """Show what the cache directory ($CUDA_LLM_CACHE, else the user cache folder) holds, per kind,
against its cap; `cuda-llm cache clear [--kind KIND ...]` removes entries (never one in use).

The cap (default 20 GB) is $CUDA_LLM_CACHE_MAX_GB, else `max_gb` in the [cache] table of cuda-llm.toml;
past it, the entries used longest ago are removed after each evaluation. Kinds: builds (compiled
candidates), benchdata (benchmark-shape inputs and references), baselines (measured baselines), profiles,
evals (scratch folders of evaluations), devices (measured peaks; only removed by clear). The feature
statistics learned across runs are not a cache and are never removed."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("action", nargs="?", choices=["show", "clear"], default="show",
                   help="show (default) or clear")
    p.add_argument("--kind", action="append", default=None, metavar="KIND",
                   help="with clear: only this kind (repeatable); default every kind but the feature statistics")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e7 else f"{n / 1e6:.2f} MB"


def run(args: argparse.Namespace) -> int:
    from cuda_llm import cache_store   # on use: ~3 ms off `--help`

    root = cache_dir()
    try:
        cap = cache_store.max_bytes()
    except cache_store.CacheConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.action == "clear":
        try:
            removed, busy = cache_store.clear(root, args.kind)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        freed = sum(e.bytes for e in removed)
        if args.json:
            print(json.dumps({"removed": len(removed), "freed_bytes": freed, "in_use": [str(e.path) for e in busy]}))
        else:
            print(f"removed {len(removed)} entries ({_gb(freed)}) from {root}")
            if busy:
                print(f"kept {len(busy)} entries in use by a running evaluation")
        return 0
    use = cache_store.usage(root)
    total = sum(b for _, b in use.values())
    if args.json:
        print(json.dumps({"root": str(root), "cap_bytes": cap, "total_bytes": total,
                          "kinds": {k: {"entries": n, "bytes": b} for k, (n, b) in sorted(use.items())}}, indent=1))
        return 0
    rows = [[kind, n, _gb(b)] for kind, (n, b) in sorted(use.items())]
    rows.append(["total", sum(n for n, _ in use.values()), _gb(total)])
    print(f"cache: {root}")
    print(render_table(["kind", "entries", "size"], rows, align="lrr"))
    print(f"cap: {_gb(cap)} ({100 * total / cap:.0f}% used); `cuda-llm cache clear [--kind KIND]` empties it")
    return 0
