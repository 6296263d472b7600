"""Reports: one typed schema of a run (`schema`), built from an aggregate (`build`), read back (`reading`),
compared (`comparison`), and shown as text (`text`) or as an HTML page (`page`, `figures`, `svg`, `markup`).

Imports only `core` (the metrics a report aggregates) and `formats` (atomic writes).
"""
