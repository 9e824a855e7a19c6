"""cuda-llm: LLM agents that write fast, verified CUDA kernels (the FSR loop of arXiv 2506.09092)."""

__version__ = "0.1.0"
