"""The report schema: what `compress` and `stats` write and what `compare` and the renderers read.

Defined once, as dataclasses with a `schema_version`, written here (`to_json`) and read by
reading.py; built from a run's aggregate by build.py and compared by comparison.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Union

from ..core.metrics import LENGTH_EDGES

SCHEMA_VERSION = 2
Number = Union[int, float]
_OMIT = {"omit_if_none": True}  # metadata: the key is left out of the JSON when the value is None


class NotAReport(ValueError):
    """The file cannot be read as a trajcomp report; the message names it and says why."""


# ---------------------------------------------------------------------------
# The schema
# ---------------------------------------------------------------------------


@dataclass
class Summary:
    total_trajectories: int = 0
    trajectories_compressed: int = 0
    trajectories_skipped_under_target: int = 0
    trajectories_still_over_limit: int = 0
    trajectories_failed: int = 0
    compression_rate: float = 0.0  # compressed rows / rows written
    outcomes: dict[str, int] = field(default_factory=dict)
    summaries_by_source: dict[str, int] = field(default_factory=dict)


@dataclass
class Tokens:
    """Tokens in (the input rows written) and tokens written (the sum over the output rows: with segments,
    several rows per input row, so it may be more than went in), and their ratio; the assistant tokens
    of the input rows written, and those trained: in unmarked assistant turns of rows at or under the
    target (a trainer cuts or drops a row over it). None: a report of a run before they were counted."""

    total_original: int = 0
    total_compressed: int = 0
    total_saved: int = 0  # total_original - total_compressed (negative when segments write more)
    overall_compression_ratio: float = 1.0  # total_compressed / total_original
    assistant: int | None = None
    trained: int | None = None
    trained_share: float | None = None  # trained / assistant (None: no assistant tokens)


@dataclass
class Turns:
    total_original: int = 0
    total_compressed: int = 0
    total_removed: int = 0


@dataclass
class Averages:
    original_tokens_per_trajectory: float = 0.0
    compressed_tokens_per_trajectory: float = 0.0
    tokens_saved_per_trajectory: float = 0.0
    turns_removed_per_compressed_trajectory: float = 0.0


@dataclass
class Latency:
    p50: int = 0
    p95: int = 0
    max: int = 0


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class BoughtOver:
    """The summaries bought for rows that stayed over the target (written or rejected), and the prompt
    and completion tokens their calls were billed (0 for a summarizer that reports no usage)."""

    summaries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Batches:
    """How a batch run bought its summaries (summarization.batch), over its resumes."""

    batches: int = 0
    rounds: int = 0
    requests: int = 0
    answered: int = 0
    failed: int = 0
    failed_by_reason: dict[str, int] = field(default_factory=dict)
    wait_seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Summaries of the rows the cache answered whole before this run bought any (batch import, an
    # earlier run): the run's cache hits. 0 in reports of runs before it was counted.
    from_cache: int = 0


@dataclass
class Summarization:
    """Summed over every row (rejected ones too), plus what the summarizer says about this run."""

    summarizer: str = ""
    api_calls: int = 0
    errors: int = 0
    model: str | None = field(default=None, metadata=_OMIT)
    base_url: str | None = field(default=None, metadata=_OMIT)
    http_requests: int | None = field(default=None, metadata=_OMIT)  # made by this run (not from the cache)
    retries: int | None = field(default=None, metadata=_OMIT)
    max_calls_in_flight: int | None = field(default=None, metadata=_OMIT)
    latency_ms: Latency | None = field(default=None, metadata=_OMIT)
    usage: Usage | None = field(default=None, metadata=_OMIT)
    bought_for_rows_over: BoughtOver | None = field(default=None, metadata=_OMIT)  # None: a report from before it
    cache_hits: int | None = field(default=None, metadata=_OMIT)
    cache_file: str | None = field(default=None, metadata=_OMIT)
    batch: Batches | None = field(default=None, metadata=_OMIT)
    # The answer checks of a model summarizer (summarization.checks): those on ([] when turned off),
    # the answers each turned away, and the rows none of whose answers passed (given on_failure).
    # None in reports of summarizers without checks, and of runs before them.
    checks: list[str] | None = field(default=None, metadata=_OMIT)
    answers_failed_checks: dict[str, int] | None = field(default=None, metadata=_OMIT)
    rows_fallen_back_on_checks: int | None = field(default=None, metadata=_OMIT)
    checks_seconds: float | None = field(default=None, metadata=_OMIT)  # the CPU time they took (every process)
    extra: dict[str, Any] = field(default_factory=dict)  # figures a summarizer adds that the schema does not name


@dataclass
class Processing:
    trajcomp_version: str = ""
    started_at: str = ""
    duration_seconds: float = 0.0
    rows_per_second: float = 0.0
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    rejects_file: str | None = None
    summary_examples_file: str | None = field(default=None, metadata=_OMIT)  # --summary-examples
    skipped_files: list[str] = field(default_factory=list)
    stray_files_in_output: list[str] = field(default_factory=list)
    files_all_rejected: list[str] = field(default_factory=list)  # inputs every row of which was rejected
    resumed: bool = False
    rows_from_checkpoint: int = 0
    selection: dict[str, Any] = field(default_factory=dict)
    max_rows_running: int | None = field(default=None, metadata=_OMIT)
    workers: int | None = field(default=None, metadata=_OMIT)  # the local engine's processes compressing rows
    # Characters the training tokenizer encoded in this process (one worker: the whole run): the rows'
    # text, and what summarizing encodes again. A diagnostic, not a figure of the rows.
    tokenizer_chars: int | None = field(default=None, metadata=_OMIT)
    engine: str | None = field(default=None, metadata=_OMIT)  # "ray"; None: the local engine
    ray_actors: int | None = field(default=None, metadata=_OMIT)
    ray_nodes: int | None = field(default=None, metadata=_OMIT)  # the cluster's nodes the actors ran on


@dataclass
class Rows:
    """Input rows read, output rows written (with segments several per input row), input rows rejected and
    not taken; read = inputs_written + rejected + not_sampled + other_shards."""

    read: int = 0
    written: int = 0
    rejected: int = 0
    reject_reasons: dict[str, int] = field(default_factory=dict)
    not_sampled: int = 0
    other_shards: int = 0
    inputs_written: int | None = None  # input rows whose rows were written (read from an older report: written)


@dataclass
class Percentiles:
    """Nearest-rank percentiles of tokens per row."""

    min: int = 0
    p50: int = 0
    p90: int = 0
    p99: int = 0
    max: int = 0


@dataclass
class Distribution:
    before: Percentiles = field(default_factory=Percentiles)
    after: Percentiles = field(default_factory=Percentiles)


@dataclass
class Histogram:
    """counts[i] rows in [edges[i], edges[i+1]); the last bin also holds anything above its upper edge."""

    edges: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)


@dataclass
class Lengths:
    """Tokens per row before and after, on the fixed bins of metrics.LENGTH_EDGES (runs overlay)."""

    edges: list[int] = field(default_factory=lambda: list(LENGTH_EDGES))
    before: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)


@dataclass
class Retention:
    """A share per row (identifier_retention, assistant_tokens_kept) over the rows that carry one."""

    rows: int = 0
    mean: float | None = None
    histogram: Histogram = field(default_factory=Histogram)


@dataclass
class HumanTurnsCut:
    """User turns of summarized regions that were too long to carry whole (summary_turn.py)."""

    turns: int = 0
    rows: int = 0


@dataclass
class Pruning:
    """What compression.prune did to the rows written: those holding stubs, those of them that fit with no
    summary (each a summary request or more avoided), their stubs, the stubs that were older copies of a
    later output, and the tokens the stubs saved."""

    rows_pruned: int = 0
    rows_fit_without_summary: int = 0
    outputs_pruned: int = 0
    outputs_deduplicated: int = 0
    tokens_saved: int = 0
    summaries_avoided: int = 0


@dataclass
class Segments:
    """What compression.segments made of the rows written: input rows in, output rows out, input rows by
    their number of output rows ("3": rows cut into three), the summaries the rows used, and the input's
    assistant tokens, all and those trained (in the one row where each turn is new, unmarked)."""

    rows_in: int = 0
    rows_out: int = 0
    segments_per_row: dict[str, int] = field(default_factory=dict)
    summaries: int = 0
    assistant_tokens: int = 0
    assistant_tokens_trained: int = 0
    trained_share: float | None = None  # assistant_tokens_trained / assistant_tokens (None: none)


@dataclass
class WorstRow:
    source: str | None = None  # the input file
    line: int | None = None  # its line (a .json array: the element's 1-based index)
    original_tokens: int = 0
    compressed_tokens: int = 0
    over_by: int = 0  # compressed_tokens - target_max_tokens
    status: str = ""


@dataclass
class TokenizerInfo:
    name: str | None = None
    class_name: str = ""
    vocab_size: int = 0


@dataclass
class Report:
    """The report of a compress run. Sections new in schema 2 are None in a converted older report."""

    schema_version: int = SCHEMA_VERSION
    summary: Summary = field(default_factory=Summary)
    tokens: Tokens = field(default_factory=Tokens)
    turns: Turns | None = None
    averages: Averages | None = None
    statuses: dict[str, int] | None = None  # every row read and taken in exactly one of STATUSES
    summarization: Summarization | None = None
    processing: Processing | None = None
    rows: Rows | None = None
    distribution: Distribution | None = None
    lengths: Lengths | None = None
    compression_ratios: Histogram | None = None  # of the compressed rows
    identifier_retention: Retention | None = None
    assistant_tokens_kept: Retention | None = None  # of every row written
    human_turns_cut: HumanTurnsCut | None = None
    passes: dict[str, int] | None = None  # summaries made per row -> rows written
    pruning: Pruning | None = field(default=None, metadata=_OMIT)  # runs with compression.prune only
    segments: Segments | None = field(default=None, metadata=_OMIT)  # runs with compression.segments only
    worst_rows: list[WorstRow] | None = None  # the rows most over the limit, worst first
    tokenizer: TokenizerInfo | None = None
    config: dict[str, dict[str, Any]] | None = None

    @property
    def summary_passes(self) -> int | None:
        """Summaries made over all rows written (a row's second pass counts again)."""
        return None if self.passes is None else sum(int(k) * v for k, v in self.passes.items())

    @property
    def answers_failed_checks(self) -> int | None:
        """Summarizer answers turned away by a check, all checks together (None: not checked)."""
        failed = self.summarization.answers_failed_checks if self.summarization else None
        return None if failed is None else sum(failed.values())

    @property
    def target_max_tokens(self) -> int | None:
        value = ((self.config or {}).get("compression") or {}).get("target_max_tokens")
        return value if isinstance(value, int) else None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass
class FileRows:
    """One input file's rows: counted (valid) and rejected."""

    path: str = ""
    rows: int = 0
    rejected: int = 0


@dataclass
class DatasetStats:
    """What `stats` and `compress --dry-run` write: lengths now and after a planned run."""

    schema_version: int = SCHEMA_VERSION
    inputs: list[str] = field(default_factory=list)
    tokenizer: TokenizerInfo = field(default_factory=TokenizerInfo)
    target_max_tokens: int = 0
    summary_target_tokens: int = 0
    protect_last_n_turns: int = 0
    rows: int = 0  # valid rows
    rows_rejected: int = 0
    reject_reasons: dict[str, int] = field(default_factory=dict)
    rows_not_sampled: int | None = field(default=None, metadata=_OMIT)  # --dry-run only
    rows_other_shards: int | None = field(default=None, metadata=_OMIT)
    over_target: int = 0
    would_fit_after_compression: int = 0
    would_stay_over_target: int = 0
    decisions: dict[str, int] = field(default_factory=dict)
    summarizer_calls_needed: int = 0
    summary_tokens_needed: int = 0
    tokens_before: Percentiles = field(default_factory=Percentiles)
    tokens_after_estimate: Percentiles = field(default_factory=Percentiles)
    lengths: Lengths = field(default_factory=Lengths)  # before, and after as planned
    files: list[FileRows] = field(default_factory=list)
    pruning: Pruning | None = field(default=None, metadata=_OMIT)  # with --prune: what the stubs would do
    # With --segments: the output rows the run would write and the summaries they would use, as the run's
    # row core cuts them with extractive summaries (the after figures are then the output rows' lengths).
    rows_out: int | None = field(default=None, metadata=_OMIT)
    summaries: int | None = field(default=None, metadata=_OMIT)

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


def to_json(value: Any) -> Any:
    """A schema object as JSON-able data, keys in field order."""
    if is_dataclass(value):
        out: dict[str, Any] = {}
        for f in fields(value):
            item = getattr(value, f.name)
            if f.name == "extra":
                out.update(item)
            elif not (item is None and f.metadata.get("omit_if_none")):
                out[f.name] = to_json(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value
