"""Shards, samples, limits and many inputs: which rows a run takes, and where they go."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import read_jsonl, run_cli, write_jsonl
from trajcomp.engines.flow.selection import Selection


def small_row(i: int) -> dict:
    return {"id": i, "conversations": [{"from": "human", "value": f"question {i}"}, {"from": "gpt", "value": f"answer {i}"}]}


def make_tree(root: Path) -> list[str]:
    """Two files at the top and one in a subfolder, plus a hidden file that must be ignored."""
    write_jsonl(root / "a.jsonl", [small_row(i) for i in range(0, 40)])
    write_jsonl(root / "b.jsonl", [small_row(i) for i in range(40, 70)] + ["{broken"])
    (root / "sub").mkdir()
    write_jsonl(root / "sub" / "c.jsonl", [small_row(i) for i in range(70, 100)])
    write_jsonl(root / ".hidden.jsonl", [small_row(999)])
    return ["a.jsonl", "b.jsonl", "sub/c.jsonl"]


def ids(directory: Path, names: list[str]) -> list[int]:
    return [row["id"] for name in names if (directory / name).exists() for row in read_jsonl(directory / name)]


def test_selection_is_a_pure_function_of_file_and_line():
    shards = [Selection(num_shards=3, shard_index=i) for i in range(3)]
    for line in range(1, 500):
        verdicts = [s.verdict("dir/a.jsonl", line) for s in shards]
        assert verdicts.count(None) == 1  # exactly one shard takes each row
    sample = Selection(sample_percent=30, seed=7)
    taken = sum(sample.verdict("a.jsonl", line) is None for line in range(1, 5001))
    assert 1300 < taken < 1700
    assert [sample.verdict("a.jsonl", n) for n in range(1, 100)] == [sample.verdict("a.jsonl", n) for n in range(1, 100)]


def test_k_shards_together_hold_every_row_exactly_once(tmp_path, bpe_tokenizer):
    src = tmp_path / "data"
    src.mkdir()
    names = make_tree(src)
    seen: list[int] = []
    rejected = 0
    for index in range(3):
        out = tmp_path / f"shard{index}"
        result = run_cli("compress", str(src), "-o", str(out), "--tokenizer", str(bpe_tokenizer),
                         "--num-shards", "3", "--shard-index", str(index), "-q")
        assert result.code == 0, result.stderr
        seen += ids(out, names)
        report = json.loads((out / "compression_metrics.json").read_text())
        assert report["rows"]["read"] == 101  # every row of the 3 files is read by every shard
        assert report["rows"]["written"] + report["rows"]["rejected"] + report["rows"]["other_shards"] == 101
        rejected += report["rows"]["rejected"]
        assert not (out / ".hidden.jsonl").exists()
    assert sorted(seen) == list(range(100))
    assert rejected == 1  # the broken line lives in exactly one shard


def test_default_shard_output_names_do_not_collide(tmp_path, bpe_tokenizer):
    src = write_jsonl(tmp_path / "d.jsonl", [small_row(i) for i in range(20)])
    for index in range(2):
        result = run_cli("compress", str(src), "--tokenizer", str(bpe_tokenizer), "--num-shards", "2",
                         "--shard-index", str(index), "-q")
        assert result.code == 0, result.stderr
    outs = sorted(p.name for p in tmp_path.glob("d_compressed.shard-*"))
    assert outs == ["d_compressed.shard-0-of-2.jsonl", "d_compressed.shard-0-of-2_metrics.json",
                    "d_compressed.shard-1-of-2.jsonl", "d_compressed.shard-1-of-2_metrics.json"]
    both = read_jsonl(tmp_path / outs[0]) + read_jsonl(tmp_path / outs[2])
    assert sorted(r["id"] for r in both) == list(range(20))


def test_sample_is_deterministic_and_limit_stops_early(tmp_path, bpe_tokenizer):
    src = write_jsonl(tmp_path / "d.jsonl", [small_row(i) for i in range(200)])

    def run(out: str, *extra: str) -> list[int]:
        result = run_cli("compress", str(src), "-o", str(tmp_path / out), "--tokenizer", str(bpe_tokenizer), "-q", *extra)
        assert result.code == 0, result.stderr
        return [r["id"] for r in read_jsonl(tmp_path / out)]

    first = run("s1.jsonl", "--sample-percent", "25", "--seed", "3")
    again = run("s2.jsonl", "--sample-percent", "25", "--seed", "3")
    other = run("s3.jsonl", "--sample-percent", "25", "--seed", "4")
    assert first == again and first != other
    assert 25 < len(first) < 75 and first == sorted(first)
    report = json.loads((tmp_path / "s1_metrics.json").read_text())
    assert report["rows"]["not_sampled"] + report["rows"]["written"] == 200
    limited = run("l.jsonl", "--limit", "7", "--sample-percent", "25", "--seed", "3")
    assert limited == first[:7]


def test_several_inputs_and_globs_mirror_the_tree(tmp_path, bpe_tokenizer):
    src = tmp_path / "data"
    src.mkdir()
    make_tree(src)
    out = tmp_path / "out"
    result = run_cli("compress", str(src / "a.jsonl"), str(src / "sub"), "-o", str(out),
                     "--tokenizer", str(bpe_tokenizer), "-q")
    assert result.code == 0, result.stderr
    assert (out / "a.jsonl").exists() and (out / "c.jsonl").exists()
    globbed = run_cli("compress", str(src / "**" / "*.jsonl"), "-o", str(tmp_path / "g"), "--tokenizer",
                      str(bpe_tokenizer), "-q", "--output-format", "jsonl.gz")
    assert globbed.code == 0, globbed.stderr
    assert sorted(p.relative_to(tmp_path / "g").as_posix() for p in (tmp_path / "g").rglob("*.jsonl.gz")) == [
        "a.jsonl.gz", "b.jsonl.gz", "sub/c.jsonl.gz"]
    missing_o = run_cli("compress", str(src / "a.jsonl"), str(src / "b.jsonl"), "--tokenizer", str(bpe_tokenizer))
    assert missing_o.code == 2 and "-o" in missing_o.stderr


def test_a_glob_skips_earlier_outputs_and_rejects_like_a_folder_does(tmp_path, bpe_tokenizer):
    src = tmp_path / "data"
    src.mkdir()
    make_tree(src)
    first = run_cli("compress", str(src / "a.jsonl"), "--tokenizer", str(bpe_tokenizer), "-q")
    assert first.code == 0, first.stderr
    (src / "a_rejects.jsonl").write_text((src / "a.jsonl").read_text())  # as a run with rejects leaves
    again = run_cli("compress", str(src / "*.jsonl"), "-o", str(tmp_path / "g"), "--tokenizer", str(bpe_tokenizer),
                    "--json")
    assert again.code == 0, again.stderr
    report = json.loads(again.stdout)
    assert [Path(p).name for p in report["processing"]["inputs"]] == ["a.jsonl", "b.jsonl"]
    assert sorted(Path(p).name for p in report["processing"]["skipped_files"]) == ["a_compressed.jsonl", "a_rejects.jsonl"]


def test_a_glob_without_o_writes_beside_its_root_and_never_where_it_would_read(tmp_path, bpe_tokenizer):
    src = tmp_path / "data"
    src.mkdir()
    make_tree(src)
    tok = ("--tokenizer", str(bpe_tokenizer), "-q")
    plain = run_cli("compress", str(src / "*.jsonl"), *tok)
    assert plain.code == 0, plain.stderr
    assert sorted(p.name for p in (tmp_path / "data_compressed").iterdir()) == [
        "a.jsonl", "b.jsonl", "compression_metrics.json", "rejects.jsonl"]
    inside = run_cli("compress", str(src / "**" / "*.jsonl"), "-o", str(src / "out"), *tok)
    assert inside.code == 2 and "would match the input glob" in inside.stderr
    assert not (src / "out").exists()


def test_outputs_an_earlier_run_left_in_the_output_folder_are_named(tmp_path, bpe_tokenizer):
    """Training on the output folder would take them too: the report and its text say so."""
    src = tmp_path / "data"
    src.mkdir()
    make_tree(src)
    tok = ("--tokenizer", str(bpe_tokenizer))
    assert run_cli("compress", str(src), *tok, "-q").code == 0
    first = json.loads((tmp_path / "data_compressed" / "compression_metrics.json").read_text())
    assert first["processing"]["stray_files_in_output"] == []
    (src / "b.jsonl").unlink()
    again = run_cli("compress", str(src), *tok)
    assert again.code == 0, again.stderr
    report = json.loads((tmp_path / "data_compressed" / "compression_metrics.json").read_text())
    stray = str(tmp_path / "data_compressed" / "b.jsonl")
    assert report["processing"]["stray_files_in_output"] == [stray]
    assert f"not from this run   {stray}" in again.stdout
