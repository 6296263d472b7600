"""Tool calls written as text in an assistant turn, as agents without native tool calling write them.

- OpenHands v0 and SWE-agent's function-call markup: `<function=bash>` then one
  `<parameter=command>ls -la</parameter>` per argument, closed by `</function>` (the close may be
  missing at the end of a turn, as models stop there);
- SWE-agent's thought-action style: the command in the turn's last ``` fence, run by the shell, read
  as a `bash` call with that `command`. A fence is ordinary text in most turns, so the caller asks for
  it only where the turn is answered by an observation (observations.py).

Each call is `{"name": ..., "arguments": {...}}`, the shape pruning and the summaries read any call in.
"""

from __future__ import annotations

import re

FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.S)
PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.S)
FENCE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)^[ \t]*```", re.S | re.M)
SHELL_TOOL = "bash"  # what runs a thought-action command


def markup_calls(text: str) -> list[dict]:
    """The `<function=...>` calls in `text`, in order (none: the turn uses no such markup)."""
    if "<function=" not in text:
        return []
    return [{"name": name, "arguments": {k: _value(v) for k, v in PARAMETER.findall(body)}}
            for name, body in FUNCTION.findall(text)]


def fenced_call(text: str) -> dict | None:
    """The command in the turn's last ``` fence, as a shell call (None: no fence, or an empty one)."""
    fences = FENCE.findall(text)
    command = fences[-1].strip() if fences else ""
    return {"name": SHELL_TOOL, "arguments": {"command": command}} if command else None


def without_markup(text: str) -> str:
    """The turn's words without its `<function=...>` calls (what the assistant said beside them)."""
    return FUNCTION.sub("", text) if "<function=" in text else text


def _value(raw: str) -> str:
    """A parameter's value: the markup puts multi-line values between line breaks, which are not the value's."""
    raw = raw[1:] if raw.startswith("\n") else raw
    return raw[:-1] if raw.endswith("\n") else raw
