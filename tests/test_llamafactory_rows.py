"""--segments on rows in LLaMA-Factory's dialect (function_call / observation turns), read as LLaMA-Factory's
sharegpt converter reads them: only each turn's role and content kept (a `train: false` mark is dropped), every
gpt and function_call turn trained (mask_history off), a row whose turns do not alternate dropped. Over SWE-like
rows at a quarter of their length: no assistant turn is trained in two rows, every one is trained, no row is
dropped (no summary followed by an observation), and every observation is in some row."""

from __future__ import annotations

from collections import Counter

import pytest
from test_segments import MODES, segmented, swe_rows

from trajcomp.core.dialects.validity import alternation_parity

USER_SIDE, ASSISTANT_SIDE = ("human", "observation"), ("gpt", "function_call")
NO_TAIL = {"protect_last_n_turns": 0, "protect_first_gpt": False, "protect_first_tool": False}


def llamafactory_reads(row: dict) -> tuple[list[str], bool]:
    """The assistant texts LLaMA-Factory trains in `row`, and whether it keeps the row at all (its alternation:
    an optional system turn, then user-side and assistant-side turns in turn, starting user-side)."""
    turns = [(t["from"], t["value"]) for t in row["conversations"]]  # role and content only
    body = turns[1:] if turns and turns[0][0] == "system" else turns
    sides = ["gpt" if name in ASSISTANT_SIDE else "human" if name in USER_SIDE else "?" for name, _ in body]
    keeps = alternation_parity(sides) is not None and all(
        (name in ASSISTANT_SIDE) == (i % 2 == 1) for i, (name, _) in enumerate(body))
    return [text for name, text in body if name in ASSISTANT_SIDE], keeps


@pytest.mark.parametrize("overrides", [{}, NO_TAIL], ids=["default", "carry-no-tail"])
@pytest.mark.parametrize("mode", MODES)
def test_llamafactory_trains_every_assistant_turn_once_and_drops_no_row(mode, overrides):
    for seed, steps in ((0, 24), (1, 30), (2, 36)):
        row = swe_rows.row("llamafactory", seed, steps)
        result, cfg, _ = segmented(row, mode, **overrides)
        assert len(result.rows) >= 3
        trained: Counter = Counter()
        for out in result.rows:
            texts, keeps = llamafactory_reads(out)
            assert keeps, (seed, out["segment"])  # e.g. [system, human (the summary), observation, gpt] is dropped
            names = [t["from"] for t in out["conversations"]]
            assert not any(a == "human" and b == "observation" for a, b in zip(names, names[1:]))
            trained.update(texts)
        wanted = Counter(t["value"] for t in row["conversations"] if t["from"] in ASSISTANT_SIDE)
        assert trained == wanted, (seed, sum((trained - wanted).values()))  # each exactly once
        held = "\n".join(t["value"] for out in result.rows for t in out["conversations"])
        assert all(t["value"] in held for t in row["conversations"] if t["from"] == "observation")
