"""`cuda-llm stages`: the tool stages a run can use: the built-in ones and those installed packages declare."""

from __future__ import annotations

import argparse

from cuda_llm.commands import one_line_errors
from cuda_llm.graph.stage_list import default_stages
from cuda_llm.graph.stage_plugins import ENTRY_POINT_GROUP, StageError, installed_stages, load_plugin, plugin_origin

HELP = "list the tool stages: the built-in ones and the plugins installed packages declare"
DESCRIPTION = """List the tool stages, the nodes between the coders and selection: the built-in ones in order
(evaluate, tune, profile), then every stage an installed package declares in the `cuda_llm.stages`
entry-point group, with where it comes from and whether it imports.

Add one to a run with `cuda-llm optimize TASK --stage NAME[:POSITION]` (POSITION: the stage it follows, or an
index in the list; default last). The run keeps its stages: `cuda-llm resume` rebuilds them, and refuses
when one can no longer be imported. Writing one: docs/graph.md and examples/stage_plugin/.
Exit code 1 when an installed stage cannot be imported."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("--no-import", action="store_true", help="list the declarations only, without importing them")


def run(args: argparse.Namespace) -> int:
    print("built-in, in order: " + " -> ".join(s.name for s in default_stages()))
    found = installed_stages()
    if not found:
        print(f"no plugin stages installed (a package declares one in the {ENTRY_POINT_GROUP!r} entry-point group: "
              "examples/stage_plugin/)")
        return 0
    print(f"installed ({ENTRY_POINT_GROUP!r} entry points):")
    broken = 0
    width = max(len(n) for n in found)
    for name, ep in sorted(found.items()):
        state = ""
        if not args.no_import:
            try:
                load_plugin(name)
                state = "  ok"
            except StageError as exc:
                broken += 1
                state = f"\n  {'':<{width}}  {exc}"
        print(f"  {name:<{width}}  {plugin_origin(ep)}{state}")
    return 1 if broken else 0
