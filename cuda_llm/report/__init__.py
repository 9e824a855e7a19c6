"""Presentation: number and table formats, the Markdown report, the run summary, the trace timeline and
console progress. Reads what runs/ stored; decides nothing about the search.

May import: cuda_llm.results, cuda_llm.figures, cuda_llm.paths, cuda_llm.halts, cuda_llm.cache_store, cuda_llm.tasks, cuda_llm.tools, cuda_llm.agents, cuda_llm.runs.
"""
