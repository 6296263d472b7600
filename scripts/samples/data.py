"""The canned data in data/*.json, loaded once, and the records built from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"


@cache
def load(name: str) -> dict | list:
    """The parsed content of data/<name>.json (read once per process)."""
    return json.loads((DATA_DIR / f"{name}.json").read_text(encoding="utf-8"))


def joined(templates: dict[str, list[str]]) -> dict[str, str]:
    """Multi-line templates are stored as lists of lines for readability; join them back."""
    return {name: "\n".join(lines) for name, lines in templates.items()}


def _tuples(record: dict) -> dict:
    # The generator was written against tuples; keep them so slicing and concatenation behave the same.
    return {k: tuple(v) if isinstance(v, list) else v for k, v in record.items()}


@dataclass(frozen=True)
class Project:
    """A fictional repository the agent works in."""

    name: str
    org: str
    lang: str  # "py" or "js"
    pkg: str
    modules: tuple[str, ...]
    nouns: tuple[str, ...]
    deps: tuple[str, ...]
    port: int
    blurb: str


@dataclass(frozen=True)
class Incident:
    """A production failure mode: its log signature, root cause and config fix."""

    key: str
    symptom: str
    errors: tuple[str, ...]
    pod_status: str
    event: str
    cause: str
    fix_key: str
    fix_old: str
    fix_new: str


@dataclass(frozen=True)
class Topic:
    """A fictional technology choice the agent researches."""

    slug: str
    question: str
    libs: tuple[str, str, str]
    domain: str
    features: tuple[str, ...]
    metric: str
    context: str


PROJECTS = tuple(Project(**_tuples(p)) for p in load("projects"))
PY_PROJECTS = tuple(p for p in PROJECTS if p.lang == "py")
INCIDENTS = tuple(Incident(**_tuples(i)) for i in load("ops")["incidents"])
TOPICS = tuple(Topic(**_tuples(t)) for t in load("research")["topics"])
