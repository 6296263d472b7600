"""Random identifiers and small text-formatting helpers shared by every generator module."""

from __future__ import annotations

import random
import string

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
POD_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of Kubernetes pod-name suffixes


def rand_str(rng: random.Random, alphabet: str, n: int) -> str:
    """A random string of `n` characters drawn from `alphabet`."""
    return "".join(rng.choice(alphabet) for _ in range(n))


def sha(rng: random.Random, n: int = 40) -> str:
    """A fake git object id."""
    return rand_str(rng, HEX, n)


def call_id(rng: random.Random) -> str:
    """A tool-call id in the OpenAI style used by Hermes Agent."""
    return "call_" + rand_str(rng, ALNUM, 24)


def numbered(lines: list[str], start: int = 1) -> str:
    """Render lines the way the read_file tool does: right-aligned number, a bar, the text."""
    return "\n".join(f"{i:>6}|{line}" for i, line in enumerate(lines, start))


def indent(lines: list[str], n: int = 4) -> list[str]:
    """Indent non-empty lines by `n` spaces."""
    pad = " " * n
    return [pad + line if line else line for line in lines]


def fmt_ts(day: int, seconds: float, month: int = 3, year: int = 2025) -> str:
    """An ISO-8601 UTC timestamp with milliseconds."""
    whole = int(seconds)
    ms = int((seconds - whole) * 1000)
    h, rem = divmod(whole % 86400, 3600)
    m, s = divmod(rem, 60)
    return f"{year}-{month:02d}-{day:02d}T{h:02d}:{m:02d}:{s:02d}.{ms:03d}Z"


def title_case(word: str) -> str:
    """CamelCase a snake_case word."""
    return "".join(part.capitalize() for part in word.split("_"))
