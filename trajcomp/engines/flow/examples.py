"""`--summary-examples`: each summary a row's output used, as a training row in the row's own dialect.

The summarizer's request (its system and user messages) becomes the row's first turns and the summary
its assistant turn, so a team can train its agent's compaction on the same data it trains the agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.row_result import SummaryExample
from ...core.dialects.rows import RowSchema

# A chat request's roles -> the planner's, which each dialect's adapter names in its own words.
_ROLES = {"system": "system", "user": "human", "assistant": "gpt"}


@dataclass(frozen=True)
class ExampleRows:
    """How a run writes its summary examples: the rows' schema and the name of their segment field."""

    schema: RowSchema
    segment_field: str

    @classmethod
    def from_config(cls, config) -> "ExampleRows":
        return cls(RowSchema.from_config(config), config.segment_field)

    def rows(self, row: dict[str, Any], examples: tuple[SummaryExample, ...], segments: int,
             source: str, line: int) -> tuple[dict[str, Any], ...]:
        """One row per example: the source row's id (null without one), where it was read, the output
        row that opens with the summary ({"index", "count"}), then the request and the summary."""
        adapter = self.schema.adapter(row)
        out = []
        for example in examples:
            turns = [adapter.make_turn(_ROLES[m["role"]], m["content"]) for m in example.messages]
            turns.append(adapter.make_turn("gpt", example.summary))
            lineage = {"id": row.get("id"), "source": source, "line": line,
                       self.segment_field: {"index": example.segment, "count": segments}}
            out.append(adapter.with_turns(lineage, turns))
        return tuple(out)
