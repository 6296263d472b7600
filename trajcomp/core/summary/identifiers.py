"""Exact identifiers in turns (paths, URLs, error names, numbers, hashes, tool-call arguments).

Models paraphrase identifiers away; these are the strings a continuing agent needs verbatim.
`extract` finds them (most recent first), `retention` measures how many a summary kept, and
`with_index` appends those a summary lacks, within its token budget. docs/compression.md (Identifiers) defines each kind.
"""

from __future__ import annotations

import json
import re
from typing import Callable, Iterable, Iterator, Sequence

from .identifier_kinds import FINDERS, NUMBER, listing_lines
from ..dialects.rows import Turn

MAX_ARGUMENT_CHARS = 80
_TRAILING = ".,;:!?"


def extract(turns: Iterable[Turn]) -> list[str]:
    """The distinct identifiers of `turns`: names (paths, URLs, ids, hashes, errors, call arguments) before
    bare numbers, each most recent first (by their last appearance). Numbers are many (an `ls -la` has a
    byte size a line) and say little alone; an index that runs out of room should keep the names."""
    seen: dict[str, None] = {}
    for turn in reversed(list(turns)):
        for ident in reversed(_in_text(turn.text)):
            seen.setdefault(ident, None)
    names = [ident for ident in seen if not bare_number(ident)]
    return names + [ident for ident in seen if bare_number(ident)]


def bare_number(ident: str) -> bool:
    return NUMBER.fullmatch(ident) is not None


def _in_text(text: str) -> list[str]:
    """Identifiers of one text in the order they appear."""
    text, found = _decoded(text)
    text = _blanked(text, listing_lines(text))
    spans: list[tuple[int, str]] = []
    for find in FINDERS:
        matches = find(text)
        for start, end in matches:
            if value := text[start:end].rstrip(_TRAILING):
                spans.append((start, value))
        text = _blanked(text, matches)  # so later kinds do not count its parts
    return found + [value for _, value in sorted(spans)]


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each of `spans` (increasing, disjoint) replaced by as many spaces."""
    if not spans:
        return text
    parts = []
    done = 0
    for start, end in spans:
        parts += (text[done:start], " " * (end - start))
        done = end
    parts.append(text[done:])
    return "".join(parts)


_OPENING = re.compile(r"<tool_(call|response)>")


def _blocks(text: str) -> Iterator[tuple[int, int, str, str]]:
    """Each tool-call or tool-response block as (start, end, kind, its body without surrounding
    whitespace): what `<tool_(call|response)>\\s*(.*?)\\s*</tool_\\1>` (re.S) matches, without
    the lazy `.*?`, which `re` advances one character at a time. The body runs to the first
    closing tag of the same kind (str.strip and \\s agree on whitespace); an opening without one
    is left as text."""
    pos = 0
    while opening := _OPENING.search(text, pos):
        kind = opening[1]
        closing = f"</tool_{kind}>"
        close = text.find(closing, opening.end())
        if close < 0:
            pos = opening.start() + 1
            continue
        pos = close + len(closing)
        yield opening.start(), pos, kind, text[opening.end():close].strip()


def _decoded(text: str) -> tuple[str, list[str]]:
    """`text` with tool-call and tool-response JSON replaced by their string values (so escaped
    newlines are newlines again), and the calls' short arguments."""
    arguments: list[str] = []
    parts = []
    done = 0
    for start, end, kind, body in _blocks(text):
        parts += (text[done:start], _plain(kind, body, arguments))
        done = end
    parts.append(text[done:])
    return "".join(parts), arguments


def _plain(kind: str, body: str, arguments: list[str]) -> str:
    """A block's body as text: its JSON's leaves, one a line (the body itself when not JSON)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if kind == "call" and isinstance(data, dict):
        arguments.extend(_short_arguments(data.get("arguments")))
    return "\n".join(_leaves(data))


def _short_arguments(args: object) -> list[str]:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return []
    if not isinstance(args, dict):
        return []
    values = (v.strip() for v in args.values() if isinstance(v, str))
    return [v for v in values if 2 <= len(v) <= MAX_ARGUMENT_CHARS and "\n" not in v]


def _leaves(value: object) -> list[str]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, str):
        return [_decoded(value)[0]] if "<tool_" in value else [value]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def retention(identifiers: Sequence[str], summary: str) -> float | None:
    """The share of `identifiers` found verbatim in `summary` (None when there are none)."""
    if not identifiers:
        return None
    return round(sum(ident in summary for ident in identifiers) / len(identifiers), 4)


INDEX_HEAD = "Identifiers: "
# The share of a summary's budget, at most, kept for the index whatever the summarizer writes: exact
# paths, hashes and numbers are what a continuing agent cannot guess back, and models paraphrase them.
INDEX_SHARE = 0.5


def with_index(body: str, identifiers: Sequence[str], budget: int, count: Callable[[list[str]], list[int]]) -> str:
    """`body` and one line listing the identifiers it lacks (most recent first), as many as fit in `budget` tokens."""
    missing = [ident for ident in identifiers if ident not in body][:budget]  # each costs a token at least
    if not missing:
        return body

    def text(k: int) -> str:
        return f"{body}\n{INDEX_HEAD}{', '.join(missing[:k])}"

    # The parts' own counts (each identifier with the separator before it) estimate how many fit;
    # real counts then settle it, since joins can merge tokens (an estimate is rarely off by more
    # than a token or two, so this takes two or three counts where a bisection took about eight).
    label = INDEX_HEAD.rstrip()  # its space goes with the first identifier, as the tokenizer joins them
    pieces = [INDEX_HEAD[len(label):] + missing[0], *(", " + ident for ident in missing[1:])]
    whole, head, *costs = count([body, f"{body}\n{label}", *pieces])
    if whole >= budget:
        return body

    def more(k: int, spent: int) -> int:
        """How many identifiers fit, by their counts, when the first k take `spent` tokens."""
        while k < len(missing) and spent + costs[k] <= budget:
            spent += costs[k]
            k += 1
        return k

    k, real = 0, head
    while k < len(missing):
        # At least one more, even when the estimate says no: a join may save the token it lacks.
        step = max(more(k, real), k + 1)
        tried = count([text(step)])[0]
        if tried > budget:
            while step > k + 1 and count([text(step - 1)])[0] > budget:
                step -= 1
            k = step - 1
            break
        k, real = step, tried
    return text(k) if k else body
