"""The one summary turn: bought, checked against the row's length, and put in place.

- `summarizer.py`: the summarizer interface and its lookup by name (the `trajcomp.summarizers` entry points).
- `sourcing.py`: the summarizer and its fallback, for one row.
- `passes.py`: summarize, measure, ask again while the row is over its target.
- `assembly.py`: the summary turn and the new turns around it.
- `identifiers.py`, `identifier_kinds.py`: the identifier index (paths, symbols, ids, errors) that ends a summary.
- `redact.py`: secrets removed from what a summary quotes.
"""
