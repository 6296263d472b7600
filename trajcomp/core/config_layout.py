"""The config file's layout: its sections, each key's dataclass field, and a field named as the file names it."""

from __future__ import annotations

# YAML section -> {yaml key -> dataclass field}. The seven sections after `input` and their keys are
# the reference's `trajectory_compression.yaml`; the extra keys are trajcomp's own.
LAYOUT: dict[str, dict[str, str]] = {
    "input": {"format": "input_format", "roles": "input_roles", "dialect": "input_dialect",
              "observations": "input_observations"},
    "tokenizer": {"name": "tokenizer_name", "trust_remote_code": "trust_remote_code", "chat_template": "chat_template"},
    "compression": {
        "target_max_tokens": "target_max_tokens",
        "summary_target_tokens": "summary_target_tokens",
        "count_mode": "count_mode",
        "chat_roles": "chat_roles",
        "max_passes": "max_passes",
        "prune": "prune", "prune_min_chars": "prune_min_chars", "prune_style": "prune_style",
        "prune_template": "prune_template",
        "segments": "segments", "summary_ratio": "summary_ratio", "summary_min_tokens": "summary_min_tokens",
        "summary_max_tokens": "summary_max_tokens", "tail_tokens": "tail_tokens",
        "cannot_fit": "cannot_fit",
    },
    "protected_turns": {
        "first_system": "protect_first_system",
        "first_human": "protect_first_human",
        "first_gpt": "protect_first_gpt",
        "first_tool": "protect_first_tool",
        "last_n_turns": "protect_last_n_turns",
    },
    "summarization": {
        "summarizer": "summarizer",
        "model": "summarization_model",
        "base_url": "base_url",
        "api_key_env": "api_key_env",
        "temperature": "temperature",
        "max_retries": "max_retries",
        "retry_delay": "retry_delay",
        "request_timeout": "request_timeout",
        "prompt_file": "prompt_file",
        "max_input_tokens": "max_input_tokens",
        "tokenizer": "summary_tokenizer",
        "cache": "cache",
        "cache_dir": "cache_dir",
        "style": "summary_style",
        "batch": "batch",
        "batch_max_requests": "batch_max_requests",
        "batch_max_bytes": "batch_max_bytes",
        "batch_poll_seconds": "batch_poll_seconds",
        "checks": "summary_checks",
        "check_thresholds": "check_thresholds",
    },
    "output": {
        "summary_prefix": "summary_prefix",
        "add_summary_notice": "add_summary_notice",
        "summary_notice_text": "summary_notice_text",
        "output_suffix": "output_suffix",
        "segment_field": "segment_field",
        "train_field": "train_field",
        "rows": "output_rows",
        "summary_examples": "summary_examples_file",
    },
    "processing": {
        "num_workers": "num_workers",
        "max_concurrent_requests": "max_concurrent_requests",
        "skip_under_target": "skip_under_target",
        "save_over_limit": "save_over_limit",
        "per_trajectory_timeout": "per_trajectory_timeout",
        "on_failure": "on_failure",
        "max_consecutive_failures": "max_consecutive_failures",
        "max_rows_in_memory": "max_rows_in_memory",
    },
    "metrics": {
        "enabled": "metrics_enabled",
        "per_trajectory": "metrics_per_trajectory",
        "output_file": "metrics_output_file",
    },
}

# Keys some versions of the reference wrote under another name.
ALIASES = {("protected_turns", "first_assistant"): "protect_first_gpt"}


# The keys of compression.segments: in a report's config only when it is on, as the pruning keys.
SEGMENT_KEYS = frozenset({"segments", "summary_ratio", "summary_min_tokens", "summary_max_tokens", "tail_tokens",
                          "segment_field", "train_field"})


def key_of(name: str) -> str:
    """A field as the config file names it (protect_last_n_turns -> protected_turns.last_n_turns)."""
    return next((f"{section}.{key}" for section, keys in LAYOUT.items() for key, field_name in keys.items()
                 if field_name == name), name)
