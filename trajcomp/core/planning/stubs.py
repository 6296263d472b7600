"""Stubs: the one line an old tool output becomes when pruned, in the words of the agent's framework.

Styles (`compression.prune_style`):
- `hermes`: built from the call and its output: the tool's name, its main argument, the exit code
  when the output has one, its first error line when it reports a failure (outcome.py), its line and
  character counts (counted as the summaries count them);
- `swe-agent`: `Old environment output: (N lines omitted)`, as SWE-agent's LastNObservations writes;
- `openhands`: `<MASKED>`, as OpenHands' ObservationMaskingCondenser writes;
- `template`: `compression.prune_template` with the fields of `TEMPLATE_FIELDS`.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Any

from ..dialects.outcome import error_line, failed, json_or_none, line_count, output_text

STYLES = ("hermes", "swe-agent", "openhands", "template")
TEMPLATE_FIELDS = ("tool", "argument", "exit_code", "error", "lines", "chars", "later")

# The arguments that say what a call did, most telling first; else a call's first string argument.
_MAIN_ARGUMENTS = ("command", "cmd", "path", "file_path", "filename", "file", "query", "url", "pattern", "code")
_EXIT_KEYS = ("exit_code", "returncode", "return_code", "exit_status", "exitCode", "status_code")
_EXIT_TEXT = re.compile(r"\bexit[ _](?:code|status)[\"']?\s*[:=]?\s*(-?\d+)", re.IGNORECASE)
ARGUMENT_CHARS = 60  # a stub's argument and error line at most, so that a stub stays one short line
ERROR_CHARS = 80


@dataclass(frozen=True)
class Output:
    """One tool output as a stub describes it."""

    tool: str  # "" when neither the output nor its call names the tool
    argument: str  # the call's main argument, on one line, shortened ("" when none)
    text: str  # the output's own text (a JSON object's strings, without the JSON around them)
    exit_code: int | None
    error: str  # the output's first line that reports an error ("" when none)

    @property
    def lines(self) -> int:
        return line_count(self.text)

    @classmethod
    def of(cls, tool: str, arguments: Any, content: Any) -> "Output":
        """The output `content` (a string, or the JSON value a tool returned) of a call with `arguments`."""
        if isinstance(content, str):
            parsed = json_or_none(content)
            content = parsed if isinstance(parsed, (dict, list)) else content
        text = output_text(content)
        exit_code = _exit_code(content, text)
        error = (error_line(content, text) or "") if failed(content, exit_code, text) else ""
        return cls(tool, _one_line(main_argument(arguments), ARGUMENT_CHARS), text, exit_code,
                   _one_line(error, ERROR_CHARS))


@dataclass(frozen=True)
class StubStyle:
    """How stubs read: one of `STYLES`, and the template when the style is `template`."""

    style: str = "hermes"
    template: str | None = None

    def text(self, output: Output, later: Output | None = None) -> str:
        """The stub of `output`; `later`: the newest identical output, when `output` is an older copy of it."""
        if self.style == "swe-agent":
            return f"Old environment output: ({output.lines} lines omitted)"
        if self.style == "openhands":
            return "<MASKED>"
        if self.style == "template":
            return self.template.format(**fields(output, later))
        return _hermes(output, later)


def fields(output: Output, later: Output | None) -> dict[str, Any]:
    """A template's fields: empty strings for what the output does not have."""
    return {
        "tool": output.tool, "argument": output.argument,
        "exit_code": "" if output.exit_code is None else output.exit_code, "error": output.error,
        "lines": output.lines, "chars": len(output.text), "later": "" if later is None else _later(later),
    }


def _later(later: Output) -> str:
    """The newest copy named by its call, not by a turn distance: a summary may replace turns between them."""
    return call_text(later) or "a later output"


def call_text(output: Output) -> str:
    """The tool and its main argument: ``bash `cat a.py` ``."""
    return " ".join(part for part in (output.tool, f"`{output.argument}`" if output.argument else "") if part)


def _hermes(output: Output, later: Output | None) -> str:
    head = "[pruned]" if later is None else f"[pruned: identical to the later output of {_later(later)}]"
    call = call_text(output)
    facts = [f"exit {output.exit_code}"] if output.exit_code is not None else []
    facts += [f"first error: {output.error}"] if output.error else []
    facts.append(f"{output.lines} lines, {len(output.text)} chars")
    return f"{head} {call} -> {'; '.join(facts)}" if call else f"{head} {'; '.join(facts)}"


def style_problem(style: str, template: str | None) -> str | None:
    """Why `style` and `template` cannot make stubs (None: they can); the config names the keys."""
    if style not in STYLES:
        return f"prune_style must be one of {', '.join(STYLES)}, got {style!r}"
    if style != "template":
        return None if template is None else "prune_template is used only with prune_style: template"
    if not template or not template.strip():
        return "prune_style template needs compression.prune_template (fields: " + ", ".join(TEMPLATE_FIELDS) + ")"
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return f"prune_template is not a format string: {exc}"
    unknown = [name for name in names if name not in TEMPLATE_FIELDS]
    if unknown:
        return f"prune_template has unknown field {{{unknown[0]}}} (fields: {', '.join(TEMPLATE_FIELDS)})"
    if "\n" in template:
        return "prune_template must be one line"
    return _trial_problem(template)


def _trial_problem(template: str) -> str | None:
    """Why the template fails on some output (a format spec such as {exit_code:d} fails on an output
    with no exit code): it is tried on an output with every field and on one with none, each a copy."""
    bare = Output("", "", "", None, "")
    full = Output("bash", "ls", "a\nb", 1, "error: x")
    for output, later in ((bare, None), (full, full)):
        try:
            template.format(**fields(output, later))
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            return f"prune_template fails on {'an output with no exit code or error' if later is None else 'an output'}: {exc}"
    return None


def main_argument(arguments: Any) -> str:
    """What a call was about: its command, path or query, else its first string argument."""
    if isinstance(arguments, str):
        parsed = json_or_none(arguments)
        arguments = parsed if isinstance(parsed, dict) else arguments
    if not isinstance(arguments, dict):
        return arguments if isinstance(arguments, str) else ""
    for key in _MAIN_ARGUMENTS:
        if isinstance(arguments.get(key), str):
            return arguments[key]
    return next((value for value in arguments.values() if isinstance(value, str)), "")


def _exit_code(content: Any, text: str) -> int | None:
    if isinstance(content, dict):
        for key in _EXIT_KEYS:
            value = content.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    found = _EXIT_TEXT.search(text)
    return int(found.group(1)) if found else None


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
