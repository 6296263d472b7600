"""What a tool output says of itself, decided once for the stubs and the summaries: its text, its line
count, whether it reports a failure, and the line that says what failed.

A failure is claimed only where the output says one happened, never because its text holds an error
word (a source file's `error` return type, a commit subject, a test's `pytest.raises(ValueError)`): a
result with a status is judged by it alone; plain text by its exit status, else by a traceback or a
line that opens with an error label (`Error: ...`, `fatal: ...`, `FileNotFoundError: ...`).
"""

from __future__ import annotations

import json
import re
from typing import Any

STATUS_KEYS = ("exit_code", "returncode", "exit_status", "status_code")
TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.M)
FAILURE_TEXT = re.compile(
    r"^Traceback \(most recent call last\):|^\s*(?:[A-Z]\w*(?:Error|Exception)|(?i:error|fatal|panic))\s*:", re.M)
ERROR_LINE = re.compile(r"(error|exception|traceback|failed|failure|fatal|panic|denied|not found)", re.I)


def output_text(content: Any) -> str:
    """An output's own text: a string as it is (a JSON one read first), a JSON value's strings one a line
    (its numbers and flags are its status, not its text), a bare number as written."""
    if isinstance(content, str):
        parsed = json_or_none(content)
        content = parsed if isinstance(parsed, (dict, list)) else content
    if isinstance(content, (int, float)) and not isinstance(content, bool):
        return json.dumps(content)
    return "\n".join(_strings(content))


def line_count(text: str) -> int:
    """Lines as an editor counts them: a final line break ends the last line, it begins none."""
    return len(text.splitlines())


def failed(content: Any, status: Any, body: str) -> bool:
    """Whether the result says its call failed: its error field, success flag or status, else its text."""
    if isinstance(content, dict) and any(k in content for k in ("error", "success", *STATUS_KEYS)):
        if content.get("error") not in (None, "", [], {}, False) or content.get("success") is False:
            return True
        codes = {key: number(content.get(key)) for key in STATUS_KEYS}
        http = codes.pop("status_code")  # an HTTP status: 2xx and 3xx are no failure
        return any(code not in (None, 0) for code in codes.values()) or (http or 0) >= 400
    if status is not None:
        return number(status) != 0
    return FAILURE_TEXT.search(body) is not None


def error_line(content: Any, body: str) -> str | None:
    """The first line saying what went wrong (past a traceback's header), else the error field's text."""
    line = next((line.strip() for line in body.splitlines() if ERROR_LINE.search(line) and not TRACEBACK.match(line)),
                None)
    error = content.get("error") if isinstance(content, dict) else None
    return line or (error.strip() if isinstance(error, str) else None)


def number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, in order (an output's text without its JSON)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def json_or_none(text: str) -> Any:
    """A text's JSON value, or None where the text is no JSON (a tool output, a call's text: either may be)."""
    try:
        return json.loads(text)
    except ValueError:
        return None
