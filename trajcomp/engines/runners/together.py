"""The summarizers of several worker processes or Ray actors seen as one: live figures and run stats."""

from __future__ import annotations

from collections import Counter
from typing import Any


class Together:
    """The progress bar's live figures and the report's summarizer figures, over every worker."""

    def __init__(self):
        self.lives: dict[int, dict[str, int]] = {}  # each worker's latest live()
        self.stats: list[dict[str, Any]] = []  # each worker's run_stats(), once it stopped

    def live(self) -> dict[str, int]:
        total: Counter = Counter()
        for live in self.lives.values():
            total.update(live)
        return dict(total)

    def run_stats(self) -> dict[str, Any]:
        return merged_stats(self.stats)


def merged_stats(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Several summarizers' run_stats() as one: counts summed; `max_calls_in_flight` the sum of each
    worker's maximum (each worker's calls are bounded by its share, the sum by the run's total);
    latency `max` the largest, and its percentiles each worker's weighted by its HTTP requests
    (a worker keeps only its percentiles: an estimate, not the percentile of all calls)."""
    if not stats:
        return {}
    merged: dict[str, Any] = {}
    for key in stats[0]:
        values = [s[key] for s in stats if key in s]
        if key == "latency_ms":
            merged[key] = _latency(values, [s.get("http_requests") or 0 for s in stats if key in s])
        elif isinstance(values[0], dict):
            merged[key] = merged_stats(values)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            merged[key] = sum(values)
        else:  # names, URLs, the cache file: the same in every worker
            merged[key] = values[0]
    return merged


def _latency(values: list[dict[str, int]], weights: list[int]) -> dict[str, int]:
    total = sum(weights)
    out = {}
    for name in values[0]:
        if name == "max":
            out[name] = max(v[name] for v in values)
        else:
            out[name] = round(sum(v[name] * w for v, w in zip(values, weights)) / total) if total else 0
    return out
