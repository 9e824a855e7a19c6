"""Assembling the StateGraph:

    START -> setup -> plan -> code (N in parallel, via Send) -> <tool stages, in order> -> select
          -> critique -> plan | repair -> code ... | finalize -> END

The tool stages default to evaluate -> profile (see stages.py); any ToolStage list may be given.
"""

from __future__ import annotations

from typing import Any, Sequence

from langgraph.graph import END, START, StateGraph

from cuda_llm.graph import nodes
from cuda_llm.graph.deps import Deps
from cuda_llm.graph.stages import ToolStage
from cuda_llm.graph.stage_list import default_stages
from cuda_llm.graph.state import GraphState

RESERVED = {"setup", "plan", "code", "select", "critique", "repair", "finalize"}


def check_stages(stages: Sequence[ToolStage]) -> list[ToolStage]:
    """Stage names must be unique, non-empty and not those of the built-in nodes."""
    seen: set[str] = set()
    for s in stages:
        name = getattr(s, "name", None)
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"tool stage {s!r}: give it a `name` that is an identifier, e.g. name = 'sanitize'")
        if not callable(getattr(s, "run", None)):
            raise ValueError(f"tool stage {name!r}: it needs a run(ctx) -> dict method")
        if name in RESERVED or name in seen:
            raise ValueError(f"tool stage name {name!r} is taken; built-in nodes are {sorted(RESERVED)}")
        seen.add(name)
    if not stages:
        raise ValueError("the tool stage list is empty: keep at least EvaluateStage (see default_stages())")
    return list(stages)


def build_graph(deps: Deps, stages: Sequence[ToolStage] | None = None) -> StateGraph:
    stages = check_stages(stages if stages is not None else default_stages())
    deps.stages = stages
    g = StateGraph(GraphState)
    g.add_node("setup", nodes.make_setup(deps))
    g.add_node("plan", nodes.make_plan(deps))
    g.add_node("code", nodes.make_code(deps))
    for s in stages:
        g.add_node(s.name, nodes.make_stage(deps, s))
    g.add_node("select", nodes.make_select(deps))
    g.add_node("critique", nodes.make_critique(deps))
    g.add_node("repair", nodes.make_repair(deps))
    g.add_node("finalize", nodes.make_finalize(deps))

    g.add_edge(START, "setup")
    g.add_conditional_edges("setup", nodes.route_after_setup, ["plan", "finalize"])
    g.add_conditional_edges("plan", nodes.route_jobs, ["code"])
    g.add_edge("code", stages[0].name)
    for a, b in zip(stages, stages[1:]):
        g.add_edge(a.name, b.name)
    g.add_edge(stages[-1].name, "select")
    g.add_edge("select", "critique")
    g.add_conditional_edges("critique", nodes.route_after_critique, ["plan", "repair", "finalize"])
    g.add_conditional_edges("repair", nodes.route_jobs, ["code"])
    g.add_edge("finalize", END)
    return g


def compile_graph(deps: Deps, checkpointer: Any, stages: Sequence[ToolStage] | None = None) -> Any:
    return build_graph(deps, stages).compile(checkpointer=checkpointer)
