"""Checks of a model's answer before it becomes a row's summary: refusals, loops, another language,
too little, the instructions echoed. Pure functions of the answer and the request body that was
sent, so an answer read back from a batch (only its body kept) is judged as an online one is."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, fields
from typing import Any, Sequence

from ..core.config import CHECK_NAMES, DEFAULT_CHECK_THRESHOLDS, enabled_checks
from ..version import __version__
from . import language
from .language import units
from .refusal import is_refusal, refusal_share

__all__ = ["CHECK_FAILED", "CHECK_NAMES", "Checks", "Thresholds", "failed_check", "measures", "refusal_share", "units"]

CHECK_FAILED = "check failed: "  # opens a failed attempt's reason, the check's name follows

STATED = re.compile(r"at most about (\d+) tokens")  # the length the built-in prompts state
TOP_NGRAMS = (2, 3, 4)  # Gopher's "most frequent n-gram" measure
DUPLICATE_NGRAM = 10  # Gopher's "duplicated n-grams" measure, at its strictest n...
LOOP_COUNT = 3  # ...counting the n-grams seen this often: a good summary may quote one command twice
ECHO_NGRAM = 8  # an 8-unit run of the instructions in an answer is the instructions, not a summary
QUOTED_SHARE = 0.5  # of an answer's characters in runs copied from the turns: it quotes them
# Below this an answer is too short for n-gram statistics to mean anything (Gopher's own minimum
# document length): a short list of calls to one file shares its prefix without being a loop.
MIN_NGRAM_UNITS = 50

HEADING = re.compile(r"^\s*(#{1,6}\s|\*\*[^*]+\*\*\s*[:：]?\s*$)")
LABELS = {"summary", "handoff", "handoff note", "context summary", "resumen", "résumé", "zusammenfassung",
          "riassunto", "resumo", "总结", "摘要", "概要", "要約", "요약", "n/a", "none", "no summary"}


@dataclass(frozen=True)
class Thresholds:
    """Where each check draws its line (summarization.check_thresholds; docs/summarizers.md, "Summary checks")."""

    refusal_max_share: float
    duplicate_line_max_share: float
    top_ngram_max_share: float
    duplicate_ngram_max_share: float
    language_min_script_share: float
    too_little_min_share: float
    too_little_region_tokens: float
    echo_max_share: float


@dataclass(frozen=True)
class Checks:
    """The checks a run applies and their thresholds, from the config."""

    names: tuple[str, ...]
    limits: Thresholds

    @classmethod
    def from_config(cls, config) -> "Checks":
        values = {**DEFAULT_CHECK_THRESHOLDS, **config.check_thresholds}
        limits = Thresholds(**{f.name: float(values[f.name]) for f in fields(Thresholds)})
        return cls(enabled_checks(config.summary_checks), limits)

    def identity(self, tokenizer: str | None) -> str | None:
        """A name for these checks as this trajcomp applies them, counting with `tokenizer` (too_little
        counts tokens): an answer that passed checks of one name passes them again. None when there are none.
        The version is part of it: a release may judge differently."""
        if not self.names:
            return None
        said = [__version__, tokenizer, list(self.names), asdict(self.limits)]
        return hashlib.sha256(json.dumps(said, sort_keys=True).encode("utf-8")).hexdigest()[:32]


def failed_check(text: str, body: dict[str, Any], checks: Checks, counter) -> str | None:
    """The first check `text` (a cleaned answer to `body`) fails, or None when it passes them all."""
    system, user = _messages(body)
    for name in checks.names:
        if not _PASSES[name](text, system, user, body, checks.limits, counter):
            return name
    return None


# ---- the checks: each True when the answer passes -------------------------------------------


def _refusal(text, system, user, body, limits: Thresholds, counter) -> bool:
    return not is_refusal(text, limits.refusal_max_share)


def _repetition(text, system, user, body, limits: Thresholds, counter) -> bool:
    m = measures(text)
    return (m["duplicate_lines"] <= limits.duplicate_line_max_share
            and m["top_ngram"] <= limits.top_ngram_max_share
            and m["duplicate_ngram"] <= limits.duplicate_ngram_max_share)


def _language(text, system, user, body, limits: Thresholds, counter) -> bool:
    if language.matches(text, language.region_prose(user), limits.language_min_script_share):
        return True
    # Mostly runs copied from the turns (a tool's English output quoted in a Chinese session): the
    # region's own words, not an answer written in another language.
    return echo_share(text, user) >= QUOTED_SHARE


def _too_little(text, system, user, body, limits: Thresholds, counter) -> bool:
    if is_label(text):
        return False
    budget = stated_budget(system, user, body)
    wanted = limits.too_little_min_share * budget
    if counter.count([text])[0] >= wanted:
        return True
    return counter.count([user])[0] < limits.too_little_region_tokens  # short is fine for a small region


def _echo(text, system, user, body, limits: Thresholds, counter) -> bool:
    return echo_share(text, system) < limits.echo_max_share


_PASSES = {"refusal": _refusal, "repetition": _repetition, "language": _language,
           "too_little": _too_little, "echo": _echo}
assert tuple(_PASSES) == CHECK_NAMES


# ---- the measures ----------------------------------------------------------------------------


def measures(text: str) -> dict[str, float]:
    """Gopher's repetition measures, by characters: duplicate lines, the most frequent 2- to 4-gram
    (in an answer of MIN_NGRAM_UNITS or more), and units covered by a 10-gram seen LOOP_COUNT times."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    seen: set[str] = set()
    duplicate = 0
    for line in lines:
        duplicate += len(line) if line in seen else 0
        seen.add(line)
    words = units(text)
    chars = max(1, sum(len(w) for w in words))
    top = max(_top_ngram_chars(words, n) for n in TOP_NGRAMS) / chars if len(words) >= MIN_NGRAM_UNITS else 0.0
    return {"duplicate_lines": duplicate / max(1, sum(len(line) for line in lines)), "top_ngram": top,
            "duplicate_ngram": _duplicated_chars(words, DUPLICATE_NGRAM) / chars}


def _top_ngram_chars(words: Sequence[str], n: int) -> int:
    grams = Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    gram, count = grams.most_common(1)[0]
    return sum(len(w) for w in gram) * count if count > 1 else 0


def _duplicated_chars(words: Sequence[str], n: int) -> int:
    grams = Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    covered = [False] * len(words)
    for i in range(len(words) - n + 1):
        if grams[tuple(words[i:i + n])] >= LOOP_COUNT:
            covered[i:i + n] = [True] * n
    return sum(len(w) for w, c in zip(words, covered) if c)


def echo_share(text: str, instructions: str) -> float:
    """The share of the answer's characters in runs of ECHO_NGRAM units also found in the instructions."""
    words, source = units(text), units(instructions)
    grams = {tuple(source[i:i + ECHO_NGRAM]) for i in range(len(source) - ECHO_NGRAM + 1)}
    covered = [False] * len(words)
    for i in range(len(words) - ECHO_NGRAM + 1):
        if tuple(words[i:i + ECHO_NGRAM]) in grams:
            covered[i:i + ECHO_NGRAM] = [True] * ECHO_NGRAM
    chars = sum(len(w) for w in words)
    return sum(len(w) for w, c in zip(words, covered) if c) / chars if chars else 0.0


def is_label(text: str) -> bool:
    """An answer that is only headings or labels ("Summary:", "## Goal"): no line says anything."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return True
    if " ".join(re.sub(r"[#*_`:：.\-\s]+", " ", text).split()).lower() in LABELS:
        return True
    # a heading is a label when short: one long line that opens with "## " still says something
    return all((HEADING.match(line) and len(line) <= 80) or (line.endswith((":", "：")) and len(line) <= 60)
               for line in lines)


def stated_budget(system: str, user: str, body: dict[str, Any]) -> int:
    """The length the prompt asks for: its "at most about N tokens", else half the answer's max_tokens
    (trajcomp asks for twice the summary's target, so a longer answer is not cut)."""
    found = STATED.findall(system) or STATED.findall(user)
    if found:
        return int(found[-1])
    return int(body.get("max_tokens") or 0) // 2


def _messages(body: dict[str, Any]) -> tuple[str, str]:
    """The system and user messages' text of a chat request body."""
    texts = {"system": [], "user": []}
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(message, dict) and message.get("role") in texts and isinstance(content, str):
            texts[message["role"]].append(content)
    return "\n\n".join(texts["system"]), "\n\n".join(texts["user"])
