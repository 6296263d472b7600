"""A turn as the row core sees it in every row format, and the error a row that cannot be read raises."""

from __future__ import annotations

from dataclasses import dataclass


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
