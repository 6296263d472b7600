"""Exact identifiers in turns (paths, URLs, error names, numbers, hashes, tool-call arguments).

Models paraphrase identifiers away; these are the strings a continuing agent needs verbatim.
`extract` finds them (most recent first), `retention` measures how many a summary kept, and
`with_index` appends those a summary lacks, within its token budget. The README defines each kind.
"""

from __future__ import annotations

import json
import re
from typing import Callable, Iterable, Sequence

from .rows import Turn

URL = re.compile(r"\bhttps?://[^\s\"'<>`()\[\]{}]+")
# A path has a slash between two names: absolute (/etc/hosts), home (~/.bashrc), relative with a
# ./ or ../ start, or relative ending in a file name with an extension (src/app/main.py).
PATH = re.compile(
    r"(?<![\w/.~<@+-])(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+"
    r"|(?<![\w/.~<@+-])(?:[\w.@+-]+/)+[\w@+-]+\.[A-Za-z0-9]{1,8}\b"
)
ERROR_NAME = re.compile(
    r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Exit|Interrupt|Warning|Fault)\b"
    r"|\bE(?:NOENT|ACCES|PERM|EXIST|NOTDIR|ISDIR|NOTEMPTY|NOSPC|ROFS|MFILE|BADF|INVAL|NOMEM|AGAIN|PIPE"
    r"|CONNREFUSED|CONNRESET|CONNABORTED|TIMEDOUT|ADDRINUSE|HOSTUNREACH|NETUNREACH)\b"
)
UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
HEX = re.compile(r"\b(?:0x[0-9a-fA-F]{4,}|(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,64})\b")
NUMBER = re.compile(r"(?<![\w.])\d{3,}(?:\.\d+)?(?![\w])")
# A file listing's line numbers (`cat -n`, grep -n, editors' views) are positions, not facts.
LISTING_LINE = re.compile(r"^[ \t]*\d+(?:[ \t]*[|:→\t]|[ \t]{2,})", re.M)
BLOCK = re.compile(r"<tool_(call|response)>\s*(.*?)\s*</tool_\1>", re.S)
MAX_ARGUMENT_CHARS = 80

# Order matters: a URL's path and a path's digits are not counted again.
_PATTERNS = (URL, PATH, UUID, HEX, ERROR_NAME, NUMBER)
_TRAILING = ".,;:!?"


def extract(turns: Iterable[Turn]) -> list[str]:
    """The distinct identifiers of `turns`, most recent first (by their last appearance)."""
    seen: dict[str, None] = {}
    for turn in reversed(list(turns)):
        for ident in reversed(_in_text(turn.text)):
            seen.setdefault(ident, None)
    return list(seen)


def _in_text(text: str) -> list[str]:
    """Identifiers of one text in the order they appear."""
    text, found = _decoded(text)
    text = LISTING_LINE.sub(lambda m: " " * len(m.group(0)), text)
    spans: list[tuple[int, str]] = []
    for pattern in _PATTERNS:
        def take(match: re.Match) -> str:
            value = match.group(0).rstrip(_TRAILING)
            if value:
                spans.append((match.start(), value))
            return " " * len(match.group(0))  # blank it out so later patterns do not count its parts

        text = pattern.sub(take, text)
    return found + [value for _, value in sorted(spans)]


def _decoded(text: str) -> tuple[str, list[str]]:
    """`text` with tool-call and tool-response JSON replaced by their string values (so escaped
    newlines are newlines again), and the calls' short arguments."""
    arguments: list[str] = []

    def plain(match: re.Match) -> str:
        try:
            data = json.loads(match.group(2))
        except ValueError:
            return match.group(2)
        if match.group(1) == "call" and isinstance(data, dict):
            arguments.extend(_short_arguments(data.get("arguments")))
        return "\n".join(_leaves(data))

    return BLOCK.sub(plain, text), arguments


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


def with_index(body: str, identifiers: Sequence[str], budget: int, count: Callable[[list[str]], list[int]]) -> str:
    """`body` and one line listing the identifiers it lacks (most recent first), as many as fit in `budget` tokens."""
    missing = [ident for ident in identifiers if ident not in body]
    if not missing or count([body])[0] >= budget:
        return body

    def text(k: int) -> str:
        return f"{body}\n{INDEX_HEAD}{', '.join(missing[:k])}"

    low, high = 0, len(missing)
    while low < high:  # the most identifiers that fit, by bisection on real counts
        mid = (low + high + 1) // 2
        if count([text(mid)])[0] <= budget:
            low = mid
        else:
            high = mid - 1
    return text(low) if low else body
