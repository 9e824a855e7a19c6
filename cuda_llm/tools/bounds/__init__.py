"""Bounds no correct kernel can beat: the speed of light and which compute peak applies. Pure.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.tasks.
"""
