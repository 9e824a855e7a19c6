"""The built-in tool stages, in order: evaluate, tune, profile. Apart from stages.py so that the stage
interface does not import the stages built on it (tune_stage imports stages).
"""

from __future__ import annotations


from cuda_llm.graph.stages import EvaluateStage, ProfileStage, ToolStage


def default_stages() -> list[ToolStage]:
    """A fresh list of the built-in stages, in order (insert your own where it belongs)."""
    # local: `cuda-llm --help` loads this module; the tuning stage pulls the compiler and tuner
    from cuda_llm.graph.tune_stage import TuneStage

    return [EvaluateStage(), TuneStage(), ProfileStage()]
