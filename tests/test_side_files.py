"""Side files (report, rejects, cache) cannot clobber each other or escape the output folder; a file
whose every row is rejected fails the run."""

from __future__ import annotations

import json

from conftest import read_jsonl, run_cli
from test_cli import BUDGET, assert_ok, hermes_rows, write_lines


def test_outputs_differing_only_by_type_keep_their_own_side_files(tmp_path, bpe_tokenizer):
    src = write_lines(tmp_path / "in.jsonl", hermes_rows(6, seed=3) + ["{not json"])
    args = ("--tokenizer", str(bpe_tokenizer), *BUDGET, "-q")
    assert_ok(run_cli("compress", str(src), "-o", str(tmp_path / "o1.parquet"), *args))
    assert_ok(run_cli("compress", str(src), "-o", str(tmp_path / "o1.jsonl.gz"), *args))
    assert_ok(run_cli("compress", str(src), "-o", str(tmp_path / "o1.parquet"), *args))  # again: same names as its first run

    first, second = tmp_path / "o1_metrics.json", tmp_path / "o1.jsonl.gz_metrics.json"
    assert json.loads(first.read_text())["processing"]["outputs"] == [str(tmp_path / "o1.parquet")]
    assert json.loads(second.read_text())["processing"]["outputs"] == [str(tmp_path / "o1.jsonl.gz")]
    assert len(read_jsonl(tmp_path / "o1_rejects.jsonl")) == len(read_jsonl(tmp_path / "o1.jsonl.gz_rejects.jsonl")) == 1
    assert not (tmp_path / "o1.parquet_metrics.json").exists()


def test_metrics_output_file_must_stay_in_the_output_folder(tmp_path, bpe_tokenizer):
    (tmp_path / "data").mkdir()
    write_lines(tmp_path / "data" / "a.jsonl", hermes_rows(2, seed=1))
    for bad in ("../escaped.json", str(tmp_path / "elsewhere.json")):
        config = tmp_path / "c.yaml"
        config.write_text(f"metrics:\n  output_file: {json.dumps(bad)}\n")
        res = run_cli("compress", str(tmp_path / "data"), "-o", str(tmp_path / "out"), "-c", str(config),
                      "--tokenizer", str(bpe_tokenizer), "-q")
        assert res.code == 2 and res.stderr.count("\n") == 1, res.stderr
        assert "metrics.output_file must name a file inside the output folder" in res.stderr
        assert not (tmp_path / "out").exists() and not (tmp_path / "escaped.json").exists()


def test_a_file_whose_every_row_is_rejected_fails_even_quietly(tmp_path, bpe_tokenizer):
    (tmp_path / "data").mkdir()
    write_lines(tmp_path / "data" / "good.jsonl", hermes_rows(3, seed=2))
    write_lines(tmp_path / "data" / "notes.jsonl", ["these are notes", "not rows at all"])
    res = run_cli("compress", str(tmp_path / "data"), "-o", str(tmp_path / "out"), "--tokenizer", str(bpe_tokenizer),
                  *BUDGET, "-q")
    assert res.code == 1 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "every row of" in lines[0] and "notes.jsonl" in lines[0] and "good.jsonl" not in lines[0]
    report = json.loads((tmp_path / "out" / "compression_metrics.json").read_text())
    assert report["processing"]["files_all_rejected"] == [str(tmp_path / "data" / "notes.jsonl")]
    assert len(read_jsonl(tmp_path / "out" / "rejects.jsonl")) == 2
    assert len(read_jsonl(tmp_path / "out" / "good.jsonl")) == 3, "the other file's rows are written"


def test_layout_names_every_side_file_after_the_output_when_a_sibling_type_exists(tmp_path):
    from trajcomp.core.config import CompressionConfig
    from trajcomp.engines.flow.paths import resolve

    src = write_lines(tmp_path / "in.jsonl", hermes_rows(1, seed=1))
    alone = resolve([str(src)], tmp_path / "o1.jsonl.gz", CompressionConfig())
    assert [p.name for p in (alone.report, alone.rejects, alone.cache)] == \
        ["o1_metrics.json", "o1_rejects.jsonl", "o1_summary_cache"]
    (tmp_path / "o1.parquet").write_bytes(b"")  # another output of the same stem, another type
    beside = resolve([str(src)], tmp_path / "o1.jsonl.gz", CompressionConfig())
    assert [p.name for p in (beside.report, beside.rejects, beside.cache, beside.work)] == \
        ["o1.jsonl.gz_metrics.json", "o1.jsonl.gz_rejects.jsonl", "o1.jsonl.gz_summary_cache",
         ".o1.jsonl.gz.trajcomp-work"]
