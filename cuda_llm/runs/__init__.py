"""Run persistence: the run directory, the trace, checkpoint serialization, run state and the LLM cache.

Everything a run leaves on disk and everything that reads it back; no graph logic and no presentation.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths.
"""
