"""Rows a live agent already compacted: its summary turn (opening with the live compactor's prefix, its
legacy one, or this run's) is a previous summary to update, never the user's words; and the note it put
on the system prompt stands for the summary notice, which is never added twice."""

from __future__ import annotations

from typing import Sequence

from .turn import Turn

LIVE_PREFIX = "[CONTEXT COMPACTION"  # the live compactor's prefix opens so; its wording has changed over versions
LEGACY_PREFIX = "[CONTEXT SUMMARY]:"
# The live compactor's note on the system prompt, as its versions word it.
LIVE_NOTES = ("earlier conversation turns have been compacted", "earlier turns were compacted")


def is_summary(text: str, prefix: str) -> bool:
    """Whether a turn's text is a compaction summary: the live compactor's, its legacy one's, or ours."""
    head = text.lstrip()
    return head.startswith((LIVE_PREFIX, LEGACY_PREFIX)) or bool(prefix.strip()) and head.startswith(prefix)


def body(text: str, prefix: str) -> str:
    """A summary turn's text without its prefix: the live prefix is its whole first line."""
    head = text.strip()
    if head.startswith(LIVE_PREFIX):
        return head.partition("\n")[2].strip()
    for known in (prefix, LEGACY_PREFIX):
        if known and head.startswith(known):
            return head[len(known):].strip()
    return head


def latest(turns: Sequence[Turn], start: int, end: int, prefix: str) -> int | None:
    """The index of the last summary turn in turns[start:end], or None."""
    return next((i for i in range(end - 1, start - 1, -1) if is_summary(turns[i].text, prefix)), None)


def noticed(system_text: str, notice: str) -> bool:
    """Whether a system prompt already says the conversation was condensed (our notice, or the live note)."""
    lowered = system_text.lower()
    return bool(notice.strip()) and notice.strip() in system_text or any(note in lowered for note in LIVE_NOTES)
