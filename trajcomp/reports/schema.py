"""The report schema: what `compress` and `stats` write and what `compare` and the renderers read.

Defined once, as dataclasses with a `schema_version`, and written and read only here. Reports
written before the schema had a version (schema 1: the same sections, no `schema_version` and no
histograms) still load; their missing sections are None.
"""

from __future__ import annotations

import json
import math
import types
from dataclasses import dataclass, field, fields, is_dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from ..core.metrics import LENGTH_EDGES, RATIO_EDGES, RETENTION_EDGES, STATUSES, Aggregate, Outcome, bin_counts, distribution

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
    total_original: int = 0
    total_compressed: int = 0
    total_saved: int = 0
    overall_compression_ratio: float = 1.0


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
    cache_hits: int | None = field(default=None, metadata=_OMIT)
    cache_file: str | None = field(default=None, metadata=_OMIT)
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
    read: int = 0
    written: int = 0
    rejected: int = 0
    reject_reasons: dict[str, int] = field(default_factory=dict)
    not_sampled: int = 0
    other_shards: int = 0


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
    worst_rows: list[WorstRow] | None = None  # the rows most over the limit, worst first
    tokenizer: TokenizerInfo | None = None
    config: dict[str, dict[str, Any]] | None = None

    @property
    def summary_passes(self) -> int | None:
        """Summaries made over all rows written (a row's second pass counts again)."""
        return None if self.passes is None else sum(int(k) * v for k, v in self.passes.items())

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

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


# ---------------------------------------------------------------------------
# Building a report from an aggregate (any engine)
# ---------------------------------------------------------------------------


def from_aggregate(
    agg: Aggregate,
    *,
    summarizer: str,
    summarizer_stats: dict[str, Any],
    processing: Processing,
    tokenizer: TokenizerInfo,
    config: dict[str, dict[str, Any]],
) -> Report:
    """The report of a run whose rows were fed to `agg`; the rest is what the engine knows."""
    n = agg.rows_written
    compressed = agg.outcomes[Outcome.COMPRESSED.value]
    rejected = sum(agg.reject_reasons.values())
    return Report(
        summary=Summary(
            total_trajectories=n,
            trajectories_compressed=compressed,
            trajectories_skipped_under_target=agg.outcomes[Outcome.SKIPPED_UNDER_TARGET.value],
            trajectories_still_over_limit=agg.still_over_limit,
            trajectories_failed=agg.outcomes[Outcome.FAILED.value],
            compression_rate=_avg(compressed, n),
            outcomes={o.value: agg.outcomes[o.value] for o in Outcome},
            summaries_by_source=dict(sorted(agg.summary_sources.items())),
        ),
        tokens=Tokens(
            agg.original_tokens, agg.compressed_tokens, agg.original_tokens - agg.compressed_tokens,
            round(agg.compressed_tokens / agg.original_tokens, 4) if agg.original_tokens else 1.0,
        ),
        turns=Turns(agg.original_turns, agg.compressed_turns, agg.original_turns - agg.compressed_turns),
        averages=Averages(
            _avg(agg.original_tokens, n), _avg(agg.compressed_tokens, n),
            _avg(agg.original_tokens - agg.compressed_tokens, n),
            _avg(agg.original_turns - agg.compressed_turns, compressed),
        ),
        statuses={s: rejected if s == "rejected" else agg.statuses[s] for s in STATUSES},
        summarization=summarization(summarizer, agg.api_calls, agg.errors, summarizer_stats),
        processing=processing,
        rows=Rows(
            agg.rows_read, n, rejected,
            dict(sorted(agg.reject_reasons.items())), agg.not_sampled, agg.other_shards,
        ),
        distribution=Distribution(Percentiles(**distribution(agg.before)), Percentiles(**distribution(agg.after))),
        lengths=lengths(agg.before, agg.after),
        compression_ratios=Histogram(list(RATIO_EDGES), list(agg.ratio_counts)),
        identifier_retention=Retention(
            agg.retention_rows,
            round(agg.retention_sum / agg.retention_rows, 4) if agg.retention_rows else None,
            Histogram(list(RETENTION_EDGES), list(agg.retention_counts)),
        ),
        assistant_tokens_kept=Retention(
            agg.assistant_rows,
            round(agg.assistant_sum / agg.assistant_rows, 4) if agg.assistant_rows else None,
            Histogram(list(RETENTION_EDGES), list(agg.assistant_counts)),
        ),
        human_turns_cut=HumanTurnsCut(agg.human_turns_cut, agg.rows_with_human_turns_cut),
        passes=dict(sorted(agg.passes.items(), key=lambda kv: int(kv[0]))),
        worst_rows=[WorstRow(**row) for row in agg.worst_rows()],
        tokenizer=tokenizer,
        config=config,
    )


def summarization(summarizer: str, api_calls: int, errors: int, stats: dict[str, Any]) -> Summarization:
    """The summarization section from the row sums and a summarizer's run_stats()."""
    return _build(Summarization, {"summarizer": summarizer, "api_calls": api_calls, "errors": errors, **stats},
                  "summarization")


def lengths(before, after) -> Lengths:
    return Lengths(list(LENGTH_EDGES), bin_counts(before, LENGTH_EDGES), bin_counts(after, LENGTH_EDGES))


def _avg(total: float, count: int) -> float:
    return round(total / count, 2) if count else 0.0


# ---------------------------------------------------------------------------
# Writing and reading
# ---------------------------------------------------------------------------


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


def load(path: Path) -> Report:
    """A report file of any schema version; NotAReport (naming the file) when it cannot be read as one."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise NotAReport(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise NotAReport(f"{path}: not a trajcomp report (not UTF-8 text)") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise NotAReport(f"{path}: not a trajcomp report (not valid JSON: {exc})") from None
    try:
        return read_report(data, "report")
    except NotAReport as exc:
        raise NotAReport(f"{path}: {exc}") from None


def read_report(data: Any, where: str = "report") -> Report:
    """A Report from parsed JSON: schema 2 as written, schema 1 (no schema_version) converted."""
    if not isinstance(data, dict):
        raise NotAReport(f"not a trajcomp report (a JSON {_json_type(data)}, not an object)")
    version = data.get("schema_version", 1)
    if version not in (1, SCHEMA_VERSION):
        raise NotAReport(f"a report of schema version {version!r}; this trajcomp reads versions 1 to {SCHEMA_VERSION}")
    # Every compress report has both; without them its figures would read as zeros, not as missing.
    if not all(isinstance(data.get(s), dict) for s in ("summary", "tokens")):
        stats = "files" in data and "tokens_before" in data
        raise NotAReport("the output of trajcomp stats, not a compress report" if stats
                         else "not a trajcomp report (no 'summary' and 'tokens' sections)")
    if version == 1:
        data = {k: v for k, v in data.items() if k in _V1_SECTIONS}  # schema 1 had no other sections
    report = _build(Report, data, where)
    report.schema_version = SCHEMA_VERSION  # converted: written again, it is a version-2 report
    return report


_V1_SECTIONS = ("summary", "tokens", "turns", "averages", "summarization", "processing", "rows", "distribution",
                "tokenizer", "config")


def _json_type(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}.get(
        type(value), type(value).__name__)


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _build(tp: Any, value: Any, where: str) -> Any:
    """`value` (parsed JSON) checked against the type `tp`; NotAReport names the key that is wrong."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return _build(next(a for a in args if a is not type(None)), value, where)
    if is_dataclass(tp):
        return _build_dataclass(tp, value, where)
    if origin is list:
        _expect(isinstance(value, list), value, where, "a list")
        return [_build(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        _expect(isinstance(value, dict), value, where, "an object")
        return {k: _build(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        _expect(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
                value, where, "a number")
        return value
    if tp is int:
        _expect(isinstance(value, int) and not isinstance(value, bool), value, where, "an integer")
        return value
    if tp is bool:
        _expect(isinstance(value, bool), value, where, "true or false")
        return value
    if tp is str:
        _expect(isinstance(value, str), value, where, "a string")
        return value
    raise TypeError(f"no reader for {tp!r}")  # a schema type this function does not know: a bug here


def _build_dataclass(cls: type, value: Any, where: str) -> Any:
    _expect(isinstance(value, dict), value, where, "an object")
    hints, known = _hints(cls), {f.name for f in fields(cls)}
    kwargs = {name: _build(hints[name], value[name], f"{where}.{name}") for name in known if name in value}
    if "extra" in known:  # keys the schema does not name are kept as they are
        kwargs["extra"] = {k: v for k, v in value.items() if k not in known}
    return cls(**kwargs)


def _expect(ok: bool, value: Any, where: str, kind: str) -> None:
    if not ok:
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise NotAReport(f"{where} is {shown}, not {kind}")


# ---------------------------------------------------------------------------
# Comparisons: the figures `compare` puts side by side
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    key: str  # its name in --json
    label: str  # its name in the text table
    path: tuple[str, ...]  # where it sits in a Report (attributes, then dict keys)
    decimals: int | None = None  # None: a count, shown as an integer
    better: str = ""  # "lower" or "higher" when a change is good or bad; "" when neither


FIGURES = (
    Figure("target_max_tokens", "target max tokens", ("config", "compression", "target_max_tokens")),
    Figure("summary_target_tokens", "summary target tokens", ("config", "compression", "summary_target_tokens")),
    Figure("rows_read", "rows read", ("rows", "read")),
    Figure("rows_written", "rows written", ("rows", "written")),
    Figure("rows_rejected", "rows rejected", ("rows", "rejected"), better="lower"),
    Figure("compressed", "compressed", ("summary", "trajectories_compressed")),
    Figure("skipped_under_target", "skipped under target", ("summary", "trajectories_skipped_under_target")),
    Figure("still_over_limit", "still over limit", ("summary", "trajectories_still_over_limit"), better="lower"),
    Figure("cannot_fit", "cannot fit", ("statuses", "cannot_fit"), better="lower"),
    Figure("failed", "failed", ("summary", "trajectories_failed"), better="lower"),
    Figure("tokens_before", "tokens before", ("tokens", "total_original")),
    Figure("tokens_after", "tokens after", ("tokens", "total_compressed")),
    Figure("tokens_saved", "tokens saved", ("tokens", "total_saved"), better="higher"),
    Figure("compression_ratio", "overall ratio", ("tokens", "overall_compression_ratio"), 4),
    Figure("p50_tokens_after", "p50 tokens after", ("distribution", "after", "p50")),
    Figure("p99_tokens_after", "p99 tokens after", ("distribution", "after", "p99")),
    Figure("identifier_retention", "identifier retention (mean)", ("identifier_retention", "mean"), 4, "higher"),
    Figure("assistant_tokens_kept", "assistant tokens kept (mean)", ("assistant_tokens_kept", "mean"), 4, "higher"),
    Figure("human_turns_cut", "user turns cut", ("human_turns_cut", "turns"), better="lower"),
    Figure("summary_passes", "summary passes", ("summary_passes",)),
    Figure("api_calls", "summarizer api calls", ("summarization", "api_calls"), better="lower"),
    Figure("http_requests", "http requests", ("summarization", "http_requests")),
    Figure("retries", "retries", ("summarization", "retries"), better="lower"),
    Figure("cache_hits", "cache hits", ("summarization", "cache_hits")),
    Figure("prompt_tokens", "prompt tokens", ("summarization", "usage", "prompt_tokens")),
    Figure("completion_tokens", "completion tokens", ("summarization", "usage", "completion_tokens")),
    Figure("latency_p95_ms", "latency p95 (ms)", ("summarization", "latency_ms", "p95")),
    Figure("duration_seconds", "duration (s)", ("processing", "duration_seconds"), 2),
    Figure("rows_per_second", "throughput (rows/s)", ("processing", "rows_per_second"), 2),
)


@dataclass
class Comparison:
    names: list[str]  # short, distinct names of the reports
    paths: list[str]
    values: dict[str, list[Number | None]]  # figure key -> one value per report (None: not in it)

    def differences(self, key: str) -> list[dict[str, Number | None]]:
        """Each later report's value of `key` against the first's: absolute and percent."""
        base, *later = self.values[key]
        return [difference(base, value) for value in later]

    def to_dict(self) -> dict[str, Any]:
        return {
            "reports": self.names,
            "paths": self.paths,
            "figures": self.values,
            "differences": {key: self.differences(key) for key in self.values},
        }


def comparison(reports: list[Report], names: list[str], paths: list[str]) -> Comparison:
    return Comparison(names, paths, {f.key: [figure_value(r, f.path) for r in reports] for f in FIGURES})


def figure_value(report: Report, path: tuple[str, ...]) -> Number | None:
    """The number at `path`, or None when the report lacks it."""
    value: Any = report
    for key in path:
        value = value.get(key) if isinstance(value, dict) else getattr(value, key, None)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None  # NaN would make the --json output invalid JSON


def difference(base: Number | None, value: Number | None) -> dict[str, Number | None]:
    """value - base, and that as a percent of base (None when either is missing or base is 0)."""
    if base is None or value is None:
        return {"absolute": None, "percent": None}
    absolute = value - base
    if isinstance(absolute, float):
        absolute = round(absolute, 4)  # 0.3 - 0.1 should not print as 0.19999999999999998
    if base == 0:
        percent = 0.0 if value == 0 else None
    else:
        percent = round((value - base) / abs(base) * 100, 2)
    return {"absolute": absolute, "percent": percent}
