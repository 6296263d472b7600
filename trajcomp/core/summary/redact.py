"""Remove secrets from text: summaries that quote them, and error bodies that echo them."""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

# Each pattern with the words one of which any match holds (lowercased when the pattern ignores case):
# a text without them is not scanned by it. A pattern and its words change together. A scan of a long text costs ~1 ms a pattern (none of them
# opens with a literal re can search for), and most texts hold none of these words.
_PATTERNS = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S), ("-----BEGIN",)),
    (re.compile(r"\bsk-(?:proj-|ant-|or-v1-)?[A-Za-z0-9_-]{16,}"), ("sk-",)),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), ("github_pat_",)),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ("AKIA", "ASIA")),
    (re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"), ("xox",)),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), ("hf_",)),
    # A bearer token, not the word after "Bearer" in prose: it must hold a digit or a symbol.
    (re.compile(r"(?i)\bBearer\s+(?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}"), ("bearer",)),
]
# key=value and "key": "value" forms keep the key and hide the value. The key may carry a prefix
# (DB_PASSWORD, GITHUB_TOKEN); a quoted value is hidden whole; a value that is a literal, a type
# or a call (None, Optional[str], os.environ[...]) is code, not a secret.
_ASSIGNMENT = re.compile(
    r"(?i)((?<![A-Za-z0-9])[A-Za-z0-9_]*?(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|token)"
    r"[\"']?\s*[:=]\s*)"
    r"(\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|(?!(?:none|null|true|false)\b)[^\s\"',;&\[\]()]{4,}(?![\w\[(.]))"
)


_ASSIGNMENT_WORDS = ("passw", "pwd", "secret", "api", "token")  # each of its keys holds one: change them together


def redact(text: str, *known: str | None) -> str:
    """`text` with known secret values and secret-looking strings replaced by [REDACTED]."""
    for secret in known:
        if secret:
            text = text.replace(secret, REDACTED)
    lower = _folded(text)
    for pattern, words in _PATTERNS:
        if any(word in (lower if pattern.flags & re.I else text) for word in words):
            text = pattern.sub(REDACTED, text)
            lower = _folded(text)
    if any(word in lower for word in _ASSIGNMENT_WORDS):
        text = _ASSIGNMENT.sub(_hide_value, text)
    return text


def _folded(text: str) -> str:
    """`text` lowercased, where a case-blind pattern's words are looked for. Four characters match an
    ASCII letter under re.IGNORECASE (found over every code point): K (Kelvin) and İ lowercase to k
    and to i and a combining dot, so a word holds them only where nothing follows its i (true of
    every word here: mind it when adding one); ı and ſ lowercase to themselves, so they are folded
    to i and s."""
    lower = text.lower()
    return lower if lower.isascii() else lower.replace("\u0131", "i").replace("\u017f", "s")


def one_line(text: str, *known: str | None, limit: int | None = None) -> str:
    """`text` as a message shows it: one line, secrets hidden, then cut to `limit` characters (cut
    after hiding, so no part of a secret is left that no pattern recognises)."""
    return redact(" ".join(text.split()), *known)[:limit]


def kept_whole(texts: list[str], *known: str | None) -> list[str]:
    """The texts that redaction leaves as they are. One pass over them all when their join comes
    out unchanged: a match in one text is a match in the join too (a newline bounds a pattern as a
    text's ends do). A match across texts only sends them to the check of each text alone."""
    joined = "\n".join(texts)
    if redact(joined, *known) == joined:
        return list(texts)
    return [text for text in texts if redact(text, *known) == text]


def _hide_value(match: re.Match) -> str:
    value = match.group(2)
    quote = value[0] if value[0] in "\"'" else ""
    return f"{match.group(1)}{quote}{REDACTED}{quote}"
