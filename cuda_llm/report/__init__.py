"""Presentation: number and table formats, the Markdown report, the run summary, the trace timeline and
console progress. Reads what runs/ stored; decides nothing about the search.
"""
