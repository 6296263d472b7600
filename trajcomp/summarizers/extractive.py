"""The offline default: a deterministic summary built from what the turns themselves say.

It keeps what an agent continuing the trajectory needs most: every tool call with its key
arguments and outcome, the user's words, files touched, errors, identifiers, and the gist of
the reasoning, quoted in the conversation's own language. No model, no network.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..rows import Turn
from .base import Summarizer, Summary, SummaryRequest

KEY_ARGS = ("command", "cmd", "path", "file_path", "file", "filename", "query", "q", "url", "pattern", "name")
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.S)
THINK = re.compile(r"<think>(.*?)</think>", re.S)
ERROR_LINE = re.compile(r"(error|exception|traceback|failed|failure|fatal|panic|denied|not found)", re.I)
EXIT_TEXT = re.compile(r"exit(?:ed)?(?: with)?(?: code| status)?[:= ]+(-?\d+)", re.I)
PATH = re.compile(r"(?<![\w/.:-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,6}\b")
IDENTIFIER = re.compile(r"\b(?:[0-9a-f]{7,40}|v?\d+\.\d+\.\d+[\w.-]*|#\d{2,})\b")
SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n")

# Lower numbers are dropped last when the budget is tight.
ACTION, USER, ERRORS, FILES, REASONING, IDENTIFIERS = range(6)
MAX_ITEM_CHARS = 400
MAX_LIST = 12


@dataclass(frozen=True)
class Item:
    priority: int
    text: str


class ExtractiveSummarizer(Summarizer):
    name = "extractive"

    def __init__(self, config, counter):
        self.counter = counter

    async def summarize(self, request: SummaryRequest) -> Summary:
        return await asyncio.to_thread(self.summarize_sync, request)

    def summarize_sync(self, request: SummaryRequest) -> Summary:
        items = extract_items(request.turns)
        return Summary(fit(items, request.target_tokens, self.counter.count))


@dataclass
class _Facts:
    """What is collected across turns: unanswered calls and de-duplicated lists (dicts keep order)."""

    pending: list[str] = field(default_factory=list)
    files: dict[str, None] = field(default_factory=dict)
    idents: dict[str, None] = field(default_factory=dict)
    errors: dict[str, None] = field(default_factory=dict)


def extract_items(turns: Iterable[Turn]) -> list[Item]:
    """Every fact worth keeping, in conversation order, with its priority."""
    items: list[Item] = []
    facts = _Facts()
    for turn in turns:
        if turn.role == "gpt":
            items.extend(_gpt_items(turn.text, facts))
        elif turn.role == "tool":
            items.extend(_tool_items(turn.text, facts))
        elif turn.role == "human":
            items.append(Item(USER, "User: " + _clip(turn.text)))
    if facts.errors:
        items.append(Item(ERRORS, "Errors seen: " + " | ".join(list(facts.errors)[-MAX_LIST:])))
    if facts.files:
        items.append(Item(FILES, "Files: " + ", ".join(list(facts.files)[: MAX_LIST * 2])))
    if facts.idents:
        items.append(Item(IDENTIFIERS, "Identifiers: " + ", ".join(list(facts.idents)[: MAX_LIST * 2])))
    return items


def _gpt_items(text: str, facts: _Facts) -> list[Item]:
    items = [Item(REASONING, "Reasoning: " + g) for g in map(_first_sentence, THINK.findall(text)) if g]
    said = _first_sentence(TOOL_CALL.sub("", THINK.sub("", text)))
    if said:
        items.append(Item(REASONING, "Assistant: " + said))
    for raw in TOOL_CALL.findall(text):
        facts.pending.append(_render_call(raw, facts.files))
    return items


def _render_call(raw: str, files: dict) -> str:
    data = _parse_json(raw)
    if not isinstance(data, dict):
        return "call " + _clip(raw, 120)
    name = str(data.get("name", "tool"))
    args = data.get("arguments", {})
    args = _parse_json(args) if isinstance(args, str) else args
    if not isinstance(args, dict):
        return f"{name}()"
    keys = [k for k in KEY_ARGS if k in args] or [k for k, v in args.items() if isinstance(v, (str, int, float))][:2]
    for value in args.values():
        if isinstance(value, str):
            files.update(dict.fromkeys(PATH.findall(value)))
    return f"{name}(" + ", ".join(f"{k}={_clip(str(args[k]), 160)}" for k in keys) + ")"


def _tool_items(text: str, facts: _Facts) -> list[Item]:
    # Hermes answers calls in the order they were made, so responses pair with calls first-in, first-out.
    items = []
    for raw in TOOL_RESPONSE.findall(text) or [text]:
        data = _parse_json(raw)
        content = data.get("content", data) if isinstance(data, dict) else raw
        name = str(data.get("name", "tool")) if isinstance(data, dict) else "tool"
        call = facts.pending.pop(0) if facts.pending else name
        items.append(Item(ACTION, f"{call} -> {_outcome(content, facts)}"))
    return items


def _outcome(content: Any, facts: _Facts) -> str:
    """Exit status, first error line and size of a tool result; collects paths and identifiers."""
    status = None
    if isinstance(content, str):
        parsed = _parse_json(content)
        content = parsed if isinstance(parsed, (dict, list)) else content
    if isinstance(content, dict):
        for key in ("exit_code", "returncode", "exit_status", "status_code"):
            if key in content:
                status = content[key]
                break
        body = "\n".join(str(v) for v in content.values() if isinstance(v, (str, int, float)))
    else:
        body = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if status is None and (m := EXIT_TEXT.search(body)):
        status = m.group(1)
    facts.files.update(dict.fromkeys(PATH.findall(body)))
    facts.idents.update(dict.fromkeys(IDENTIFIER.findall(body)))
    parts = [] if status is None else [f"exit {status}"]
    error = next((line.strip() for line in body.splitlines() if ERROR_LINE.search(line)), None)
    if error:
        facts.errors[_clip(error, 200)] = None
        parts.append("error: " + _clip(error, 200))
    lines = body.count("\n") + 1 if body else 0
    parts.append(f"{lines} lines, {len(body)} chars")
    return "; ".join(parts)


def fit(items: list[Item], budget: int, count) -> str:
    """Join as many items as fit in `budget` tokens, dropping the least important, oldest first."""
    costs = count([i.text for i in items]) if items else []
    keep = set(range(len(items)))
    total = sum(costs) + len(items)  # about one token per newline
    for k in sorted(keep, key=lambda k: (-items[k].priority, k)):
        if total <= budget:
            break
        keep.discard(k)
        total -= costs[k] + 1
    lines = [items[k].text for k in sorted(keep)]
    dropped = len(items) - len(lines)
    # The per-item estimate can be off by a few tokens at the joins: trim whole lines, then characters.
    while True:
        text = "\n".join(lines + ([f"({dropped} less important items omitted)"] if dropped else []))
        if not lines or count([text])[0] <= budget:
            return text
        if len(lines) > 1:
            lines.pop(0)
            dropped += 1
        else:
            lines[0] = lines[0][: len(lines[0]) * 3 // 4]


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
