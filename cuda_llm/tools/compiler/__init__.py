"""Building a candidate: nvcc compile, the static source checks, the linked symbols, ptxas resources, the
SASS units, vendor library flags, the nvcc log condensed, and the process-group runner every child uses.
Nothing here runs candidate code: it compiles and reads files.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.cache_store, cuda_llm.tasks, cuda_llm.tools.device.
"""
