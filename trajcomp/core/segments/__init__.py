"""`--segments`: a row replayed as the live compactor lives it, one output row per view.

- `segments.py`: the replay: where each view is cut, what it carries, its summary.
- `segment_rows.py`: those rows' marks (trained or context), lineage and figures.
"""
