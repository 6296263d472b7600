"""The progress bar on stderr, with the outcome counts as its postfix."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Callable

from tqdm import tqdm


def warn(message: str) -> None:
    """One line on stderr, shown under -q too and above a progress bar (not through it)."""
    tqdm.write(f"trajcomp: warning: {message}", file=sys.stderr)


class Progress:
    """Counts rows by outcome and shows them; `live` adds run facts such as calls in flight."""

    def __init__(self, disable: bool, live: Callable[[], dict] | None = None):
        # In a log file (stderr not a terminal) every redraw is kept: one line a minute is enough, the
        # first after a minute too (a run that stops at once, at a dead endpoint, says only why).
        interval = 0.1 if sys.stderr.isatty() else 60.0
        self.bar = tqdm(unit="row", disable=disable, file=sys.stderr, dynamic_ncols=True,
                        mininterval=interval, maxinterval=max(10.0, interval), delay=0 if interval < 1 else interval)
        self.counts: Counter = Counter()
        self.live = live
        self._shown = 0.0

    def update(self, kind: str) -> None:
        self.advance({kind: 1})

    def advance(self, counts: dict[str, int]) -> None:
        """Rows counted by kind, e.g. a whole part's (skipped rows are not shown)."""
        self.counts.update(counts)
        self.bar.update(sum(counts.values()))
        now = time.monotonic()
        if now - self._shown >= 0.5:
            self._shown = now
            self.bar.set_postfix(self._postfix(), refresh=False)

    def _postfix(self) -> dict:
        shown = {k: self.counts[k] for k in ("compressed", "unchanged", "failed", "rejected")}
        return {**shown, **(self.live() if self.live else {})}

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, kind, *exc: object) -> None:
        if kind is not None:  # the run stopped: its error line, not a bar cut short, is what is left on screen
            self.bar.leave = False
        self.close()

    def close(self) -> None:
        self.bar.set_postfix(self._postfix(), refresh=False)
        self.bar.close()
