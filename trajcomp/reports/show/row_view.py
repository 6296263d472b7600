"""One output row as `show` presents it: its turns counted, the summary turn marked, the turns it
replaced (given the input) and, for a row still over the limit, why in numbers."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from ...core.dialects.validity import alternation_parity
from ...core.planning.planner import PlanParams, protected_bounds, summarizable
from ...core.dialects.rows import RowError, RowSchema, Turn
from .pairing import METRICS_KEY, Paired, Shape, shape_of, turns_of


@dataclass(frozen=True)
class TurnView:
    role: str  # the planner's role: system, human, gpt or tool
    text: str
    tokens: int
    summary: bool = False


@dataclass(frozen=True)
class Why:
    """Why a row is still over the limit: the turns no summary may replace (the protected head and
    tail) against the target, what lies between them, and the setting that would change it."""

    text: str
    target: int | None  # None: no report beside the output names it
    head_turns: int
    head_tokens: int
    tail_turns: int
    tail_tokens: int
    between_tokens: int  # the summary turn's, or the turns between head and tail when nothing was summarized
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class RowView:
    row: int  # 1-based position in the output
    id: Any
    metrics: dict[str, Any] | None
    status: str | None
    kept: list[TurnView]
    source: str = ""  # the output file: its name, or its path below the folder show was given
    input_where: str | None = None  # file:line of the input row, when paired
    replaced: list[TurnView] | None = None  # with the input: its turns the summary replaced
    input_turns: list[TurnView] | None = None
    region: tuple[int, int] | None = None
    why: Why | None = None
    target: int | None = None
    has_id: bool = False
    notes: list[str] = field(default_factory=list)  # what cannot be known about this row
    originals: dict[int, TurnView] = field(default_factory=dict)  # with the input: kept turn -> the output its stub replaced
    segment: dict[str, Any] | None = None  # compression.segments: {"index", "count"} of this output row
    # the row's top-level system prompt and tools (core/dialects/frame.py), counted by the turns rule: no summary shortens them
    frame_tokens: int = 0

    @property
    def summary_index(self) -> int | None:
        return next((i for i, t in enumerate(self.kept) if t.summary), None)

    @property
    def tokens_before(self) -> int | None:
        if self.metrics is not None:
            return self.metrics.get("original_tokens")
        return sum(t.tokens for t in self.input_turns) + self.frame_tokens if self.input_turns is not None else None

    @property
    def tokens_after(self) -> int:
        if self.metrics is None:
            return sum(t.tokens for t in self.kept) + self.frame_tokens
        # A segment's own length (segment_tokens; in rows of older runs compressed_tokens was its input row's)
        return self.metrics.get("segment_tokens" if self.segment else "compressed_tokens")

    def to_dict(self) -> dict[str, Any]:
        """The row as `show --json` prints it."""
        k = self.summary_index
        out: dict[str, Any] = {"row": self.row, "output": self.source}
        if self.has_id:
            out["id"] = self.id
        if self.segment is not None:
            out["segment"] = self.segment
        if self.frame_tokens:
            out["frame_tokens"] = self.frame_tokens
        out.update({
            "status": self.status, "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
            "summary": self.kept[k].text if k is not None else None,
            "kept": [{"role": t.role, "tokens": t.tokens, "summary": t.summary} for t in self.kept],
        })
        if self.replaced is not None:
            out["replaced"] = [{"role": t.role, "tokens": t.tokens, "value": t.text} for t in self.replaced]
            out["input"] = self.input_where
        if self.originals:
            out["stubbed"] = [{"turn": i + 1, "tokens": t.tokens, "value": t.text} for i, t in self.originals.items()]
        out["why"] = self.why.to_dict() if self.why else None
        return out


def build_views(rows: Sequence[tuple[int, dict[str, Any], Paired | None]], counter, schema: RowSchema,
                params: PlanParams, prefix: str, target: int | None, source: str = "",
                segment_field: str = "segment") -> list[RowView]:
    """Views of the rows (position, output row, its input when paired), every turn counted in one call;
    `target`: the run's target_max_tokens, when its report is at hand."""
    read = [(turns_of(out, schema) or ([], []))[1] for _, out, _ in rows]
    read_in = [(turns_of(p.row, schema) or ([], []))[1] if p else [] for _, _, p in rows]
    frames = [_frame_texts(out, schema) for _, out, _ in rows]
    texts = [t.text for turns in read + read_in for t in turns] + [text for frame in frames for text in frame]
    counts = iter(counter.count(texts))
    counted = [[next(counts) for _ in turns] for turns in read + read_in]
    framed = [sum(next(counts) for _ in frame) for frame in frames]
    views = []
    for i, (position, out, paired) in enumerate(rows):
        metrics = out.get(METRICS_KEY) if isinstance(out.get(METRICS_KEY), dict) else None
        segment = out.get(segment_field) if isinstance(out.get(segment_field), dict) else None
        shape = shape_of(None if segment else metrics, read[i], prefix)  # a segment's summary: by its prefix
        kept = [TurnView(t.role, t.text, n, j == shape.summary) for j, (t, n) in enumerate(zip(read[i], counted[i]))]
        view = RowView(position, out.get("id"), metrics, _status(metrics), kept, source, target=target,
                       has_id="id" in out, segment=segment, frame_tokens=framed[i])
        if paired is not None:
            inputs = [TurnView(t.role, t.text, n) for t, n in zip(read_in[i], counted[len(rows) + i])]
            view.input_where, view.input_turns, view.region = paired.where, inputs, paired.region
            view.replaced = inputs[paired.region[0]:paired.region[1]] if paired.region else []
            view.originals = _stubbed(kept, inputs, shape.summary) if shape.pruned else {}
        _explain(view, read[i], shape, params, _alternation(out, schema))
        views.append(view)
    return views


def _frame_texts(row: Any, schema: RowSchema) -> list[str]:
    """The texts of the row's system prompt and tools, as count_mode turns counts them (none: unreadable)."""
    try:
        return schema.adapter(row).frame.texts()
    except RowError:
        return []


def _alternation(row: Any, schema: RowSchema) -> bool:
    try:
        return schema.adapter(row).alternation
    except RowError:
        return False


def _stubbed(kept: list[TurnView], inputs: list[TurnView], summary: int | None) -> dict[int, TurnView]:
    """The kept tool turns holding a stub, each with the input's turn it stands for: the same place
    before the summary turn, the same place from the end after it."""
    shift = len(inputs) - len(kept)
    found = {}
    for i, turn in enumerate(kept):
        j = i + shift if summary is not None and i > summary else i
        if turn.role == "tool" and 0 <= j < len(inputs) and inputs[j].text != turn.text:
            found[i] = inputs[j]
    return found


def _status(metrics: dict[str, Any] | None) -> str | None:
    if metrics is None:
        return None
    status = metrics.get("status")
    return "still_over_limit" if status == "still_over" else status


def _explain(view: RowView, turns: list[Turn], shape: Shape, params: PlanParams, alternation: bool) -> None:
    if view.metrics is None:
        view.notes.append(f"the row has no {METRICS_KEY} (metrics.per_trajectory was false): its status, the "
                          "target, passes and identifier retention cannot be known; the summary turn is found by "
                          "its prefix" + ("" if view.input_turns is not None else
                                          ", and the tokens before and the replaced turns need --input"))
        return
    if view.metrics.get("still_over_limit"):
        view.why = why(view, turns, shape, params, alternation)


def why(view: RowView, turns: list[Turn], shape: Shape, params: PlanParams, alternation: bool) -> Why:
    """The numbers behind a row still over the limit; they add up to the row's length (the chat
    template's markup named as what no turn's text holds)."""
    if view.segment is not None:
        return _segment_why(view, turns, shape, params, alternation)
    m, costs = view.metrics, [t.tokens for t in view.kept]
    target, last_n = view.target, params.protect_last_n_turns
    if shape.summary is not None:
        k = shape.summary
        head, tail, between = costs[:k], costs[k + 1:], costs[k]
        what = f"with the summary turn ({between:,} tokens){_markup(view, sum(costs))} the row is {view.tokens_after:,}"
    else:
        start, limit = _head_and_tail(turns, params, alternation)
        head, tail, between = costs[:start], costs[limit:], sum(costs[start:limit])
        what = (f"the {_turns(limit - start)} between them ({between:,} tokens) are no more than a summary would take"
                if between else "no turn lies between them to summarize")
    fixed = sum(head) + sum(tail) + view.frame_tokens
    frame = f", with the row's system prompt and tools ({view.frame_tokens:,} tokens)," if view.frame_tokens else ""
    text = (f"the protected head ({_turns(len(head))}) and the last {_turns(len(tail))}{frame} alone are {fixed:,} "
            f"tokens against {_against(target)}; {what}. ")
    text += _remedy(m, fixed, target, last_n)
    return Why(text, target, len(head), sum(head), len(tail), sum(tail), between, m.get("error"))


def _segment_why(view: RowView, turns: list[Turn], shape: Shape, params: PlanParams, alternation: bool) -> Why:
    """A segment row over the limit, by its own turns: its head, its summary turn (if it has one) and the
    turns after it, which add up to its length."""
    m, costs, target = view.metrics, [t.tokens for t in view.kept], view.target
    if shape.summary is not None:
        k = shape.summary
        head, between, rest = costs[:k], costs[k], costs[k + 1:]
        opening = f"its summary turn is {between:,} tokens, "
    else:  # the head as the segments' walk protects it (segments.py): the last turns are no tail here
        roles = [t.role for t in turns]
        k = protected_bounds(roles, replace(params, protect_last_n_turns=0))[0]
        head, between, rest = costs[:k], 0, costs[k:]
        opening = "it holds no summary (the input's turns as they were, cut where the next would not fit), "
    text = (f"this row's protected head ({_turns(len(head))}) is {sum(head):,} tokens; {opening}the "
            f"{_turns(len(rest))} after {'it' if shape.summary is not None else 'the head'} {sum(rest):,}"
            f"{_markup(view, sum(costs))}: {view.tokens_after:,} tokens against {_against(target)}. ")
    if target is not None and sum(head) + between > target:
        text += "No summary can fit it: protect fewer head turns (protected_turns.first_*) or raise " \
                "compression.target_max_tokens."
    elif shape.summary is None:
        text += "Its first turns after the head are over the target by themselves: a row is cut only between " \
                "groups (a turn and its calls' results); raise compression.target_max_tokens."
    elif m.get("outcome") == "failed":
        text += _remedy(m, sum(head), target, params.protect_last_n_turns)
    else:
        text += "The turns after its summary (a group at least: a turn and its calls' results) do not fit beside " \
                "the head and the summary: raise compression.target_max_tokens or protect fewer head turns."
    return Why(text, target, len(head), sum(head), len(rest), sum(rest), between, m.get("error"))


def _head_and_tail(turns: list[Turn], params: PlanParams, alternation: bool) -> tuple[int, int]:
    roles = [t.role for t in turns]
    start, limit = summarizable(roles, params, alternation_parity(roles) if alternation else None)
    return start, max(start, limit)


def _markup(view: RowView, texts: int) -> str:
    """The tokens of the row no turn's text holds (the chat template's markup), when there are any."""
    extra = (view.tokens_after or 0) - texts
    return f" and the chat template's markup {extra:,} more" if extra else ""


def _against(target: int | None) -> str:
    return f"a target of {target:,}" if target is not None else "the run's target (no report beside the output names it)"


def _turns(n: int) -> str:
    return f"{n} turn" if n == 1 else f"{n} turns"


def _remedy(m: dict[str, Any], fixed: int, target: int | None, last_n: int) -> str:
    if m.get("outcome") == "failed":
        return f"The summary failed: {m.get('error') or 'no error recorded'}."
    if m.get("outcome") == "summary_too_long":
        return ("A summary would not have made the row shorter: a shorter one (compression.summary_target_tokens) "
                "or a higher compression.target_max_tokens would.")
    if not m.get("cannot_fit"):
        return (f"More of the row could be summarized: {m.get('passes')} passes were made; a higher "
                "compression.max_passes would make more.")
    if target is None or fixed > target:
        return (f"No summary can fit it: lower protected_turns.last_n_turns (now {last_n}), protect fewer head "
                "turns (protected_turns.first_*) or raise compression.target_max_tokens.")
    return ("Everything between them is summarized: a shorter summary (compression.summary_target_tokens) or a "
            "higher compression.target_max_tokens would fit it.")
