"""A/B of a row's JSON work in one thread: each line of a bench file parsed and written again by the
trajcomp tree given (formats/jsonl.py parse_line and dumps), CPU a row, median of 5.
Usage: python scripts/bench_json_ab.py TREE [FILE]   (FILE: a JSON Lines file, default bench's 200 rows)
"""
import statistics
import sys
import time
tree = sys.argv[1]; sys.path.insert(0, tree)
from trajcomp.formats.jsonl import parse_line, dumps
from pathlib import Path
DEFAULT = Path(__file__).resolve().parent.parent / ".cache" / "bench" / "data" / "rows_200_seed1.jsonl"
data = open(sys.argv[2] if len(sys.argv) > 2 else DEFAULT, "rb").readlines()
res = []
for _ in range(5):
    t = time.thread_time()
    for i, d in enumerate(data):
        dumps(parse_line("f", i, d).row)
    res.append((time.thread_time() - t) / len(data) * 1e3)
print(tree, "parse+write %.3f ms a row (median of 5; %s)" % (statistics.median(res), ", ".join("%.3f" % r for r in res)))
