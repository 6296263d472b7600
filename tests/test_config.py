"""Config files in the reference's sectioned YAML layout: loading, defaults, validation, CLI overrides."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, read_jsonl, run_cli
from test_cli import assert_ok, hermes_rows, write_jsonl
from trajcomp.core.config import LAYOUT, CompressionConfig, ConfigError, load_config

# The reference's trajectory_compression.yaml layout, every key set to a non-default value.
REFERENCE_YAML = """\
tokenizer:
  name: "some-org/some-tokenizer"
  trust_remote_code: true

compression:
  target_max_tokens: 12000
  summary_target_tokens: 600

protected_turns:
  first_system: false
  first_human: false
  first_gpt: false
  first_tool: false
  last_n_turns: 6

summarization:
  model: "google/gemini-3-flash-preview"
  base_url: "https://openrouter.ai/api/v1"
  api_key_env: "OPENROUTER_API_KEY"
  temperature: 0.7
  max_retries: 5
  retry_delay: 1.5

output:
  add_summary_notice: false
  summary_notice_text: "\\n\\nSome of your previous tool responses may be summarized to preserve context."
  output_suffix: "_small"

processing:
  num_workers: 8
  max_concurrent_requests: 20
  skip_under_target: false
  save_over_limit: false
  per_trajectory_timeout: 120

metrics:
  enabled: false
  per_trajectory: false
  output_file: "run_metrics.json"
"""

REFERENCE_VALUES = {
    "tokenizer_name": "some-org/some-tokenizer",
    "trust_remote_code": True,
    "target_max_tokens": 12000,
    "summary_target_tokens": 600,
    "protect_first_system": False,
    "protect_first_human": False,
    "protect_first_gpt": False,
    "protect_first_tool": False,
    "protect_last_n_turns": 6,
    "summarization_model": "google/gemini-3-flash-preview",
    "base_url": "https://openrouter.ai/api/v1",
    "api_key_env": "OPENROUTER_API_KEY",
    "temperature": 0.7,
    "max_retries": 5,
    "retry_delay": 1.5,
    "add_summary_notice": False,
    "summary_notice_text": "\n\nSome of your previous tool responses may be summarized to preserve context.",
    "output_suffix": "_small",
    "num_workers": 8,
    "max_concurrent_requests": 20,
    "skip_under_target": False,
    "save_over_limit": False,
    "per_trajectory_timeout": 120,
    "metrics_enabled": False,
    "metrics_per_trajectory": False,
    "metrics_output_file": "run_metrics.json",
}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_reference_layout_loads_with_every_value_applied(tmp_path):
    cfg = load_config(write(tmp_path / "trajectory_compression.yaml", REFERENCE_YAML))
    for name, value in REFERENCE_VALUES.items():
        assert getattr(cfg, name) == value, name
        assert type(getattr(cfg, name)) is type(value), name
    # The trajcomp-only keys the file does not set keep their defaults.
    defaults = CompressionConfig()
    for f in dataclasses.fields(CompressionConfig):
        if f.name not in REFERENCE_VALUES:
            assert getattr(cfg, f.name) == getattr(defaults, f.name), f.name
    # And the effective config, written back in the layout, holds the file's values unchanged.
    sections = cfg.to_sections()
    for section, keys in yaml.safe_load(REFERENCE_YAML).items():
        for key, value in keys.items():
            assert sections[section][key] == value, f"{section}.{key}"


def test_every_layout_key_round_trips(tmp_path):
    """A file with every key of LAYOUT set loads to exactly that layout again."""
    data = CompressionConfig(prune=True, segments=True, summary_examples_file="/abs/examples.jsonl",
                             input_observations=["auto", "Tool output:"], output_rows="tokens",
                             count_mode="chat_template").to_sections()
    data["tokenizer"]["name"] = "/abs/tokenizer"
    data["compression"].update(target_max_tokens=9000, summary_target_tokens=300, count_mode="chat_template",
                               chat_roles={"system": "system", "human": "user", "gpt": "model", "tool": "ipython"},
                               max_passes=5, prune_min_chars=50, prune_style="template",
                               prune_template="[{tool} {argument}: {lines} lines]")
    data["summarization"].update(summarizer="openai", request_timeout=30.5, prompt_file="/abs/prompt.txt", cache=False)
    data["processing"]["on_failure"] = "extractive"
    path = write(tmp_path / "all.yaml", yaml.safe_dump(data, allow_unicode=True))
    assert load_config(path).to_sections() == data
    assert {s: set(k) for s, k in data.items()} == {s: set(k) for s, k in LAYOUT.items()}


def test_defaults_equal_the_reference_but_the_tokenizer_and_the_workers():
    for cfg in (CompressionConfig(), load_config(None), load_config()):
        assert cfg.target_max_tokens == 15250
        assert cfg.summary_target_tokens == 750
        assert cfg.protect_first_system and cfg.protect_first_human and cfg.protect_first_gpt and cfg.protect_first_tool
        assert cfg.protect_last_n_turns == 4
        assert cfg.tokenizer_name is None  # the one departure: the training tokenizer must be named
        assert cfg.temperature == 0.3
        assert cfg.max_retries == 3
        assert cfg.retry_delay == 2.0
        assert cfg.add_summary_notice is True
        assert cfg.output_suffix == "_compressed"
        assert cfg.num_workers == 1  # the reference's 4 had no effect; here workers are real (see workers.py)
        assert cfg.max_concurrent_requests == 50
        assert cfg.skip_under_target is True
        assert cfg.save_over_limit is True
        assert cfg.per_trajectory_timeout == 300
        assert cfg.metrics_enabled is True
        assert cfg.metrics_per_trajectory is True
        assert cfg.metrics_output_file == "compression_metrics.json"


@pytest.mark.parametrize("text", ["", "# only a comment\n", "compression:\n", "compression: {}\n"])
def test_empty_file_and_empty_sections_mean_defaults(tmp_path, text):
    assert load_config(write(tmp_path / "c.yaml", text)) == CompressionConfig()


def test_alias_first_assistant(tmp_path):
    cfg = load_config(write(tmp_path / "c.yaml", "protected_turns:\n  first_assistant: false\n"))
    assert cfg.protect_first_gpt is False


@pytest.mark.parametrize(
    "text, must_name",
    [
        ("compression:\n  target_max_tokenz: 100\n", "target_max_tokenz"),
        ("compression:\n  target_max_tokens: 100\n  summary_target_tokens: 50\n  extra: 1\n", "extra"),
        ("protected_turns:\n  last_n: 2\n", "last_n"),
        ("tokenizers:\n  name: x\n", "tokenizers"),  # unknown section
        ("Compression:\n  target_max_tokens: 100\n", "Compression"),  # keys are case-sensitive
        ("tokenizer:\n  target_max_tokens: 100\n", "target_max_tokens"),  # a real key in the wrong section
    ],
)
def test_unknown_key_or_section_names_it_and_the_file(tmp_path, text, must_name):
    assert_one_line_error_naming(write(tmp_path / "my_config.yaml", text), must_name)


def assert_one_line_error_naming(path, must_name: str) -> None:
    """Loading `path` fails with a one-line ConfigError naming `must_name` and the file."""
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert must_name in message and str(path) in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    "text, must_name",
    [
        # wrong types
        ("compression:\n  target_max_tokens: '5000'\n", "target_max_tokens"),
        ("compression:\n  target_max_tokens: 5000.0\n", "target_max_tokens"),
        ("compression:\n  target_max_tokens: true\n", "target_max_tokens"),
        ("compression:\n  target_max_tokens: null\n", "target_max_tokens"),
        ("protected_turns:\n  first_system: 'yes please'\n", "first_system"),
        ("protected_turns:\n  first_human: 1\n", "first_human"),
        ("protected_turns:\n  last_n_turns: 2.5\n", "last_n_turns"),
        ("summarization:\n  temperature: hot\n", "temperature"),
        ("summarization:\n  max_retries: [1]\n", "max_retries"),
        ("tokenizer:\n  name: 42\n", "name"),
        ("tokenizer:\n  trust_remote_code: 'true'\n", "trust_remote_code"),
        ("output:\n  output_suffix: {a: 1}\n", "output_suffix"),
        ("processing:\n  num_workers: false\n", "num_workers"),
        ("processing:\n  per_trajectory_timeout: '300'\n", "per_trajectory_timeout"),
        ("metrics:\n  enabled: 'false'\n", "enabled"),
        # bad values
        ("compression:\n  target_max_tokens: 0\n", "target_max_tokens"),
        ("compression:\n  target_max_tokens: -5\n", "target_max_tokens"),
        ("compression:\n  summary_target_tokens: 0\n", "summary_target_tokens"),
        ("compression:\n  target_max_tokens: 700\n  summary_target_tokens: 750\n", "summary_target_tokens"),
        ("compression:\n  target_max_tokens: 750\n  summary_target_tokens: 750\n", "summary_target_tokens"),
        ("protected_turns:\n  last_n_turns: -1\n", "protected_turns.last_n_turns"),  # as the file names it
        ("summarization:\n  base_url: notaurl\n", "summarization.base_url"),
        ("summarization:\n  temperature: -0.1\n", "temperature"),
        ("summarization:\n  max_retries: -1\n", "max_retries"),
        ("summarization:\n  retry_delay: -2\n", "retry_delay"),
        ("processing:\n  max_concurrent_requests: 0\n", "max_concurrent_requests"),
        ("processing:\n  num_workers: -1\n", "num_workers"),
        ("processing:\n  max_rows_in_memory: 0\n", "max_rows_in_memory"),
        ("processing:\n  per_trajectory_timeout: 0\n", "per_trajectory_timeout"),
        ("processing:\n  on_failure: explode\n", "on_failure"),
        # bad structure
        ("- a\n- b\n", "mapping"),
        ("compression: 5\n", "compression"),
        ("compression:\n  - target_max_tokens\n", "compression"),
        ("compression: [\n", "YAML"),
    ],
)
def test_wrong_types_and_bad_values_raise_config_error(tmp_path, text, must_name):
    assert_one_line_error_naming(write(tmp_path / "bad.yaml", text), must_name)


@pytest.mark.parametrize(
    "key", ["processing:\n  per_trajectory_timeout", "summarization:\n  request_timeout",
            "summarization:\n  temperature", "summarization:\n  retry_delay"],
)
def test_nan_is_rejected(tmp_path, key):
    with pytest.raises(ConfigError):
        load_config(write(tmp_path / "nan.yaml", f"{key}: .nan\n"))


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(err.value)


def test_overrides_win_and_none_is_ignored(tmp_path):
    path = write(tmp_path / "c.yaml", "compression:\n  target_max_tokens: 9000\n  summary_target_tokens: 500\n")
    cfg = load_config(path, target_max_tokens=4000, summary_target_tokens=None, protect_last_n_turns=0)
    assert (cfg.target_max_tokens, cfg.summary_target_tokens, cfg.protect_last_n_turns) == (4000, 500, 0)
    with pytest.raises(ConfigError) as err:  # an override is validated against the file's values
        load_config(path, target_max_tokens=400)
    assert "summary_target_tokens" in str(err.value) and str(path) in str(err.value)


def test_relative_paths_resolve_beside_the_config_file(tmp_path, monkeypatch):
    cfg_dir = tmp_path / "project" / "configs"
    cfg_dir.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the working directory must not matter
    path = write(cfg_dir / "c.yaml", "tokenizer:\n  name: ./tok\nsummarization:\n  prompt_file: ../prompts/p.txt\n")
    cfg = load_config(path)
    assert cfg.tokenizer_name == str((cfg_dir / "tok").resolve())
    assert cfg.prompt_file == str((tmp_path / "project" / "prompts" / "p.txt").resolve())
    # A relative config path is resolved against the working directory, then beside the file.
    cfg = load_config(Path("..") / "project" / "configs" / "c.yaml")
    assert cfg.tokenizer_name == str((cfg_dir / "tok").resolve())
    # Hub names and absolute paths stay as written; overrides are not rebased on the config file.
    path = write(cfg_dir / "hub.yaml", "tokenizer:\n  name: org/name\n")
    assert load_config(path).tokenizer_name == "org/name"
    assert load_config(path, tokenizer_name="./local").tokenizer_name == "./local"


def test_default_yaml_in_the_repo_covers_the_layout():
    path = ROOT / "configs" / "default.yaml"
    if not path.exists():
        pytest.skip("configs/default.yaml not written yet")
    cfg = load_config(path)
    assert isinstance(cfg, CompressionConfig)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    missing = [f"{s}.{k}" for s, keys in LAYOUT.items() for k in keys if k not in (data.get(s) or {})]
    assert not missing, f"configs/default.yaml lacks {missing}"


def test_cli_flags_override_the_config_file(tmp_path, bpe_tokenizer):
    """-c FILE plus flags: the flags win, the rest of the file applies, ./ paths resolve beside the file."""
    cfg_dir = tmp_path / "cfg"
    shutil.copytree(bpe_tokenizer, cfg_dir / "tok")
    cfg_path = write(
        cfg_dir / "run.yaml",
        "tokenizer:\n  name: ./tok\n"
        "compression:\n  target_max_tokens: 2500\n  summary_target_tokens: 200\n"
        "protected_turns:\n  last_n_turns: 2\n"
        "output:\n  output_suffix: _small\n"
        "processing:\n  max_concurrent_requests: 7\n"
        "metrics:\n  per_trajectory: false\n",
    )
    data = tmp_path / "data"
    data.mkdir()
    src = write_jsonl(data / "runs.jsonl", hermes_rows(5, seed=4))
    res = run_cli(
        "compress", str(src), "-c", str(cfg_path), "--target-max-tokens", "3000", "--protect-last-n", "6",
        "--concurrency", "3", "--json", cwd=tmp_path,
    )
    assert_ok(res)
    report = json.loads(res.stdout)
    config = report["config"]
    assert config["compression"] == {**CompressionConfig().to_sections()["compression"],
                                     "target_max_tokens": 3000, "summary_target_tokens": 200}
    assert config["protected_turns"]["last_n_turns"] == 6
    assert config["processing"]["max_concurrent_requests"] == 3
    assert config["output"]["output_suffix"] == "_small"
    assert config["metrics"]["per_trajectory"] is False
    assert config["tokenizer"]["name"] == str((cfg_dir / "tok").resolve())
    assert report["tokenizer"]["name"] == str((cfg_dir / "tok").resolve())
    # The file's settings are applied to the run, not only echoed.
    assert sorted(p.name for p in data.iterdir()) == ["runs.jsonl", "runs_small.jsonl", "runs_small_metrics.json"]
    assert all("compression_metrics" not in row for row in read_jsonl(data / "runs_small.jsonl"))
    assert json.loads((data / "runs_small_metrics.json").read_text(encoding="utf-8"))["config"] == config
