"""`trajcomp show`: the rows of an output, explained.

- `runs.py`: the run's report found (beside the output, or a folder run's above it); a folder's outputs.
- `rows.py`: rows picked and read.
- `pairing.py`: output rows paired with input rows by content.
- `row_view.py`: a row's turns counted, its summary turn, the replaced turns, why it is over the limit.
- `row_text.py`: the terminal's text; `rows_page.py`: the rows' page.
"""
