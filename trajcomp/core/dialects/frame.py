"""What a trainer renders around a row's turns: its top-level `system` prompt and its `tools`.

LLaMA-Factory's sharegpt format, OpenHands, SWE-agent and AgentLab rows carry the system prompt as a
top-level `system` string; OpenAI-style and OpenHands SDK rows carry tool schemas as a top-level
`tools` list (LLaMA-Factory's `tools` column: a JSON string of that list). A trainer renders both:
`system` as the leading system message when the row opens with none (LLaMA-Factory's loader does
so), `tools` through `apply_chat_template(messages, tools=...)`. Neither is a turn: no rule shortens
them, so they are the row's fixed cost (`Measured.overhead`), never a removable one.

`Chat` is the turns' messages as a template takes them together with that frame; it indexes and
slices like the messages (a slice keeps the frame), so the costs' spans stay one a turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from .turn import RowError


@dataclass(frozen=True)
class Frame:
    """A row's top-level system prompt (only when it opens with no system turn) and tool schemas."""

    system: str | None = None
    tools: tuple[Any, ...] = ()

    def __bool__(self) -> bool:
        return self.system is not None or bool(self.tools)

    def lead(self) -> list[dict[str, Any]]:
        """The messages a trainer puts before the turns: the system prompt, when the row has one here."""
        return [] if self.system is None else [{"role": "system", "content": self.system}]

    def texts(self) -> list[str]:
        """count_mode `turns`' rule: the system text, and the tools as one compact JSON text (as written,
        keys in order, no ASCII escaping), each counted without special tokens."""
        texts = [] if self.system is None else [self.system]
        return texts + ([json.dumps(list(self.tools), ensure_ascii=False)] if self.tools else [])


NO_FRAME = Frame()


def frame_of(row: dict[str, Any], opens_with_system: bool) -> Frame:
    """The row's frame; a `system` that is not a string, or `tools` that are not a list (or a JSON
    text of one), is a RowError. Null and empty values are none (a Parquet round trip fills nulls)."""
    system = row.get("system")
    if system is not None and not isinstance(system, str):
        raise RowError("invalid_system", f"the row's 'system' is {type(system).__name__}, not a string")
    tools = _tools(row.get("tools"))
    return Frame(None if opens_with_system or not system else system, tools)


def _tools(value: Any) -> tuple[Any, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):  # LLaMA-Factory's column: the list as JSON text
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise RowError("invalid_tools", f"the row's 'tools' is a string but not JSON ({exc})") from None
    if not isinstance(value, list):
        raise RowError("invalid_tools", f"the row's 'tools' is {type(value).__name__}, not a list of tool schemas")
    return tuple(value)


@dataclass(frozen=True)
class Chat(Sequence):
    """A row's turns as chat messages (one a turn, in order) and the frame rendered with them."""

    messages: Sequence[dict[str, Any]]
    frame: Frame = field(default=NO_FRAME)

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return Chat(self.messages[k], self.frame)
        return self.messages[k]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.messages)


def parts(messages: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """What `apply_chat_template` takes for `messages` (a Chat or plain messages): every message,
    the frame's system first, and the tools (None: none)."""
    frame = getattr(messages, "frame", NO_FRAME)
    return frame.lead() + list(messages), (list(frame.tools) or None)


def frame_of_messages(messages: Sequence[dict[str, Any]]) -> Frame:
    return getattr(messages, "frame", NO_FRAME)
