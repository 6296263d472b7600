"""The fast identifier scan (trajcomp/core/summary/identifier_kinds.py) finds exactly what the plain regex passes found.

`_Oracle` below holds the patterns and logic of identifiers.py before the speed work (commit d372076): one
`re.sub` pass per kind over the whole text; its `extract` also states the later order (44b99e0): names
before bare numbers. The tests compare the module with it, identifier for
identifier and in order, on every turn of the sample data and on generated texts that crowd
together the characters where the two could differ (run edges, `<`, word boundaries, unicode
digits and spaces, unclosed and nested tool blocks).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajcomp.core.summary import identifier_kinds, identifiers
from trajcomp.core.dialects.rows import Turn

ROOT = Path(__file__).resolve().parent.parent


class _Oracle:
    """identifiers.extract and its helpers as they were (copied, not imported), with extract's order since
    44b99e0 written out on its own: names first, then bare numbers, each group most recent first."""

    URL = re.compile(r"\bhttps?://[^\s\"'<>`()\[\]{}]+")
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
    LISTING_LINE = re.compile(r"^[ \t]*\d+(?:[ \t]*[|:→\t]|[ \t]{2,})", re.M)
    BLOCK = re.compile(r"<tool_(call|response)>\s*(.*?)\s*</tool_\1>", re.S)
    MAX_ARGUMENT_CHARS = 80
    _PATTERNS = (URL, PATH, UUID, HEX, ERROR_NAME, NUMBER)
    _TRAILING = ".,;:!?"
    BARE_NUMBER = re.compile(r"\d{3,}(?:\.\d+)?")  # the whole identifier: digits, maybe a fraction

    @classmethod
    def extract(cls, turns):
        latest_first: list[str] = []
        for turn in reversed(list(turns)):
            for ident in reversed(cls._in_text(turn.text)):
                if ident not in latest_first:
                    latest_first.append(ident)
        names = [ident for ident in latest_first if not cls.BARE_NUMBER.fullmatch(ident)]
        numbers = [ident for ident in latest_first if cls.BARE_NUMBER.fullmatch(ident)]
        return names + numbers

    @classmethod
    def _in_text(cls, text):
        text, found = cls._decoded(text)
        text = cls.LISTING_LINE.sub(lambda m: " " * len(m.group(0)), text)
        spans: list[tuple[int, str]] = []
        for pattern in cls._PATTERNS:
            def take(match: re.Match) -> str:
                value = match.group(0).rstrip(cls._TRAILING)
                if value:
                    spans.append((match.start(), value))
                return " " * len(match.group(0))

            text = pattern.sub(take, text)
        return found + [value for _, value in sorted(spans)]

    @classmethod
    def _decoded(cls, text):
        arguments: list[str] = []

        def plain(match: re.Match) -> str:
            try:
                data = json.loads(match.group(2))
            except ValueError:
                return match.group(2)
            if match.group(1) == "call" and isinstance(data, dict):
                arguments.extend(cls._short_arguments(data.get("arguments")))
            return "\n".join(cls._leaves(data))

        return cls.BLOCK.sub(plain, text), arguments

    @classmethod
    def _short_arguments(cls, args):
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return []
        if not isinstance(args, dict):
            return []
        values = (v.strip() for v in args.values() if isinstance(v, str))
        return [v for v in values if 2 <= len(v) <= cls.MAX_ARGUMENT_CHARS and "\n" not in v]

    @classmethod
    def _leaves(cls, value):
        if isinstance(value, dict):
            return [leaf for v in value.values() for leaf in cls._leaves(v)]
        if isinstance(value, list):
            return [leaf for v in value for leaf in cls._leaves(v)]
        if isinstance(value, str):
            return [cls._decoded(value)[0]] if "<tool_" in value else [value]
        return [] if value is None or isinstance(value, bool) else [str(value)]


def _sample_rows() -> list[list[str]]:
    """Each row's turn texts: the shipped samples and two more seeds of the same generator."""
    rows = []
    for path in sorted((ROOT / "data_samples").glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_samples

    for seed in (1, 2):
        for file_rows in make_samples.generate(seed).values():
            rows += file_rows
    return [[turn["value"] for turn in row["conversations"]] for row in rows]


@pytest.fixture(scope="module")
def sample_rows() -> list[list[str]]:
    return _sample_rows()


def test_same_identifiers_on_every_sample_turn(sample_rows):
    texts = [text for row in sample_rows for text in row]
    assert len(texts) > 5000
    expected = [_Oracle._in_text(text) for text in texts]
    differ = [i for i, text in enumerate(texts) if identifiers._in_text(text) != expected[i]]
    assert not differ, f"{len(differ)} turns differ, first: {texts[differ[0]][:300]!r}"
    assert sum(map(len, expected)) > 40_000  # the samples do have identifiers


def test_same_extract_on_every_sample_row_and_region(sample_rows):
    for row in sample_rows:
        turns = [Turn("gpt", text) for text in row]
        assert identifiers.extract(turns) == _Oracle.extract(turns)
        middle = turns[2:-2]  # a summarized region: the head and the tail kept
        assert identifiers.extract(middle) == _Oracle.extract(middle)


# Generated texts: single characters from an alphabet rich in the characters the patterns care about,
# and fragments of the identifiers themselves, so that matches touch, nest and share edges.
ALPHABET = (
    "/.~<>@+-_:;,!?'\"()[]{}`= \n\t\r|→"
    "0123456789abcdefxABCDEFXZ"
    "é٣²\u00a0\u2028\x1cß"  # a unicode letter, a unicode decimal digit, a non-decimal digit, unicode spaces
    "😀\ud800"  # beyond latin-1 and the BMP, and a lone surrogate: still one character each
)
FRAGMENTS = [
    "http://", "https://", "http", "https:/", "www.example.com", "0x", "0X", "0x1f2e", "deadbeef", "cafe1234",
    "1234567", "abcdef0123456789", "12345678-1234-abcd-ABCD-1234567890ab", "1234abcd-", "-12ab-",
    "Error", "Exception", "Exit", "Interrupt", "Warning", "Fault", "ValueError", "KeyboardInterrupt",
    "E", "ENOENT", "EPIPE", "EACCES", "ECONNREFUSED", "NOENT",
    "~/", "./", "../", "/", "//", "src/", "app.py", ".tar.gz", "a/b", "@scope/pkg", "x+y", "~user",
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tool_", "<tool_call>\n",
    "\n  12 | ", "\n3\t", "\n 42:", "\n7→", "\n100  ", "12.5", "3.14159", "1.2.3", "v1.2.300",
    "   ", "\n\n", "a_b", "__init__", "é/ü.py",
]
_pieces = st.one_of(st.sampled_from(ALPHABET), st.sampled_from(FRAGMENTS))
plain_texts = st.lists(_pieces, max_size=40).map("".join)


def _block(kind: str, payload: object, spaces: tuple[str, str]) -> str:
    return f"<tool_{kind}>{spaces[0]}{json.dumps(payload, ensure_ascii=False)}{spaces[1]}</tool_{kind}>"


_json_values = st.recursive(
    st.one_of(plain_texts, st.integers(-10**6, 10**9), st.floats(allow_nan=False), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abcxyz"), inner, max_size=3)),
    max_leaves=6,
)
_calls = st.builds(
    lambda name, args, as_string: {"name": name, "arguments": json.dumps(args) if as_string else args},
    st.sampled_from(["terminal", "read_file"]),
    st.dictionaries(st.sampled_from(["command", "path", "url", "n"]), st.one_of(plain_texts, st.integers()), max_size=3),
    st.booleans(),
)
_spaces = st.tuples(st.sampled_from(["", "\n", " \n ", "\u00a0"]), st.sampled_from(["", "\n", "\t\n", "\x1c"]))
_blocks = st.one_of(
    st.builds(_block, st.just("call"), _calls, _spaces),
    st.builds(_block, st.sampled_from(["call", "response"]), _json_values, _spaces),
    st.builds(lambda kind, body: f"<tool_{kind}>{body}</tool_{kind}>", st.sampled_from(["call", "response"]), plain_texts),
)
texts = st.lists(st.one_of(_pieces, _pieces, _pieces, _blocks), max_size=30).map("".join)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_same_identifiers_on_generated_texts(text):
    assert identifiers._in_text(text) == _Oracle._in_text(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turn_texts=st.lists(texts, max_size=5))
def test_same_extract_on_generated_turns(turn_texts):
    turns = [Turn("tool", text) for text in turn_texts]
    assert identifiers.extract(turns) == _Oracle.extract(turns)


@pytest.mark.parametrize("text", [
    "", "/", "a/b.c", "</x/y", "x</y.py", "~/.bashrc", "see /etc/hosts.", "(src/app/main.py)", "a/b.py_",
    "http://a.b/c/d.py", "xhttp://a.b", "ab/cd.ef1\u00e9", "12345678-1234-abcd-ABCD-1234567890ab",
    "x12345678-1234-abcd-ABCD-1234567890ab", "0x1234", "a0x1234", "deadbeef1", "٣٣٣", "1.234", "x 1234.5.6",
    "FooError: bar", "ENOENT", "EENOENT", "_ENOENT", "1  foo\n  2 | bar\n3→baz", "<tool_call>{}</tool_call>",
    "<tool_call> <tool_response>[\"/a/b\"]</tool_response>", "<tool_call>\u00a0\"/x/y\"\x1c</tool_call>",
])
def test_same_identifiers_on_edge_cases(text):
    assert identifiers._in_text(text) == _Oracle._in_text(text)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_each_finder_finds_what_its_pattern_finds(text):
    """Kind by kind, on the same text: each finder against the module's own pattern for its kind, so
    that a pattern edited without its finder (or the other way round) fails here."""
    kinds = identifier_kinds
    for find, pattern in [
        (kinds._urls, kinds.URL), (kinds._paths, kinds.PATH), (kinds._uuids, kinds.UUID), (kinds._hexes, kinds.HEX),
        (kinds._error_names, kinds.ERROR_NAME), (kinds._numbers, kinds.NUMBER), (kinds.listing_lines, kinds.LISTING_LINE),
    ]:
        assert find(text) == [m.span() for m in pattern.finditer(text)], find.__name__
    blocks = [(m.start(), m.end(), m[1], m[2]) for m in _Oracle.BLOCK.finditer(text)]
    assert list(identifiers._blocks(text)) == blocks


def test_the_kinds_are_the_patterns_the_oracle_had():
    """The speed work changed how kinds are found, not what they are."""
    for name in ("URL", "PATH", "UUID", "HEX", "ERROR_NAME", "NUMBER", "LISTING_LINE"):
        assert getattr(identifier_kinds, name).pattern == getattr(_Oracle, name).pattern, name
