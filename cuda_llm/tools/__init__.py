"""Tools know no LLM and no graph: compile, check, run on the GPU, time, profile. Usable alone."""
