"""Hugging Face datasets: compress_dataset / map_function give the CLI's rows; the CLI reads and writes save_to_disk folders."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLES, read_jsonl, run_cli, write_jsonl
from openai_server import ServerThread
import processes
from test_resume import args as resume_args
from test_resume import hermes_row, run_held_midway, thaw

DEMO = ROOT / "configs" / "demo.yaml"
EXTRA = ("reason", "detail")


@pytest.fixture(scope="module", autouse=True)
def hf_offline(tmp_path_factory):
    """datasets offline, its cache in a temporary HF_HOME (set before datasets is first imported)."""
    home = tmp_path_factory.mktemp("hf_home")
    env = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(home),
           "HF_DATASETS_CACHE": str(home / "datasets")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import datasets

    datasets.config.HF_DATASETS_CACHE = Path(env["HF_DATASETS_CACHE"])  # in case it was imported already
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def sample_rows() -> list[dict]:
    rows = read_jsonl(SAMPLES / "hermes_coding_runs.jsonl")[:10] + read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:6]
    assert len({json.dumps(sorted(r)) for r in rows}) == 1  # one set of columns, as a Dataset needs
    return rows


def cli_run(tmp: Path, rows: list[dict], *extra: str) -> tuple[list[dict], list[dict]]:
    """The CLI's output rows and rejects for `rows` (as JSON Lines) with the demo config."""
    src = write_jsonl(tmp / "in.jsonl", rows)
    result = run_cli("compress", str(src), "-c", str(DEMO), "-o", str(tmp / "out.jsonl"), "-q", *extra)
    assert result.code == 0, result.stderr
    rejects = tmp / "out_rejects.jsonl"
    return read_jsonl(tmp / "out.jsonl"), read_jsonl(rejects) if rejects.exists() else []


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return sample_rows()


@pytest.fixture(scope="module")
def cli_rows(tmp_path_factory, rows) -> list[dict]:
    out, rejects = cli_run(tmp_path_factory.mktemp("cli"), rows)
    assert not rejects and len(out) == len(rows)
    assert sum(r["compression_metrics"]["was_compressed"] for r in out) >= 5  # the test compares real work
    return out


def assert_same_as_cli(got: list[dict], cli: list[dict], column: str = "compression") -> None:
    """Row for row, column for column: the CLI's rows, its compression_metrics in `column`."""
    assert len(got) == len(cli)
    for g, c in zip(got, cli):
        metrics = g.pop(column)
        expected = dict(c)
        cli_metrics = expected.pop("compression_metrics")
        assert g.keys() == expected.keys()
        for key in expected:
            assert g[key] == expected[key], key
        assert {k: v for k, v in metrics.items() if k not in EXTRA} == cli_metrics
        assert metrics["reason"] is None and metrics["detail"] is None


def test_dataset_with_num_proc_2_gives_the_cli_rows(rows, cli_rows):
    import datasets
    from trajcomp.hf import compress_dataset

    out = compress_dataset(datasets.Dataset.from_list(rows), DEMO, num_proc=2, batch_size=3)
    assert isinstance(out, datasets.Dataset)
    assert_same_as_cli(out.to_list(), cli_rows)


def test_iterable_dataset_is_lazy_and_gives_the_cli_rows(rows, cli_rows):
    import datasets
    from trajcomp.hf import compress_dataset

    source = datasets.Dataset.from_list(rows).to_iterable_dataset()
    out = compress_dataset(source, DEMO, batch_size=4)
    assert isinstance(out, datasets.IterableDataset)
    assert_same_as_cli(list(out), cli_rows)
    # Without a metrics column the rows are exactly the CLI's, compression_metrics included.
    assert list(compress_dataset(source, DEMO, metrics_column=None)) == cli_rows


def test_map_function_in_users_own_map_gives_the_cli_rows(rows, cli_rows):
    import datasets
    from trajcomp.hf import map_function

    ds = datasets.Dataset.from_list(rows)
    fn = map_function({"tokenizer": {"name": str(SAMPLES / "demo_tokenizer")},
                       "compression": {"target_max_tokens": 4000, "summary_target_tokens": 300, "cannot_fit": "shorten"},
                       "processing": {"max_concurrent_requests": 8}})
    assert_same_as_cli(ds.map(fn, batched=True).to_list(), cli_rows)
    typed = ds.map(fn, batched=True, batch_size=5, features=fn.features(ds.features))
    assert_same_as_cli(typed.to_list(), cli_rows)


def test_the_function_hashes_the_same_so_the_datasets_cache_works(tmp_path, rows):
    import datasets
    from datasets.fingerprint import Hasher
    from trajcomp.core.config import load_config
    from trajcomp.hf import compress_dataset, map_function

    assert Hasher.hash(map_function(DEMO)) == Hasher.hash(map_function(load_config(DEMO)))
    assert Hasher.hash(map_function(DEMO)) != Hasher.hash(map_function(load_config(DEMO, target_max_tokens=3000)))
    datasets.Dataset.from_list(rows[:4]).save_to_disk(tmp_path / "ds")
    ds = datasets.load_from_disk(tmp_path / "ds")
    first = compress_dataset(ds, DEMO)
    again = compress_dataset(ds, DEMO)
    assert first.cache_files and again.cache_files == first.cache_files


def test_metrics_column_type_has_every_row_metrics_field():
    from trajcomp.formats.arrow_rows import METRICS_TYPE as ROW_METRICS_TYPE
    from trajcomp.engines.runners.hf import METRICS_COLUMN_TYPE
    from trajcomp.core.metrics import Outcome, RowMetrics

    keys = list(RowMetrics(Outcome.COMPRESSED, 10, 5, 4, 3, 8, (1, 2)).to_dict())
    assert sorted(ROW_METRICS_TYPE.names) == sorted(keys)
    assert METRICS_COLUMN_TYPE.names == ROW_METRICS_TYPE.names + ["reason", "detail"]


# ---------------------------------------------------------------------------------------------- rejects


def rows_with_rejects(rows: list[dict]) -> list[dict]:
    bad_role = {**rows[1], "conversations": [{"from": "narrator", "value": "hi"}]}
    not_a_string = {**rows[2], "conversations": [{"from": "human", "value": None}]}
    no_turns = {**rows[3], "conversations": None}
    return [rows[0], bad_role, rows[4], not_a_string, no_turns]


def test_rejected_rows_stay_unchanged_with_the_clis_reason(tmp_path, rows):
    import datasets
    from trajcomp.hf import compress_dataset

    ds = datasets.Dataset.from_list(rows_with_rejects(rows))
    given = ds.to_list()  # as the Dataset holds them (None for absent values), and as the CLI gets them
    cli, rejects = cli_run(tmp_path, given)
    assert [r["reason"] for r in rejects] == ["unknown_role", "turn_not_a_string", "conversations_not_a_list"]
    got = compress_dataset(ds, DEMO, num_proc=2, batch_size=2).to_list()
    by_line = {r["line"]: r for r in rejects}
    written = iter(cli)
    for line, (row, before) in enumerate(zip(got, given), 1):
        metrics = row.pop("compression")
        if line in by_line:
            assert row == before  # unchanged
            assert metrics["status"] == "rejected"
            assert (metrics["reason"], metrics["detail"]) == (by_line[line]["reason"], by_line[line]["detail"])
            assert metrics["original_tokens"] is None  # rejected before counting
        else:
            expected = next(written)
            assert metrics["status"] == expected.pop("compression_metrics")["status"] != "rejected"
            assert row == expected


@pytest.mark.parametrize("num_proc", [None, 2])
def test_on_reject_raise_names_the_row(rows, num_proc):
    import datasets
    from trajcomp.hf import RowRejected, compress_dataset

    ds = datasets.Dataset.from_list(rows_with_rejects(rows))
    with pytest.raises(RowRejected, match="row 1 rejected: unknown_role") as caught:
        compress_dataset(ds, DEMO, num_proc=num_proc, batch_size=2, on_reject="raise")
    assert caught.value.reason == "unknown_role"


def test_bad_arguments_fail_before_any_work(rows):
    import datasets
    from trajcomp.core.config import ConfigError
    from trajcomp.hf import compress_dataset

    ds = datasets.Dataset.from_list(rows[:1])
    with pytest.raises(ValueError, match="on_reject"):
        compress_dataset(ds, DEMO, on_reject="drop")
    with pytest.raises(ValueError, match="replace the rows' turns"):
        compress_dataset(ds, DEMO, metrics_column="conversations")
    with pytest.raises(ConfigError, match="unknown key 'compression.target'"):
        compress_dataset(ds, {"compression": {"target": 5}})
    with pytest.raises(ValueError, match="num_proc"):
        compress_dataset(ds.to_iterable_dataset(), DEMO, num_proc=2)


# ------------------------------------------------------------------------- spawn, and the openai summarizer

SPAWN_SCRIPT = """
import json, sys
import datasets, multiprocess
from trajcomp.hf import compress_dataset

if __name__ == "__main__":
    multiprocess.set_start_method("spawn", force=True)  # datasets' num_proc pool uses multiprocess
    ds = datasets.load_from_disk(sys.argv[1])
    out = compress_dataset(ds, sys.argv[2], num_proc=2, batch_size=3)
    out.save_to_disk(sys.argv[3])
    print(multiprocess.get_start_method())
"""


def test_num_proc_with_spawned_workers_gives_the_cli_rows(tmp_path, rows, cli_rows):
    import datasets

    datasets.Dataset.from_list(rows).save_to_disk(tmp_path / "ds")
    script = tmp_path / "spawned.py"
    script.write_text(SPAWN_SCRIPT)
    proc = processes.run([sys.executable, str(script), str(tmp_path / "ds"), str(DEMO), str(tmp_path / "out")],
                         text=True, cwd=ROOT, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["spawn"]
    assert_same_as_cli(datasets.load_from_disk(tmp_path / "out").to_list(), cli_rows)


def test_openai_summarizer_one_session_per_worker_process(tmp_path, rows):
    import datasets
    from trajcomp.hf import compress_dataset

    with ServerThread() as server:
        url = ["--summarizer", "openai", "--base-url", server.base_url, "--model", "test-model", "--no-cache"]
        cli, _ = cli_run(tmp_path, rows, *url)
        server.reset()
        config = {"tokenizer": {"name": str(SAMPLES / "demo_tokenizer")},
                  "compression": {"target_max_tokens": 4000, "summary_target_tokens": 300, "cannot_fit": "shorten"},
                  "summarization": {"summarizer": "openai", "base_url": server.base_url, "model": "test-model"},
                  "processing": {"max_concurrent_requests": 4}}
        out = compress_dataset(datasets.Dataset.from_list(rows), config, num_proc=2, batch_size=2)
        stats = server.stats
    assert sum(r["compression_metrics"]["summary_source"] == "openai" for r in cli) >= 5
    assert_same_as_cli(out.to_list(), cli)
    assert stats.models_requests == 2  # one preflight per worker process, not one per batch
    assert stats.max_in_flight <= 8


def test_a_cache_dir_shared_with_a_cli_run_pays_no_summary_twice(tmp_path, rows):
    """Summaries the CLI paid for, in --cache-dir, answer both map workers: no chat request at all."""
    import datasets
    from trajcomp.core.config import load_config
    from trajcomp.hf import compress_dataset

    cache = tmp_path / "shared_cache"
    with ServerThread() as server:
        flags = ["--summarizer", "openai", "--base-url", server.base_url, "--model", "test-model"]
        cli, _ = cli_run(tmp_path, rows, *flags, "--cache-dir", str(cache))
        paid = server.stats.requests
        server.reset()
        config = load_config(DEMO, summarizer="openai", base_url=server.base_url, summarization_model="test-model",
                             cache_dir=str(cache))
        out = compress_dataset(datasets.Dataset.from_list(rows), config, num_proc=2, batch_size=2,
                               load_from_cache_file=False)
        stats = server.stats
    assert paid >= 5 and stats.requests == 0
    assert stats.models_requests == 0  # no request to send: the endpoint is not even checked
    assert_same_as_cli(out.to_list(), cli)


# ----------------------------------------------------------------------------------- the CLI and folders


def test_cli_reads_a_save_to_disk_folder_and_writes_one(tmp_path, rows, cli_rows):
    import datasets
    from trajcomp.hf import compress_dataset

    ds = datasets.Dataset.from_list(rows)
    ds.save_to_disk(tmp_path / "train")
    result = run_cli("compress", str(tmp_path / "train"), "-c", str(DEMO), "-q")
    assert result.code == 0, result.stderr
    out = tmp_path / "train_compressed"  # the input's kind: a dataset folder, report beside it
    report = json.loads((tmp_path / "train_compressed_metrics.json").read_text())
    assert report["rows"]["written"] == len(rows) and report["processing"]["inputs"] == [str(tmp_path / "train")]
    written = datasets.load_from_disk(out)
    assert written.to_list() == cli_rows
    assert written.to_list() == compress_dataset(ds, DEMO, metrics_column=None).to_list()
    assert written.features["conversations"] == ds.features["conversations"]

    # JSON Lines in, --output-format hf out; the same bytes as the folder written from the folder.
    (tmp_path / "jsonl").mkdir()
    src = write_jsonl(tmp_path / "jsonl" / "train.jsonl", rows)
    result = run_cli("compress", str(src), "-c", str(DEMO), "-q", "--output-format", "hf")
    assert result.code == 0, result.stderr
    again = tmp_path / "jsonl" / "train_compressed"
    assert sorted(p.name for p in again.iterdir()) == ["data-00000-of-00001.arrow", "dataset_info.json", "state.json"]
    assert datasets.load_from_disk(again).to_list() == cli_rows
    assert (again / "data-00000-of-00001.arrow").read_bytes() == (out / "data-00000-of-00001.arrow").read_bytes()


def test_cli_dataset_folder_rejects_and_folder_runs(tmp_path, rows):
    import datasets

    data = tmp_path / "data"
    data.mkdir()
    datasets.Dataset.from_list(rows_with_rejects(rows)).save_to_disk(data / "train")
    write_jsonl(data / "extra.jsonl", rows[:2])
    result = run_cli("compress", str(data), "-c", str(DEMO), "-q", "-o", str(tmp_path / "out"))
    assert result.code == 0, result.stderr
    out = tmp_path / "out"
    assert len(read_jsonl(out / "extra.jsonl")) == 2
    assert len(datasets.load_from_disk(out / "train")) == 2
    rejects = read_jsonl(out / "rejects.jsonl")
    assert [(r["source"], r["line"], r["reason"]) for r in rejects] == [
        (str(data / "train"), 2, "unknown_role"), (str(data / "train"), 4, "turn_not_a_string"),
        (str(data / "train"), 5, "conversations_not_a_list"),
    ]
    assert json.loads(rejects[0]["raw"])["conversations"] == [{"from": "narrator", "value": "hi"}]
    # A second run writes over its own dataset folders; an output named as a file contradicts hf.
    assert run_cli("compress", str(data), "-c", str(DEMO), "-q", "-o", str(out)).code == 0
    report = json.loads((out / "compression_metrics.json").read_text())
    assert report["processing"]["outputs"] == [str(out / "extra.jsonl"), str(out / "train")]
    assert report["processing"]["stray_files_in_output"] == []
    bad = run_cli("compress", str(data / "train"), "-c", str(DEMO), "-o", str(tmp_path / "x.jsonl"),
                  "--output-format", "hf")
    assert bad.code == 2 and "--output-format hf contradicts" in bad.stderr


def test_cli_resumes_a_dataset_folder_run_to_the_same_bytes(tmp_path, bpe_tokenizer):
    import datasets
    from trajcomp.formats import identity

    src = tmp_path / "ds"
    datasets.Dataset.from_list([hermes_row(i) for i in range(12)]).save_to_disk(src)
    # Calls slow enough that the rows after the second part cannot all finish before the freeze.
    with ServerThread(latency=0.15) as server:
        ref = tmp_path / "ref" / "out"
        assert run_cli(*resume_args(src, ref, bpe_tokenizer, server.base_url, "--no-cache")).code == 0
        out = tmp_path / "run" / "out"
        proc = run_held_midway(server, src, out, bpe_tokenizer, parts=2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not out.exists()
        thaw(server)
        result = run_cli(*resume_args(src, out, bpe_tokenizer, server.base_url))
        assert result.code == 0, result.stderr
    report = json.loads((tmp_path / "run" / "out_metrics.json").read_text())
    assert report["processing"]["resumed"] and 6 <= report["processing"]["rows_from_checkpoint"] < 12
    for name in ("data-00000-of-00001.arrow", "dataset_info.json", "state.json"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    # A dataset saved again in place is another input for a resume, though its folder looks the same.
    before = identity(src)
    datasets.Dataset.from_list([hermes_row(i) for i in range(13)]).save_to_disk(tmp_path / "tmp")
    for name in ("data-00000-of-00001.arrow", "state.json"):
        os.replace(tmp_path / "tmp" / name, src / name)
    assert identity(src) != before


def test_openai_message_rows_equal_the_clis_dataset_folder(tmp_path):
    import datasets
    from test_openai_rows import agent_row
    from trajcomp.hf import compress_dataset

    rows = []
    for i in range(3):
        row = agent_row()
        for message in row["messages"]:  # one type per column: text content only
            if isinstance(message.get("content"), list):
                message["content"] = " ".join(part.get("text", "") for part in message["content"])
        rows.append({**row, "id": i})
    ds = datasets.Dataset.from_list(rows)
    write_jsonl(tmp_path / "in.jsonl", ds.to_list())
    flags = ["--tokenizer", str(SAMPLES / "demo_tokenizer"), "--target-max-tokens", "300", "--summary-target-tokens", "60",
             "--cannot-fit", "shorten"]
    result = run_cli("compress", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out"), "--output-format", "hf", "-q", *flags)
    assert result.code == 0, result.stderr
    cli = datasets.load_from_disk(tmp_path / "out").to_list()
    assert [r["compression_metrics"]["outcome"] for r in cli] == ["compressed"] * 3
    config = {"tokenizer": {"name": str(SAMPLES / "demo_tokenizer")},
              "compression": {"target_max_tokens": 300, "summary_target_tokens": 60, "cannot_fit": "shorten"}}
    # The summary message has the other messages' keys as nulls, in the CLI's typed output as here.
    assert compress_dataset(ds, config, metrics_column=None).to_list() == cli


def test_summaries_failing_in_a_row_stop_the_map(rows):
    import datasets
    from trajcomp.hf import SummariesFailing, compress_dataset

    with ServerThread(fail_first_n=10**6, fail_status=400) as server:  # 400: not retried
        config = {"tokenizer": {"name": str(SAMPLES / "demo_tokenizer")},
                  "compression": {"target_max_tokens": 4000, "summary_target_tokens": 300, "cannot_fit": "shorten"},
                  "summarization": {"summarizer": "openai", "base_url": server.base_url, "model": "test-model"},
                  "processing": {"max_consecutive_failures": 3}}
        with pytest.raises(SummariesFailing, match="3 summaries in a row failed"):
            compress_dataset(datasets.Dataset.from_list(rows), config, batch_size=2)
        # Below the limit, failed rows are kept as they were, flagged.
        out = compress_dataset(datasets.Dataset.from_list(rows[:2]), {**config, "processing": {}})
    assert [m["status"] for m in out["compression"]] == ["failed", "failed"]
    assert out.remove_columns("compression").to_list() == rows[:2]
