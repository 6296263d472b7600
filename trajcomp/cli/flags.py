"""A run's config from a command's flags: shared by compress and the batch commands."""

from __future__ import annotations

from ..core.config import load_config


def config_from_flags(flags):
    """The run's config: the file's, with the flags given on top (a command without a flag leaves it to the file)."""
    flag = lambda name: getattr(flags, name, None)  # noqa: E731
    path = lambda name: str(flag(name)) if flag(name) else None  # noqa: E731
    return load_config(
        flags.config,
        target_max_tokens=flag("target_max_tokens"),
        summary_target_tokens=flag("summary_target_tokens"),
        protect_last_n_turns=flag("protect_last_n"),
        tokenizer_name=flag("tokenizer"),
        count_mode=flag("count_mode"),
        chat_template=path("chat_template"),
        max_passes=flag("max_passes"),
        prune=True if flag("prune") else None,
        segments=True if flag("segments") else None,
        output_rows="tokens" if flag("token_rows") else None,
        summary_examples_file=flag("summary_examples"),
        summarizer=flag("summarizer"),
        summary_style=flag("summary_style"),
        summary_prefix=flag("summary_prefix"),
        summary_tokenizer=path("summary_tokenizer"),
        max_concurrent_requests=flag("concurrency"),
        num_workers=flag("workers"),
        max_rows_in_memory=flag("max_rows_in_memory"),
        base_url=flag("base_url"),
        summarization_model=flag("model"),
        api_key_env=flag("api_key_env"),
        request_timeout=flag("request_timeout"),
        per_trajectory_timeout=flag("trajectory_timeout"),
        max_retries=flag("max_retries"),
        retry_delay=flag("retry_delay"),
        on_failure=flag("on_failure"),
        cannot_fit=flag("cannot_fit"),
        summary_checks=flag("summary_checks"),
        cache=False if flag("no_cache") else None,
        cache_dir=flag("cache_dir"),
        batch=True if flag("batch") else None,
        input_format=flag("input_format"),
        input_observations=_observations(flag("observations")),
    )


def _observations(values: list[str] | None):
    """`--observations` as `input.observations` takes it: auto or none alone, else a list of prefixes."""
    if not values:
        return None
    return values[0] if len(values) == 1 and values[0] in ("auto", "none") else list(values)
