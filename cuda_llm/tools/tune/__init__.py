"""Tuning without a model: tunable constants declared in a kernel, the sampler that searches them, and its
replay over an exhaustive table. It measures through the evaluation function it is given.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.cache_store, cuda_llm.tasks, cuda_llm.tools.compiler, cuda_llm.tools.harness.
"""
