"""What the tool stages, the evidence and the critic all read: a candidate's stored profile record and the
catalogue features a task may use. Their own module so that stages, evidence and review import it
without importing each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_llm.graph.deps import Deps
from cuda_llm.feature_db.bandit import applicable, task_filters
from cuda_llm.runs.rundir import read_json


def applicable_feature_ids(deps: Deps) -> set[str] | None:
    """The catalogue features this task may use on this arch (its family, bound, tolerance, dtypes): the
    only ones the diagnosis may suggest."""
    if not deps.catalogue:
        return None
    try:
        return {f.id for f in applicable(deps.catalogue, arch=deps.arch, **task_filters(deps.task))}
    except Exception:  # noqa: BLE001 - without the filter the diagnosis still speaks
        return None


def load_profile(rundir: Any, cid: str) -> dict[str, Any] | None:
    return read_json(Path(rundir.root) / "profiles" / f"{cid}.json")
