"""Observation turns: user turns that hold a tool's result, as SWE-agent and OpenHands v0 write them.

Agents that call tools in text (no `tool` role) send each result back as a user turn opening with a
fixed prefix: SWE-agent `OBSERVATION:`, OpenHands v0 `EXECUTION RESULT of [<tool>]:`. Such a turn is
no user's words: the planner, pruning, validity and the summaries see it as a `tool` turn, while the
row keeps its role name and the chat template still renders it as the user turn it is.

`input.observations` (`resolve`) says which prefixes mark one: `auto` (the built-in ones), `none`, or
a list, where `auto` stands for the built-in ones beside the dataset's own.
"""

from __future__ import annotations

import re
from typing import Any

# The built-in prefixes, as each framework writes them (OpenHands names the tool between the brackets).
SWE_AGENT = "OBSERVATION:"
OPENHANDS = "EXECUTION RESULT of ["
BUILT_IN = (SWE_AGENT, OPENHANDS)
# The whole opening a stub keeps: OpenHands' bracketed tool name and colon, then the line break.
_OPENHANDS_HEAD = re.compile(r"EXECUTION RESULT of \[([^\]\n]*)\]:?[ \t]*\n?")
_PLAIN_HEAD = re.compile(r"[ \t]*\n?")


def resolve(value: Any) -> tuple[str, ...] | None:
    """The prefixes `input.observations` names (None: the value is not one the key takes)."""
    if value in ("auto", None):
        return BUILT_IN
    if value == "none":
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) and p.strip() for p in value):
        return None
    prefixes = [q for p in value for q in (BUILT_IN if p == "auto" else (p,))]
    return tuple(dict.fromkeys(prefixes))  # in order, once each


def prefix_of(text: str, prefixes: tuple[str, ...]) -> str | None:
    """The prefix `text` opens with (after leading whitespace), or None: not an observation."""
    opened = text.lstrip()
    return next((p for p in prefixes if opened.startswith(p)), None)


def split(text: str, prefix: str) -> tuple[str, str]:
    """An observation's head (leading space, the prefix, OpenHands' `[tool]:`, the line break) and its output."""
    start = text.find(prefix)
    if prefix == OPENHANDS and (head := _OPENHANDS_HEAD.match(text, start)):
        return text[: head.end()], text[head.end() :]
    end = _PLAIN_HEAD.match(text, start + len(prefix)).end()
    return text[:end], text[end:]


def tool_named(head: str) -> str | None:
    """The tool an OpenHands head names (`EXECUTION RESULT of [execute_bash]:`), else None."""
    found = _OPENHANDS_HEAD.search(head)
    return found.group(1).strip() or None if found else None


def output_of(text: str, prefixes: tuple[str, ...] = BUILT_IN) -> tuple[str | None, str] | None:
    """An observation's tool (when its head names one) and output; None: `text` is not an observation."""
    prefix = prefix_of(text, prefixes)
    if prefix is None:
        return None
    head, output = split(text, prefix)
    return tool_named(head), output
