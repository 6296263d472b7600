"""Reports: one typed schema of a run (`schema`) and its views, text (`text`) and HTML (`page`).

Imports only `core` (the metrics a report aggregates) and `formats.base` (atomic writes).
"""
