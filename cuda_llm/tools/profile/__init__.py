"""Profiling: Nsight Compute run and parsed, the profile's typed results, the roofline and the rule-based
diagnosis. ncu.py runs the GPU worker under Nsight Compute through harness/runner.py; the rest is pure.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.cache_store, cuda_llm.tasks, cuda_llm.tools.device, cuda_llm.tools.compiler, cuda_llm.tools.bounds, cuda_llm.tools.harness.
"""
