"""Parts as the unit of work (`--workers N` on a plain JSON Lines file): the workers read, compress and
write whole parts, the main process parses no row, and the parts, selection and bytes are the row
path's."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from trajcomp.formats.jsonl import JSONL, part_ranges, read_range

# ---- the parts' byte ranges: the same records as one read of the file, `rows` to a part ------------

LINES = st.one_of(
    st.builds(lambda i: json.dumps({"id": i, "text": "é" * (i % 3)}), st.integers(0, 99)),
    st.sampled_from(["", "   ", "\t\r", "not json {", "[1, 2]", '"text"', '{"id": "\\ud800"}']),
)


def seen(record) -> tuple:
    error = record.error and (record.error.reason, record.error.detail)
    return record.source, record.line, record.raw, record.row, error


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(LINES, max_size=30), rows=st.integers(1, 6), crlf=st.booleans(), last_newline=st.booleans())
def test_part_ranges_cut_the_records_every_rows_as_one_read_does(tmp_path_factory, lines, rows, crlf, last_newline):
    path = tmp_path_factory.mktemp("ranges") / "in.jsonl"
    end = "\r\n" if crlf else "\n"
    path.write_bytes((end.join(lines) + (end if last_newline and lines else "")).encode("utf-8"))
    whole = [seen(r) for r in JSONL.read(path)]
    ranges = list(part_ranges(path, rows))
    parts = [[seen(r) for r in read_range(path, *span)] for span in ranges]
    assert [r for part in parts for r in part] == whole  # the same lines, numbers, rows and errors
    assert [len(part) for part in parts] == [min(rows, len(whole) - k) for k in range(0, len(whole), rows)]
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # no byte read twice, none left out
