"""Exact identifiers in turns (paths, URLs, error names, numbers, hashes, tool-call arguments).

Models paraphrase identifiers away; these are the strings a continuing agent needs verbatim.
`extract` finds them (most recent first), `retention` measures how many a summary kept, and
`with_index` appends those a summary lacks, within its token budget. The README defines each kind.
"""

from __future__ import annotations

import json
import re
from typing import Callable, Iterable, Iterator, Sequence

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
_LISTING = r"[ \t]*\d+(?:[ \t]*[|:→\t]|[ \t]{2,})"
LISTING_LINE = re.compile("^" + _LISTING, re.M)
MAX_ARGUMENT_CHARS = 80
_TRAILING = ".,;:!?"

# Speed. The patterns above say what each kind is; the finders below return exactly their
# `finditer` spans, only faster. `re` scans in C for a pattern's leading literal, and (slower) for a
# leading character class, but tries a pattern that opens with `\b` or a lookbehind at every
# position (~30 ns each, 0.3 µs per character for all kinds). So each finder tries its pattern only
# where a match can start, or uses the same pattern with its opening check moved after the first
# character. tests/test_identifiers_fast.py compares the result with the plain passes.


def _tried(pattern: re.Pattern, text: str, starts: Iterable[int]) -> list[tuple[int, int]]:
    """`pattern.finditer(text)`'s spans, trying only `starts`: increasing positions that include
    every one where a match can start. (A match's lookbehind and \\b still see the text before it.)"""
    spans: list[tuple[int, int]] = []
    end = 0
    for start in starts:
        if start >= end and (match := pattern.match(text, start)):
            spans.append(match.span())
            end = match.end()
    return spans


def _occurrences(text: str, literal: str) -> Iterator[int]:
    i = text.find(literal)
    while i >= 0:
        yield i
        i = text.find(literal, i + 1)


def _urls(text: str) -> list[tuple[int, int]]:
    return _tried(URL, text, _occurrences(text, "http"))


# Every character PATH can match (both its alternatives). Its lookbehind rejects these and `<`, so
# a path starts where a maximal run of them starts, and lies inside that run; it holds a slash, so
# the run does too.
_PATH_RUN = re.compile(r"[\w/.~@+-]*")


def _paths(text: str) -> list[tuple[int, int]]:
    """PATH tried once per run of its characters that holds a slash, at the run's start (the
    lookbehind then rejects a run after `<`)."""
    if "/" not in text:
        return []
    backwards = text[::-1]  # the run's part before a slash is a forward match here
    n = len(text)
    starts = []
    slash = text.find("/")
    while slash >= 0:
        starts.append(n - _PATH_RUN.match(backwards, n - slash).end())
        slash = text.find("/", _PATH_RUN.match(text, slash).end())  # the next run's first slash
    return _tried(PATH, text, starts)


# A UUID's first dash: 8 characters after its start, and 4 hex digits before the next dash.
_UUID_DASH = re.compile(r"-(?=[0-9a-fA-F]{4}-)")


def _uuids(text: str) -> list[tuple[int, int]]:
    return _tried(UUID, text, (dash.start() - 8 for dash in _UUID_DASH.finditer(text) if dash.start() >= 8))


# Applied to a text encoded as latin-1 with `?` for the characters beyond it (one byte per
# character, so positions stay): `h` for [0-9a-f], a space for anything else. bytes.find then
# finds runs of [0-9a-f] in C.
_HEX_MASK = bytes(ord("h") if chr(i) in "0123456789abcdef" else ord(" ") for i in range(256))
_SEVEN_HEX = b"h" * 7


def _hexes(text: str) -> list[tuple[int, int]]:
    """HEX tried at each `0x` and at the start of each run of 7 or more [0-9a-f]: a match opens
    with \\b, so the character before it is no word character, let alone [0-9a-f]."""
    starts = set(_occurrences(text, "0x"))
    mask = text.encode("latin-1", "replace").translate(_HEX_MASK)
    run = mask.find(_SEVEN_HEX)
    while run >= 0:
        starts.add(run)
        run_end = mask.find(b" ", run)
        run = mask.find(_SEVEN_HEX, run_end) if run_end >= 0 else -1
    return _tried(HEX, text, sorted(starts))


# ERROR_NAME and NUMBER with their opening check moved after their first character, which is
# then the only thing `re` scans for (capitals, digits): \b[A-Z] is [A-Z](?<!\w[A-Z]), \bE is
# [A-Z](?<!\w[A-Z])(?<=E), and (?<![\w.])\d is \d(?<![\w.]\d).
_ERROR_NAME_SCAN = re.compile(
    r"[A-Z](?<!\w[A-Z])(?:[A-Za-z0-9]*(?:Error|Exception|Exit|Interrupt|Warning|Fault)\b"
    r"|(?<=E)(?:NOENT|ACCES|PERM|EXIST|NOTDIR|ISDIR|NOTEMPTY|NOSPC|ROFS|MFILE|BADF|INVAL|NOMEM|AGAIN|PIPE"
    r"|CONNREFUSED|CONNRESET|CONNABORTED|TIMEDOUT|ADDRINUSE|HOSTUNREACH|NETUNREACH)\b)"
)
_NUMBER_SCAN = re.compile(r"\d(?<![\w.]\d)\d{2,}(?:\.\d+)?(?![\w])")


def _error_names(text: str) -> list[tuple[int, int]]:
    return [match.span() for match in _ERROR_NAME_SCAN.finditer(text)]


def _numbers(text: str) -> list[tuple[int, int]]:
    return [match.span() for match in _NUMBER_SCAN.finditer(text)]


_LISTING_AFTER_NEWLINE = re.compile("\n(" + _LISTING + ")")  # a leading literal: scanned in C


def _listing_lines(text: str) -> list[tuple[int, int]]:
    """LISTING_LINE's spans: at the text's start, and after each newline."""
    first = LISTING_LINE.match(text)
    return ([first.span()] if first else []) + [m.span(1) for m in _LISTING_AFTER_NEWLINE.finditer(text)]


# Order matters: a URL's path and a path's digits are not counted again.
_FINDERS = (_urls, _paths, _uuids, _hexes, _error_names, _numbers)


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
    text = _blanked(text, _listing_lines(text))
    spans: list[tuple[int, str]] = []
    for find in _FINDERS:
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
