"""Run configuration: one flat dataclass, loaded from the reference's sectioned YAML layout."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .config_layout import ALIASES, LAYOUT, SEGMENT_KEYS, key_of
from .dialects.observations import resolve as resolve_observations
from .dialects.rows import DEFAULT_ROLES, DIALECTS, ROLES
from .planning.stubs import style_problem
from .dialects.summary_turn import DEFAULT_PREFIX, STYLES


class ConfigError(ValueError):
    """A bad config file, key or value; the CLI prints it on one line and exits 2."""


ON_FAILURE_CHOICES = ("keep", "extractive", "reject")
# What happens to a row no rule can make fit (core/planning/fit.py): written as it was, rejected, or shortened anyway.
CANNOT_FIT_CHOICES = ("keep", "reject", "shorten")
COUNT_MODES = ("turns", "chat_template")
OUTPUT_ROWS = ("text", "tokens")
DEFAULT_CHAT_ROLES = {"system": "system", "human": "user", "gpt": "assistant", "tool": "tool"}
INPUT_FORMATS = ("auto", "sharegpt", "openai")
# The checks a model's answer must pass before it becomes a summary (summarizers/checks.py), in the
# order they run, and the thresholds they start from (docs/summarizers.md, "Summary checks", says how each was set).
CHECK_NAMES = ("refusal", "repetition", "language", "too_little", "echo")
DEFAULT_CHECK_THRESHOLDS = {
    "refusal_max_share": 0.5,  # of the answer's characters in sentences that refuse or apologize
    "duplicate_line_max_share": 0.3,  # Gopher's 0.2 for web pages; a handoff note may repeat "- none"
    "top_ngram_max_share": 0.4,  # of characters in the most frequent 2-, 3- or 4-gram (Gopher: 0.2-0.16)
    "duplicate_ngram_max_share": 0.3,  # of characters in 10-grams seen three times or more
    "language_min_script_share": 0.05,  # of the region's letters in the answer's main script
    "too_little_min_share": 0.1,  # of the stated length, for a region of at least...
    "too_little_region_tokens": 2000,  # ...this many tokens
    "echo_max_share": 0.5,  # of the answer's characters in 8-unit runs of the instructions
}


@dataclass(frozen=True)
class CompressionConfig:
    """Every setting of a run. Field names follow the reference's dataclass where it had one."""

    # input
    input_format: str = "auto"  # auto (per row), sharegpt or openai
    input_roles: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ROLES))  # row's name -> planner role
    input_dialect: str = "auto"  # auto, hermes or llamafactory: which rows keep LLaMA-Factory's alternation
    # which human turns are tool results: auto (SWE-agent's and OpenHands v0's prefixes), none, or a list of prefixes
    input_observations: Any = "auto"
    # tokenizer
    tokenizer_name: str | None = None  # no default: counting with another model's tokenizer would mislead
    trust_remote_code: bool = False
    chat_template: str | None = None  # a template file replacing the tokenizer's own
    # compression
    target_max_tokens: int = 15250
    summary_target_tokens: int = 750
    count_mode: str = "turns"
    chat_roles: dict[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_CHAT_ROLES))
    max_passes: int = 3
    # Old tool outputs become one-line stubs before any summary, as few as fit the row (core/planning/pruning.py).
    prune: bool = False
    prune_min_chars: int = 200  # an output this long or shorter is never stubbed
    prune_style: str = "hermes"  # hermes, swe-agent, openhands or template (core/planning/stubs.py)
    prune_template: str | None = None
    # Each row replayed as the live compactor lives it: one output row per segment (core/segments/segments.py).
    segments: bool = False
    summary_ratio: float = 0.0  # of the span a segment's summary replaces (0: summary_target_tokens)
    summary_min_tokens: int = 2000  # the ratio's budget at least...
    summary_max_tokens: int = 12000  # ...and at most
    tail_tokens: int = 0  # a segment's carried tail by tokens (0: protected_turns.last_n_turns turns)
    # A row whose protected turns and smallest summary are over the target (core/planning/fit.py), decided before
    # any summary: keep (as it was, no request), reject (to the rejects file) or shorten (summarized anyway).
    cannot_fit: str = "keep"  # the default: no money on a summary that cannot help
    # protected_turns
    protect_first_system: bool = True
    protect_first_human: bool = True
    protect_first_gpt: bool = True
    protect_first_tool: bool = True
    protect_last_n_turns: int = 4
    # summarization
    summarizer: str = "extractive"
    summarization_model: str = "gpt-4o-mini"
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.3
    max_retries: int = 3
    retry_delay: float = 2.0
    request_timeout: float = 120.0
    prompt_file: str | None = None
    max_input_tokens: int | None = None  # None: 8192 minus the answer's max_tokens
    summary_tokenizer: str | None = None  # the summary model's tokenizer folder, for the input guard
    cache: bool = True
    cache_dir: str | None = None  # the summary cache's folder; None: beside the output (engines/flow/paths.py)
    summary_style: str = "prose"  # prose, or handoff: the Markdown sections an agent's own compaction writes
    # Summaries bought through the endpoint's Files and Batches API in rounds (engines/summaries/batch_rounds.py), not one call each.
    batch: bool = False
    batch_max_requests: int = 50_000  # a batch file's requests at most (OpenAI's limit)
    batch_max_bytes: int = 200_000_000  # and its size
    batch_poll_seconds: float = 30.0  # how often a batch's status is asked for
    summary_checks: str = "all"  # all, none, or a comma list of CHECK_NAMES
    check_thresholds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_CHECK_THRESHOLDS))
    # output
    summary_prefix: str = DEFAULT_PREFIX  # opens the summary turn
    add_summary_notice: bool = True
    summary_notice_text: str = (
        "\n\nNote: part of the earlier conversation has been condensed into a summary to fit the context window."
    )
    output_suffix: str = "_compressed"
    segment_field: str = "segment"  # with segments: each row's {"index", "count"}
    train_field: str = "train"  # with segments: a ShareGPT turn's not-trained mark (false)
    output_rows: str = "text"  # text (the row's turns) or tokens (input_ids, attention_mask, labels: token_rows.py)
    # processing
    num_workers: int = 1  # worker processes compressing rows; 0: one per usable core (engines/runners/workers.py)
    max_concurrent_requests: int = 50
    skip_under_target: bool = True
    save_over_limit: bool = True
    per_trajectory_timeout: float = 300.0
    on_failure: str = "keep"
    max_consecutive_failures: int = 50
    max_rows_in_memory: int = 1000
    # every summary the output used, as a training row (a local .jsonl; --summary-examples); None: not written
    summary_examples_file: str | None = None
    # metrics
    metrics_enabled: bool = True
    metrics_per_trajectory: bool = True
    metrics_output_file: str = "compression_metrics.json"

    def __post_init__(self) -> None:
        validate(self)

    def replace(self, **changes: Any) -> "CompressionConfig":
        """A copy with some fields changed (validated like any config)."""
        return dataclasses.replace(self, **changes)

    def to_sections(self) -> dict[str, dict[str, Any]]:
        """The effective config in the YAML section layout (for the report and resume fingerprints);
        the pruning and segment keys only when they are on, the examples file and observations only when set and
        output.rows only when it is tokens, so that
        runs without them keep their reports' bytes."""
        return {
            section: {key: getattr(self, name) for key, name in keys.items()
                      if (self.prune or not name.startswith("prune")) and (self.segments or name not in SEGMENT_KEYS)
                      and (name != "summary_examples_file" or self.summary_examples_file is not None)
                      and (name != "input_observations" or self.input_observations != "auto")
                      and (name != "output_rows" or self.output_rows != "text")}
            for section, keys in LAYOUT.items()
        }


# Fields whose default None stands for a number worked out from others.
_OPTIONAL_INTS = {"max_input_tokens"}


def _expected_type(name: str) -> tuple[type, ...]:
    f = next(f for f in dataclasses.fields(CompressionConfig) if f.name == name)
    default = f.default_factory() if f.default is dataclasses.MISSING else f.default
    if name in _OPTIONAL_INTS:
        return (int, type(None))
    if name == "input_observations":  # auto, none, or a list of prefixes (checked in validate)
        return (str, list, tuple)
    if isinstance(default, dict):
        return (dict,)
    if isinstance(default, bool):
        return (bool,)
    if isinstance(default, float):
        return (int, float)
    if isinstance(default, int):
        return (int,)
    return (str, type(None)) if default is None else (str,)


def validate(cfg: CompressionConfig) -> None:
    """Reject values no run could use, naming the key as the config file spells it."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        types = _expected_type(f.name)
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise ConfigError(f"{key_of(f.name)} must be {types[0].__name__}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key_of(f.name)} must be a finite number, got {value!r}")
    positive = ("target_max_tokens", "summary_target_tokens", "max_concurrent_requests",
                "max_rows_in_memory", "max_passes", "max_input_tokens", "batch_max_requests", "batch_max_bytes",
                "batch_poll_seconds")
    for name in positive:
        if getattr(cfg, name) is not None and getattr(cfg, name) <= 0:
            raise ConfigError(f"{key_of(name)} must be > 0, got {getattr(cfg, name)}")
    for name in ("protect_last_n_turns", "prune_min_chars", "max_retries", "retry_delay", "temperature", "max_consecutive_failures",
                 "num_workers"):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"{key_of(name)} must be >= 0, got {getattr(cfg, name)}")
    for name in ("request_timeout", "per_trajectory_timeout"):
        if getattr(cfg, name) <= 0:
            raise ConfigError(f"{key_of(name)} must be > 0 seconds, got {getattr(cfg, name)}")
    if cfg.summary_target_tokens >= cfg.target_max_tokens:
        raise ConfigError(
            f"{key_of('summary_target_tokens')} ({cfg.summary_target_tokens}) must be smaller than "
            f"{key_of('target_max_tokens')} ({cfg.target_max_tokens})"
        )
    _validate_segments(cfg)
    if cfg.cannot_fit not in CANNOT_FIT_CHOICES:
        raise ConfigError(f"{key_of('cannot_fit')} must be one of {', '.join(CANNOT_FIT_CHOICES)}, got {cfg.cannot_fit!r}")
    if cfg.on_failure not in ON_FAILURE_CHOICES:
        raise ConfigError(f"{key_of('on_failure')} must be one of {', '.join(ON_FAILURE_CHOICES)}, got {cfg.on_failure!r}")
    if cfg.summary_style not in STYLES:
        raise ConfigError(f"{key_of('summary_style')} must be one of {', '.join(STYLES)}, got {cfg.summary_style!r}")
    if not cfg.summary_prefix.strip():
        raise ConfigError(f"{key_of('summary_prefix')} must not be empty: it marks the summary turn for the model")
    if style_problem(cfg.prune_style, cfg.prune_template):
        raise ConfigError(f"compression.{style_problem(cfg.prune_style, cfg.prune_template)}")
    if cfg.count_mode not in COUNT_MODES:
        raise ConfigError(f"{key_of('count_mode')} must be one of {', '.join(COUNT_MODES)}, got {cfg.count_mode!r}")
    _validate_chat_roles(cfg.chat_roles)
    enabled_checks(cfg.summary_checks)
    _validate_thresholds(cfg.check_thresholds)
    if cfg.input_format not in INPUT_FORMATS:
        raise ConfigError(f"{key_of('input_format')} must be one of {', '.join(INPUT_FORMATS)}, got {cfg.input_format!r}")
    if cfg.input_dialect not in DIALECTS:
        raise ConfigError(f"{key_of('input_dialect')} must be one of {', '.join(DIALECTS)}, got {cfg.input_dialect!r}")
    _validate_roles(cfg.input_roles)
    if resolve_observations(cfg.input_observations) is None:
        raise ConfigError(f"{key_of('input_observations')} must be auto, none or a list of prefixes "
                          f"(auto in the list: the built-in ones), got {cfg.input_observations!r}")
    _validate_output_rows(cfg)
    if not re.match(r"https?://[^/\s]+", cfg.base_url):
        raise ConfigError(f"{key_of('base_url')} must be an http:// or https:// URL, got {cfg.base_url!r}")


def _validate_output_rows(cfg: CompressionConfig) -> None:
    if cfg.output_rows not in OUTPUT_ROWS:
        raise ConfigError(f"{key_of('output_rows')} must be one of {', '.join(OUTPUT_ROWS)}, got {cfg.output_rows!r}")
    if cfg.output_rows == "tokens" and cfg.count_mode != "chat_template":  # rows are fitted as they are tokenized
        raise ConfigError(f"{key_of('output_rows')}: tokens needs {key_of('count_mode')}: chat_template "
                          f"(rows are fitted as the template renders them), got {cfg.count_mode!r}")


def _validate_segments(cfg: CompressionConfig) -> None:
    if not 0 <= cfg.summary_ratio <= 1:
        raise ConfigError(f"{key_of('summary_ratio')} must be between 0 and 1, got {cfg.summary_ratio}")
    if not 0 < cfg.summary_min_tokens <= cfg.summary_max_tokens:
        raise ConfigError(f"{key_of('summary_min_tokens')} ({cfg.summary_min_tokens}) must be > 0 and at most "
                          f"{key_of('summary_max_tokens')} ({cfg.summary_max_tokens})")
    if cfg.tail_tokens < 0:
        raise ConfigError(f"{key_of('tail_tokens')} must be >= 0, got {cfg.tail_tokens}")
    for name in ("segment_field", "train_field"):
        if not getattr(cfg, name):
            raise ConfigError(f"{key_of(name)} must name a field, got {getattr(cfg, name)!r}")


def _validate_chat_roles(roles: dict) -> None:
    for role, chat_role in roles.items():
        if role not in DEFAULT_CHAT_ROLES:
            raise ConfigError(f"{key_of('chat_roles')} has unknown role {role!r} (roles: {', '.join(DEFAULT_CHAT_ROLES)})")
        if not isinstance(chat_role, str) or not chat_role:
            raise ConfigError(f"{key_of('chat_roles')}.{role} must be a role name, got {chat_role!r}")
    missing = [r for r in DEFAULT_CHAT_ROLES if r not in roles]
    if missing:
        raise ConfigError(f"{key_of('chat_roles')} must map every role; missing: {', '.join(missing)}")


def enabled_checks(value: str) -> tuple[str, ...]:
    """The checks `summarization.checks` turns on, in their running order: all, none, or a comma list."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    if names in (["all"], []):
        return CHECK_NAMES if names else ()
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in CHECK_NAMES]
    if unknown:
        raise ConfigError(f"{key_of('summary_checks')} has unknown check {unknown[0]!r} "
                          f"(all, none, or some of: {', '.join(CHECK_NAMES)})")
    return tuple(n for n in CHECK_NAMES if n in names)


def _validate_thresholds(values: dict) -> None:
    for name, value in values.items():
        if name not in DEFAULT_CHECK_THRESHOLDS:
            raise ConfigError(f"{key_of('check_thresholds')} has unknown key {name!r} "
                              f"(known: {', '.join(DEFAULT_CHECK_THRESHOLDS)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise ConfigError(f"{key_of('check_thresholds')}.{name} must be a number >= 0, got {value!r}")


def _validate_roles(roles: dict) -> None:
    for name, role in roles.items():
        if not isinstance(name, str) or role not in ROLES:
            raise ConfigError(f"{key_of('input_roles')} maps role names to one of {', '.join(ROLES)}, got {name!r}: {role!r}")


def _merged_roles(value: Any, source: str) -> Any:
    """`input.roles` in a file adds to the default names; a name mapped to null is removed."""
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: input.roles must be a mapping of role names, got {value!r}")
    merged = {**DEFAULT_ROLES, **value}
    return {name: role for name, role in merged.items() if role is not None}


def fields_from_mapping(data: Any, source: str) -> dict[str, Any]:
    """Flatten a sectioned mapping into dataclass field values; unknown keys are errors."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections")
    values: dict[str, Any] = {}
    for section, keys in data.items():
        if section not in LAYOUT:
            raise ConfigError(f"{source}: unknown section '{section}' (known: {', '.join(LAYOUT)})")
        if keys is None:
            continue
        if not isinstance(keys, dict):
            raise ConfigError(f"{source}: section '{section}' must be a mapping")
        for key, value in keys.items():
            name = LAYOUT[section].get(key) or ALIASES.get((section, key))
            if name is None:
                known = ", ".join(LAYOUT[section])
                raise ConfigError(f"{source}: unknown key '{section}.{key}' (known in {section}: {known})")
            values[name] = _merged_roles(value, source) if name == "input_roles" else value
    if isinstance(values.get("chat_roles"), dict):  # a file names only the roles it changes
        values["chat_roles"] = {**DEFAULT_CHAT_ROLES, **values["chat_roles"]}
    if isinstance(values.get("check_thresholds"), dict):  # and only the thresholds it changes
        values["check_thresholds"] = {**DEFAULT_CHECK_THRESHOLDS, **values["check_thresholds"]}
    if isinstance(values.get("summary_checks"), list):  # checks: [refusal, echo]
        values["summary_checks"] = ",".join(str(v) for v in values["summary_checks"])
    return values


def _resolve_relative_paths(values: dict[str, Any], base: Path) -> None:
    # "./x" and "../x" in a config file mean "beside this file", so configs travel with their data.
    for name in ("tokenizer_name", "prompt_file", "chat_template", "summary_tokenizer", "cache_dir"):
        value = values.get(name)
        if isinstance(value, str) and value.startswith(("./", "../")):
            values[name] = str((base / value).resolve())


def as_config(config: "str | Path | Mapping[str, Any] | CompressionConfig") -> CompressionConfig:
    """A CompressionConfig from itself, a mapping in the YAML's section layout, or a YAML file's path."""
    if isinstance(config, CompressionConfig):
        return config
    if isinstance(config, Mapping):
        return CompressionConfig(**fields_from_mapping(dict(config), "config mapping"))
    return load_config(config)


def load_config(path: str | Path | None = None, **overrides: Any) -> CompressionConfig:
    """Defaults, then the YAML file, then explicit overrides (None values are ignored)."""
    values: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({_one_line(exc)})") from None
        values = fields_from_mapping(data, str(path))
        _resolve_relative_paths(values, path.parent)
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return CompressionConfig(**values)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}" if path else str(exc)) from None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
