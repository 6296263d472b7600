"""Row schemas: read the turns out of a row and put new turns back, keeping everything else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROLES = ("system", "human", "gpt", "tool")


@dataclass(frozen=True)
class Turn:
    """A turn as the planner and summarizers see it, whatever the row format."""

    role: str  # one of ROLES
    text: str


class RowError(ValueError):
    """A row that cannot be compressed; `reason` is a stable code for the rejects file."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class ShareGPT:
    """`{"conversations": [{"from": ..., "value": ...}, ...], ...}` rows."""

    name = "sharegpt"
    key = "conversations"

    def native_turns(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        """The row's turn objects, validated."""
        turns = row.get(self.key)
        if self.key not in row:
            raise RowError("missing_conversations", "the row has no 'conversations' field")
        if not isinstance(turns, list):
            raise RowError("conversations_not_a_list", f"'conversations' is {type(turns).__name__}, not a list")
        for i, turn in enumerate(turns):
            self._check_turn(i, turn)
        return turns

    def _check_turn(self, i: int, turn: Any) -> None:
        if not isinstance(turn, dict):
            raise RowError("turn_not_an_object", f"turn {i} is {type(turn).__name__}, not an object")
        for field in ("from", "value"):
            if field not in turn:
                raise RowError("turn_missing_field", f"turn {i} has no '{field}'")
            if not isinstance(turn[field], str):
                raise RowError("turn_not_a_string", f"turn {i} '{field}' is {type(turn[field]).__name__}, not a string")
        if turn["from"] not in ROLES:
            raise RowError("unknown_role", f"turn {i} has role {turn['from']!r} (expected one of {', '.join(ROLES)})")

    def turns(self, native: list[dict[str, Any]]) -> list[Turn]:
        return [Turn(t["from"], t["value"]) for t in native]

    def make_turn(self, role: str, text: str) -> dict[str, Any]:
        return {"from": role, "value": text}

    def with_text(self, turn: dict[str, Any], text: str) -> dict[str, Any]:
        return {**turn, "value": text}

    def with_turns(self, row: dict[str, Any], turns: list[dict[str, Any]]) -> dict[str, Any]:
        return {**row, self.key: turns}
