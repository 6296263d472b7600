"""The offline default: a deterministic summary built from what the turns themselves say.

It keeps what an agent continuing the trajectory needs most: every tool call with its key
arguments and outcome, files touched, errors, identifiers, and the gist of the reasoning, quoted
in the conversation's own language (the user's own words the compressor carries verbatim beside
it). In the `handoff` style the same facts go under the sections' headings. No model, no network.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..core.dialects.observations import output_of
from ..core.dialects.outcome import STATUS_KEYS, error_line, failed, line_count, output_text
from ..core.dialects.summary_turn import HANDOFF
from ..core.dialects.text_calls import fenced_call, markup_calls, without_markup
from ..core.dialects.turn import Turn
from .base import Summarizer, Summary, SummaryError, SummaryRequest

KEY_ARGS = ("command", "cmd", "path", "file_path", "file", "filename", "query", "q", "url", "pattern", "name")
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.S)
THINK = re.compile(r"<think>(.*?)</think>", re.S)
DISCUSSION = re.compile(r"^\s*DISCUSSION\s*\n")  # SWE-agent's heading over the thought, no thought itself
# A failed call is one whose output says so (core/dialects/outcome.py decides it, for the stubs too).
EXIT_TEXT = re.compile(r"exit(?:ed)?(?: with)?(?: code| status)?[:= ]+(-?\d+)", re.I)
PATH = re.compile(r"(?<![\w/.:-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,6}\b")
IDENTIFIER = re.compile(r"\b[0-9a-f]{7,40}\b|\bv?\d+\.\d+\.\d+[\w.-]*|(?<![\w#])#\d{2,}\b")
# Western sentences end at punctuation and a space; CJK ones at the full-width mark itself.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n")

# Lower numbers are dropped last when the budget is tight.
GOAL, ACTION, USER, ERRORS, FILES, REASONING, IDENTIFIERS = range(-1, 6)
MAX_ITEM_CHARS = 400
MAX_LIST = 12
# The handoff section each kind of fact goes under (the Goal item is the row's first request's gist).
SECTION = {
    ACTION: "Completed Actions", USER: "Critical Context", ERRORS: "Critical Context",
    FILES: "Relevant Files", REASONING: "Active State", IDENTIFIERS: "Critical Context",
}
SECTION_ORDER = ("Goal", "Completed Actions", "Active State", "Relevant Files", "Critical Context")


@dataclass(frozen=True)
class Item:
    priority: int
    text: str
    section: str = ""  # handoff's heading for it ("" in prose)


class ExtractiveSummarizer(Summarizer):
    name = "extractive"

    def __init__(self, config, counter):
        self.counter = counter

    async def summarize(self, request: SummaryRequest) -> Summary:
        return await asyncio.to_thread(self.summarize_sync, request)

    def summarize_sync(self, request: SummaryRequest) -> Summary:
        # request.target_tokens is already what is left beside the user's words and the index.
        handoff = request.style == HANDOFF
        items = extract_items(request.turns, handoff)
        if handoff and request.goal and (goal := _clip(_first_sentence(request.goal), MAX_ITEM_CHARS // 2)):
            items.insert(0, Item(GOAL, goal, "Goal"))
        text = fit(items, max(1, request.target_tokens), self.counter.count, _render_handoff if handoff else _render)
        if not text:  # never an empty summary standing in for real turns
            raise SummaryError(f"nothing of the turns fits in {request.target_tokens} tokens")
        return Summary(text)


@dataclass
class _Facts:
    """What is collected across turns: unanswered calls and de-duplicated lists (dicts keep order)."""

    handoff: bool = False  # actions written as handoff's numbered entries: call — outcome [tool: name]
    pending: list[tuple[str, str]] = field(default_factory=list)  # (tool name, rendered call) awaiting a result
    files: dict[str, None] = field(default_factory=dict)
    idents: dict[str, None] = field(default_factory=dict)
    errors: dict[str, None] = field(default_factory=dict)
    last_gpt: str = ""  # the last assistant turn, whose fenced command an observation may answer


def extract_items(turns: Iterable[Turn], handoff: bool = False) -> list[Item]:
    """Every fact worth keeping, in conversation order, with its priority (and handoff section).

    Human turns give none: the compressor carries the user's own words verbatim (summary_turn.py)."""
    items: list[Item] = []
    facts = _Facts(handoff=handoff)
    for turn in turns:
        if turn.role != "tool":
            items.extend(_unanswered(facts))
        if turn.role == "gpt":
            items.extend(_gpt_items(turn.text, facts))
        elif turn.role == "tool":
            items.extend(_tool_items(turn.text, facts))
        elif turn.role == "system":
            items.append(Item(USER, "System: " + _first_sentence(turn.text)))
    items.extend(_unanswered(facts))
    if facts.errors:
        items.append(Item(ERRORS, "Errors seen: " + " | ".join(list(facts.errors)[-MAX_LIST:])))
    if facts.files:
        items.append(Item(FILES, "Files: " + ", ".join(list(facts.files)[: MAX_LIST * 2])))
    if facts.idents:
        items.append(Item(IDENTIFIERS, "Identifiers: " + ", ".join(list(facts.idents)[: MAX_LIST * 2])))
    if handoff:
        items = [Item(i.priority, i.text, SECTION[i.priority]) for i in items]
    return _collapse_repeats(items)


def _collapse_repeats(items: list[Item]) -> list[Item]:
    """One line per repeated fact (agents re-read the same file often), where it last happened."""
    repeats = Counter(items)
    last = {item: i for i, item in enumerate(items)}
    return [
        Item(item.priority, f"{item.text} (x{repeats[item]})" if repeats[item] > 1 else item.text, item.section)
        for i, item in enumerate(items)
        if last[item] == i
    ]


def _gpt_items(text: str, facts: _Facts) -> list[Item]:
    items = [Item(REASONING, "Reasoning: " + g) for g in map(_first_sentence, THINK.findall(text)) if g]
    said = _first_sentence(DISCUSSION.sub("", without_markup(TOOL_CALL.sub("", THINK.sub("", text)))))
    if said:
        items.append(Item(REASONING, "Assistant: " + said))
    for raw in TOOL_CALL.findall(text):
        facts.pending.append(_render_call(raw, facts.files))
    for call in markup_calls(text):  # OpenHands' and SWE-agent's <function=...> markup
        facts.pending.append(_render_call(json.dumps(call), facts.files))
    facts.last_gpt = text
    return items


def _unanswered(facts: _Facts) -> list[Item]:
    """Calls whose results never came before the next non-tool turn."""
    items = [Item(ACTION, _action(call, name, "no result seen", facts)) for name, call in facts.pending]
    facts.pending.clear()
    return items


def _render_call(raw: str, files: dict) -> tuple[str, str]:
    data = _parse_json(raw)
    if not isinstance(data, dict):
        return "", "call " + _clip(raw, 120)
    name = str(data.get("name", "tool"))
    args = data.get("arguments", {})
    args = _parse_json(args) if isinstance(args, str) else args
    if not isinstance(args, dict):
        return name, f"{name}()"
    keys = [k for k in KEY_ARGS if k in args] or [k for k, v in args.items() if isinstance(v, (str, int, float))][:2]
    for value in args.values():
        if isinstance(value, str):
            files.update(dict.fromkeys(PATH.findall(value)))
    return name, f"{name}(" + ", ".join(f"{k}={_clip(str(args[k]), 160)}" for k in keys) + ")"


def _tool_items(text: str, facts: _Facts) -> list[Item]:
    # Hermes answers calls in the order they were made, so responses pair with calls first-in, first-out.
    observed = output_of(text)
    if observed is not None:  # a user turn holding a tool's result (SWE-agent, OpenHands v0)
        tool, output = observed
        fenced = fenced_call(facts.last_gpt) if not facts.pending else None
        facts.last_gpt = ""  # its command answered
        called, call = (_render_call(json.dumps(fenced), facts.files) if fenced else None) or \
            _pop_call(facts.pending, tool or "") or (tool or "", tool or "tool")
        return [Item(ACTION, _action(call, called, _outcome(output, facts), facts))]
    items = []
    for raw in TOOL_RESPONSE.findall(text) or [text]:
        data = _parse_json(raw)
        content = data.get("content", data) if isinstance(data, dict) else raw
        name = str(data.get("name", "")) if isinstance(data, dict) else ""
        called, call = _pop_call(facts.pending, name) or (name, name or "tool")
        items.append(Item(ACTION, _action(call, called, _outcome(content, facts), facts)))
    return items


def _action(call: str, name: str, outcome: str, facts: _Facts) -> str:
    if not facts.handoff:
        return f"{call} -> {outcome}"
    return f"{call} — {outcome}" + (f" [tool: {name}]" if name else "")


def _pop_call(pending: list[tuple[str, str]], name: str) -> tuple[str, str] | None:
    """The first waiting call of that tool (or the first waiting call when the result names none)."""
    for i, (called, rendered) in enumerate(pending):
        if not name or called == name:
            del pending[i]
            return called, rendered
    return None


def _leaves(value: Any) -> list[str]:
    """Every string and number inside a JSON value, depth first."""
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def _outcome(content: Any, facts: _Facts) -> str:
    """Exit status, what failed (only when the output says so) and size of a tool result; collects
    paths and identifiers."""
    if isinstance(content, str):
        parsed = _parse_json(content)
        content = parsed if isinstance(parsed, (dict, list)) else content
    key = next((key for key in STATUS_KEYS if key in content), None) if isinstance(content, dict) else None
    status = content[key] if key else None
    body = content if isinstance(content, str) else "\n".join(_leaves(content))
    if status is None and (m := EXIT_TEXT.search(body)):
        status = m.group(1)
    facts.files.update(dict.fromkeys(PATH.findall(body)))
    facts.idents.update(dict.fromkeys(IDENTIFIER.findall(body)))
    parts = [] if status is None else [f"{'HTTP' if key == 'status_code' else 'exit'} {status}"]
    if failed(content, status, body):
        error = error_line(content, body)
        facts.errors.update({_clip(error, 200): None} if error else {})
        parts.append("error: " + _clip(error, 200) if error else "failed")
    text = output_text(content)  # lines and chars counted as the stubs count them
    parts.append(f"{line_count(text)} lines, {len(text)} chars")
    return "; ".join(parts)


def fit(items: list[Item], budget: int, count, render=None) -> str:
    """As many items as fit in `budget` tokens, in order; the least important, oldest go first.
    `render` joins the kept items (default: one a line, a note saying how many were left out)."""
    render = render or _render
    if not items:
        return ""
    costs = [c + 1 for c in count([i.text for i in items])]  # + about one token for the newline
    note_cost = count([_note(len(items))])[0] + 1
    drop_order = sorted(range(len(items)), key=lambda k: (-items[k].priority, k))
    kept = set(range(len(items)))
    # Drop by estimate first, then confirm with a real count: joins can merge tokens.
    while kept and sum(costs[k] for k in kept) + (note_cost if len(kept) < len(items) else 0) > budget:
        kept.discard(drop_order.pop(0))
    while kept:
        text = render(items, kept)
        if count([text])[0] <= budget:
            return text
        kept.discard(drop_order.pop(0))
    first = min(items, key=lambda i: i.priority)  # nothing fits whole: the most important, cut
    return _truncate(render([first], {0}), budget, count)


def _render(items: list[Item], kept: set[int]) -> str:
    lines = [items[k].text for k in sorted(kept)]
    if len(kept) < len(items):
        lines.append(_note(len(items) - len(kept)))
    return "\n".join(lines)


def _render_handoff(items: list[Item], kept: set[int]) -> str:
    """The kept items under their sections' headings, actions numbered, the note last."""
    lines = []
    for section in SECTION_ORDER:
        entries = [items[k].text for k in sorted(kept) if items[k].section == section]
        if section == "Completed Actions":
            entries = [f"{n}. {text}" for n, text in enumerate(entries, 1)]
        if entries:
            lines += [f"## {section}", *entries]
    if len(kept) < len(items):
        lines.append(_note(len(items) - len(kept)))
    return "\n".join(lines)


def _note(dropped: int) -> str:
    return f"({dropped} less important items omitted)"


def _truncate(text: str, budget: int, count) -> str:
    """The longest prefix of `text` (cut at a character) within `budget` tokens, by bisection."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count([text[:mid] + "…"])[0] <= budget:
            low = mid
        else:
            high = mid - 1
    return text[:low] + "…" if low else ""


def _first_sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    return _clip(SENTENCE_END.split(text, maxsplit=1)[0].strip())


def _clip(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parse_json(raw: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return None
