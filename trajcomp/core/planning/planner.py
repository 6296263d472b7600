"""Choose the turns to summarize: a pure function of roles and token counts (no I/O, no tokenizer).

Roles are the ShareGPT ones: "system", "human", "gpt", "tool" (other formats map onto them).
The region is the half-open range [start, end) of turn indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Sequence

from ..dialects.validity import alternation_parity


class Decision(str, Enum):
    SKIPPED_UNDER_TARGET = "skipped_under_target"
    NOTHING_TO_COMPRESS = "nothing_to_compress"  # head and tail leave no middle
    NO_NET_SAVINGS = "no_net_savings"  # the middle is no bigger than a summary
    COMPRESS = "compress"


@dataclass(frozen=True)
class PlanParams:
    target_max_tokens: int
    # Every token compressing adds to the row: the summary turn (prefix, body, the template's
    # markers around it) and the notice. The real cost once known, an estimate before.
    summary_tokens: int
    protect_first_system: bool = True
    protect_first_human: bool = True
    protect_first_gpt: bool = True
    protect_first_tool: bool = True
    protect_last_n_turns: int = 4
    # Set per row (not a config key) for rows in LLaMA-Factory's dialect: when the row follows its
    # alternation rule (see `alternation_parity`), the output row follows it too.
    alternation: bool = False

    @classmethod
    def from_config(cls, cfg, summary_tokens: int | None = None) -> "PlanParams":
        """The config's settings; the summary costs its budget unless a better estimate is given."""
        fields = {name: getattr(cfg, name) for name in cls.__dataclass_fields__ if name not in ("summary_tokens", "alternation")}
        return cls(summary_tokens=cfg.summary_target_tokens if summary_tokens is None else summary_tokens, **fields)


@dataclass(frozen=True)
class Plan:
    decision: Decision
    total_tokens: int
    start: int = 0
    end: int = 0
    region_tokens: int = 0
    # The turn right after the region is a human turn: the summary opens it instead of
    # standing alone, so that two human turns never follow each other.
    merge_into_next: bool = False
    # The turn right before the region is the head's human turn (compression.segments in a row that keeps
    # an alternation): the summary joins it.
    merge_into_prev: bool = False
    # Over the target even with everything between the protected head and tail summarized.
    cannot_fit: bool = False
    limit: int = 0  # where the region would have to stop at the latest


def plan(roles: Sequence[str], counts: Sequence[int], params: PlanParams, fixed: int = 0) -> Plan:
    """The region to summarize, or why nothing is; `fixed` tokens belong to no turn (a template's own)."""
    n = len(roles)
    total = fixed + sum(counts)
    if total <= params.target_max_tokens:
        return Plan(Decision.SKIPPED_UNDER_TARGET, total)
    parity = alternation_parity(roles) if params.alternation else None
    start, limit = summarizable(roles, params, parity)
    if start >= limit:
        return Plan(Decision.NOTHING_TO_COMPRESS, total, cannot_fit=True)
    need = total - params.target_max_tokens + params.summary_tokens
    end, region_tokens = _greedy_end(roles, counts, start, limit, need, parity)
    if region_tokens <= params.summary_tokens:
        return Plan(Decision.NO_NET_SAVINGS, total, start, end, region_tokens, cannot_fit=True, limit=limit)
    merge = end < n and roles[end] == "human"
    return Plan(Decision.COMPRESS, total, start, end, region_tokens, merge, cannot_fit=region_tokens < need, limit=limit)


def summarizable(roles: Sequence[str], params: PlanParams, parity: int | None = None) -> tuple[int, int]:
    """[start, limit): the turns a summary may replace; those before are the protected head, those
    after the protected tail (empty when start >= limit)."""
    head_end, tail_start = protected_bounds(roles, params)
    start = _region_start(roles, head_end, tail_start, parity)
    return start, _region_limit(roles, start, tail_start, parity)


def protected_bounds(roles: Sequence[str], params: PlanParams) -> tuple[int, int]:
    """(head_end, tail_start): the turns before head_end are the protected head, those from tail_start the tail."""
    tail_start = max(0, len(roles) - params.protect_last_n_turns)
    return _head_end(roles, params, tail_start), tail_start


def _head_end(roles: Sequence[str], params: PlanParams, tail_start: int) -> int:
    """One past the last protected head turn that lies before the tail (0 when none)."""
    wanted = {
        role
        for role, on in (
            ("system", params.protect_first_system),
            ("human", params.protect_first_human),
            ("gpt", params.protect_first_gpt),
            ("tool", params.protect_first_tool),
        )
        if on
    }
    last = -1
    for i, role in enumerate(roles[:tail_start]):
        if role in wanted:
            wanted.discard(role)
            last = i
    return last + 1


def _may_start(roles: Sequence[str], i: int, parity: int | None) -> bool:
    # A tool turn (an observation) answers the call before it, so it stays with it: the summary, a
    # human turn, never takes a result's place.
    if roles[i] == "tool":
        return False
    if parity is not None:  # the summary takes a user-side place: a human turn's
        return i % 2 == parity or i == 0
    return not (i > 0 and roles[i - 1] == "human")  # and never follows a human turn


def _may_end(roles: Sequence[str], end: int, parity: int | None) -> bool:
    """Whether the region may stop before turn `end`. Never after the last turn: its role is the row's
    last, which a trainer may rely on (the summary would end the row as a human turn)."""
    if end >= len(roles):
        return False
    if parity is not None:  # a gpt-side turn follows the summary, or a human turn the summary opens
        return end % 2 != parity or roles[end] == "human"
    return roles[end] != "tool"  # a gpt turn's tool turns go with it


def _region_start(roles: Sequence[str], start: int, tail_start: int, parity: int | None) -> int:
    while start < tail_start and not _may_start(roles, start, parity):
        start += 1
    return start


def _region_limit(roles: Sequence[str], start: int, tail_start: int, parity: int | None) -> int:
    # If the tail opens with tool turns, their gpt call must stay too: step back before it.
    end = tail_start
    while end > start and not _may_end(roles, end, parity):
        end -= 1
    return end


def _greedy_end(roles: Sequence[str], counts: Sequence[int], start: int, limit: int, need: int,
                parity: int | None) -> tuple[int, int]:
    """Take turns from `start` until `need` tokens are covered, cutting only where `_may_end` allows."""
    total = 0
    for i in range(start, limit):
        total += counts[i]
        end = i + 1
        if total >= need and _may_end(roles, end, parity):
            return end, total
    return limit, total
