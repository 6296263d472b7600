"""The row core: the only place rows change. Config, row dialects (ShareGPT, OpenAI messages) and their
validity rule, counting (tokens, chat-template costs), planning, the summary passes and the summary
turn's assembly, identifiers, redaction, metrics, and the summarizer interface it calls.

Imports nothing else from trajcomp: engines, formats, summarizers and reports import it.
"""
