"""What a new user meets first in batches: the recipe of docs/summarizers.md run exactly as written (its commands
read from that page, only its placeholders put in), the wrong file given to `batch import`, `--batch`
with a summarizer that has nothing to batch, and a plain compress whose every summary is in the cache
run with no endpoint listening. Every run is a real CLI subprocess; the recipe runs once per module."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO_TOKENIZER, ROOT, SAMPLES, read_jsonl, run_cli
from openai_server import ServerThread

SAMPLE = SAMPLES / "hermes_research_runs.jsonl"  # 20 rows, 5 over the default target with the demo tokenizer
# Row 13's region the test server answers too briefly every time (check failed: too_little): a batch
# run asks it again for max_retries rounds. Without it, one round buys every summary.
ROWS = [row for i, row in enumerate(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)) if i != 13]
N_OVER = 4
DATA = "runs.jsonl"
RECIPE = "**Batch files for any runner**"
RECIPE_PAGE = ROOT / "docs" / "summarizers.md"
RUNNER = "python scripts/run_batch.py"  # what the page says runs the file where vLLM cannot


def readme_recipe() -> tuple[list[list[str]], list[str]]:
    """The page's recipe: its commands (a line ending in a backslash continued) and the runner its
    comments name for where vLLM cannot run, each as argv."""
    text = RECIPE_PAGE.read_text(encoding="utf-8")
    block = text[text.index(RECIPE):]
    block = block[block.index("```sh\n") + len("```sh\n"):]
    block = block[:block.index("```")].replace("\\\n", " ")
    commands, runner = [], None
    for line in (raw.strip() for raw in block.splitlines()):
        said = line.lstrip("#").strip()
        if said.startswith(RUNNER):
            runner = shlex.split(said)
        elif line and not line.startswith("#"):
            commands.append(shlex.split(line))
    assert runner is not None, f"the recipe no longer names {RUNNER}"
    return commands, runner


def placed(argv: list[str], runner: list[str], base_url: str) -> list[str]:
    """A recipe command with only what the page tells the user to replace replaced: their tokenizer,
    vLLM by the runner it names (its URL the test server), and `trajcomp`/`python` as this venv's."""
    if argv[0] == "vllm":
        argv = [base_url if word == "URL" else word for word in runner]
    argv = [str(DEMO_TOKENIZER) if word == "./my_tokenizer" else word for word in argv]
    if argv[0] == "trajcomp":
        return [sys.executable, "-m", "trajcomp.cli", *argv[1:]]
    return [sys.executable, *argv[1:]] if argv[0] == "python" else argv


def model_of(commands: list[list[str]]) -> str:
    first = commands[0]
    return first[first.index("--model") + 1]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """The recipe's commands run in order in a fresh folder holding data/ and the repository's scripts/."""
    folder = tmp_path_factory.mktemp("recipe")
    (folder / "data").mkdir()
    (folder / "data" / DATA).write_text("".join(ROWS), encoding="utf-8")
    (folder / "scripts").symlink_to(ROOT / "scripts")
    commands, runner = readme_recipe()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with ServerThread(models=[model_of(commands)]) as server:
        done = []
        for argv in commands:
            done.append(subprocess.run(placed(argv, runner, server.base_url), cwd=folder, env=env,
                                       capture_output=True, text=True, timeout=600))
            if done[-1].returncode:
                break
        calls_before_the_rows = (server.stats.requests, server.stats.models_requests)
        online = run_cli("compress", str(folder / "data"), "-o", str(folder / "online"), "--tokenizer",
                         str(DEMO_TOKENIZER), "--summarizer", "openai", "--model", model_of(commands),
                         "--base-url", server.base_url, "--no-cache")
        stats = server.stats
    return {"folder": folder, "commands": commands, "done": done, "online": online, "stats": stats,
            "calls_before_the_rows": calls_before_the_rows}


def test_the_readme_batch_recipe_runs_as_written(recipe):
    commands, done = recipe["commands"], recipe["done"]
    steps = [argv[:3] if argv[0] == "trajcomp" else argv[:2] for argv in commands]
    assert steps == [["trajcomp", "batch", "export"], ["vllm", "run-batch"], ["trajcomp", "batch", "import"],
                     ["trajcomp", "batch", "export"], ["trajcomp", "compress", "data/"]]
    for argv, result in zip(commands, done):
        assert result.returncode == 0, (argv, result.stderr)
    assert len(done) == len(commands)
    exported, _, imported, again, _ = done
    assert exported.stdout.startswith(f"{N_OVER} requests written to requests.jsonl")
    assert imported.stdout.startswith(f"took {N_OVER} answers into cache/")
    assert "nothing to export" in again.stdout
    folder = recipe["folder"]
    out = folder / "out" / DATA
    statuses = [row["compression_metrics"]["status"] for row in read_jsonl(out)]
    assert statuses.count("compressed") == N_OVER and len(statuses) == len(ROWS)
    assert recipe["online"].code == 0, recipe["online"].stderr
    assert out.read_bytes() == (folder / "online" / DATA).read_bytes()
    # the rows were written with no call at all: the server saw nothing after the import
    assert recipe["calls_before_the_rows"] == (N_OVER, 0)


def test_after_an_import_the_report_says_the_summaries_came_from_the_cache(recipe):
    from trajcomp.cli.compare import compare_reports
    from trajcomp.reports.reading import load
    from trajcomp.reports.text import render_report

    report_path = recipe["folder"] / "out" / "compression_metrics.json"
    summarization = json.loads(report_path.read_text())["summarization"]
    assert summarization["cache_hits"] == N_OVER
    assert summarization["batch"]["batches"] == 0 and summarization["batch"]["from_cache"] == N_OVER
    text = render_report(load(report_path), "compression_metrics.json")
    assert "none submitted: every summary was in the cache" in text and f"{N_OVER} summaries from the cache" in text
    _, comparison = compare_reports([report_path, recipe["folder"] / "online" / "compression_metrics.json"])
    assert comparison.values["cache_hits"][0] == N_OVER


def wrong_files(folder: Path) -> dict[str, Path]:
    (folder / "notes.txt").write_text("this is not JSON\n")
    (folder / "empty.jsonl").write_text("")
    return {"requests": folder / "requests.jsonl", "dataset": folder / "data" / DATA,
            "not_json": folder / "notes.txt", "empty": folder / "empty.jsonl"}


@pytest.mark.parametrize("wrong", ["requests", "dataset", "not_json", "empty"])
def test_importing_the_wrong_file_is_refused_and_records_nothing(recipe, wrong, tmp_path):
    path = wrong_files(recipe["folder"])[wrong]
    cache = tmp_path / "cache"
    alone = run_cli("batch", "import", str(path), "--cache-dir", str(cache), "--summarizer", "openai")
    # with a good file before it: every file is checked before anything is stored
    along = run_cli("batch", "import", str(recipe["folder"] / "results.jsonl"), str(path), "--cache-dir",
                    str(cache), "--summarizer", "openai")
    for result in (alone, along):
        lines = result.stderr.strip().splitlines()
        assert result.code == 1 and len(lines) == 1 and str(path) in lines[0], result.stderr
        assert result.stdout == ""
    assert not cache.exists()
    if wrong == "requests":
        assert "batch requests" in alone.stderr


def test_one_of_each_is_said_in_the_singular(recipe, tmp_path):
    folder = recipe["folder"]
    one = tmp_path / "one.jsonl"
    one.write_text((folder / "results.jsonl").read_text().splitlines()[0] + "\n")
    imported = run_cli("batch", "import", str(one), "--cache-dir", str(tmp_path / "cache"), "--summarizer", "openai")
    assert imported.code == 0 and imported.stdout.startswith("took 1 answer into "), imported.stdout
    again = run_cli("batch", "import", str(one), "--cache-dir", str(tmp_path / "cache"), "--summarizer", "openai")
    assert "took 0 answers" in again.stdout and "1 was there already" in again.stdout
    over = next(i for i, row in enumerate(read_jsonl(folder / "out" / DATA))
                if row["compression_metrics"]["status"] == "compressed")
    (tmp_path / "data.jsonl").write_text(ROWS[over])
    exported = run_cli("batch", "export", str(tmp_path / "data.jsonl"), "-o", str(tmp_path / "r.jsonl"),
                       "--cache-dir", str(tmp_path / "empty_cache"), "--tokenizer", str(DEMO_TOKENIZER),
                       "--summarizer", "openai", "--model", model_of(recipe["commands"]))
    assert exported.code == 0 and exported.stdout.startswith("1 request written to "), exported.stdout


def test_batch_with_a_summarizer_that_makes_no_requests_is_refused(tmp_path):
    (tmp_path / DATA).write_text("".join(ROWS))
    result = run_cli("compress", str(tmp_path / DATA), "-o", str(tmp_path / "out.jsonl"), "--tokenizer",
                     str(DEMO_TOKENIZER), "--batch")
    assert result.code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "extractive summarizer makes no requests to batch" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [DATA]


def test_a_plain_compress_whose_summaries_are_all_cached_needs_no_endpoint(tmp_path):
    """Compressed once against the test server, then again once it is stopped: every summary is a cache
    hit, so the endpoint is never checked and the rows are written as before."""
    (tmp_path / DATA).write_text("".join(ROWS))

    def compress(base_url: str, out: str):
        return run_cli("compress", str(tmp_path / DATA), "-o", str(tmp_path / out), "--tokenizer",
                       str(DEMO_TOKENIZER), "--summarizer", "openai", "--model", "test-model", "--base-url", base_url,
                       "--cache-dir", str(tmp_path / "cache"))

    with ServerThread() as server:
        first = compress(server.base_url, "first.jsonl")
        base_url, calls = server.base_url, server.stats.requests
    assert first.code == 0 and calls == N_OVER, first.stderr
    again = compress(base_url, "again.jsonl")  # the port is closed now: any call would be refused
    assert again.code == 0, again.stderr
    assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "first.jsonl").read_bytes()
    summarization = json.loads((tmp_path / "again_metrics.json").read_text())["summarization"]
    assert summarization["cache_hits"] == N_OVER and summarization["http_requests"] == 0
    # and when a request is needed, a dead endpoint still stops the run at once, one line, nothing left
    dead = run_cli("compress", str(tmp_path / DATA), "-o", str(tmp_path / "dead" / "out.jsonl"), "--tokenizer",
                   str(DEMO_TOKENIZER), "--summarizer", "openai", "--model", "test-model", "--base-url", base_url)
    assert dead.code == 1 and dead.stderr.count("\n") == 1 and "cannot reach" in dead.stderr, dead.stderr
    assert not (tmp_path / "dead").exists()
