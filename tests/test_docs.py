"""Docs that cannot rot: README.md and docs/*.md checked against the files, the CLI and the config
(tests/docs_check.py), and each kind of rot planted in a small made-up tree to show the checker finds it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest
import typer

import docs_check
from conftest import ROOT


def repository_docs() -> docs_check.Docs:
    from trajcomp.cli import app
    from trajcomp.core.config_layout import ALIASES, LAYOUT

    aliases = {f"{section}.{key}" for section, key in ALIASES}
    return docs_check.load(ROOT, typer.main.get_command(app), LAYOUT, aliases)


def test_the_repository_docs_hold():
    found = docs_check.problems(repository_docs())
    assert not found, "\n".join(map(str, found))


def test_every_command_is_checked():
    """The command tree is read whole: subcommands of `batch` too, so a new one cannot hide."""
    commands = repository_docs().commands
    assert {"", "compress", "stats", "show", "report", "compare", "batch export", "batch import"} <= set(commands)
    assert "--segments" in commands["compress"] and "--cache-dir" in commands["batch import"]


def test_the_readme_fits_a_screenful_of_scrolling():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


# A small made-up tree: a two-command app (one in a group), a two-section config, two pages.
tiny = typer.Typer(add_completion=False)


@tiny.callback()
def _root() -> None:
    """The root."""


@tiny.command()
def run(out: Optional[str] = typer.Option(None, "-o", "--output"), fast: bool = typer.Option(False, "--fast")):
    """Runs."""


jobs = typer.Typer()
tiny.add_typer(jobs, name="jobs")


@jobs.command("list")
def list_jobs(json: bool = typer.Option(False, "--json")):
    """Lists."""


LAYOUT = {"compression": {"target": "target", "roles": "roles"}, "output": {"prefix": "prefix"}}
DEFAULT = "compression:\n  target: 10\noutput:\n  prefix: x\n"
README = """# Tiny

See [the guide](docs/guide.md#running) and [the keys](docs/guide.md#keys).

```sh
tiny run data --fast -o out
tiny jobs list --json
```
"""
GUIDE = """# Guide

## Running

| `trajcomp run` option | meaning |
| --- | --- |
| `-o, --output PATH` | where |
| `--fast` | faster |

| `trajcomp jobs list` option | meaning |
| --- | --- |
| `--json` | as JSON |

```sh
trajcomp run data --fast
```

## Keys

`compression.target` is the target, `output.prefix` the prefix. Back to [the top](../README.md#tiny).
"""


def plant(tmp_path: Path, readme: str = README, guide: str = GUIDE, default: str = DEFAULT) -> list[str]:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "docs" / "guide.md").write_text(guide)
    (tmp_path / "default.yaml").write_text(default)
    docs = docs_check.load(tmp_path, typer.main.get_command(tiny), LAYOUT, default_yaml=tmp_path / "default.yaml")
    return [str(problem) for problem in docs_check.problems(docs)]


def test_the_made_up_tree_holds(tmp_path):
    assert plant(tmp_path) == []


def test_docs_pending_is_not_read(tmp_path):
    (tmp_path / "docs" / "pending").mkdir(parents=True)
    (tmp_path / "docs" / "pending" / "branch.md").write_text("[gone](nowhere.md) `--bogus` `output.nokey`\n")
    assert plant(tmp_path) == []


@pytest.mark.parametrize("planted, where, said", [
    pytest.param(lambda r, g, d: (r.replace("docs/guide.md#running", "docs/gide.md#running"), g, d),
                 "README.md:3", "link to docs/gide.md#running: docs/gide.md does not exist", id="broken-link"),
    pytest.param(lambda r, g, d: (r.replace("#keys", "#the-keys"), g, d),
                 "README.md:3", "no heading #the-keys in docs/guide.md", id="broken-anchor"),
    pytest.param(lambda r, g, d: (r, g.replace("../README.md#tiny", "../README.md#tin"), d),
                 "docs/guide.md:20", "no heading #tin in ../README.md", id="broken-anchor-upward"),
    pytest.param(lambda r, g, d: (r, g.replace("| `--fast` | faster |\n", ""), d),
                 "docs:0", "`trajcomp run`: no options table documents --fast", id="undocumented-option"),
    pytest.param(lambda r, g, d: (r, g.replace("`--fast` | faster", "`--fast`, `--furious` | faster"), d),
                 "docs/guide.md:5", "`trajcomp run` has no option --furious", id="bogus-option-in-a-table"),
    pytest.param(lambda r, g, d: (r, g.replace("trajcomp run data --fast", "trajcomp run data --slow"), d),
                 "docs/guide.md:14", "`trajcomp run` has no option --slow", id="bogus-option-in-an-example"),
    pytest.param(lambda r, g, d: (r, g + "\nRun `trajcomp run data --fats`.\n", d),
                 "docs/guide.md:22", "`trajcomp run` has no option --fats", id="bogus-option-inline"),
    pytest.param(lambda r, g, d: (r, g + "\nRun `trajcomp jobs stop --json`.\n", d),
                 "docs/guide.md:22", "`trajcomp jobs stop`: no such command", id="bogus-command-inline"),
    pytest.param(lambda r, g, d: (r, g.replace("`output.prefix` the prefix", "`output.prefix` the prefix, "
                                               "`output.suffix: x` the suffix"), d),
                 "docs/guide.md:20", "config key `output.suffix` does not exist", id="bogus-config-key"),
    pytest.param(lambda r, g, d: (r, g + "\n```yaml\ncompression:\n  targt: 5\n```\n", d),
                 "docs/guide.md:22", "config key `compression.targt` (YAML block) does not exist",
                 id="bogus-config-key-in-yaml"),
    pytest.param(lambda r, g, d: (r, g.replace("`output.prefix` the prefix", "the prefix"), d),
                 "configs/default.yaml:0", "key `output.prefix` is explained on no page", id="missing-key"),
    pytest.param(lambda r, g, d: (r, g, d + "  suffix: y\n"),
                 "configs/default.yaml:0", "key `output.suffix` is not a key of the config code",
                 id="default-key-the-code-lacks"),
])
def test_planted_rot_is_found(tmp_path, planted, where, said):
    readme, guide, default = planted(README, GUIDE, DEFAULT)
    found = plant(tmp_path, readme, guide, default)
    assert any(p.startswith(where + ":") and said in p for p in found), found


def test_github_slugs():
    assert docs_check.slug("Segments: trainers, engines, reports and `--summary-examples`") == \
        "segments-trainers-engines-reports-and---summary-examples"
    assert docs_check.slug("show: what compression did to a row") == "show-what-compression-did-to-a-row"
    assert docs_check.anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
