"""What every kind of run shares: the row spec, the size budget and the exploration loop."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from .trajectory import PHRASES, Call, Trajectory, est_tokens


@dataclass(frozen=True)
class RowSpec:
    """What one generated row should be: family, category, language, size and edge case."""

    index: int
    family: str  # "coding" or "research"
    category: str
    lang: str
    target: int  # approximate total tokens
    special: str = ""  # "", short, huge_head, huge_tail, short_middle, late_tool, human_after_middle


class Run:
    """Shared machinery of one trajectory: budget, follow-ups and size-aware actions."""

    RESERVE = 1400  # tokens kept free for the fix and closing steps
    MAX_OUTPUT = 2600  # largest single tool output in the middle of a normal row

    def __init__(self, rng: random.Random, spec: RowSpec):
        self.rng = rng
        self.spec = spec
        self.lang = spec.lang
        self.followed_up = False
        self.t: Trajectory

    def room(self) -> float:
        """Tokens that the middle of the conversation may still use."""
        return min(self.spec.target - self.t.size - self.RESERVE, self.MAX_OUTPUT)

    def fill(self, actions: list[tuple], followup_slots: dict) -> None:
        """Run weighted exploration actions until the size budget is spent.

        Each action is (weight, function) or (weight, function, True) for actions used at most once.
        """
        rng = self.rng
        used: list[object] = []
        for _ in range(80):
            if self.room() < 250:
                return
            open_actions = [a for a in actions if not (len(a) > 2 and a[1] in used)]
            action = rng.choices([a[1] for a in open_actions], [a[0] for a in open_actions])[0]
            used.append(action)
            if not self.followed_up and rng.random() < 0.04:
                self.followed_up = True
                self.t.human(rng.choice(PHRASES["followups"][self.t.kind][self.lang]).format(**followup_slots))
                self.t.obs = None
                action(plan="followup")
            else:
                action()


def fit_lines(lines: list[str], room: float, make) -> Call:
    """The largest call from make(limit) whose content fits `room` tokens (shrinking the limit)."""
    limit = len(lines)
    call = make(limit)
    while est_tokens(json.dumps(call.content)) > room and limit > 20:
        limit = int(limit * 0.7)
        call = make(limit)
    return call


def read_obs(path: str) -> tuple[str, dict]:
    """The observation to make after reading `path`: code or configuration."""
    is_config = path.endswith((".yml", ".yaml", ".toml", ".cfg", ".json", ".conf", ".md"))
    return ("config" if is_config else "code", {"path": path})


def passed_count(output: str) -> int:
    """The number of passed tests in a pytest or jest summary."""
    m = re.findall(r"(\d+) passed", output)
    return int(m[-1]) if m else 0


def error_of(output: str) -> str:
    """The first error-looking line of a test log."""
    for line in output.split("\n"):
        if line.startswith("FAILED ") and " - " in line:
            return line.split(" - ", 1)[1]
        if re.match(r"^\s+(TypeError|Error|AssertionError): ", line):
            return line.strip()
    return "AssertionError"
