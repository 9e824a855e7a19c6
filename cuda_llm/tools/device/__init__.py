"""What the CUDA driver says about a device, asked through libcuda with ctypes. Runs no kernel.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths.
"""
