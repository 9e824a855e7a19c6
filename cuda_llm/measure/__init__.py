"""The measurement service: the Evaluator protocol (the graph's one seam to the GPU) and what serves it:
the GPU evaluator over the tools, the pool of GPUs, a process per GPU, Ray actors, the slot server both
run, and the pool's throughput. The graph measures only through this package; tools/ never imports it.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.halts, cuda_llm.cache_store, cuda_llm.tasks, cuda_llm.runs, cuda_llm.tools.
"""
