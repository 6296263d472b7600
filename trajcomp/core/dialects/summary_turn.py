"""The summary turn's text: the summarizer's words in the run's style, and the user's own words, verbatim.

`prose`: the summarizer's text, then the user's messages of the summarized turns, most recent first.
`handoff`: Markdown sections in a fixed order (`HANDOFF_SECTIONS`); Active Task holds the latest user
request verbatim, the summarizer writes the others. The identifier index (identifiers.with_index) is
appended after either, so in `handoff` it closes Critical Context. The prefix opens the turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from . import compaction
from .rows import Turn

PROSE, HANDOFF = "prose", "handoff"
STYLES = (PROSE, HANDOFF)
DEFAULT_PREFIX = "[CONTEXT SUMMARY]:"
HANDOFF_SECTIONS = ("Active Task", "Goal", "Completed Actions", "Active State", "Relevant Files", "Critical Context")
SUMMARIZER_SECTIONS = HANDOFF_SECTIONS[1:]  # Active Task is the user's own words, never a summarizer's
LOOSE_SECTION = "Completed Actions"  # where a model's text outside any known section is kept
EMPTY_SECTION = "(not summarized)"
USERS_HEAD = "The user said, latest first:"
EARLIER_HEAD = "Before that the user said, latest first:"
CUT = " [... {n} tokens cut]"
# A user message longer than this share of summary_target_tokens is cut (its beginning kept, a
# marker says how much is left out): one long paste must not take the whole summary.
USER_TURN_SHARE = 0.25
_HEADER = re.compile(r"^\s*#{1,6}\s*(.*?)[\s#:*]*$")


@dataclass(frozen=True)
class UserWords:
    """The user's words a summary turn carries, each whole or cut at the start of a token."""

    messages: tuple[str, ...] = ()  # the summarized turns' human texts, most recent first
    cut: int = 0  # how many of `messages` were cut
    task: str | None = None  # handoff's Active Task: the latest user request in or before the region


def user_words(turns: Sequence[Turn], start: int, end: int, cap: int, counter, with_task: bool,
               prefix: str = "") -> UserWords:
    """The human texts of turns[start:end], most recent first, cut at `cap` tokens; and the task when asked.
    A compaction summary (compaction.is_summary) is no user's words, whatever its role."""
    said = [t.text for t in turns[:end] if t.role == "human" and not compaction.is_summary(t.text, prefix)]
    texts = [t.text for t in reversed(turns[start:end]) if t.role == "human" and not compaction.is_summary(t.text, prefix)]
    before = said[len(said) - len(texts) - 1] if len(said) > len(texts) else None
    extra = [before] if with_task and not texts and before is not None else []
    kept, was_cut = _capped(texts + extra, cap, counter)
    task = kept[0] if with_task and kept else None
    return UserWords(tuple(kept[: len(texts)]), sum(was_cut[: len(texts)]), task)


def _capped(texts: list[str], cap: int, counter) -> tuple[list[str], list[bool]]:
    """Each text whole, or its first `cap` tokens and a marker; and which were cut."""
    counts = counter.count(texts) if texts else []
    long = [i for i, n in enumerate(counts) if n > cap]
    out = list(texts)
    for i, encoding in zip(long, counter.encode([texts[i] for i in long])):
        end = encoding.token_to_chars(cap - 1)[1]
        out[i] = texts[i][:end] + CUT.format(n=counts[i] - cap)
    return out, [n > cap for n in counts]


def compose(style: str, text: str, words: UserWords) -> str:
    """The summary body (before the identifier index): `text` from the summarizer, `words` from the user."""
    if style == HANDOFF:
        return _handoff(text, words)
    parts = [text] if text else []
    if words.messages:
        parts.append(f"{USERS_HEAD}\n{_numbered(words.messages)}")
    return "\n".join(parts)


def _handoff(text: str, words: UserWords) -> str:
    written = sections(text)
    task = words.task or EMPTY_SECTION
    if len(words.messages) > 1:
        task += f"\n{EARLIER_HEAD}\n{_numbered(words.messages[1:])}"
    lines = ["## Active Task", task]
    for name in SUMMARIZER_SECTIONS:
        lines += [f"## {name}", written.get(name) or EMPTY_SECTION]
    return "\n".join(lines)


def sections(text: str) -> dict[str, str]:
    """A summarizer's text by handoff section. Text before any known heading, or under an unknown one
    (made a bold label), is kept in the section it follows (LOOSE_SECTION at first); a model's own
    Active Task is dropped, since the user's verbatim words stand there."""
    known = {name.lower(): name for name in HANDOFF_SECTIONS}
    found: dict[str, list[str]] = {}
    current = LOOSE_SECTION
    for line in text.splitlines():
        header = _HEADER.match(line)
        name = known.get(header[1].strip().lower()) if header else None
        if name is not None:
            current = name
            continue
        if header:  # a heading of the model's own: kept as a label, so the sections stay the six
            line = f"**{header[1].strip()}**"
        found.setdefault(current, []).append(line)
    found.pop("Active Task", None)
    joined = {name: "\n".join(lines).strip() for name, lines in found.items()}
    return {name: text for name, text in joined.items() if text}


def _numbered(messages: Sequence[str]) -> str:
    return "\n".join(f"{i}. {message}" for i, message in enumerate(messages, 1))


def opening(prefix: str, style: str) -> str:
    """What stands before the body: the prefix, then a space (prose) or a line break (handoff's headings)."""
    return prefix + ("\n" if style == HANDOFF else " ")


def strip_prefix(text: str, prefix: str) -> str:
    """`text` without whitespace around it nor leading copies of `prefix` (a model may echo it)."""
    text = text.strip()
    while prefix and text.startswith(prefix):
        text = text[len(prefix):].strip()
    return text


def joined(prefix: str, style: str, body: str) -> str:
    """The summary turn's text."""
    return opening(prefix, style) + strip_prefix(body, prefix)
