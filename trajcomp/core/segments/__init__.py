"""`--segments`: a row replayed as the live compactor lives it, one output row per view.

- `segments.py`: the replay: where each view is cut, what it carries, its summary.
- `walk.py`: the replay's data: the rows in the making, the input row's facts and stubs.
- `segment_rows.py`: those rows' marks (trained or context), lineage and figures.
"""
