"""The public API stays where users import it, whatever the packages behind it: the names, the
installed entry points, and the README's Python examples run as written (the Ray one in test_ray.py,
before its cluster starts: the Ray tests share the machine), each the same as on the docs page that explains it."""

from __future__ import annotations

import ast
import inspect
import os
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from conftest import DEMO_TOKENIZER, ROOT, SAMPLES
import processes

README = ROOT / "README.md"


def test_the_top_level_names():
    from trajcomp import CompressionConfig, TrajectoryCompressor, __version__, load_config

    config = load_config(ROOT / "configs" / "demo.yaml")
    assert isinstance(config, CompressionConfig)
    assert inspect.isclass(TrajectoryCompressor) and __version__


def test_the_datasets_and_ray_entry_points():
    import trajcomp.hf
    import trajcomp.ray

    assert callable(trajcomp.hf.compress_dataset) and callable(trajcomp.hf.map_function)
    assert callable(trajcomp.ray.compress)
    assert "ds" in inspect.signature(trajcomp.ray.compress).parameters


def test_the_console_script_and_python_m():
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "trajcomp"]
    from trajcomp.cli import main

    assert script.load() is main
    installed = Path(sys.executable).parent / "trajcomp"
    for argv in ([str(installed), "--version"], [sys.executable, "-m", "trajcomp.cli", "--version"]):
        done = processes.run(argv, text=True)
        assert done.returncode == 0 and done.stdout.strip().endswith("0.1.0"), done.stderr


def test_the_summarizer_entry_point_group():
    from trajcomp.core.config import CompressionConfig
    from trajcomp.core.counting.tokens import TokenCounter
    from trajcomp.summarizers import Summarizer, make_summarizer, names

    found = {ep.name: ep for ep in entry_points(group="trajcomp.summarizers")}
    assert {"extractive", "openai"} <= set(found) and {"extractive", "openai"} <= set(names())
    for ep in found.values():
        assert issubclass(ep.load(), Summarizer)
    config = CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER))
    assert make_summarizer("extractive", config, TokenCounter(str(DEMO_TOKENIZER))).name == "extractive"


def readme_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def run_example(code: str, cwd: Path) -> str:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    done = processes.run([sys.executable, "-c", code], cwd=cwd, env=env, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture
def user_folder(tmp_path) -> Path:
    """A working folder as the README's examples assume one: configs/, the data they read, a tokenizer."""
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    (tmp_path / "data_samples").symlink_to(SAMPLES)
    (tmp_path / "tok").symlink_to(DEMO_TOKENIZER)
    return tmp_path


def test_the_readme_has_its_three_examples():
    examples = readme_examples()
    assert len(examples) == 3
    assert "TrajectoryCompressor(config)" in examples[0]
    assert "compress_dataset" in examples[1] and "trajcomp.ray.compress" in examples[2]


# Each README example is also on its topic's page (moved there with its explanation): the same text, so
# running the README's runs the page's too.
EXAMPLE_PAGES = ["usage.md", "formats.md", "large-runs.md"]


def test_the_readme_examples_are_their_pages_examples():
    for example, page in zip(readme_examples(), EXAMPLE_PAGES, strict=True):
        assert f"```python\n{example}```" in (ROOT / "docs" / page).read_text(), page


def test_the_readme_library_example_runs(user_folder):
    rows = "import json\nrows = [json.loads(l) for l in open('data_samples/hermes_coding_runs.jsonl')][:4]\n"
    printed = run_example(rows + readme_examples()[0], user_folder)
    metrics = [ast.literal_eval(line) for line in printed.splitlines()]
    assert len(metrics) == 4 and any(m["status"] == "compressed" for m in metrics)


def test_the_readme_datasets_example_runs(user_folder):
    code = "import datasets, json\n" \
           "rows = [json.loads(l) for l in open('data_samples/hermes_coding_runs.jsonl')][:6]\n" \
           "datasets.Dataset.from_list(rows).save_to_disk('data/train')\n"
    run_example(code, user_folder)
    check = "\nassert len(out) == 6 and out.column_names == [*ds.column_names, 'compression'], out\nprint(len(list(lazy)))\n"
    assert run_example(readme_examples()[1] + check, user_folder).split() == ["6"]


def test_a_row_of_any_dialect_goes_through_compress_row():
    """The README's word for library users: a whole row in, the output row (or the reason) out."""
    import asyncio

    from trajcomp import CompressionConfig, TrajectoryCompressor

    config = CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), target_max_tokens=100_000)
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
            {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
            {"neither": []}]

    async def run():
        async with TrajectoryCompressor(config) as compressor:
            return await compressor.compress_rows(rows)

    kept, shared, rejected = asyncio.run(run())
    for result, row in ((kept, rows[0]), (shared, rows[1])):
        assert result.row["compression_metrics"]["status"] == "under_target"
        assert {k: v for k, v in result.row.items() if k != "compression_metrics"} == row
    assert rejected.row is None and rejected.reason == "missing_conversations"
