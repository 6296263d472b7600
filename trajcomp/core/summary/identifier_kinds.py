"""The kinds of identifier (URLs, paths, UUIDs, hex ids, error names, numbers) and where they are in a text.

Each kind is one regular expression; docs/compression.md (Identifiers) defines them. Each finder returns exactly the spans
of its pattern's `finditer`, only faster (see "Speed" below). `identifiers` uses them in order.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

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


def listing_lines(text: str) -> list[tuple[int, int]]:
    """LISTING_LINE's spans: at the text's start, and after each newline."""
    first = LISTING_LINE.match(text)
    return ([first.span()] if first else []) + [m.span(1) for m in _LISTING_AFTER_NEWLINE.finditer(text)]


# Order matters: a URL's path and a path's digits are not counted again.
FINDERS = (_urls, _paths, _uuids, _hexes, _error_names, _numbers)
