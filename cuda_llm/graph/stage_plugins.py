"""Tool stages as plugins: a package declares a stage in the ``cuda_llm.stages`` entry-point group,
``optimize --stage NAME[:POSITION]`` puts it in the list, and a resumed run gets back the stages it was
started with (or refuses, when one cannot be imported). Apart from stages.py, whose interface the stages
implement, so that the default list (stage_list.py) and the plugins sit above both."""

from __future__ import annotations

import importlib.metadata
from typing import Sequence

from cuda_llm.graph.stage_list import default_stages
from cuda_llm.graph.stages import ToolStage
from cuda_llm.graph.state import short

ENTRY_POINT_GROUP = "cuda_llm.stages"


class StageError(ValueError):
    """A plugin stage that cannot be named, found, imported or placed (one line, what to do)."""


def parse_stage_spec(text: str) -> tuple[str, str | None]:
    """'NAME' or 'NAME:POSITION' -> (name, position): POSITION is an index in the stage list (0 is first) or the
    name of the stage it follows; none puts the stage last, just before selection."""
    name, _, position = str(text).strip().partition(":")
    if not name.isidentifier():
        raise StageError(f"{text!r}: write a stage as NAME or NAME:POSITION (e.g. register_budget:evaluate)")
    if _ and not position:
        raise StageError(f"{text!r}: after ':' give the stage it follows or an index (e.g. {name}:evaluate)")
    return name, position or None


def installed_stages() -> dict[str, importlib.metadata.EntryPoint]:
    """The stages installed packages declare, by name (entry points are read, nothing is imported)."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def plugin_origin(ep: importlib.metadata.EntryPoint) -> str:
    """'module:object from distribution version', for messages and `cuda-llm stages`."""
    dist = getattr(ep, "dist", None)
    return f"{ep.value} from {dist.name} {dist.version}" if dist is not None else ep.value


def load_plugin(name: str) -> ToolStage:
    """The stage an installed package declares under ``name`` (its class or factory called with no arguments)."""
    ep = installed_stages().get(name)
    if ep is None:
        have = ", ".join(sorted(installed_stages())) or "none"
        raise StageError(f"no tool stage named {name!r} is installed (installed: {have}; `cuda-llm stages` lists "
                         f"them, a package declares one in the {ENTRY_POINT_GROUP!r} entry-point group)")
    try:
        obj = ep.load()
        stage = obj() if isinstance(obj, type) or not hasattr(obj, "run") else obj
    except Exception as exc:  # noqa: BLE001 - any failure of someone else's import is reported the same way
        raise StageError(f"tool stage {name!r} ({plugin_origin(ep)}) cannot be imported: "
                         f"{type(exc).__name__}: {short(str(exc), 200)}") from exc
    if getattr(stage, "name", None) != name or not callable(getattr(stage, "run", None)):
        raise StageError(f"tool stage {name!r} ({plugin_origin(ep)}) must give an object with name = {name!r} and a "
                         f"run(ctx) method; it gave {type(stage).__name__} named {getattr(stage, 'name', None)!r}")
    return stage


def _index(position: str | None, stages: Sequence[ToolStage], name: str) -> int:
    names = [s.name for s in stages]
    if position is None:
        return len(stages)
    if position.lstrip("-").isdigit():
        i = int(position)
        if not 0 <= i <= len(stages):
            raise StageError(f"stage {name!r}: position {i} is outside the stage list 0..{len(stages)} "
                             f"({', '.join(names)})")
        return i
    if position not in names:
        raise StageError(f"stage {name!r}: no stage {position!r} to follow; the stages are {', '.join(names)}")
    return names.index(position) + 1


def with_plugins(specs: Sequence[str], base: Sequence[ToolStage] | None = None) -> list[ToolStage]:
    """``base`` (the built-in stages by default) with each plugin stage of ``specs`` ('NAME[:POSITION]') put in
    its place, in the order given."""
    stages = list(base) if base is not None else default_stages()
    for text in specs:
        name, position = parse_stage_spec(text)
        if name in {s.name for s in stages}:
            raise StageError(f"stage {name!r} is already in the list ({', '.join(s.name for s in stages)})")
        stage = load_plugin(name)
        stages.insert(_index(position, stages, name), stage)
    return stages


def restore_stages(saved_names: Sequence[str] | None, specs: Sequence[str],
                   given: Sequence[ToolStage] | None = None, run_id: str = "RUN") -> list[ToolStage]:
    """The stages a resumed run goes on with: ``given`` (the Python API's list) or the built-in ones with the
    plugins it was started with; refused when a stage it ran before is missing, so no stage is dropped
    silently."""
    try:
        stages = list(given) if given is not None else with_plugins(specs)
    except StageError as exc:
        raise StageError(f"run {run_id} was started with plugin stage(s) {', '.join(specs)}: {exc}; install it "
                         f"again to resume") from None
    missing = [n for n in saved_names or [] if n not in {s.name for s in stages}]
    if missing:
        raise StageError(f"run {run_id} was started with tool stage(s) {', '.join(missing)}, which are neither "
                         f"installed plugins nor given (resume_run(stages=...)): resuming would drop them")
    return stages
