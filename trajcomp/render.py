"""Short human-readable views of a report or an estimate, for the end of a CLI run."""

from __future__ import annotations

from typing import Any


def _n(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"


def render_report(report: dict[str, Any], report_path: str) -> str:
    s, t, rows, p = report["summary"], report["tokens"], report["rows"], report["processing"]
    d = report["distribution"]
    lines = [
        f"trajcomp: {_n(rows['read'])} rows read in {p['duration_seconds']:.1f}s ({_n(p['rows_per_second'])} rows/s)",
        f"  compressed          {_n(s['trajectories_compressed'])}",
        f"  under target        {_n(s['trajectories_skipped_under_target'])} (left as they were)",
        f"  still over limit    {_n(s['trajectories_still_over_limit'])}",
        f"  failed              {_n(s['trajectories_failed'])} (written unchanged, flagged)",
        f"  rejected            {_n(rows['rejected'])}" + _reasons(rows["reject_reasons"]),
        f"  tokens              {_n(t['total_original'])} -> {_n(t['total_compressed'])} "
        f"(ratio {t['overall_compression_ratio']})",
        f"  tokens per row p50  {_n(d['before']['p50'])} -> {_n(d['after']['p50'])}, "
        f"max {_n(d['before']['max'])} -> {_n(d['after']['max'])}",
        f"  summarizer          {report['summarization']['summarizer']}: "
        f"{_n(report['summarization']['api_calls'])} API calls, {_n(report['summarization']['errors'])} errors",
        f"  report              {report_path}",
    ]
    if rows["not_sampled"]:
        lines.insert(1, f"  not sampled         {_n(rows['not_sampled'])}")
    if p["rejects_file"]:
        lines.append(f"  rejects             {p['rejects_file']}")
    return "\n".join(lines)


def _reasons(reasons: dict[str, int]) -> str:
    return " (" + ", ".join(f"{k}: {v}" for k, v in reasons.items()) + ")" if reasons else ""


def render_estimate(est: dict[str, Any]) -> str:
    b, a = est["tokens_before"], est["tokens_after_estimate"]
    return "\n".join(
        [
            f"trajcomp (dry run): {_n(est['rows'])} rows, target {_n(est['target_max_tokens'])} tokens",
            f"  over target             {_n(est['over_target'])}",
            f"  would fit after         {_n(est['would_fit_after_compression'])}",
            f"  would stay over target  {_n(est['would_stay_over_target'])}",
            f"  summarizer calls        {_n(est['summarizer_calls_needed'])} "
            f"(~{_n(est['summary_tokens_needed'])} summary tokens)",
            f"  rejected                {_n(est['rows_rejected'])}" + _reasons(est["reject_reasons"]),
            f"  tokens min/p50/p90/p99/max  {b['min']}/{b['p50']}/{b['p90']}/{b['p99']}/{b['max']}"
            f" -> ~{a['min']}/{a['p50']}/{a['p90']}/{a['p99']}/{a['max']}",
        ]
    )
