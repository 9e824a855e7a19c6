"""Tools know no LLM and no graph: compile, check, run on the GPU, time, profile. Usable alone.

One wing per concern, each with its own rule in its __init__: device/ (what the driver says), compiler/ (nvcc,
static checks, symbols, SASS), bounds/ (speed of light), harness/ (the judge: the only folder whose code
runs candidate code, in its worker, and the only one that times), profile/ (Nsight Compute, roofline,
diagnosis), tune/ (the tuner). Nothing lives at this folder's root.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.cache_store, cuda_llm.tasks.
"""
