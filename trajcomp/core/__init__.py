"""The row core: the only place rows change. Config, counting (tokens, chat-template costs), planning,
assembly of the summary turn, identifiers and metrics, and the summarizer interface it calls.

Imports nothing else from trajcomp: engines, formats, summarizers and reports import it.
"""
