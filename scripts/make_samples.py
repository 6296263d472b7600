#!/usr/bin/env python3
"""Generate seeded, synthetic Hermes-style agent trajectories as ShareGPT JSONL.

Writes ``hermes_coding_runs.jsonl`` and ``hermes_research_runs.jsonl`` into
``--out-dir``. Every random choice flows from ``--seed`` so reruns are
byte-identical. ``--report`` prints per-row token lengths measured with the
demo tokenizer (see ``scripts/sample_lengths.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SEED = 20240611
DEFAULT_OUT_DIR = "data_samples"
CODING_FILE = "hermes_coding_runs.jsonl"
RESEARCH_FILE = "hermes_research_runs.jsonl"

# Rough characters per demo-tokenizer token by kind of run, used only to size rows while generating.
CHARS_PER_TOKEN = {"coding": 3.4, "research": 3.9, "ops": 3.2}

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Fake projects
# ---------------------------------------------------------------------------


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


PROJECTS = (
    Project(
        "tidepool",
        "kelp-labs",
        "py",
        "tidepool",
        ("ingest", "schema", "transforms", "sinks", "watermark"),
        ("record", "batch", "column", "partition", "watermark", "offset", "sink", "schema"),
        ("pyarrow==15.0.2", "fsspec==2024.3.1", "pydantic==2.7.1", "orjson==3.10.3"),
        8088,
        "a streaming ingestion library that batches records into Parquet partitions",
    ),
    Project(
        "quillmark",
        "inkwell-dev",
        "py",
        "quillmark",
        ("lexer", "parser", "render", "inline", "footnotes"),
        ("token", "block", "node", "span", "heading", "footnote", "fence", "anchor"),
        ("regex==2024.4.28", "markupsafe==2.1.5", "pygments==2.18.0"),
        8011,
        "a CommonMark-ish Markdown parser with a pluggable HTML renderer",
    ),
    Project(
        "harborctl",
        "driftwood-ops",
        "py",
        "harborctl",
        ("cli", "config", "manifests", "rollout", "registry"),
        ("release", "manifest", "rollout", "image", "namespace", "context", "secret", "replica"),
        ("click==8.1.7", "kubernetes==29.0.0", "ruamel.yaml==0.18.6", "httpx==0.27.0"),
        9443,
        "a deployment CLI that renders manifests and drives progressive rollouts",
    ),
    Project(
        "ledgerline",
        "brightfin",
        "py",
        "ledgerline",
        ("api", "models", "reconcile", "currency", "postings"),
        ("entry", "account", "invoice", "ledger", "currency", "balance", "posting", "payout"),
        ("fastapi==0.111.0", "sqlalchemy==2.0.30", "psycopg==3.1.19", "pydantic==2.7.1"),
        8000,
        "a double-entry ledger service exposed over a FastAPI HTTP API",
    ),
    Project(
        "pebblecache",
        "stonefruit",
        "py",
        "pebblecache",
        ("cache", "redis_backend", "serializers", "eviction", "locks"),
        ("key", "entry", "ttl", "shard", "lock", "namespace", "value", "segment"),
        ("redis==5.0.4", "msgpack==1.0.8", "xxhash==3.4.1"),
        6380,
        "a tiered caching library with in-process LRU and Redis backends",
    ),
    Project(
        "fieldnotes",
        "meadow-research",
        "py",
        "fieldnotes",
        ("loaders", "units", "stats", "catalog", "resample"),
        ("sample", "unit", "series", "station", "reading", "catalog", "interval", "sensor"),
        ("numpy==1.26.4", "pandas==2.2.2", "pint==0.23", "matplotlib==3.8.4"),
        8501,
        "a toolkit for cleaning and resampling environmental sensor readings",
    ),
    Project(
        "mailroom",
        "postbox-io",
        "py",
        "mailroom",
        ("queue", "templates", "smtp", "retries", "webhooks"),
        ("message", "template", "recipient", "bounce", "webhook", "attempt", "envelope", "domain"),
        ("jinja2==3.1.4", "aiosmtplib==3.0.1", "celery==5.4.0", "redis==5.0.4"),
        2525,
        "a transactional e-mail worker with templating, retries and bounce webhooks",
    ),
    Project(
        "northwind-ui",
        "northwind",
        "js",
        "src",
        ("DataTable", "usePagination", "apiClient", "format", "filters"),
        ("row", "page", "column", "filter", "cursor", "sort", "cell", "query"),
        ("react@18.3.1", "typescript@5.4.5", "jest@29.7.0", "@tanstack/react-query@5.40.0"),
        5173,
        "a React + TypeScript admin dashboard for the Northwind order data",
    ),
    Project(
        "relayd",
        "hookline",
        "js",
        "src",
        ("server", "retry", "signature", "queue", "deliveries"),
        ("delivery", "webhook", "attempt", "signature", "subscriber", "event", "backoff", "endpoint"),
        ("fastify@4.27.0", "undici@6.18.2", "bullmq@5.7.14", "jest@29.7.0"),
        3000,
        "a Node.js webhook relay that signs, queues and retries deliveries",
    ),
)

PY_PROJECTS = tuple(p for p in PROJECTS if p.lang == "py")
JS_PROJECTS = tuple(p for p in PROJECTS if p.lang == "js")

VERBS = (
    "parse",
    "load",
    "resolve",
    "normalize",
    "validate",
    "merge",
    "render",
    "flush",
    "compute",
    "emit",
    "encode",
    "decode",
    "fetch",
    "apply",
    "build",
    "split",
    "coerce",
    "collect",
    "prune",
    "index",
    "refresh",
    "schedule",
)
CLASS_SUFFIXES = (
    "Spec",
    "Config",
    "Registry",
    "Buffer",
    "Resolver",
    "Writer",
    "Reader",
    "Index",
    "State",
    "Policy",
    "Planner",
    "Client",
)
CONST_SUFFIXES = (
    "LIMIT",
    "TIMEOUT_S",
    "MAX_RETRIES",
    "BATCH_SIZE",
    "DEFAULT_TTL",
    "THRESHOLD_MS",
    "CHUNK_BYTES",
    "WINDOW",
)
ARG_NAMES = (
    "payload",
    "path",
    "options",
    "limit",
    "strict",
    "config",
    "now",
    "timeout",
    "source",
    "items",
    "context",
    "encoding",
)
ARG_TYPES = {
    "payload": "Mapping[str, Any]",
    "path": "str | Path",
    "options": "dict[str, Any] | None",
    "limit": "int",
    "strict": "bool",
    "config": "Mapping[str, Any]",
    "now": "datetime | None",
    "timeout": "float",
    "source": "str",
    "items": "Iterable[Any]",
    "context": "dict[str, Any]",
    "encoding": "str",
}


# ---------------------------------------------------------------------------
# Python source synthesis
# ---------------------------------------------------------------------------

PY_IMPORTS = (
    "import hashlib",
    "import json",
    "import logging",
    "import os",
    "import re",
    "import time",
    "import itertools",
    "import functools",
    "from collections import defaultdict",
    "from dataclasses import dataclass, field",
    "from datetime import datetime, timedelta, timezone",
    "from pathlib import Path",
    "from typing import Any, Iterable, Iterator, Mapping, Sequence",
)

# Statement templates. Slots are filled by PyGen.statement(); doubled braces are literal.
PY_STATEMENTS = (
    'if not {a}:\n    raise ValueError(f"{fn}() received an empty {noun} set")',
    "if not isinstance({a}, ({T}, type(None))):\n"
    '    raise TypeError(f"{fn}: expected {T}, got {{type({a}).__name__}}")',
    '{v} = []\nfor {it} in {a}:\n    if getattr({it}, "{attr}", None) is None:\n        continue\n'
    "    {v}.append({helper}({it}))",
    '{v} = {{key: value for key, value in dict({a}).items() if not str(key).startswith("_")}}',
    "try:\n    {v} = {helper}({a}, timeout={CONST})\nexcept {exc} as exc:\n"
    '    logger.warning("{fn}: {helper} failed for %r: %s", {a}, exc)\n    {v} = {default}',
    'logger.debug("{fn}: handling %d {noun}(s)", len({a}))',
    'with open({a}, encoding="utf-8") as fh:\n    {v} = json.load(fh)',
    "{v} = sorted({a}, key=lambda item: (item.{attr}, item.{attr2}))",
    'if len({a}) > {CONST}:\n    logger.info("{fn}: truncating %d {noun}s to %d", len({a}), {CONST})\n'
    "    {a} = {a}[:{CONST}]",
    "started = time.monotonic()\n{v} = {helper}({a})\nelapsed_ms = (time.monotonic() - started) * 1000.0\n"
    'if elapsed_ms > {n}:\n    logger.info("slow {noun} lookup took %.1f ms", elapsed_ms)',
    'match = _{NOUN}_RE.match(str({a}))\nif match is None:\n    raise ValueError(f"invalid {noun}: {{{a}!r}}")\n'
    '{v} = match.group("{noun}")',
    '{v} = hashlib.sha256(repr({a}).encode("utf-8")).hexdigest()[:{small}]',
    "grouped: dict[str, list[Any]] = defaultdict(list)\nfor {it} in {a}:\n    grouped[{it}.{attr}].append({it})\n"
    "{v} = dict(grouped)",
    "for attempt in range(1, {CONST} + 1):\n    try:\n        {v} = {helper}({a})\n        break\n"
    "    except {exc}:\n        if attempt == {CONST}:\n            raise\n"
    "        time.sleep(min(0.1 * 2 ** attempt, 5.0))",
    '{v} = os.environ.get("{PKG}_{NOUN}_{suffix}", "{envdefault}")',
    "target = Path({a}).expanduser().resolve()\ntarget.parent.mkdir(parents=True, exist_ok=True)\n"
    '{v} = target.with_suffix(".{ext}")',
    'assert {a} is not None, "{noun} must be resolved before {verb}"',
    "cutoff = datetime.now(timezone.utc) - timedelta(seconds={n})\n"
    "{v} = [{it} for {it} in {a} if {it}.{attr} >= cutoff]",
    '{v} = {a}.get("{key}") or {default}',
    '{v} = "{sep}".join(str(part) for part in {a} if part)',
    "if {a} is None:\n    return {default}",
    "{v} = max(({it}.{attr} for {it} in {a}), default={small})",
    '{v} = {{**dict({a}), "{key}": {helper}({a2})}}',
    "if {a2} and id({a}) not in _SEEN:\n    _SEEN.add(id({a}))\n    {v} = {helper}({a2})\nelse:\n    {v} = {default}",
    "{v} = list(itertools.islice({a}, {CONST}))",
)
EXCEPTIONS = (
    "ValueError",
    "KeyError",
    "TimeoutError",
    "OSError",
    "json.JSONDecodeError",
    "ConnectionError",
    "LookupError",
)
DEFAULTS = ("None", "{}", "[]", "0", '""', "()", "False")


class PyGen:
    """Synthesizes plausible Python modules and pytest files for one project."""

    def __init__(self, rng: random.Random, project: Project):
        self.rng = rng
        self.p = project

    def noun(self) -> str:
        return self.rng.choice(self.p.nouns)

    def func_name(self) -> str:
        name = f"{self.rng.choice(VERBS)}_{self.noun()}"
        return name + self.rng.choice(("", "", "s", "_batch", "_map", "_safe"))

    def class_name(self) -> str:
        return title_case(self.noun()) + self.rng.choice(CLASS_SUFFIXES)

    def const_name(self) -> str:
        return f"{self.noun().upper()}_{self.rng.choice(CONST_SUFFIXES)}"

    def statement(self, ctx: dict) -> list[str]:
        """One statement (possibly compound) as unindented lines; records new variables in ctx."""
        rng = self.rng
        noun = self.noun()
        var = f"{noun}_{rng.choice(('map', 'list', 'value', 'result', 'spec', 'rows', 'ids', 'key'))}"
        pool = ctx["args"] + ctx["vars"]
        slots = {
            "a": rng.choice(pool),
            "a2": rng.choice(pool),
            "v": var,
            "it": noun,
            "noun": noun,
            "NOUN": noun.upper(),
            "attr": rng.choice(self.p.nouns) + rng.choice(("_id", "_at", "", "_name")),
            "attr2": rng.choice(("priority", "created_at", "name", "size", "seq")),
            "helper": rng.choice(ctx["helpers"]),
            "exc": rng.choice(EXCEPTIONS),
            "fn": ctx["fn"],
            "T": rng.choice(("dict", "list", "str", "int", "Path", "tuple")),
            "CONST": rng.choice(ctx["consts"]),
            "default": rng.choice(DEFAULTS),
            "n": rng.choice((50, 100, 250, 500, 750, 1500, 3600, 86400)),
            "small": rng.choice((0, 8, 12, 16)),
            "PKG": self.p.pkg.upper().replace("-", "_"),
            "suffix": rng.choice(("MODE", "DIR", "URL", "LEVEL")),
            "envdefault": rng.choice(("auto", "info", "/tmp", "strict")),
            "ext": rng.choice(("json", "parquet", "lock", "tmp", "bak")),
            "verb": rng.choice(VERBS),
            "key": rng.choice(self.p.nouns) + rng.choice(("_id", "s", "_ref")),
            "sep": rng.choice((",", "/", ":", ".")),
        }
        lines = rng.choice(PY_STATEMENTS).format(**slots).split("\n")
        if var in lines[0] or any(line.startswith(var) for line in lines):
            ctx["vars"].append(var)
        return lines

    def signature(self, args: list[str], method: bool) -> str:
        parts = (["self"] if method else []) + [f"{a}: {ARG_TYPES.get(a, 'Any')}" for a in args]
        return ", ".join(parts)

    def function(self, name: str, helpers: list[str], consts: list[str], method: bool = False) -> list[str]:
        """A full function definition with docstring and a synthesized body."""
        rng = self.rng
        args = rng.sample(ARG_NAMES, rng.randint(1, 3))
        first = f"{self.noun()}s"
        args = [first] + [a for a in args if a != first]
        ret = rng.choice(("dict[str, Any]", "list[Any]", "str | None", "int", "bool", "Any", "None"))
        verb, _, rest = name.lstrip("_").partition("_")
        doc = f"{verb.capitalize()} {rest.replace('_', ' ') or 'the input'} " + rng.choice(
            (
                "and return the result.",
                "for the caller.",
                "honouring the configured limits.",
                "without mutating the input.",
                "in a single pass.",
                "; see the module docstring.",
            )
        )
        ctx = {"args": args, "vars": [], "helpers": helpers, "consts": consts, "fn": name}
        body: list[str] = [f'"""{doc.replace(" ;", ";")}"""']
        for _ in range(rng.randint(3, 7)):
            body += self.statement(ctx)
        body.append(f"return {ctx['vars'][-1]}" if ctx["vars"] and ret != "None" else "return None")
        return [f"def {name}({self.signature(args, method)}) -> {ret}:"] + indent(body)

    def dataclass_block(self, cls: str) -> list[str]:
        rng = self.rng
        lines = [
            "@dataclass",
            f"class {cls}:",
            f'    """{self.noun().capitalize()} settings as loaded from config."""',
            "",
        ]
        names: list[str] = []
        for _ in range(rng.randint(3, 6)):
            fname = self.noun() + rng.choice(("_id", "_count", "_name", "_ttl", "_enabled", "s"))
            if fname in names:
                continue
            names.append(fname)
            ftype, default = rng.choice(
                (
                    ("int", str(rng.choice((0, 1, 30, 64, 512)))),
                    ("str", '"default"'),
                    ("bool", rng.choice(("True", "False"))),
                    ("float", "0.5"),
                    ("list[str]", "field(default_factory=list)"),
                )
            )
            lines.append(f"    {fname}: {ftype} = {default}")
        return lines

    def class_block(self, cls: str, helpers: list[str], consts: list[str]) -> list[str]:
        rng = self.rng
        lines = [
            f"class {cls}:",
            f'    """Owns {self.noun()} state for one {self.noun()} at a time."""',
            "",
            "    def __init__(self, config: Mapping[str, Any] | None = None) -> None:",
            "        self._config = dict(config or {})",
            f"        self._{self.noun()}s: dict[str, Any] = {{}}",
            "        self._lock_count = 0",
            "",
        ]
        for _ in range(rng.randint(2, 4)):
            lines += indent(self.function(self.func_name(), helpers, consts, method=True)) + [""]
        return lines[:-1]

    def module(self, module: str) -> list[str]:
        """A whole module: docstring, imports, constants, classes and functions."""
        rng = self.rng
        others = [m for m in self.p.modules if m != module]
        funcs = [self.func_name() for _ in range(rng.randint(4, 8))]
        helpers = [self.func_name() for _ in range(3)] + funcs
        consts = [self.const_name() for _ in range(rng.randint(2, 4))]
        lines = [
            f'"""{self.p.pkg}.{module}: {rng.choice(("helpers for", "core logic for", "the public API of", "internal plumbing for"))} '
            f'{self.noun()} handling."""',
            "",
            "from __future__ import annotations",
            "",
        ]
        base = [
            "import logging",
            "import re",
            "from dataclasses import dataclass, field",
            "from datetime import datetime, timedelta, timezone",
            "from typing import Any, Iterable, Iterator, Mapping, Sequence",
        ]
        extra = rng.sample([i for i in PY_IMPORTS if i not in base], rng.randint(2, 5))
        lines += sorted(i for i in base + extra if i.startswith("import ")) + sorted(
            i for i in base + extra if i.startswith("from ")
        )
        lines.append("")
        for k, other in enumerate(rng.sample(others, min(2, len(others)))):
            lines.append(f"from {self.p.pkg}.{other} import {helpers[k]}, {self.class_name()}")
        lines += ["", "logger = logging.getLogger(__name__)", ""]
        for const in consts:
            lines.append(f"{const} = {rng.choice((8, 16, 30, 64, 100, 256, 1024, 4096, 0.25, 2.5))}")
        noun = self.noun()
        lines.append(f'_{noun.upper()}_RE = re.compile(r"^(?P<{noun}>[a-z0-9_.-]+)(?::(?P<version>\\d+))?$")')
        lines += ["_SEEN: set[int] = set()", "", ""]
        blocks = [self.dataclass_block(self.class_name())]
        if rng.random() < 0.7:
            blocks.append(self.class_block(self.class_name(), helpers, consts))
        blocks += [self.function(name, helpers, consts) for name in funcs]
        for block in blocks:
            lines += block + ["", ""]
        return lines[:-2]

    def test_module(self, module: str, funcs: list[str]) -> list[str]:
        """A pytest module exercising `funcs` from `module`."""
        rng = self.rng
        lines = [
            "import json",
            "",
            "import pytest",
            "",
            f"from {self.p.pkg}.{module} import {', '.join(funcs)}",
            "",
            "",
        ]
        noun = self.noun()
        lines += [
            "@pytest.fixture",
            f"def sample_{noun}s(tmp_path):",
            f'    """Five {noun}s with increasing ids, one of them incomplete."""',
            f'    rows = [{{"{noun}_id": i, "name": f"{noun}-{{i}}", "size": i * 10}} for i in range(5)]',
            '    rows[3]["size"] = None',
            f'    (tmp_path / "{noun}s.json").write_text(json.dumps(rows))',
            "    return rows",
            "",
            "",
        ]
        for func in funcs:
            behaviours = rng.sample(
                (
                    "handles_empty",
                    "keeps_order",
                    "skips_missing",
                    "respects_limit",
                    "roundtrip",
                    "rejects_bad_type",
                    "is_idempotent",
                    "uses_defaults",
                ),
                rng.randint(2, 4),
            )
            for behaviour in behaviours:
                lines += self.test_function(func, behaviour, noun) + ["", ""]
        return lines[:-2]

    def test_function(self, func: str, behaviour: str, noun: str) -> list[str]:
        rng = self.rng
        name = f"test_{func.lstrip('_')}_{behaviour}"
        if behaviour in ("handles_empty", "rejects_bad_type"):
            exc = "ValueError" if behaviour == "handles_empty" else "TypeError"
            arg = "[]" if behaviour == "handles_empty" else rng.choice(("42", "object()", "b'raw'"))
            return [f"def {name}():", f"    with pytest.raises({exc}):", f"        {func}({arg})"]
        if behaviour == "roundtrip":
            return [
                f'@pytest.mark.parametrize("raw", ["{noun}-1", "{noun}-2:3", "{noun}_x.y"])',
                f"def {name}(raw):",
                f"    assert {func}({func}(raw)) == {func}(raw)",
            ]
        expect = rng.choice(("3", "4", "5", '"' + noun + '-0"', "[0, 1, 2, 4]"))
        return [
            f"def {name}(sample_{noun}s):",
            f"    result = {func}(sample_{noun}s, limit={rng.choice((3, 4, 10))})",
            "    assert result is not None",
            f"    assert {rng.choice(('len(result)', 'result[0]', 'sorted(result)', 'result'))} == {expect}",
        ]


# ---------------------------------------------------------------------------
# JavaScript / TypeScript source synthesis
# ---------------------------------------------------------------------------

JS_STATEMENTS = (
    "if (!{a}) {{\n  throw new TypeError(`{fn}: expected a {noun}, got ${{typeof {a}}}`);\n}}",
    "const {v} = {a}.filter((item) => item.{attr} != null).map((item) => {helper}(item));",
    "const {{ limit = {n}, signal }} = options ?? {{}};",
    "try {{\n  const res = await fetch(`${{baseUrl}}/{noun}s/${{{a}.id}}`, {{ signal }});\n"
    "  if (!res.ok) throw new Error(`upstream ${{res.status}}`);\n  {v} = await res.json();\n"
    "}} catch (err) {{\n  logger.warn({{ err, {noun}: {a}?.id }}, '{fn} failed');\n  {v} = null;\n}}",
    "for (const {it} of {a}) {{\n  if ({it}.{attr} === undefined) continue;\n  seen.add({it}.id);\n}}",
    "const {v} = {{ ...defaults, ...{a}, updatedAt: Date.now() }};",
    "await new Promise((resolve) => setTimeout(resolve, Math.min(2 ** attempt * {n}, 30_000)));",
    "logger.debug({{ count: {a}.length }}, '{fn}: processing {noun}s');",
    "const {v} = Object.fromEntries(Object.entries({a}).filter(([, value]) => value !== undefined));",
    "if ({a}.length > {n}) {{\n  return {a}.slice(0, {n});\n}}",
    "const {v} = crypto.createHmac('sha256', secret).update({a}).digest('hex');",
    "const {v} = [...{a}].sort((x, y) => x.{attr2} - y.{attr2});",
)


class JsGen:
    """Synthesizes plausible JS/TS modules and jest files for one project."""

    def __init__(self, rng: random.Random, project: Project):
        self.rng = rng
        self.p = project

    def noun(self) -> str:
        return self.rng.choice(self.p.nouns)

    def func_name(self) -> str:
        return self.rng.choice(VERBS) + title_case(self.noun()) + self.rng.choice(("", "", "s", "Async"))

    def function(self, name: str, helpers: list[str]) -> list[str]:
        rng = self.rng
        noun = self.noun()
        args = [f"{noun}s"] + rng.sample(["options", "ctx", "limit", "signal", "now"], rng.randint(0, 2))
        body: list[str] = []
        last = None
        for _ in range(rng.randint(3, 6)):
            var = f"{self.noun()}{rng.choice(('List', 'Map', 'Result', 'Key', 'Payload'))}"
            slots = {
                "a": rng.choice(args),
                "v": var,
                "it": self.noun(),
                "noun": noun,
                "fn": name,
                "attr": self.noun() + rng.choice(("Id", "At", "")),
                "attr2": rng.choice(("priority", "createdAt", "seq")),
                "helper": rng.choice(helpers),
                "n": rng.choice((25, 50, 100, 250, 1000)),
            }
            stmt = rng.choice(JS_STATEMENTS).format(**slots)
            if f"const {var}" in stmt or f"{var} =" in stmt:
                last = var
            body += stmt.split("\n")
        body.append(f"return {last or 'undefined'};")
        asyncness = "async " if "await" in "\n".join(body) else ""
        doc = [
            "/**",
            f" * {name} — {rng.choice(('normalises', 'collects', 'resolves', 'retries'))} {noun}s for the caller.",
            f" * @param {{Array<object>}} {args[0]}",
            " */",
        ]
        return doc + [f"export {asyncness}function {name}({', '.join(args)}) {{"] + indent(body, 2) + ["}"]

    def module(self, module: str) -> list[str]:
        rng = self.rng
        funcs = [self.func_name() for _ in range(rng.randint(4, 7))]
        helpers = [self.func_name() for _ in range(3)] + funcs
        lines = [
            "import crypto from 'node:crypto';",
            "import { logger } from './logger.js';",
            f"import {{ {helpers[0]}, {helpers[1]} }} from './{rng.choice(self.p.modules)}.js';",
            "",
            f"const defaults = {{ retries: {rng.choice((3, 5, 8))}, timeoutMs: {rng.choice((2000, 5000, 15000))} }};",
            "const seen = new Set();",
            f"const baseUrl = process.env.UPSTREAM_URL ?? 'http://localhost:{self.p.port}';",
            "",
        ]
        for name in funcs:
            lines += self.function(name, helpers) + [""]
        return lines[:-1]

    def test_module(self, module: str, funcs: list[str]) -> list[str]:
        rng = self.rng
        lines = [f"import {{ {', '.join(funcs)} }} from './{module}.js';", "", f"describe('{module}', () => {{"]
        for func in funcs:
            for case in rng.sample(
                (
                    "returns [] for empty input",
                    "keeps insertion order",
                    "retries on 503",
                    "drops undefined fields",
                    "respects the limit option",
                    "signs the payload",
                ),
                rng.randint(2, 3),
            ):
                lines += [
                    f"  it('{func} {case}', async () => {{",
                    "    const input = [{ id: 1, seq: 2 }, { id: 2, seq: 1 }];",
                    f"    const result = await {func}(input, {{ limit: {rng.choice((1, 2, 10))} }});",
                    f"    expect(result).{rng.choice(('toHaveLength(2)', 'toEqual([])', 'toBeDefined()', 'toMatchObject({ id: 1 })'))};",
                    "  });",
                    "",
                ]
        return lines[:-1] + ["});"]


# ---------------------------------------------------------------------------
# A synthesized working tree, stable within one trajectory
# ---------------------------------------------------------------------------


@dataclass
class Bug:
    """Where a planted defect lives and how the agent fixes it."""

    path: str
    func: str
    line_idx: int
    old: str
    new: str
    kind: str
    message: str


class Repo:
    """Lazily synthesized files of one project; each path is generated once per trajectory."""

    def __init__(self, rng: random.Random, project: Project):
        self.rng = rng
        self.p = project
        self.gen = PyGen(rng, project) if project.lang == "py" else JsGen(rng, project)
        self.files: dict[str, list[str]] = {}
        self.root = f"/workspace/{project.name}"

    def module_path(self, module: str) -> str:
        if self.p.lang == "py":
            return f"{self.p.pkg}/{module}.py"
        ext = "tsx" if module[0].isupper() else "ts" if self.p.name == "northwind-ui" else "js"
        return f"src/{module}.{ext}"

    def test_path(self, module: str) -> str:
        if self.p.lang == "py":
            return f"tests/test_{module}.py"
        return f"src/{module}.test.{'ts' if self.p.name == 'northwind-ui' else 'js'}"

    def source(self, path: str) -> list[str]:
        """The lines of `path`, synthesizing module, test or config files on first use."""
        if path not in self.files:
            self.files[path] = self._synthesize(path)
        return self.files[path]

    def _synthesize(self, path: str) -> list[str]:
        for module in self.p.modules:
            if path == self.test_path(module):
                return self.gen.test_module(module, self.functions(self.module_path(module))[:3] or ["main"])
            if path == self.module_path(module):
                return self.gen.module(module)
        return config_file(self.rng, self.p, path).split("\n")

    def functions(self, path: str) -> list[str]:
        """Top-level function names defined in a module."""
        pattern = r"^def (\w+)\(" if self.p.lang == "py" else r"^export (?:async )?function (\w+)\("
        return [m.group(1) for line in self.source(path) if (m := re.match(pattern, line))]

    def def_line(self, path: str, func: str) -> int:
        """Index of the line defining `func` in `path`."""
        for i, line in enumerate(self.source(path)):
            if re.match(rf"^(?:export )?(?:async )?(?:def|function) {func}\(", line):
                return i
        return 0

    def body_line(self, path: str, func: str) -> int:
        """Index of a plain statement inside `func`, suitable for planting a bug."""
        lines = self.source(path)
        start = self.def_line(path, func)
        candidates = []
        for i in range(start + 1, len(lines)):
            line = lines[i]
            if line and not line.startswith((" ", "\t")) and i > start + 1:
                break
            text = line.strip()
            if (
                text
                and not text.startswith(('"""', "/**", "*", "return", "}", "except", "else", "try"))
                and "=" in text
            ):
                candidates.append(i)
        return self.rng.choice(candidates) if candidates else start + 2

    def grep(self, symbol: str, limit: int = 40) -> list[tuple[str, int, str]]:
        """(path, 1-based line, text) for every line mentioning `symbol` across known files."""
        hits = []
        for path in sorted(self.files):
            for i, line in enumerate(self.files[path], 1):
                if symbol in line:
                    hits.append((path, i, line))
        return hits[:limit]

    def warm(self, n_modules: int) -> None:
        """Synthesize a few modules and their tests so searches have something to find."""
        for module in self.p.modules[:n_modules]:
            self.source(self.module_path(module))
            self.source(self.test_path(module))


# ---------------------------------------------------------------------------
# Config files
# ---------------------------------------------------------------------------


def config_file(rng: random.Random, p: Project, path: str) -> str:
    """Synthesize a config file whose format follows its name."""
    name = path.rsplit("/", 1)[-1]
    if name == "pyproject.toml":
        return pyproject_toml(rng, p)
    if name == "setup.cfg":
        return setup_cfg(rng, p)
    if name == "package.json":
        return package_json(rng, p)
    if name.endswith((".yml", ".yaml")):
        if "workflows" in path:
            return ci_workflow(rng, p)
        if "compose" in name:
            return compose_yaml(rng, p)
        return k8s_deployment(rng, p)
    if name.endswith(".md"):
        return "\n".join(
            [
                f"# {p.name}",
                "",
                f"{p.name} is {p.blurb}.",
                "",
                "## Development",
                "",
                "```bash",
                "make install",
                "make test",
                "```",
            ]
        )
    return "\n".join(
        f"{p.pkg.upper()}_{k.upper()}={v}"
        for k, v in (
            ("log_level", "info"),
            ("port", p.port),
            ("workers", rng.randint(2, 16)),
            ("timeout_s", rng.choice((5, 15, 30))),
        )
    )


def pyproject_toml(rng: random.Random, p: Project) -> str:
    deps = "\n".join(f'    "{d.replace("==", ">=")}",' for d in p.deps)
    return f"""[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "{p.name}"
version = "{rng.randint(0, 3)}.{rng.randint(1, 19)}.{rng.randint(0, 9)}"
description = "{p.blurb.capitalize()}"
requires-python = ">=3.{rng.choice((9, 10, 11))}"
dependencies = [
{deps}
]

[project.optional-dependencies]
dev = ["pytest>=8.0", "pytest-cov>=5.0", "ruff>=0.4.4", "mypy>=1.10"]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-ra --strict-markers"
markers = ["slow: long-running tests", "integration: needs docker services"]

[tool.ruff]
line-length = {rng.choice((99, 100, 110, 120))}
target-version = "py311"

[tool.ruff.lint]
select = ["E", "F", "I", "B", "UP", "SIM"]

[tool.mypy]
strict = {rng.choice(("true", "false"))}
warn_unused_ignores = true"""


def setup_cfg(rng: random.Random, p: Project) -> str:
    deps = "\n".join(f"    {d}" for d in p.deps)
    return f"""[metadata]
name = {p.name}
version = attr: {p.pkg}.__version__
description = {p.blurb}
long_description = file: README.md
long_description_content_type = text/markdown
license = MIT
classifiers =
    Programming Language :: Python :: 3
    Programming Language :: Python :: 3.{rng.choice((8, 9, 10))}

[options]
packages = find:
python_requires = >=3.{rng.choice((8, 9))}
install_requires =
{deps}

[options.extras_require]
dev =
    pytest>=7.4
    pytest-cov
    flake8>=6.0
    black==23.12.1

[options.entry_points]
console_scripts =
    {p.name} = {p.pkg}.{p.modules[0]}:main

[flake8]
max-line-length = {rng.choice((88, 100, 120))}
extend-ignore = E203, W503
per-file-ignores =
    tests/*: S101

[tool:pytest]
testpaths = tests
addopts = -ra -q
filterwarnings =
    error::DeprecationWarning"""


def package_json(rng: random.Random, p: Project) -> str:
    deps = {d.rsplit("@", 1)[0]: "^" + d.rsplit("@", 1)[1] for d in p.deps}
    doc = {
        "name": f"@{p.org}/{p.name}",
        "version": f"{rng.randint(0, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
        "private": True,
        "type": "module",
        "scripts": {
            "dev": "vite" if p.name == "northwind-ui" else "node --watch src/server.js",
            "build": "tsc -p tsconfig.json" if p.name == "northwind-ui" else "echo no build",
            "test": "jest --runInBand",
            "lint": "eslint 'src/**/*.{js,ts,tsx}'",
        },
        "dependencies": deps,
        "devDependencies": {"eslint": "^8.57.0", "prettier": "^3.2.5"},
        "engines": {"node": ">=18.17"},
    }
    return json.dumps(doc, indent=2)


def ci_workflow(rng: random.Random, p: Project) -> str:
    versions = rng.sample(["3.9", "3.10", "3.11", "3.12"], 3) if p.lang == "py" else ["18.x", "20.x"]
    setup = (
        ("actions/setup-python@v5", "python-version") if p.lang == "py" else ("actions/setup-node@v4", "node-version")
    )
    install = "pip install -e '.[dev]'" if p.lang == "py" else "npm ci"
    test = "pytest -q --cov=" + p.pkg if p.lang == "py" else "npm test -- --ci"
    return f"""name: ci

on:
  push:
    branches: [main]
  pull_request:

concurrency:
  group: ci-${{{{ github.ref }}}}
  cancel-in-progress: true

jobs:
  test:
    runs-on: ubuntu-22.04
    timeout-minutes: {rng.choice((15, 20, 30))}
    strategy:
      fail-fast: false
      matrix:
        version: [{", ".join(f'"{v}"' for v in sorted(versions))}]
    steps:
      - uses: actions/checkout@v4
      - uses: {setup[0]}
        with:
          {setup[1]}: ${{{{ matrix.version }}}}
          cache: {"pip" if p.lang == "py" else "npm"}
      - name: Install
        run: {install}
      - name: Lint
        run: {"ruff check ." if p.lang == "py" else "npm run lint"}
      - name: Test
        run: {test}
        env:
          {p.pkg.upper().replace("-", "_")}_ENV: ci"""


def compose_yaml(rng: random.Random, p: Project) -> str:
    return f"""version: "3.8"
services:
  app:
    build: .
    ports:
      - "{p.port}:{p.port}"
    environment:
      DATABASE_URL: postgresql://{p.pkg}:{p.pkg}@db:5432/{p.pkg}
      REDIS_URL: redis://cache:6379/{rng.randint(0, 3)}
      LOG_LEVEL: {rng.choice(("info", "debug", "warning"))}
    depends_on:
      - db
      - cache
  db:
    image: postgres:{rng.choice(("14", "15", "16"))}-alpine
    environment:
      POSTGRES_PASSWORD: {p.pkg}
    volumes:
      - pgdata:/var/lib/postgresql/data
  cache:
    image: redis:7.2-alpine
    command: ["redis-server", "--maxmemory", "{rng.choice((128, 256, 512))}mb", "--maxmemory-policy", "allkeys-lru"]
volumes:
  pgdata: {{}}"""


def k8s_deployment(rng: random.Random, p: Project) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {p.name}
  namespace: {rng.choice(("prod", "payments", "platform", "default"))}
  labels:
    app.kubernetes.io/name: {p.name}
spec:
  replicas: {rng.choice((2, 3, 4, 6))}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 0
  selector:
    matchLabels:
      app.kubernetes.io/name: {p.name}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {p.name}
    spec:
      containers:
        - name: app
          image: ghcr.io/{p.org}/{p.name}:{rng.randint(1, 3)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}
          ports:
            - containerPort: {p.port}
          env:
            - name: DB_POOL_SIZE
              value: "{rng.choice((5, 10, 20))}"
            - name: DB_POOL_TIMEOUT_S
              value: "{rng.choice((5, 10, 30))}"
          resources:
            requests:
              cpu: {rng.choice(("100m", "250m", "500m"))}
              memory: {rng.choice(("128Mi", "256Mi", "512Mi"))}
            limits:
              memory: {rng.choice(("256Mi", "512Mi", "1Gi"))}
          readinessProbe:
            httpGet:
              path: /healthz
              port: {p.port}
            periodSeconds: 10
            failureThreshold: 3
          livenessProbe:
            httpGet:
              path: /livez
              port: {p.port}
            initialDelaySeconds: {rng.choice((5, 15, 30))}"""


# ---------------------------------------------------------------------------
# Coding tool outputs: test runs, diffs, git, search, lint, builds
# ---------------------------------------------------------------------------


def error_for_line(rng: random.Random, line: str, noun: str, lang: str) -> tuple[str, str]:
    """An exception (type, message) that `line` could plausibly raise on a partial record."""
    attrs = re.findall(r"\.([a-z_]+)\b(?!\()", line)
    attr = attrs[0] if attrs else f"{noun}_id"
    if lang != "py":
        return rng.choice(
            (
                ("TypeError", f"Cannot read properties of undefined (reading '{attr}')"),
                ("TypeError", f"{noun}s.filter is not a function"),
                ("Error", "upstream 503"),
            )
        )
    rules = (
        ("json.load", ("json.decoder.JSONDecodeError", "Expecting value: line 1 column 1 (char 0)")),
        (".match(", ("TypeError", "expected string or bytes-like object, got 'NoneType'")),
        (" >= ", ("TypeError", "'>=' not supported between instances of 'NoneType' and 'datetime.datetime'")),
        ("sorted(", ("TypeError", "'<' not supported between instances of 'NoneType' and 'int'")),
        ("max(", ("TypeError", "'>' not supported between instances of 'int' and 'NoneType'")),
        (".get(", ("AttributeError", "'NoneType' object has no attribute 'get'")),
        ("len(", ("TypeError", "object of type 'NoneType' has no len()")),
        ("os.environ", ("KeyError", f"'{noun.upper()}_MODE'")),
        ("dict(", ("ValueError", "dictionary update sequence element #0 has length 1; 2 is required")),
        ("Path(", ("TypeError", "expected str, bytes or os.PathLike object, not list")),
        (".join(", ("TypeError", "sequence item 3: expected str instance, NoneType found")),
        ("hashlib", ("TypeError", "object supporting the buffer API required")),
        ("[", ("KeyError", f"'{attr}'")),
    )
    for needle, error in rules:
        if needle in line:
            return error
    return "AttributeError", f"'dict' object has no attribute '{attr}'"


def plant_bug(rng: random.Random, repo: Repo, module: str) -> Bug:
    """Choose a function and a line in `module` to blame, the error it raises and a plausible fix."""
    path = repo.module_path(module)
    funcs = repo.functions(path)[:3] or repo.functions(path)
    func = rng.choice(funcs)
    idx = repo.body_line(path, func)
    old = repo.source(path)[idx]
    kind, message = error_for_line(rng, old, rng.choice(repo.p.nouns), repo.p.lang)
    return Bug(path, func, idx, old, fix_line(rng, old, repo.p.lang), kind, message)


KEYWORDS = (
    "null",
    "true",
    "false",
    "await",
    "new",
    "const",
    "let",
    "return",
    "undefined",
    "typeof",
    "not",
    "and",
    "or",
    "in",
    "is",
    "for",
    "if",
    "else",
    "lambda",
    "await",
    "item",
    "value",
    "key",
    "part",
    "chunk",
    "exc",
)


def fix_line(rng: random.Random, line: str, lang: str) -> str:
    """A small, plausible edit of `line` (possibly adding a guard line above it)."""
    swaps = (
        (" > ", " >= "),
        (" < ", " <= "),
        ("[:", "[: 1 +"),
        (" is None", " is None or not isinstance({x}, dict)"),
        ('.get("', '.get("default_'),
        (" or ", " if {x} is not None else "),
        ("default=0", "default=None"),
    )
    for old, new in swaps:
        if old in line and rng.random() < 0.6:
            var = re.findall(r"[a-z_]+", line)
            return line.replace(old, new.replace("{x}", var[0] if var else "value"), 1)
    pad = line[: len(line) - len(line.lstrip())]
    lhs, _, rhs = line.partition("=")
    words = [w for w in re.findall(r"\b([a-z][a-zA-Z_]+)\b", rhs) if w not in KEYWORDS]
    names = [w for w in re.findall(r"\b([a-z][a-zA-Z_]+)\b", lhs) if w not in KEYWORDS]
    guard_var = words[-1] if words else names[-1] if names else "value"
    if lang == "py":
        return f"{pad}if {guard_var} is None:\n{pad}    {guard_var} = {{}}\n{line}"
    return f"{pad}if ({guard_var} == null) return [];\n{line}"


def unified_diff(path: str, lines: list[str], idx: int, new_block: str, rng: random.Random) -> str:
    """A git-style unified diff replacing lines[idx] with `new_block`."""
    new_lines = new_block.split("\n")
    lo, hi = max(0, idx - 3), min(len(lines), idx + 4)
    before = lines[lo:idx]
    after = lines[idx + 1 : hi]
    header = next((ln for ln in reversed(lines[:idx]) if re.match(r"^\s*(def|class|export|function) ", ln)), "")
    out = [
        f"diff --git a/{path} b/{path}",
        f"index {sha(rng, 7)}..{sha(rng, 7)} 100644",
        f"--- a/{path}",
        f"+++ b/{path}",
        f"@@ -{lo + 1},{hi - lo} +{lo + 1},{hi - lo - 1 + len(new_lines)} @@ {header.strip()}",
    ]
    out += (
        [" " + ln for ln in before] + ["-" + lines[idx]] + ["+" + ln for ln in new_lines] + [" " + ln for ln in after]
    )
    return "\n".join(out)


def test_source(repo: Repo, test_path: str, test_name: str) -> tuple[list[str], int]:
    """The lines of one test function and the 1-based line number where it starts."""
    lines = repo.source(test_path)
    for i, line in enumerate(lines):
        if line.startswith(f"def {test_name}("):
            end = i + 1
            while end < len(lines) and lines[end].strip():
                end += 1
            return lines[i:end], i + 1
    return [f"def {test_name}():", "    ..."], 1


def py_failure_block(rng: random.Random, repo: Repo, bug: Bug, test_path: str, test_name: str) -> str:
    """The FAILURES section for one failing pytest test, with a two-frame traceback."""
    lines = repo.source(bug.path)
    start = repo.def_line(bug.path, bug.func)
    frame = lines[start : bug.line_idx]
    if len(frame) > 14:
        frame = frame[:3] + ["    ..."] + frame[-9:]
    test_lines, first = test_source(repo, test_path, test_name)
    fixture = (re.findall(r"\((sample_\w+)\)", test_lines[0]) or ["sample_rows"])[0]
    noun = fixture[len("sample_") : -1]
    call = next((k for k, ln in enumerate(test_lines) if f"{bug.func}(" in ln), len(test_lines) - 1)
    param = (re.findall(r"\((?:self, )?(\w+)", lines[start]) or ["items"])[0]
    out = [
        f"{'_' * 22} {test_name} {'_' * 22}",
        "",
        f"{fixture} = [{{'{noun}_id': 0, 'name': '{noun}-0', 'size': 0}}, {{'{noun}_id': 1, 'name': '{noun}-1', 'size': 10}}, ...]",
        "",
    ]
    out += [("    " if k != call else ">   ") + ln for k, ln in enumerate(test_lines[: call + 1])]
    out += [
        "",
        f"{test_path}:{first + call}: ",
        "_ " * 40,
        "",
        f"{param} = [{{'{noun}_id': 0, 'name': '{noun}-0', 'size': 0}}, ...], limit = 4",
        "",
    ]
    out += ["    " + ln for ln in frame]
    out += [
        ">   " + lines[bug.line_idx],
        f"E   {bug.kind}: {bug.message}",
        "",
        f"{bug.path}:{bug.line_idx + 1}: {bug.kind.rsplit('.', 1)[-1]}",
    ]
    if rng.random() < 0.5:
        mod = bug.path.rsplit("/", 1)[-1]
        out += [
            f"{'-' * 30} Captured log call {'-' * 30}",
            f"DEBUG    {repo.p.pkg}.{mod[:-3]}:{mod}:{bug.line_idx - 3} {bug.func}: handling 5 {noun}(s)",
            f"WARNING  {repo.p.pkg}.{mod[:-3]}:{mod}:{bug.line_idx - 1} {bug.func}: retrying once",
        ]
    return "\n".join(out)


def py_assert_block(rng: random.Random, test_path: str, test_name: str, noun: str) -> str:
    """A FAILURES section for a plain assertion failure."""
    got, want = rng.sample([2, 3, 4, 5, 7], 2)
    return "\n".join(
        [
            f"{'_' * 22} {test_name} {'_' * 22}",
            "",
            f"    def {test_name}(sample_{noun}s):",
            f"        result = list(iter_{noun}s(sample_{noun}s))",
            f">       assert len(result) == {want}",
            f"E       AssertionError: assert {got} == {want}",
            f"E        +  where {got} = len([{{'{noun}_id': 0}}, {{'{noun}_id': 1}}, ...])",
            "",
            f"{test_path}:{rng.randint(20, 160)}: AssertionError",
        ]
    )


def pytest_run(
    rng: random.Random,
    repo: Repo,
    failing: list[tuple[str, str]],
    bug: Bug | None,
    n_files: int,
    verbose: bool = False,
    only: str | None = None,
) -> tuple[str, int]:
    """Full pytest console output and its exit code; `failing` is [(test_path, test_name)]."""
    p = repo.p
    files = [repo.test_path(m) for m in p.modules]
    extra = [f"tests/test_{n}.py" for n in ("cli", "integration", "config", "regressions", "utils")]
    files = [only] if only else list(dict.fromkeys(files + extra))[:n_files]
    for path, _ in failing:
        if path not in files:
            files.append(path)
    counts = [rng.randint(6, 48) for _ in files]
    total = sum(counts)
    out = [
        "=" * 29 + " test session starts " + "=" * 30,
        f"platform linux -- Python 3.11.{rng.choice((4, 7, 9))}, pytest-8.{rng.randint(0, 3)}.{rng.randint(0, 2)}, pluggy-1.5.0",
        f"rootdir: {repo.root}",
        "configfile: pyproject.toml",
        f"plugins: {', '.join(rng.sample(['cov-5.0.0', 'anyio-4.4.0', 'xdist-3.6.1', 'timeout-2.3.1', 'asyncio-0.23.7', 'hypothesis-6.103.0'], 3))}",
        f"collected {total} items",
        "",
    ]
    done = skipped = 0
    fail_paths = [f for f, _ in failing]
    for path, count in zip(files, counts):
        marks = ["." for _ in range(count)]
        for _ in range(fail_paths.count(path)):
            marks[rng.randrange(count)] = "F"
        if rng.random() < 0.3:
            marks[rng.randrange(count)] = "s"
        skipped += marks.count("s")
        if verbose:
            words = {".": "PASSED", "F": "FAILED", "s": "SKIPPED"}
            for i, mark in enumerate(marks, 1):
                name = f"test_{rng.choice(VERBS)}_{rng.choice(p.nouns)}_{rng.choice(('basic', 'empty', 'unicode', 'large', 'nested', 'defaults'))}"
                out.append(f"{path}::{name} {words[mark]} [{(done + i) * 100 // total:>3}%]")
        else:
            out.append(f"{path} {''.join(marks):<{max(10, 60 - len(path))}} [{(done + count) * 100 // total:>3}%]")
        done += count
    failed = len(failing)
    passed = total - failed - skipped
    secs = rng.uniform(0.8, 40.0)
    if failing:
        out += ["", "=" * 36 + " FAILURES " + "=" * 36]
        for i, (path, name) in enumerate(failing):
            if bug is not None and i == 0:
                out.append(py_failure_block(rng, repo, bug, path, name))
            else:
                out.append(py_assert_block(rng, path, name, rng.choice(p.nouns)))
        out += ["=" * 29 + " short test summary info " + "=" * 26]
        for i, (path, name) in enumerate(failing):
            reason = (
                f"{bug.kind.rsplit('.', 1)[-1]}: {bug.message}" if bug and i == 0 else "AssertionError: assert 3 == 4"
            )
            out.append(f"FAILED {path}::{name} - {reason}")
    summary = ", ".join(
        x
        for x in (f"{failed} failed" if failed else "", f"{passed} passed", f"{skipped} skipped" if skipped else "")
        if x
    )
    out.append(f"{'=' * 20} {summary} in {secs:.2f}s {'=' * 20}")
    return "\n".join(out), 1 if failing else 0


def jest_run(
    rng: random.Random, repo: Repo, failing: list[tuple[str, str]], bug: Bug | None, only: str | None = None
) -> tuple[str, int]:
    """Jest console output and exit code."""
    suites = [only] if only else [repo.test_path(m) for m in repo.p.modules]
    out = []
    fail_paths = [f for f, _ in failing]
    suites += [f for f in fail_paths if f not in suites]
    for path in suites:
        status = "FAIL" if path in fail_paths else "PASS"
        out.append(f"{status} {path} ({rng.uniform(0.2, 4.5):.3f} s)")
    n_tests = rng.randint(4, 12) if only else rng.randint(40, 160)
    for path, name in failing:
        code = repo.source(bug.path) if bug else []
        ln = (bug.line_idx + 1) if bug else rng.randint(10, 80)
        out += ["", f"  ● {name}", ""]
        if bug:
            out += [f"    {bug.kind}: {bug.message}", ""]
            for j in range(max(0, ln - 3), min(len(code), ln + 2)):
                mark = ">" if j + 1 == ln else " "
                out.append(f"    {mark} {j + 1:>3} | {code[j]}")
            out += [
                "",
                f"      at {bug.func} ({bug.path}:{ln}:{rng.randint(5, 40)})",
                f"      at Object.<anonymous> ({path}:{rng.randint(10, 90)}:{rng.randint(5, 30)})",
            ]
        else:
            out += [
                "    expect(received).toHaveLength(expected)",
                "",
                "    Expected length: 2",
                "    Received length: 3",
                f"      at Object.<anonymous> ({path}:{rng.randint(10, 90)}:22)",
            ]
    failed = len(failing)
    out += [
        "",
        f"Test Suites: {len(fail_paths)} failed, {len(suites) - len(fail_paths)} passed, {len(suites)} total"
        if failing
        else f"Test Suites: {len(suites)} passed, {len(suites)} total",
        f"Tests:       {failed} failed, {n_tests - failed} passed, {n_tests} total"
        if failing
        else f"Tests:       {n_tests} passed, {n_tests} total",
        "Snapshots:   0 total",
        f"Time:        {rng.uniform(2, 30):.3f} s",
        "Ran all test suites.",
    ]
    return "\n".join(out), 1 if failing else 0


COMMIT_TEMPLATES = (
    "fix({module}): handle empty {noun} input",
    "feat({module}): add {func}",
    "chore(deps): bump {dep}",
    "refactor({module}): split {func} into smaller helpers",
    "test: cover {func} edge cases",
    "docs: explain {noun} lifecycle in README",
    "perf({module}): avoid quadratic {noun} scan",
    "fix: retry {noun} fetch on transient errors",
    "ci: pin runner image to ubuntu-22.04",
    "Merge pull request #{pr} from {user}/{branch}",
    'revert: "{module}: cache {noun} lookups"',
)
AUTHORS = (
    "Priya Raman <priya@{org}.dev>",
    "Tomás Okafor <tomas@{org}.dev>",
    "Mei Lin <mlin@{org}.dev>",
    "Jonas Weber <jonas.weber@{org}.dev>",
    "dependabot[bot] <support@github.com>",
    "Alex Kowalczyk <alexk@{org}.dev>",
    "Sam Noor <sam@{org}.dev>",
)


def commit_message(rng: random.Random, repo: Repo) -> str:
    p = repo.p
    module = rng.choice(p.modules)
    return rng.choice(COMMIT_TEMPLATES).format(
        module=module,
        noun=rng.choice(p.nouns),
        func=repo.gen.func_name(),
        dep=rng.choice(p.deps),
        pr=rng.randint(120, 2400),
        user=rng.choice(("priya-r", "tokafor", "meilin", "jweber", "skowalczyk")),
        branch=rng.choice(("fix/flaky-tests", "feat/streaming", "chore/deps", "perf/index")),
    )


def git_log(rng: random.Random, repo: Repo, n: int, long: bool) -> str:
    """`git log --oneline` or `git log --stat` style history."""
    out = []
    day = rng.randint(20, 31)
    for i in range(n):
        msg = commit_message(rng, repo)
        if not long:
            out.append(f"{sha(rng, 7)} {msg}")
            continue
        author = rng.choice(AUTHORS).format(org=repo.p.org)
        out += [
            f"commit {sha(rng)}",
            f"Author: {author}",
            f"Date:   {('Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun')[(day - i) % 7]} Mar {max(1, day - i)} {rng.randint(8, 19):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} 2025 +0{rng.choice((0, 1, 2))}00",
            "",
            f"    {msg}",
            "",
        ]
        files = rng.sample(
            [repo.module_path(m) for m in repo.p.modules] + [repo.test_path(m) for m in repo.p.modules],
            rng.randint(1, 3),
        )
        for f in files:
            a, d = rng.randint(1, 60), rng.randint(0, 30)
            out.append(f" {f:<40} | {a + d:>3} {'+' * min(a, 20)}{'-' * min(d, 12)}")
        out += [
            f" {len(files)} files changed, {rng.randint(5, 90)} insertions(+), {rng.randint(0, 40)} deletions(-)",
            "",
        ]
    return "\n".join(out).rstrip()


def grep_output(repo: Repo, symbol: str) -> str:
    """`grep -rn` output over the synthesized files."""
    hits = repo.grep(symbol)
    return "\n".join(f"{path}:{line}:{text}" for path, line, text in hits)


def search_files_result(repo: Repo, pattern: str) -> dict:
    """The search_files tool's JSON result."""
    hits = repo.grep(pattern, limit=30)
    return {
        "total_count": len(hits),
        "truncated": len(hits) >= 30,
        "matches": [{"path": p, "line": n, "content": t.strip()} for p, n, t in hits],
    }


RUFF_CODES = (
    ("F401", "`{name}` imported but unused"),
    ("E501", "Line too long ({n} > 100)"),
    ("B008", "Do not perform function call `{name}` in argument defaults"),
    ("UP007", "Use `X | Y` for type annotations"),
    ("SIM108", "Use ternary operator instead of `if`-`else`-block"),
    ("F841", "Local variable `{name}` is assigned to but never used"),
    ("I001", "Import block is un-sorted or un-formatted"),
    ("B904", "Within an `except` clause, raise exceptions with `raise ... from err`"),
)


def lint_output(rng: random.Random, repo: Repo, tool: str) -> tuple[str, int]:
    """ruff or mypy output over a few synthesized modules."""
    out = []
    paths = [repo.module_path(m) for m in repo.p.modules[:3]]
    for path in paths:
        lines = repo.source(path)
        for _ in range(rng.randint(1, 6)):
            idx = rng.randrange(len(lines))
            name = (re.findall(r"[a-z_]{4,}", lines[idx]) or ["value"])[0]
            if tool == "ruff":
                code, msg = rng.choice(RUFF_CODES)
                out.append(
                    f"{path}:{idx + 1}:{rng.randint(1, 40)}: {code} {msg.format(name=name, n=rng.randint(101, 140))}"
                )
            else:
                msg = rng.choice(
                    (
                        f'Argument 1 to "{name}" has incompatible type "list[str]"; expected "Sequence[int]"  [arg-type]',
                        f'Item "None" of "{title_case(name)} | None" has no attribute "get"  [union-attr]',
                        "Function is missing a return type annotation  [no-untyped-def]",
                        'Incompatible return value type (got "dict[str, Any]", expected "list[Any]")  [return-value]',
                    )
                )
                out.append(f"{path}:{idx + 1}: error: {msg}")
    if tool == "ruff":
        out.append(f"Found {len(out)} errors.\n[*] {rng.randint(0, len(out))} fixable with the `--fix` option.")
    else:
        out.append(f"Found {len(out)} errors in {len(paths)} files (checked {rng.randint(20, 80)} source files)")
    return "\n".join(out), 1


def pip_install_log(rng: random.Random, repo: Repo, conflict: bool) -> tuple[str, int]:
    """pip install output, optionally ending in a resolver conflict."""
    out = [
        f"Obtaining file://{repo.root}",
        "  Installing build dependencies ... done",
        "  Checking if build backend supports build_editable ... done",
    ]
    for dep in repo.p.deps:
        name, _, ver = dep.partition("==")
        out += [
            f"Collecting {name}>={ver}",
            f"  Downloading {name.replace('-', '_')}-{ver}-py3-none-any.whl ({rng.uniform(0.05, 9):.1f} MB)",
        ]
    if conflict:
        dep = rng.choice(repo.p.deps).partition("==")[0]
        out += [
            "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. "
            "This behaviour is the source of the following dependency conflicts.",
            f"{repo.p.name} {rng.randint(0, 3)}.{rng.randint(1, 9)}.0 requires {dep}<{rng.randint(2, 5)}.0, but you have {dep} {rng.randint(2, 5)}.{rng.randint(0, 9)}.1 which is incompatible.",
        ]
        return "\n".join(out), 1
    out.append(
        "Successfully installed " + " ".join(d.replace("==", "-") for d in repo.p.deps) + f" {repo.p.name}-0.0.0"
    )
    return "\n".join(out), 0


def tsc_output(rng: random.Random, repo: Repo) -> tuple[str, int]:
    """`tsc --noEmit` errors."""
    out = []
    for module in rng.sample(repo.p.modules, 3):
        path = repo.module_path(module)
        for _ in range(rng.randint(1, 4)):
            code, msg = rng.choice(
                (
                    (
                        "TS2345",
                        "Argument of type 'string | undefined' is not assignable to parameter of type 'string'.",
                    ),
                    ("TS2339", f"Property '{rng.choice(repo.p.nouns)}Id' does not exist on type 'Row'."),
                    ("TS7006", "Parameter 'item' implicitly has an 'any' type."),
                    ("TS2322", "Type 'number | null' is not assignable to type 'number'."),
                )
            )
            out.append(f"{path}({rng.randint(5, 200)},{rng.randint(3, 40)}): error {code}: {msg}")
    out.append(f"\nFound {len(out)} errors in 3 files.")
    return "\n".join(out), 2


def eslint_output(rng: random.Random, repo: Repo) -> tuple[str, int]:
    """`eslint` stylish-format output."""
    out, errors, warnings = [], 0, 0
    for module in rng.sample(repo.p.modules, 3):
        out.append(f"{repo.root}/{repo.module_path(module)}")
        for _ in range(rng.randint(1, 4)):
            rule, level, msg = rng.choice(
                (
                    ("no-undef", "error", "'attempt' is not defined"),
                    (
                        "no-unused-vars",
                        "warning",
                        f"'{rng.choice(repo.p.nouns)}Map' is assigned a value but never used",
                    ),
                    ("no-console", "warning", "Unexpected console statement"),
                    (
                        "prefer-const",
                        "error",
                        f"'{rng.choice(repo.p.nouns)}Result' is never reassigned. Use 'const' instead",
                    ),
                )
            )
            errors += level == "error"
            warnings += level == "warning"
            out.append(f"  {rng.randint(3, 180)}:{rng.randint(1, 40)}  {level:<7}  {msg}  {rule}")
        out.append("")
    out.append(f"✖ {errors + warnings} problems ({errors} errors, {warnings} warnings)")
    return "\n".join(out), 1 if errors else 0


def docker_build_log(rng: random.Random, repo: Repo, fail: bool) -> tuple[str, int]:
    """BuildKit-style `docker build` output."""
    steps = [
        "[internal] load build definition from Dockerfile",
        "[internal] load .dockerignore",
        "[internal] load metadata for docker.io/library/python:3.11-slim",
        "[builder 1/6] FROM docker.io/library/python:3.11-slim@sha256:" + sha(rng, 64),
        "[builder 2/6] WORKDIR /app",
        "[builder 3/6] COPY pyproject.toml ./",
        "[builder 4/6] RUN pip install --no-cache-dir .",
        "[builder 5/6] COPY . .",
        "[builder 6/6] RUN python -m compileall -q .",
    ]
    out = []
    t = 0.0
    for i, step in enumerate(steps, 1):
        t += rng.uniform(0.0, 3.0)
        out.append(f"#{i} {step}")
        if "pip install" in step:
            for dep in repo.p.deps:
                out.append(f"#{i} {t:.3f} Collecting {dep}")
            if fail:
                out += [
                    f"#{i} {t + 4:.3f} error: subprocess-exited-with-error",
                    f"#{i} {t + 4:.3f}   × Building wheel for {repo.p.deps[0].split('==')[0]} (pyproject.toml) did not run successfully.",
                    f"#{i} {t + 4:.3f}   │ exit code: 1",
                    f'#{i} ERROR: process "/bin/sh -c pip install --no-cache-dir ." did not complete successfully: exit code: 1',
                    "------",
                    'ERROR: failed to solve: process "/bin/sh -c pip install --no-cache-dir ." did not complete successfully: exit code: 1',
                ]
                return "\n".join(out), 1
        out.append(f"#{i} DONE {rng.uniform(0.0, 20):.1f}s")
    out.append(
        f"#10 exporting to image\n#10 writing image sha256:{sha(rng, 64)} done\n#10 naming to docker.io/{repo.p.org}/{repo.p.name}:dev done"
    )
    return "\n".join(out), 0


def coverage_table(rng: random.Random, repo: Repo) -> str:
    """A `pytest --cov` report table."""
    rows = []
    total_s = total_m = 0
    for m in repo.p.modules:
        s, miss = rng.randint(40, 400), rng.randint(0, 60)
        total_s, total_m = total_s + s, total_m + miss
        missing = (
            ", ".join(f"{a}-{a + rng.randint(1, 9)}" for a in sorted(rng.sample(range(10, s + 10), min(3, miss))))
            if miss
            else ""
        )
        rows.append(f"{repo.module_path(m):<36} {s:>6} {miss:>6} {100 * (s - miss) // s:>5}%   {missing}")
    return "\n".join(
        [
            "---------- coverage: platform linux, python 3.11.9-final-0 -----------",
            f"{'Name':<36} {'Stmts':>6} {'Miss':>6} {'Cover':>6}   Missing",
            "-" * 72,
        ]
        + rows
        + ["-" * 72, f"{'TOTAL':<36} {total_s:>6} {total_m:>6} {100 * (total_s - total_m) // total_s:>5}%"]
    )


def tree_output(rng: random.Random, repo: Repo) -> str:
    """A `tree -L 2` listing."""
    p = repo.p
    out = [".", "├── README.md", "├── pyproject.toml" if p.lang == "py" else "├── package.json"]
    src = p.pkg if p.lang == "py" else "src"
    out.append(f"├── {src}")
    for m in p.modules:
        out.append(f"│   ├── {repo.module_path(m).rsplit('/', 1)[-1]}")
    if p.lang == "py":
        out += ["│   └── __init__.py", "├── tests", "│   ├── conftest.py"] + [f"│   ├── test_{m}.py" for m in p.modules]
    out += [
        "├── .github",
        "│   └── workflows",
        "│       └── ci.yml",
        "└── Dockerfile",
        "",
        f"{rng.randint(4, 9)} directories, {len(out) + 2} files",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Operations tool outputs: service logs, kubectl, health checks
# ---------------------------------------------------------------------------


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


INCIDENTS = (
    Incident(
        "db_pool",
        "intermittent 502/504 responses and p99 latency above 8 s",
        (
            "sqlalchemy.exc.TimeoutError: QueuePool limit of size {pool} overflow 0 reached, connection timed out, timeout {timeout}.00",
            "upstream timed out waiting for db connection route=/v1/{noun}s/{id} waited_ms={ms}",
            'psycopg.OperationalError: connection to server at "db-primary.internal" (5432) failed: FATAL: remaining connection slots are reserved for non-replication superuser connections',
        ),
        "Running",
        "Readiness probe failed: HTTP probe failed with statuscode: 503",
        "the connection pool is sized for the old worker count: DB_POOL_SIZE=5 with 8 workers per pod exhausts it under load",
        "DB_POOL_SIZE",
        "5",
        "20",
    ),
    Incident(
        "oom",
        "pods restarting every few minutes and requests failing with connection resets",
        (
            "worker pid={pid} was sent SIGKILL! Perhaps out of memory?",
            "MemoryError while materializing {noun} batch size={n} rss_mb={mb}",
            "Container app exceeded memory limit (256Mi); killing process {pid}",
        ),
        "CrashLoopBackOff",
        "Back-off restarting failed container app in pod; Last State: Terminated Reason: OOMKilled Exit Code: 137",
        "the new export endpoint loads the whole result set in memory and the container limit is still 256Mi",
        "memory",
        "256Mi",
        "768Mi",
    ),
    Incident(
        "tls",
        "all outbound webhook deliveries failing since midnight UTC",
        (
            "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired (_ssl.c:1006)",
            "delivery failed endpoint=https://hooks.partner-{id}.example.com/events attempt={n} error=CERT_HAS_EXPIRED",
            "giving up on {noun} {id} after {n} attempts; moving to dead-letter queue",
        ),
        "Running",
        "Warning  Unhealthy  readiness probe: upstream TLS handshake failed",
        "the pinned CA bundle in the image is from 2023 and the partner rotated to a new intermediate certificate",
        "CA_BUNDLE_PATH",
        "/app/certs/ca-2023.pem",
        "/etc/ssl/certs/ca-certificates.crt",
    ),
    Incident(
        "disk",
        "writes failing with 500s on the ingest path",
        (
            "OSError: [Errno 28] No space left on device: '/var/lib/{svc}/spool/{noun}-{id}.tmp'",
            "failed to flush {noun} segment id={id} bytes={n}: ENOSPC",
            'logrotate: error: skipping "/var/log/{svc}/app.log" because parent directory has insecure permissions',
        ),
        "Running",
        "Warning  EvictionThresholdMet  Attempting to reclaim ephemeral-storage",
        "log rotation silently stopped after a permissions change, so /var/log filled the 20G volume",
        "rotate",
        "0",
        "7",
    ),
    Incident(
        "dns",
        "every request to the pricing backend failing after the namespace migration",
        (
            "httpx.ConnectError: [Errno -2] Name or service not known (pricing.legacy.svc.cluster.local)",
            "circuit breaker OPEN for upstream=pricing failures={n} window_s=60",
            "fallback price used for {noun} {id}; stale_age_s={ms}",
        ),
        "Running",
        "Warning  Unhealthy  Liveness probe failed: dependency pricing unreachable",
        "the PRICING_URL env var still points at the old namespace, which was deleted during the migration",
        "PRICING_URL",
        "http://pricing.legacy.svc.cluster.local:8080",
        "http://pricing.pricing.svc.cluster.local:8080",
    ),
    Incident(
        "migration",
        "POST requests returning 500 right after the 2.14 deploy",
        (
            'sqlalchemy.exc.IntegrityError: (psycopg.errors.NotNullViolation) null value in column "{noun}_region" of relation "{noun}s" violates not-null constraint',
            "migration 0047_add_{noun}_region applied in 412ms",
            "rollback triggered for request_id=req_{rid} status=500",
        ),
        "Running",
        "Normal   Pulled  Successfully pulled image; started container app",
        "migration 0047 added a NOT NULL column without a server default while the old pods were still writing rows",
        "server_default",
        "None",
        "'eu-west-1'",
    ),
)

LOG_ROUTINE = (
    "request completed method={method} path=/v1/{noun}s/{id} status={status} duration_ms={ms} request_id=req_{rid}",
    "db pool checkout in_use={pool_used} idle={small} overflow=0 wait_ms={ms}",
    "cache {hm} key={noun}:{id} ttl_s={ttl}",
    "worker heartbeat pid={pid} rss_mb={mb} tasks_done={n}",
    "scheduled job refresh_{noun}_index finished in {sec}s rows={n}",
    "outbound call upstream={svc}-api status={status} duration_ms={ms}",
    "feature flag {noun}_v2 evaluated to {flag} for tenant t_{id}",
)


def log_line(rng: random.Random, svc: str, nouns: tuple[str, ...], ts: str, incident: Incident | None) -> list[str]:
    """One service log line (plus an optional traceback for errors)."""
    slots = {
        "method": rng.choice(("GET", "GET", "POST", "PUT", "DELETE")),
        "noun": rng.choice(nouns),
        "id": rng.randint(1000, 99999),
        "status": rng.choice((200, 200, 200, 201, 204, 404)),
        "ms": rng.randint(2, 900),
        "rid": rand_str(rng, HEX, 12),
        "n": rng.randint(1, 5000),
        "small": rng.randint(0, 9),
        "hm": rng.choice(("hit", "miss")),
        "ttl": rng.choice((30, 300, 3600)),
        "pid": rng.randint(7, 400),
        "mb": rng.randint(90, 760),
        "sec": round(rng.uniform(0.1, 40), 2),
        "svc": svc,
        "flag": rng.choice(("true", "false")),
        "pool": 5,
        "timeout": 30,
        "pool_used": rng.randint(1, 20),
    }
    worker = f"worker-{rng.randint(1, 8)}"
    if incident is None or rng.random() > 0.35:
        return [f"{ts} INFO  [{worker}] {svc}: {rng.choice(LOG_ROUTINE).format(**slots)}"]
    lines = [f"{ts} ERROR [{worker}] {svc}: {rng.choice(incident.errors).format(**slots)}"]
    if rng.random() < 0.25:
        module = rng.choice(("api", "handlers", "db", "client", "jobs"))
        lines += [
            "Traceback (most recent call last):",
            f'  File "/app/{svc.replace("-", "_")}/{module}.py", line {rng.randint(20, 400)}, in {rng.choice(VERBS)}_{slots["noun"]}',
            f"    return await self._{rng.choice(VERBS)}({slots['noun']}_id, timeout=self.timeout)",
            f'  File "/usr/local/lib/python3.11/site-packages/sqlalchemy/pool/impl.py", line {rng.randint(100, 200)}, in _do_get',
            "    raise exc.TimeoutError(" if incident.key == "db_pool" else "    raise",
            incident.errors[0].format(**slots),
        ]
    return lines


def service_log(
    rng: random.Random,
    svc: str,
    nouns: tuple[str, ...],
    incident: Incident | None,
    n_lines: int,
    day: int,
    start_s: float,
) -> str:
    """A chunk of a service log with routine lines and the incident's error signature."""
    out: list[str] = []
    t = start_s
    while len(out) < n_lines:
        t += rng.expovariate(1.5)
        out += log_line(rng, svc, nouns, fmt_ts(day, t), incident)
    return "\n".join(out[:n_lines])


def kubectl_pods(rng: random.Random, svc: str, incident: Incident, namespace: str) -> str:
    """`kubectl get pods` table."""
    out = [f"{'NAME':<44}{'READY':<8}{'STATUS':<20}{'RESTARTS':<16}AGE"]
    for other in (
        "postgres-0",
        "redis-master-0",
        f"{svc}-worker-{rand_str(rng, 'bcdfghjklmnpqrstvwxz2456789', 10)}-{rand_str(rng, 'bcdfghjklmnpqrstvwxz2456789', 5)}",
    ):
        out.append(f"{other:<44}{'1/1':<8}{'Running':<20}{'0':<16}{rng.randint(2, 40)}d")
    rs = rand_str(rng, "bcdfghjklmnpqrstvwxz2456789", 10)
    for _ in range(rng.randint(3, 6)):
        name = f"{svc}-{rs}-{rand_str(rng, 'bcdfghjklmnpqrstvwxz2456789', 5)}"
        restarts = rng.randint(3, 41) if incident.pod_status != "Running" else rng.randint(0, 2)
        ready = "0/1" if incident.pod_status != "Running" or rng.random() < 0.3 else "1/1"
        out.append(
            f"{name:<44}{ready:<8}{incident.pod_status:<20}{f'{restarts} ({rng.randint(1, 50)}m ago)':<16}{rng.randint(1, 9)}h"
        )
    return "\n".join(out)


def kubectl_describe(rng: random.Random, svc: str, incident: Incident, namespace: str, project: Project) -> str:
    """`kubectl describe pod` output with events."""
    pod = f"{svc}-{rand_str(rng, 'bcdfghjklmnpqrstvwxz2456789', 10)}-{rand_str(rng, 'bcdfghjklmnpqrstvwxz2456789', 5)}"
    return "\n".join(
        [
            f"Name:             {pod}",
            f"Namespace:        {namespace}",
            "Priority:         0",
            f"Node:             ip-10-0-{rng.randint(1, 9)}-{rng.randint(10, 250)}.eu-west-1.compute.internal/10.0.{rng.randint(1, 9)}.{rng.randint(10, 250)}",
            f"Start Time:       Fri, 14 Mar 2025 0{rng.randint(0, 9)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} +0000",
            f"Labels:           app.kubernetes.io/name={svc}",
            f"                  pod-template-hash={rand_str(rng, 'bcdfghjklmnpqrstvwxz2456789', 10)}",
            f"Status:           {incident.pod_status if incident.pod_status == 'Running' else 'Running'}",
            f"IP:               10.42.{rng.randint(0, 9)}.{rng.randint(2, 250)}",
            "Containers:",
            "  app:",
            f"    Image:          ghcr.io/{project.org}/{project.name}:{rng.randint(1, 3)}.{rng.randint(10, 40)}.{rng.randint(0, 9)}",
            f"    Port:           {project.port}/TCP",
            "    State:          Running",
            f"      Started:      Fri, 14 Mar 2025 0{rng.randint(0, 9)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} +0000",
            "    Last State:     Terminated" if incident.key == "oom" else "    Last State:     <none>",
            "      Reason:       OOMKilled" if incident.key == "oom" else "",
            "      Exit Code:    137" if incident.key == "oom" else "",
            f"    Ready:          {rng.choice(('True', 'False'))}",
            f"    Restart Count:  {rng.randint(0, 30)}",
            "    Limits:",
            f"      memory:  {'256Mi' if incident.key == 'oom' else '1Gi'}",
            "    Requests:",
            "      cpu:     250m",
            "      memory:  128Mi",
            f"    Readiness:  http-get http://:{project.port}/healthz delay=0s timeout=1s period=10s #success=1 #failure=3",
            "Conditions:",
            "  Type              Status",
            "  Initialized       True",
            "  Ready             False",
            "  ContainersReady   False",
            "  PodScheduled      True",
            "Events:",
            "  Type     Reason     Age                  From     Message",
            "  ----     ------     ----                 ----     -------",
            f"  Normal   Pulled     {rng.randint(10, 50)}m (x{rng.randint(2, 9)} over 2h)  kubelet  Container image already present on machine",
            f"  Warning  {incident.event.split()[1] if incident.event.startswith('Warning') else 'BackOff'}  {rng.randint(1, 9)}m (x{rng.randint(10, 300)} over 2h)  kubelet  {incident.event}",
        ]
    ).replace("\n\n", "\n")


def health_json(rng: random.Random, svc: str, incident: Incident) -> str:
    """A /healthz JSON body from the service."""
    deps = {
        "database": {
            "status": "degraded" if incident.key in ("db_pool", "migration") else "ok",
            "latency_ms": rng.randint(2, 9000),
            "pool": {"size": 5, "checked_out": 5, "overflow": 0},
        },
        "redis": {"status": "ok", "latency_ms": rng.randint(1, 4)},
        "upstreams": {
            "pricing": "unreachable" if incident.key == "dns" else "ok",
            "webhooks": "tls_error" if incident.key == "tls" else "ok",
        },
        "disk": {"spool_free_bytes": 0 if incident.key == "disk" else rng.randint(10**9, 10**10)},
    }
    return json.dumps(
        {
            "service": svc,
            "version": f"2.{rng.randint(10, 16)}.{rng.randint(0, 5)}",
            "commit": sha(rng, 12),
            "status": "unhealthy",
            "checks": deps,
            "uptime_s": rng.randint(30, 90000),
        },
        indent=2,
    )


def metrics_json(rng: random.Random, svc: str, metric: str) -> str:
    """A Prometheus range-query API response."""
    values = []
    t0 = 1741917600
    level = rng.uniform(0.01, 0.2)
    for i in range(rng.randint(12, 30)):
        level = max(0.0, level + rng.uniform(-0.05, 0.3 if i > 6 else 0.02))
        values.append([t0 + i * 60, f"{level:.4f}"])
    return json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [
                    {
                        "metric": {
                            "__name__": metric,
                            "service": svc,
                            "pod": f"{svc}-{rand_str(rng, 'abcdef0123456789', 5)}",
                        },
                        "values": values,
                    }
                ],
            },
        }
    )


def disk_usage(rng: random.Random, svc: str, full: bool) -> str:
    """`df -h` followed by `du` of the biggest directories."""
    use = 100 if full else rng.randint(20, 70)
    out = [
        "Filesystem      Size  Used Avail Use% Mounted on",
        "overlay          80G   31G   49G  39% /",
        "tmpfs            64M     0   64M   0% /dev",
        f"/dev/nvme1n1     20G   {20 * use // 100}G   {20 - 20 * use // 100}G  {use}% /var",
        "shm              64M     0   64M   0% /dev/shm",
        "",
        f"$ du -sh /var/log/{svc}/* | sort -h | tail",
    ]
    for name in ("gc.log", "access.log.1", "audit.log", "app.log.2.gz", "app.log"):
        out.append(f"{rng.randint(1, 900)}{rng.choice('MG')}\t/var/log/{svc}/{name}")
    return "\n".join(out)


def listening_ports(rng: random.Random, project: Project) -> str:
    """`ss -ltnp` output."""
    out = ["State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process"]
    for port, proc in (
        (project.port, "gunicorn" if project.lang == "py" else "node"),
        (5432, "postgres"),
        (6379, "redis-server"),
        (9090, "prometheus"),
        (rng.randint(30000, 32000), "kube-proxy"),
    ):
        out.append(
            f'LISTEN 0      {rng.choice((128, 511, 4096)):<6} 0.0.0.0:{port:<12} 0.0.0.0:*     users:(("{proc}",pid={rng.randint(100, 9000)},fd={rng.randint(3, 30)}))'
        )
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Research tool outputs: web search and page extracts
# ---------------------------------------------------------------------------


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


TOPICS = (
    Topic(
        "rate-limiting",
        "an async rate-limiting library",
        ("throttlekit", "aioquota", "bucketeer"),
        "rate limiting",
        (
            "token buckets",
            "sliding-window logs",
            "Redis-backed distributed counters",
            "per-route quotas",
            "burst allowances",
        ),
        "decisions/s",
        "our FastAPI gateway that fronts 40 internal services",
    ),
    Topic(
        "structured-logging",
        "a structured logging library to replace our ad-hoc JSON formatter",
        ("logweave", "structlite", "jsonlog-x"),
        "structured logging",
        ("contextvar binding", "JSON rendering", "log sampling", "trace-id correlation", "async-safe handlers"),
        "lines/s",
        "a fleet of async workers that log about 30k lines per second at peak",
    ),
    Topic(
        "task-queue",
        "a background job queue with delayed jobs and dead-letter support",
        ("taskferry", "quayjobs", "relaymq"),
        "background job processing",
        ("delayed jobs", "exactly-once delivery", "job priorities", "a Redis Streams backend", "dead-letter queues"),
        "jobs/s",
        "the billing service, which currently runs cron scripts on a single VM",
    ),
    Topic(
        "dataframes",
        "a dataframe engine for out-of-core analytics on 200 GB of Parquet",
        ("quokka-df", "polaris-frames", "tabula-rs"),
        "dataframe processing",
        ("lazy evaluation", "streaming group-bys", "Arrow interop", "out-of-core joins", "a SQL frontend"),
        "rows/s",
        "the nightly analytics jobs that currently OOM on pandas",
    ),
    Topic(
        "vector-index",
        "an embeddable vector index for semantic search over 5M documents",
        ("vektorlite", "hnswpp", "annoyance"),
        "approximate nearest-neighbour search",
        ("HNSW graphs", "product quantization", "filtered search", "on-disk indexes", "incremental inserts"),
        "queries/s",
        "the support-ticket search feature",
    ),
    Topic(
        "config-validation",
        "a typed configuration library with layered files and env overrides",
        ("confidant", "schemawise", "typedconf"),
        "configuration management",
        ("environment overrides", "layered YAML files", "secret providers", "JSON Schema export", "hot reload"),
        "validations/s",
        "our twelve Python services that each parse YAML by hand",
    ),
    Topic(
        "http-client",
        "an HTTP client with HTTP/2, pooling and retries",
        ("swiftreq", "aioflux", "hyperpy"),
        "HTTP client",
        (
            "HTTP/2 multiplexing",
            "connection pooling",
            "retries with jittered backoff",
            "streaming uploads",
            "SOCKS proxies",
        ),
        "requests/s",
        "the price crawler that hits 3,000 partner sites per hour",
    ),
    Topic(
        "pdf-extraction",
        "a PDF text and table extraction library",
        ("pagemill", "pdfscribe", "leafparse"),
        "PDF extraction",
        ("table detection", "OCR fallback", "layout-aware text order", "embedded font decoding", "incremental parsing"),
        "pages/s",
        "the accounts-payable pipeline that ingests 20k supplier invoices a month",
    ),
)

SITES = (
    "docs.{lib}.dev",
    "github.com/{lib}-org/{lib}",
    "pypi.org/project/{lib}",
    "blog.benchbase.io",
    "engineering.shopwise.com",
    "news.ycombinator.com",
    "www.reddit.com/r/Python",
    "dev.to/kmaren",
    "medium.com/@dataplumber",
    "{lib}.readthedocs.io/en/stable",
)

PROSE = (
    "{lib} is a {domain} library that focuses on {feature}; the {ver} release made that the default code path.",
    "Version {ver} of {lib} changed the default behaviour of {feature}, so upgrading from {oldver} requires an explicit opt-in.",
    "In the benchmark on a 4 vCPU / 8 GB instance, {lib} sustained {num:,} {metric} with a p99 of {ms} ms, against {num2:,} {metric} for {alt}.",
    "The maintainers of {lib} recommend pinning to {ver} or later because earlier releases leaked file descriptors when {feature} was enabled.",
    "{alt} has the larger community ({stars:,} GitHub stars, about {dl:,} weekly downloads) but its {feature} support is still labelled experimental.",
    "A common pitfall with {lib} is forgetting to close the client, which surfaces as `ResourceWarning: unclosed transport` in test runs.",
    "Issue #{issue} on the {lib} tracker documents a regression in {feature} introduced in {oldver} and fixed in {ver}.",
    "{lib} ships both a synchronous and an asyncio API; the async variant was roughly {pct}% faster in fan-out workloads.",
    "Licensing differs: {lib} is {license}, while {alt} switched to {license2} in {year}.",
    "If you need {feature}, {alt} is currently the only candidate that supports it without a third-party plugin.",
    "Memory stayed flat at around {mb} MB for {lib} during a 30-minute soak test, while {alt} grew to {mb2} MB.",
    "The {lib} documentation covers {feature} in depth and includes a migration guide for {alt} users.",
    "Configuration goes through a single `Settings` object, and environment variables prefixed with `{envp}_` override file values.",
    "{lib} {ver} dropped support for Python 3.{pyold}, which matters for teams still deploying older base images.",
    "Under contention, {alt} falls back to a global lock around {feature}, which explains the flat throughput above {threads} threads.",
    "The last release of {alt} was {months} months ago and {open_issues} issues are open, several about {feature}.",
    "{lib} publishes wheels for Linux, macOS and Windows on x86-64 and arm64, so no compiler is needed at install time.",
    "One reviewer notes that {lib}'s error messages are unusually clear, pointing at the exact field that failed.",
    "Cold-start import time was {ms} ms for {lib} versus {ms2} ms for {alt}, measured with `python -X importtime`.",
    "Both {lib} and {alt} expose hooks for metrics; only {lib} emits OpenTelemetry spans out of the box.",
)

PROSE_ZH = (
    "{lib} {ver} 起默认启用 {feature}，之前需要额外插件。",
    "在 4 vCPU / 8 GB 的机器上，{lib} 达到 {num:,} {metric}，p99 为 {ms} ms；{alt} 为 {num2:,} {metric}。",
    "{lib} 同时提供同步和 asyncio 接口，在扇出场景下异步版本快约 {pct}%。",
    "{lib} 为 Linux、macOS 和 Windows 的 x86-64 与 arm64 发布预编译 wheel，安装时不需要编译器。",
    "{alt} 的最新版本发布于 {months} 个月前，目前有 {open_issues} 个未关闭的问题，其中几个与 {feature} 有关。",
    "30 分钟压测中 {lib} 的内存稳定在约 {mb} MB，而 {alt} 增长到 {mb2} MB。",
)
HEADINGS = (
    "Overview",
    "Installation",
    "Benchmarks",
    "Configuration",
    "Known issues",
    "Migration notes",
    "Production experience",
    "API design",
    "Performance tuning",
    "Limitations",
    "Changelog highlights",
)


def prose_slots(rng: random.Random, topic: Topic, lib: str) -> dict:
    """Random facts for one sentence about `lib` and one alternative."""
    alt = rng.choice([ln for ln in topic.libs if ln != lib])
    major = rng.randint(0, 4)
    return {
        "lib": lib,
        "alt": alt,
        "domain": topic.domain,
        "feature": rng.choice(topic.features),
        "ver": f"{major}.{rng.randint(2, 20)}.{rng.randint(0, 9)}",
        "oldver": f"{major}.{rng.randint(0, 1)}.{rng.randint(0, 9)}",
        "num": rng.randint(2, 400) * 100,
        "num2": rng.randint(2, 400) * 100,
        "metric": topic.metric,
        "ms": rng.randint(2, 250),
        "ms2": rng.randint(2, 250),
        "stars": rng.randint(800, 40000),
        "dl": rng.randint(5, 900) * 1000,
        "issue": rng.randint(100, 4000),
        "pct": rng.randint(8, 70),
        "license": rng.choice(("MIT", "Apache-2.0", "BSD-3-Clause")),
        "license2": rng.choice(("BUSL-1.1", "AGPL-3.0", "SSPL")),
        "year": rng.choice((2022, 2023, 2024)),
        "mb": rng.randint(40, 300),
        "mb2": rng.randint(300, 2000),
        "envp": lib.upper().replace("-", "_"),
        "pyold": rng.choice((7, 8, 9)),
        "threads": rng.choice((4, 8, 16)),
        "months": rng.randint(7, 30),
        "open_issues": rng.randint(40, 900),
    }


def paragraph(rng: random.Random, topic: Topic, lib: str, n: int) -> str:
    """`n` distinct sentences about `lib`."""
    return " ".join(t.format(**prose_slots(rng, topic, lib)) for t in rng.sample(PROSE, n))


def code_example(rng: random.Random, topic: Topic, lib: str) -> str:
    """A short usage snippet for a fictional library."""
    mod = lib.replace("-", "_")
    feature = rng.choice(topic.features).split()[-1].rstrip("s")
    return "\n".join(
        [
            f"import {mod}",
            "",
            f"settings = {mod}.Settings(",
            f"    {feature}_enabled=True,",
            f"    max_workers={rng.choice((4, 8, 16))},",
            f"    timeout_s={rng.choice((2.5, 5, 10))},",
            ")",
            f"client = {mod}.Client(settings)",
            "",
            "async def main():",
            "    async with client.session() as session:",
            f'        result = await session.run("{topic.slug}", batch_size={rng.choice((64, 256, 1024))})',
            "        print(result.summary())",
        ]
    )


def bench_table(rng: random.Random, topic: Topic, best: str | None = None, best_value: int = 0) -> str:
    """A markdown benchmark table comparing the three candidates (`best` gets the top throughput)."""
    rows = [
        f"| {'library':<16} | {topic.metric:>14} | p50 ms | p99 ms | RSS MB |",
        f"|{'-' * 18}|{'-' * 16}|--------|--------|--------|",
    ]
    for lib in topic.libs:
        value = (
            best_value
            if lib == best
            else rng.randint(3, 900) * 100
            if not best
            else rng.randint(3, max(4, best_value // 130)) * 100
        )
        rows.append(
            f"| {lib:<16} | {value:>14,} | {rng.uniform(0.2, 20):>6.1f} | {rng.uniform(10, 400):>6.1f} | {rng.randint(40, 900):>6} |"
        )
    return "\n".join(rows)


def web_page(rng: random.Random, topic: Topic, lib: str, url: str, n_sections: int) -> str:
    """Markdown text of a fetched page about `lib`."""
    title = rng.choice(
        (
            f"{lib}: {topic.domain} for Python",
            f"Why we moved from {topic.libs[2]} to {lib}",
            f"{lib} documentation — {rng.choice(topic.features)}",
            f"Benchmarking {topic.domain} libraries in 2025",
        )
    )
    out = [
        f"# {title}",
        "",
        f"*Source: {url} · updated {rng.randint(1, 28)} {rng.choice(('Jan', 'Feb', 'Mar', 'Apr'))} 2025*",
        "",
    ]
    for heading in rng.sample(HEADINGS, min(n_sections, len(HEADINGS))):
        out += [f"## {heading}", "", paragraph(rng, topic, lib, rng.randint(3, 5)), ""]
        roll = rng.random()
        if heading == "Benchmarks" or roll < 0.15:
            out += [bench_table(rng, topic), ""]
        elif heading in ("Installation", "Configuration", "API design") or roll < 0.3:
            out += ["```python", code_example(rng, topic, lib), "```", ""]
        elif roll < 0.5:
            out += [f"- {paragraph(rng, topic, lib, 1)}" for _ in range(rng.randint(2, 4))] + [""]
    return "\n".join(out).strip()


def search_results(rng: random.Random, topic: Topic, query: str, n: int) -> tuple[dict, list[str]]:
    """The web_search tool's JSON result and the URLs it lists."""
    items = []
    for _ in range(n):
        lib = rng.choice(topic.libs)
        site = rng.choice(SITES).format(lib=lib)
        slug = "-".join(re.findall(r"[a-z0-9]+", f"{lib} {rng.choice(topic.features)}".lower()))
        url = f"https://{site}/{rng.choice(('', 'blog/', 'guide/', 'issues/'))}{slug}"
        title = rng.choice(
            (
                f"{lib} vs {rng.choice(topic.libs)}: {topic.domain} benchmarks",
                f"Migrating to {lib} — a field report",
                f"{lib} docs: {rng.choice(topic.features)}",
                f"{lib}-org/{lib}: {topic.domain} done right",
                f"Issue #{rng.randint(100, 4000)}: {rng.choice(topic.features)} regression",
                f"Ask HN: anyone running {lib} in production?",
            )
        )
        items.append({"url": url, "title": title, "description": paragraph(rng, topic, lib, rng.randint(1, 2))})
    return ({"success": True, "query": query, "data": {"web": items}}), [i["url"] for i in items]


def extract_result(rng: random.Random, topic: Topic, urls: list[str], sections: int) -> dict:
    """The web_extract tool's JSON result for `urls`."""
    results = []
    for url in urls:
        lib = next((ln for ln in topic.libs if ln in url), rng.choice(topic.libs))
        results.append(
            {"url": url, "title": f"{lib} — {topic.domain}", "content": web_page(rng, topic, lib, url, sections)}
        )
    return {"results": results}


def bench_script_output(rng: random.Random, topic: Topic, versions: dict[str, str]) -> str:
    """Console output of a local micro-benchmark comparing the candidates."""
    out = [f"python 3.11.9, {rng.choice(('4', '8'))} cpus, linux-x86_64"]
    for lib in topic.libs:
        out.append(f"[{lib}] installed version {versions[lib]}")
    for r in range(1, 6):
        for lib in topic.libs:
            out.append(
                f"round {r} {lib:<14} {rng.randint(3, 900) * 100:>8,} {topic.metric:<12} p99={rng.uniform(1, 300):7.2f}ms rss={rng.randint(40, 900)}MB"
            )
    out += ["", bench_table(rng, topic)]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# System prompt
# ---------------------------------------------------------------------------


def _schema(desc: str, props: dict, required: list[str]) -> dict:
    return {"description": desc, "parameters": {"type": "object", "properties": props, "required": required}}


TOOL_SCHEMAS = {
    "terminal": _schema(
        "Run a shell command in the sandbox and return its combined stdout/stderr plus the exit code. "
        "Use it for tests, git, package managers and quick scripts.",
        {
            "command": {"type": "string", "description": "Command line to execute with bash."},
            "timeout": {"type": "integer", "description": "Seconds before the command is killed (default 180)."},
            "background": {"type": "boolean", "description": "Start the command and return at once."},
        },
        ["command"],
    ),
    "read_file": _schema(
        "Read a text file with line numbers. Use offset and limit for large files instead of cat.",
        {
            "path": {"type": "string", "description": "File path, absolute or relative to the working directory."},
            "offset": {"type": "integer", "description": "First line to return (1-based)."},
            "limit": {"type": "integer", "description": "Maximum number of lines to return."},
        },
        ["path"],
    ),
    "write_file": _schema(
        "Create or overwrite a file with the given content. Parent directories are created as needed.",
        {"path": {"type": "string"}, "content": {"type": "string", "description": "Full new file content."}},
        ["path", "content"],
    ),
    "patch": _schema(
        "Replace an exact snippet in a file. old_string must match exactly once unless replace_all is true.",
        {
            "path": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
        },
        ["path", "old_string", "new_string"],
    ),
    "search_files": _schema(
        "Search file contents with a regular expression (ripgrep semantics). Returns matching lines with paths.",
        {
            "pattern": {"type": "string"},
            "path": {"type": "string", "description": "Directory to search (default '.')."},
            "file_glob": {"type": "string", "description": "Only search files matching this glob, e.g. '*.py'."},
            "max_results": {"type": "integer"},
        },
        ["pattern"],
    ),
    "web_search": _schema(
        "Search the web and return titles, URLs and short descriptions.",
        {"query": {"type": "string"}, "limit": {"type": "integer", "description": "Number of results (max 10)."}},
        ["query"],
    ),
    "web_extract": _schema(
        "Fetch web pages and return their main content as markdown.",
        {"urls": {"type": "array", "items": {"type": "string"}, "description": "Up to 5 URLs."}},
        ["urls"],
    ),
}

PERSONAS = {
    "coding": ("a senior software engineer", "an autonomous coding agent", "a careful pair-programmer"),
    "research": ("a research assistant for an engineering team", "a technical analyst"),
    "ops": ("a meticulous site-reliability engineer", "an on-call operations agent"),
}


def system_prompt(rng: random.Random, tools: list[str], cwd: str) -> str:
    """A Hermes-style function-calling system prompt listing `tools`."""
    specs = [{"type": "function", "function": {"name": name, **TOOL_SCHEMAS[name]}} for name in tools]
    kind = "research" if "web_extract" in tools else "coding" if "write_file" in tools else "ops"
    date = f"2025-{rng.randint(1, 6):02d}-{rng.randint(1, 28):02d}"
    return (
        f"You are a function calling AI model. You work as {rng.choice(PERSONAS[kind])} inside a sandboxed workspace. "
        "The functions you may call are described as JSON schemas inside <tools></tools> XML tags. Call as many "
        "as the task needs, one or several per turn, and never guess argument values you have not observed.\n"
        f"<tools>\n{json.dumps(specs)}\n</tools>\n"
        "Each call must follow this JSON schema: "
        '{"properties": {"name": {"type": "string"}, "arguments": {"type": "object"}}, "required": ["name", "arguments"]}\n'
        "Reason privately inside <think></think> tags before you act. Then wrap every call in <tool_call></tool_call> "
        'tags, for example:\n<tool_call>\n{"name": <function-name>, "arguments": <args-dict>}\n</tool_call>\n'
        "Results come back to you inside <tool_response></tool_response> tags. When the task is complete, reply "
        "with a final answer that contains no tool call.\n\n"
        f"Environment: Linux (Ubuntu 22.04), bash, working directory {cwd}. Current date: {date}."
    )


# ---------------------------------------------------------------------------
# Phrasebook: reasoning, user turns and answers in four languages
# ---------------------------------------------------------------------------

# Plan sentences keyed by action; slots are filled from the trajectory state.
PLANS = {
    "en": {
        "plan_tests": [
            "The user says {test} is failing. Before reading any code I want the exact failure, so I'll run that test file with -x to stop at the first error.",
            "First step: reproduce. Running {test} alone will show me the traceback and which assertion or exception is involved.",
        ],
        "plan_explore": [
            "I don't know this codebase yet, so I'll start by getting an overview of the layout of {repo}.",
            "Let me look at the repository structure of {repo} first to see where the relevant modules and tests live.",
        ],
        "read": [
            "Next I'll read {path} to understand the code path involved.",
            "I need to see the implementation in {path} before deciding anything.",
            "Let me open {path}; the relevant logic should be in there.",
        ],
        "read_many": [
            "I'll read {paths} in parallel, since I need both to follow the data flow.",
            "These files are independent, so I'll fetch {paths} at the same time.",
        ],
        "grep": [
            "I'll search for every use of {symbol} to know which callers depend on it.",
            "Before changing {symbol}, let me find all the places that reference it.",
        ],
        "git_log": [
            "Let me check the recent history of {path}; a recent commit may have introduced this.",
            "The git log for {path} should tell me what changed lately.",
        ],
        "repro": [
            "I'll write a tiny reproduction calling {func} directly to isolate the behaviour from the test fixtures.",
            "A quick python -c reproduction of {func} will confirm my hypothesis without the rest of the suite.",
        ],
        "config": [
            "I should check the project configuration in {path} as well.",
            "Let me look at {path} to see how the project is configured.",
        ],
        "lint": [
            "Let me run the linters on {pkg} to make sure I'm not leaving style or typing problems behind.",
            "Type checking {pkg} may reveal the same issue in other call sites.",
        ],
        "deps": [
            "I want to know which version of {dep} is actually installed in the environment.",
            "Let me check the installed dependencies; {dep} could be the culprit.",
        ],
        "patch": [
            "I'm confident about the fix now: I'll make a minimal edit in {func} in {path}.",
            "Time to apply the fix in {path}. I'll keep the change small and local to {func}.",
        ],
        "write": ["I'll write {path} with the new content.", "Now I'll create {path}."],
        "rerun": ["Let me re-run {test} to see whether the fix works.", "Re-running {test} to verify."],
        "full_suite": [
            "Now the full test suite, to make sure nothing else in {pkg} broke.",
            "The targeted test passes; let me run everything to check for regressions.",
        ],
        "diffstat": [
            "Let me review the final diff before summarising.",
            "One last look at the diff stat so I can report exactly what changed.",
        ],
        "followup": [
            "The user added a constraint. I'll take it into account and continue.",
            "Good point from the user; I'll adjust my plan accordingly.",
        ],
        "build": [
            "Let me run the build to make sure everything still compiles.",
            "I'll run the build step that CI runs.",
        ],
        "fix_typo": [
            "The validator is right: that is a typo I introduced in {path}. Fixing that line.",
            "That error points at a line I just wrote in {path}; correcting it.",
        ],
        "coverage": [
            "Let me check test coverage for {pkg} to see which branches are untested.",
            "A coverage report will show whether this code path is exercised at all.",
        ],
        "search": [
            "I'll start with a web search for {query}.",
            "Let me search the web for {query} to find primary sources.",
        ],
        "extract": [
            "These results look relevant; I'll read the pages about {lib} in full.",
            "I need the details, not the snippets, so I'll extract the pages on {lib}.",
        ],
        "versions": [
            "Let me check which versions of {dep} are published and how often they release.",
            "Release history says a lot about maintenance; checking the published versions of {dep}.",
        ],
        "bench": [
            "Claims in blog posts vary a lot. I'll run our own benchmark script for {slug} to get comparable numbers.",
            "Let me verify the performance claims locally with the benchmark harness.",
        ],
        "notes": [
            "I have enough material. I'll write the decision record to {path}.",
            "Let me put the recommendation in {path}.",
        ],
        "pods": [
            "First I'll check the state of the {svc} pods.",
            "Let me see whether the {svc} pods are healthy or restarting.",
        ],
        "logs": [
            "Next, the recent logs from {svc} should show the error signature.",
            "I'll pull the latest log lines from {svc}.",
        ],
        "grep_logs": [
            "Let me count and sample the error lines matching {pattern}.",
            "I'll filter the logs for {pattern} to see how often it happens.",
        ],
        "describe": [
            "kubectl describe will show the events and last state for one of the {svc} pods.",
            "Let me describe one {svc} pod to see probes, limits and events.",
        ],
        "health": [
            "Let me hit the health endpoint of {svc} directly.",
            "The /healthz endpoint of {svc} reports dependency status; checking it.",
        ],
        "metrics": [
            "I'll query Prometheus for the error rate of {svc} over the last half hour.",
            "Let me look at the metrics for {svc} to date the regression.",
        ],
        "disk": ["I should rule out disk pressure on the {svc} node.", "Let me check disk usage where {svc} writes."],
        "ports": [
            "Let me confirm which processes are listening on which ports.",
            "Checking the listening sockets to make sure the service is bound where expected.",
        ],
        "fix_config": [
            "The root cause is clear; I'll change {key} in the manifest.",
            "I'll patch {key} in the deployment config.",
        ],
        "restart": [
            "Now I'll roll out the change to {svc}.",
            "Let me restart {svc} so the new configuration is picked up.",
        ],
        "verify": [
            "Let me verify that {svc} is healthy after the rollout.",
            "Verifying the error rate of {svc} after the change.",
        ],
        "final": [
            "Everything checks out. Time to summarise for the user.",
            "The work is done and verified; I'll write the summary.",
        ],
    },
    "zh": {
        "plan_tests": [
            "用户说 {test} 失败了。在看代码之前，我先用 -x 单独运行这个测试文件，拿到准确的报错。",
            "第一步是复现问题：单独运行 {test}，看看是哪个断言或异常导致失败。",
        ],
        "plan_explore": [
            "我还不熟悉这个代码库，先看一下 {repo} 的目录结构。",
            "先了解 {repo} 的项目结构，找到相关模块和测试的位置。",
        ],
        "read": ["接下来读一下 {path}，弄清楚相关的代码路径。", "在做决定之前，我需要先看 {path} 里的实现。"],
        "read_many": ["我要同时读取 {paths}，这样才能跟上数据流。", "这几个文件互不依赖，可以并行读取 {paths}。"],
        "grep": ["搜索 {symbol} 的所有用法，确认有哪些调用方依赖它。", "修改 {symbol} 之前，先找出所有引用它的地方。"],
        "git_log": ["看看 {path} 最近的提交记录，可能是最近的改动引入了这个问题。"],
        "repro": ["写一个最小复现脚本直接调用 {func}，排除测试夹具的干扰。"],
        "config": ["还要检查一下 {path} 中的项目配置。"],
        "lint": ["对 {pkg} 运行 lint 和类型检查，确保没有遗留问题。"],
        "deps": ["确认一下环境里实际安装的 {dep} 版本。"],
        "patch": [
            "现在可以确定修复方案了：在 {path} 的 {func} 里做一个最小改动。",
            "开始在 {path} 中修复，改动尽量小，只影响 {func}。",
        ],
        "write": ["把新内容写入 {path}。"],
        "rerun": ["重新运行 {test}，看看修复是否生效。"],
        "full_suite": ["再跑一遍完整的测试套件，确认 {pkg} 其他部分没有被破坏。"],
        "diffstat": ["总结之前，先检查一下最终的 diff。"],
        "followup": ["用户补充了一个要求，我会照此调整后继续。"],
        "build": ["运行一次构建，确认一切都能正常编译。"],
        "coverage": ["看一下 {pkg} 的测试覆盖率，确认这条代码路径有没有被测到。"],
        "search": ["先在网上搜索 {query}。", "搜索一下 {query}，找一些一手资料。"],
        "extract": ["这些结果看起来有用，我把关于 {lib} 的页面完整读一遍。"],
        "versions": ["看看 {dep} 发布过哪些版本、发布频率如何。"],
        "bench": ["博客里的性能数据差别很大，我用我们自己的基准脚本跑一下 {slug}，得到可比的数字。"],
        "notes": ["资料已经足够了，我把决策记录写到 {path}。"],
        "pods": ["先检查 {svc} 的 pod 状态。"],
        "logs": ["接着看 {svc} 最近的日志，找出错误特征。"],
        "grep_logs": ["统计并抽样匹配 {pattern} 的错误行。"],
        "describe": ["用 kubectl describe 看一下 {svc} 某个 pod 的事件和上次退出状态。"],
        "health": ["直接请求 {svc} 的健康检查接口。"],
        "metrics": ["查询 Prometheus，看 {svc} 最近半小时的错误率。"],
        "disk": ["排除一下 {svc} 所在节点的磁盘压力。"],
        "ports": ["确认各个进程监听的端口。"],
        "fix_config": ["根因已经清楚了，我来修改部署配置里的 {key}。"],
        "restart": ["现在把改动发布到 {svc}。"],
        "verify": ["确认发布之后 {svc} 恢复正常。"],
        "final": ["所有检查都通过了，现在给用户写总结。"],
    },
    "fr": {
        "plan_tests": [
            "L'utilisateur indique que {test} échoue. Avant de lire le code, je lance ce fichier de test avec -x pour obtenir l'erreur exacte.",
            "Première étape : reproduire. Lancer {test} seul me donnera la trace complète.",
        ],
        "plan_explore": ["Je ne connais pas encore ce dépôt ; je commence par un aperçu de l'arborescence de {repo}."],
        "read": [
            "Je vais lire {path} pour comprendre le chemin d'exécution concerné.",
            "Il me faut l'implémentation de {path} avant de décider quoi que ce soit.",
        ],
        "read_many": ["Je lis {paths} en parallèle, j'ai besoin des deux pour suivre le flux de données."],
        "grep": ["Je cherche toutes les utilisations de {symbol} pour savoir quels appelants en dépendent."],
        "git_log": ["Regardons l'historique récent de {path} ; un commit récent a peut-être introduit le problème."],
        "repro": ["J'écris une reproduction minimale qui appelle {func} directement, sans les fixtures."],
        "config": ["Je dois aussi vérifier la configuration du projet dans {path}."],
        "lint": ["Je lance les linters sur {pkg} pour ne pas laisser de problèmes de style ou de typage."],
        "deps": ["Je veux savoir quelle version de {dep} est réellement installée."],
        "patch": ["Le correctif est clair : une modification minimale de {func} dans {path}."],
        "write": ["J'écris {path} avec le nouveau contenu."],
        "rerun": ["Je relance {test} pour vérifier le correctif."],
        "full_suite": ["Maintenant toute la suite de tests, pour m'assurer que rien d'autre n'est cassé dans {pkg}."],
        "diffstat": ["Un dernier coup d'œil au diff avant de résumer."],
        "followup": ["L'utilisateur ajoute une contrainte ; j'en tiens compte et je continue."],
        "build": ["Je lance le build pour vérifier que tout compile encore."],
        "coverage": ["Je regarde la couverture de tests de {pkg} pour voir si ce chemin est testé."],
        "search": ["Je commence par une recherche web sur {query}."],
        "extract": ["Ces résultats semblent pertinents ; je lis en entier les pages sur {lib}."],
        "versions": ["Je regarde quelles versions de {dep} sont publiées et à quel rythme."],
        "bench": ["Les chiffres des blogs varient beaucoup ; je lance notre propre benchmark {slug}."],
        "notes": ["J'ai assez d'éléments ; j'écris la note de décision dans {path}."],
        "pods": ["Je vérifie d'abord l'état des pods {svc}."],
        "logs": ["Ensuite, les derniers logs de {svc} devraient montrer la signature de l'erreur."],
        "grep_logs": ["Je compte et j'échantillonne les lignes d'erreur correspondant à {pattern}."],
        "describe": ["kubectl describe montrera les événements et le dernier état d'un pod {svc}."],
        "health": ["J'interroge directement l'endpoint de santé de {svc}."],
        "metrics": ["Je consulte Prometheus pour le taux d'erreur de {svc} sur la dernière demi-heure."],
        "disk": ["J'écarte l'hypothèse d'un disque plein sur le nœud de {svc}."],
        "ports": ["Je vérifie quels processus écoutent sur quels ports."],
        "fix_config": ["La cause est claire ; je modifie {key} dans le manifeste."],
        "restart": ["Je déploie la modification sur {svc}."],
        "verify": ["Je vérifie que {svc} est sain après le déploiement."],
        "final": ["Tout est vérifié ; je rédige le résumé pour l'utilisateur."],
    },
    "es": {
        "plan_tests": [
            "El usuario dice que {test} falla. Antes de leer código, ejecuto ese archivo de pruebas con -x para ver el error exacto."
        ],
        "plan_explore": ["Todavía no conozco este repositorio; empiezo por revisar la estructura de {repo}."],
        "read": [
            "Ahora leo {path} para entender la ruta de código implicada.",
            "Necesito ver la implementación en {path} antes de decidir nada.",
        ],
        "read_many": ["Leo {paths} en paralelo; necesito ambos para seguir el flujo de datos."],
        "grep": ["Busco todos los usos de {symbol} para saber qué llamadores dependen de él."],
        "git_log": ["Reviso el historial reciente de {path}; quizá un commit reciente introdujo el problema."],
        "repro": ["Escribo una reproducción mínima que llama a {func} directamente, sin fixtures."],
        "config": ["También debo revisar la configuración del proyecto en {path}."],
        "lint": ["Ejecuto los linters sobre {pkg} para no dejar problemas de estilo o de tipos."],
        "deps": ["Quiero saber qué versión de {dep} está instalada realmente."],
        "patch": ["La corrección está clara: un cambio mínimo en {func} dentro de {path}."],
        "write": ["Escribo {path} con el contenido nuevo."],
        "rerun": ["Vuelvo a ejecutar {test} para comprobar la corrección."],
        "full_suite": ["Ahora toda la batería de pruebas, para asegurar que nada más se rompió en {pkg}."],
        "diffstat": ["Un último vistazo al diff antes de resumir."],
        "followup": ["El usuario añade una condición; la tengo en cuenta y sigo."],
        "build": ["Ejecuto el build para confirmar que todo compila."],
        "coverage": ["Reviso la cobertura de pruebas de {pkg} para ver si esta ruta está probada."],
        "search": ["Empiezo con una búsqueda web sobre {query}."],
        "extract": ["Estos resultados parecen útiles; leo completas las páginas sobre {lib}."],
        "versions": ["Reviso qué versiones de {dep} se han publicado y con qué frecuencia."],
        "bench": ["Las cifras de los blogs varían mucho; ejecuto nuestro propio benchmark de {slug}."],
        "notes": ["Tengo suficiente material; escribo el registro de decisión en {path}."],
        "pods": [
            "Primero reviso el estado de los pods de {svc}.",
            "Veamos si los pods de {svc} están sanos o reiniciándose.",
        ],
        "logs": ["Después, los logs recientes de {svc} deberían mostrar la firma del error."],
        "grep_logs": ["Cuento y muestreo las líneas de error que coinciden con {pattern}."],
        "describe": ["kubectl describe mostrará los eventos y el último estado de un pod de {svc}."],
        "health": ["Consulto directamente el endpoint de salud de {svc}."],
        "metrics": ["Consulto Prometheus para ver la tasa de errores de {svc} en la última media hora."],
        "disk": ["Descarto presión de disco en el nodo de {svc}."],
        "ports": ["Compruebo qué procesos escuchan en qué puertos."],
        "fix_config": ["La causa raíz está clara; cambio {key} en el manifiesto."],
        "restart": ["Despliego el cambio en {svc}."],
        "verify": ["Verifico que {svc} esté sano tras el despliegue."],
        "final": ["Todo está verificado; escribo el resumen para el usuario."],
    },
}

# Observations about the previous tool result, prefixed to the plan.
OBSERVATIONS = {
    "en": {
        "fail": [
            "The run fails in {test} with `{error}`.",
            "So `{error}` is raised while running {test}.",
            "I can see the failure now: {test} ends with `{error}`.",
        ],
        "pass": ["Good, that run is green ({n} passed).", "All {n} tests pass now."],
        "code": [
            "Reading {path}, the suspicious part is the handling of empty or missing values.",
            "{path} is fairly long; the relevant function does not guard against None.",
            "The structure of {path} is clear now.",
        ],
        "hits": [
            "The search found {n} references to {symbol}.",
            "There are {n} matches for {symbol}, mostly in the package itself.",
        ],
        "history": [
            "The history shows a recent refactor touching this area.",
            "Nothing obviously related in the history, but one refactor is recent.",
        ],
        "web": [
            "The search results give me several candidate sources.",
            "Those pages contain concrete numbers I can compare.",
        ],
        "logs": ["The logs are dominated by `{error}`.", "The recurring error is `{error}`."],
        "generic": ["That output is useful.", "OK, noted.", "That confirms part of my hypothesis."],
        "config": [
            "{path} looks standard; the relevant settings are easy to spot.",
            "The settings in {path} are clear now.",
        ],
        "clean": ["No matching errors since the rollout.", "The error count is down to zero."],
    },
    "zh": {
        "fail": ["测试 {test} 失败，报错是 `{error}`。", "现在看到失败原因了：{test} 抛出了 `{error}`。"],
        "pass": ["很好，这次全部通过（{n} passed）。"],
        "code": ["读完 {path}，可疑的地方是对空值或缺失值的处理。", "{path} 的结构现在清楚了。"],
        "hits": ["搜索到 {n} 处引用了 {symbol}。"],
        "history": ["提交历史显示最近有一次重构涉及这一块。"],
        "web": ["搜索结果里有几个可以参考的来源。", "这些页面里有可以对比的具体数字。"],
        "logs": ["日志里主要是 `{error}` 这个错误。"],
        "generic": ["这个输出很有用。", "好的，记下了。"],
        "config": ["{path} 的配置一目了然。"],
        "clean": ["发布之后没有再出现匹配的错误。"],
    },
    "fr": {
        "fail": ["Le test {test} échoue avec `{error}`."],
        "pass": ["Parfait, tout est vert ({n} passed)."],
        "code": ["En lisant {path}, la partie suspecte est la gestion des valeurs vides ou absentes."],
        "hits": ["La recherche trouve {n} références à {symbol}."],
        "history": ["L'historique montre un refactoring récent dans cette zone."],
        "web": ["Les résultats donnent plusieurs sources intéressantes."],
        "logs": ["Les logs sont dominés par `{error}`."],
        "generic": ["Cette sortie est utile.", "D'accord, c'est noté."],
        "config": ["La configuration dans {path} est claire."],
        "clean": ["Plus aucune erreur depuis le déploiement."],
    },
    "es": {
        "fail": ["La prueba {test} falla con `{error}`."],
        "pass": ["Bien, todo en verde ({n} passed)."],
        "code": ["Al leer {path}, lo sospechoso es el manejo de valores vacíos o ausentes."],
        "hits": ["La búsqueda encuentra {n} referencias a {symbol}."],
        "history": ["El historial muestra una refactorización reciente en esta zona."],
        "web": ["Los resultados ofrecen varias fuentes útiles."],
        "logs": ["En los logs domina el error `{error}`."],
        "generic": ["Esta salida es útil.", "De acuerdo, anotado."],
        "config": ["La configuración de {path} está clara."],
        "clean": ["No hay errores desde el despliegue."],
    },
}

# Extra deliberation sentences that make the reasoning less formulaic, by kind of run.
MUSINGS = {
    "coding": {
        "en": [
            "I should keep the change minimal since {func} is part of the public API.",
            "Other callers might rely on the current behaviour, so I'll double-check before editing.",
            "The traceback points into library code rather than the test, so the test expectation is probably right.",
            "If this is an ordering issue it would explain why it only fails on CI with xdist.",
            "I'll avoid touching unrelated formatting so the diff stays reviewable.",
            "It's worth checking whether the same pattern exists elsewhere in {pkg}.",
            "I need to remember to mention any behavioural change in the summary.",
        ],
        "zh": [
            "{func} 是公开 API 的一部分，所以改动要尽量小。",
            "其他调用方可能依赖当前行为，修改前需要再确认一下。",
            "不要顺手改无关的格式，保持 diff 便于审查。",
        ],
        "fr": [
            "{func} fait partie de l'API publique, donc le changement doit rester minimal.",
            "Je garde le diff lisible en évitant de toucher au formatage sans rapport.",
        ],
    },
    "research": {
        "en": [
            "The numbers need to come from primary sources rather than marketing pages.",
            "Benchmarks from vendors tend to be optimistic; I'll weigh independent ones more.",
            "Maintenance activity matters as much as raw speed for a long-lived dependency.",
            "I should note the versions each claim refers to, since defaults changed between releases.",
        ],
        "zh": ["数据最好来自一手资料，而不是宣传页面。", "对长期依赖来说，维护活跃度和性能一样重要。"],
    },
    "ops": {
        "en": [
            "Restarting blindly would hide the evidence, so I'll gather logs first.",
            "I want to date the start of the errors precisely and correlate it with the last deploy.",
            "It's worth checking whether other services on the same node are affected.",
            "Any mitigation should be reversible, so I'll keep track of what I change.",
        ],
        "zh": ["盲目重启会掩盖证据，所以先收集日志。", "需要准确确定错误开始的时间，并和最近一次发布对照。"],
        "es": [
            "Reiniciar a ciegas ocultaría la evidencia, así que primero recojo los logs.",
            "Conviene comprobar si el mismo patrón aparece en otros servicios.",
        ],
    },
}

# Short sentences that sometimes follow the reasoning, before the tool calls.
LEADS = {
    "en": ["Let me check.", "Running it now.", "Let me look.", "On it.", "Checking that next.", ""],
    "zh": ["我来检查一下。", "马上运行。", "我看一下。", ""],
    "fr": ["Je vérifie.", "Je lance la commande.", ""],
    "es": ["Lo compruebo.", "Lo ejecuto ahora.", ""],
}

FOLLOWUPS = {
    "coding": {
        "en": [
            "Quick note: please don't change the public signature of `{func}`, other teams import it.",
            "Also, can you check whether the same problem affects `{module}`?",
            "FYI, CI also runs on Python 3.10, so keep it compatible.",
            "While you're at it, please add a short entry to CHANGELOG.md.",
        ],
        "zh": [
            "补充一下：请不要修改 `{func}` 的公开签名，其他团队在用。",
            "另外，请确认一下 `{module}` 是否也有同样的问题？",
        ],
        "fr": ["Petite précision : ne change pas la signature publique de `{func}`, d'autres équipes l'importent."],
    },
    "research": {
        "en": [
            "Please also consider licensing and maintenance status, not only speed.",
            "Keep in mind we deploy on arm64 too, so wheels matter.",
            "Could you also check how each option behaves when Redis is unavailable?",
        ],
        "zh": ["也请考虑许可证和维护状态，不只是性能。", "注意我们也部署在 arm64 上，所以预编译 wheel 很重要。"],
    },
    "ops": {
        "en": [
            "Let's not restart everything during business hours; do one pod first and watch it.",
            "Heads-up: the database is shared with billing, don't change anything on the DB side.",
            "Please keep notes with timestamps, we'll need them for the postmortem.",
        ],
        "zh": ["请不要在工作时间重启全部实例，先重启一个 pod 观察一下。", "请记录带时间戳的操作，复盘时需要。"],
        "es": [
            "Por favor, no reinicies todo en horario laboral; empieza por un solo pod.",
            "Anota las horas de cada cambio, las necesitaremos para el postmortem.",
        ],
    },
}

TASKS = {
    "bugfix": {
        "en": [
            "In `{repo}` ({root}), `{test}` started failing after yesterday's merge:\n\n```\n{error}\n```\n\n"
            "Please find the root cause, fix it with a minimal change and make sure the whole suite still passes. "
            "Don't touch unrelated files.",
            "CI for {org}/{repo} is red: `{test}` fails with `{error}`. Can you investigate and fix it? "
            "The repo is checked out at {root}.",
            "Hey, {test} in {repo} is broken on main ({error}). I suspect something in `{module}`. "
            "Please fix it and tell me what was actually wrong.",
        ],
        "zh": [
            "{repo} 仓库（路径 {root}）里的 `{test}` 在昨天合并之后开始失败，报错如下：\n\n```\n{error}\n```\n\n"
            "请找出根本原因，用最小的改动修复，并确保整个测试套件都能通过。不要改动无关的文件。"
        ],
        "fr": [
            "Dans le dépôt {repo} ({root}), le test `{test}` échoue depuis le dernier merge :\n\n```\n{error}\n```\n\n"
            "Peux-tu trouver la cause, corriger avec un changement minimal et vérifier que toute la suite passe ?"
        ],
    },
    "feature": {
        "en": [
            "In {repo} ({root}), please add {feature}.\n\nRequirements:\n- {req1}\n- {req2}\n- tests covering the new behaviour\n\n"
            "Keep the public API backwards compatible.",
            "Feature request for {org}/{repo}: {feature}. {req1}; {req2}. Add tests and keep CI green.",
        ],
    },
    "refactor": {
        "en": [
            "`{path}` in {repo} has grown too big and `{func}` is hard to follow. Please split it into smaller helpers, "
            "remove dead code and keep behaviour identical: tests must stay green and `ruff check` clean.",
            "Refactoring task in {root}: `{module}` mixes I/O and pure logic. Extract the pure parts of `{func}` into "
            "separate functions with docstrings, no behaviour change.",
        ],
    },
    "config_migration": {
        "en": [
            "Migrate {repo} from setup.cfg to a PEP 621 pyproject.toml. Keep the same dependencies, entry points and "
            "pytest settings, and replace flake8 with ruff if it's straightforward.",
            "Our GitHub Actions workflow in {repo} still tests old Python versions with deprecated actions. Update "
            "`.github/workflows/ci.yml` to a 3.10–3.12 matrix with caching, keeping the lint and test steps.",
            "Convert `docker-compose.yml` in {repo} to the Compose spec: drop `version`, add healthchecks, use "
            "`depends_on` conditions, and validate it with `docker compose config`.",
        ],
    },
    "dependency_upgrade": {
        "en": [
            "Please upgrade `{dep}` in {repo} to the latest major version, fix whatever breaks in code and tests, "
            "and summarise which changes affected us.",
            "Dependabot opened a PR bumping `{dep}` in {org}/{repo} and CI fails. Take it over: make the upgrade work "
            "and keep the tests passing.",
        ],
    },
    "library_research": {
        "en": [
            "I need a recommendation on {question} for {context}. Please compare {lib0}, {lib1} and {lib2}: "
            "features ({features}), performance, maintenance and licensing. Run our local benchmark if it helps and "
            "write an ADR to `{adr}`.",
            "Can you research {question}? Context: {context}. Candidates so far are {lib0}, {lib1} and {lib2}. "
            "I care most about {feature} and operational simplicity. Put your conclusion in `{adr}`.",
        ],
        "zh": [
            "我们准备在后端服务里引入一个 {domain} 库。请比较 {lib0}、{lib1} 和 {lib2} 的功能（{features}）、性能、"
            "维护状况和许可证。如果有帮助可以运行本地基准测试，最后把结论写成 ADR，保存到 `{adr}`。"
        ],
    },
    "log_investigation": {
        "en": [
            "The `{svc}` service in the `{ns}` namespace has shown {symptom} since about {hh}:{mm} UTC. Please go "
            "through the logs and cluster state, find the root cause and propose (or apply) a fix.",
            "Something is off with `{svc}` ({ns}): {symptom}. Dig through the logs, tell me what's going on and fix "
            "it if the fix is a config change.",
        ],
        "zh": [
            "`{ns}` 命名空间里的 `{svc}` 服务从 UTC {hh}:{mm} 左右开始出现异常：{symptom}。请查看日志和集群状态，"
            "找出根本原因，并提出或直接应用修复。"
        ],
    },
    "incident_response": {
        "en": [
            "Incident: {svc} ({ns}) with {symptom}. You have kubectl access. Mitigate first, then tell me the root "
            "cause and what we should follow up on.",
            "Paging you in: {svc} in {ns} has {symptom}. Please stabilise it and write up the root cause.",
        ],
        "es": [
            "Incidente: el servicio `{svc}` en el namespace `{ns}` presenta {symptom} desde las {hh}:{mm} UTC. "
            "Tienes acceso con kubectl. Primero mitiga, después explícame la causa raíz y qué seguimiento hace falta."
        ],
    },
}

SYMPTOMS = {
    "zh": {
        "db_pool": "间歇性的 502/504 错误，p99 延迟超过 8 秒",
        "oom": "pod 每隔几分钟就重启，请求出现连接重置",
        "tls": "从 UTC 零点起所有外发 webhook 投递失败",
        "disk": "写入路径返回 500 错误",
        "dns": "命名空间迁移后所有对定价服务的请求都失败",
        "migration": "2.14 版本发布后 POST 请求返回 500",
    },
    "es": {
        "db_pool": "errores 502/504 intermitentes y latencia p99 por encima de 8 s",
        "oom": "pods que se reinician cada pocos minutos y conexiones reiniciadas",
        "tls": "fallos en todas las entregas de webhooks salientes",
        "disk": "errores 500 en la ruta de escritura",
        "dns": "fallos en todas las peticiones al backend de precios tras la migración de namespace",
        "migration": "respuestas 500 en las peticiones POST tras el despliegue 2.14",
    },
}
CAUSES = {
    "zh": {
        "db_pool": "连接池大小仍按旧的 worker 数量配置：每个 pod 8 个 worker，但 DB_POOL_SIZE=5，高负载时连接池被耗尽",
        "oom": "新的导出接口把整个结果集加载进内存，而容器内存限制仍是 256Mi",
        "tls": "镜像里固定的 CA 证书包来自 2023 年，合作方已经轮换到新的中间证书",
        "disk": "权限变更后日志轮转静默停止，/var/log 写满了 20G 的卷",
        "dns": "PRICING_URL 仍然指向迁移中被删除的旧命名空间",
        "migration": "0047 号迁移新增了一个没有服务端默认值的 NOT NULL 列，而旧 pod 仍在写入数据",
    },
    "es": {
        "db_pool": "el pool de conexiones sigue dimensionado para el número antiguo de workers: DB_POOL_SIZE=5 con 8 workers por pod se agota bajo carga",
        "oom": "el nuevo endpoint de exportación carga todo el resultado en memoria y el límite del contenedor sigue en 256Mi",
        "tls": "el bundle de CA fijado en la imagen es de 2023 y el socio rotó a un nuevo certificado intermedio",
        "disk": "la rotación de logs dejó de funcionar tras un cambio de permisos y /var/log llenó el volumen de 20G",
        "dns": "la variable PRICING_URL sigue apuntando al namespace antiguo, eliminado durante la migración",
        "migration": "la migración 0047 añadió una columna NOT NULL sin valor por defecto mientras los pods antiguos seguían escribiendo",
    },
}

FEATURES = (
    (
        "a `--dry-run` flag to the `{func}` entry point",
        "it must print what would change without writing anything",
        "the exit code must be 0 when nothing would change",
    ),
    (
        "retry with exponential backoff to `{func}`",
        "at most 5 attempts with jitter, configurable via settings",
        "non-retryable errors (4xx) must fail immediately",
    ),
    (
        "a `max_{noun}s` setting honoured by `{func}`",
        "default to the current behaviour when unset",
        "reject negative values with a clear error message",
    ),
    (
        "JSON output for the `status` command",
        "add a `--format {{text,json}}` option",
        "the JSON must be stable and sorted",
    ),
    (
        "a {noun} cache with a configurable TTL",
        "cache hits must not call the backend",
        "expose hit/miss counters for metrics",
    ),
)

ANSWER_HEADERS = {
    "en": ("## Summary", "### Root cause", "### Changes", "### Verification", "### Follow-ups"),
    "zh": ("## 总结", "### 根本原因", "### 修改内容", "### 验证", "### 后续建议"),
    "fr": ("## Résumé", "### Cause", "### Modifications", "### Vérification", "### Suites à donner"),
    "es": ("## Resumen", "### Causa raíz", "### Cambios", "### Verificación", "### Próximos pasos"),
}

BUG_CAUSE = {
    "en": "`{func}` in `{path}` assumed every {noun} was complete, so `{error}` was raised as soon as the input "
    "contained a partial {noun} (line {line}). The test fixture has exactly such a record, which is why the "
    "failure only appeared once the fixture was extended.",
    "zh": "`{path}` 中的 `{func}` 假设每个 {noun} 都是完整的，因此只要输入里有不完整的 {noun}（第 {line} 行），"
    "就会抛出 `{error}`。测试夹具里恰好有这样一条记录，所以在夹具扩展之后才暴露出这个问题。",
    "fr": "`{func}` dans `{path}` supposait que chaque {noun} était complet ; dès qu'un {noun} partiel arrivait "
    "(ligne {line}), `{error}` était levée. La fixture de test contient justement un tel enregistrement.",
}
BUG_CHANGE = {
    "en": "guard the missing value in `{func}` before it is used; no signature change",
    "zh": "在 `{func}` 使用该值之前增加空值保护，函数签名不变",
    "fr": "protection contre la valeur manquante dans `{func}` avant son utilisation ; signature inchangée",
}
FOLLOWUP_NOTES = {
    "coding": {
        "en": [
            "Consider adding a property-based test for partial inputs.",
            "The same pattern appears in two other helpers; worth a follow-up ticket.",
            "CI runtime is dominated by the integration tests; marking them `slow` would help.",
            "Pin the dependency range in pyproject to avoid surprise upgrades.",
        ],
        "zh": ["建议为不完整输入增加基于属性的测试。", "另外两个辅助函数里也有同样的写法，值得单独开一个工单。"],
        "fr": [
            "Ajouter un test basé sur les propriétés pour les entrées partielles.",
            "Le même motif existe dans deux autres fonctions ; à traiter dans un ticket séparé.",
        ],
    },
    "ops": {
        "en": [
            "Add an alert on the error-rate metric so this is caught within minutes next time.",
            "Add a CI check that validates this setting against the worker count before deploy.",
            "Document the failure mode and the fix in the service runbook.",
            "Review the other services that were migrated the same way.",
        ],
        "zh": ["建议对错误率指标加告警，下次能在几分钟内发现。", "在服务的运维手册里记录这个故障模式和修复方法。"],
        "es": [
            "Añadir una alerta sobre la tasa de errores para detectarlo en minutos la próxima vez.",
            "Documentar el cambio en el runbook del servicio.",
        ],
    },
}


def final_answer(
    lang: str,
    cause: str,
    changes: list[tuple[str, str]],
    checks: list[tuple[str, str]],
    notes: list[str],
    intro: str = "",
    cause_title: str | None = None,
) -> str:
    """A markdown final report with localized headings."""
    head, h_cause, h_changes, h_checks, h_notes = ANSWER_HEADERS[lang]
    h_cause = cause_title or h_cause
    out = [head, ""]
    if intro:
        out += [intro, ""]
    out += [h_cause, "", cause, "", h_changes, ""] + [f"- `{path}`: {desc}" for path, desc in changes]
    out += ["", h_checks, ""] + [f"- `{cmd}` → {result}" for cmd, result in checks]
    if notes:
        out += ["", h_notes, ""] + [f"- {note}" for note in notes]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Trajectory assembly
# ---------------------------------------------------------------------------

CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")


def est_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN["coding"]) -> float:
    """Rough demo-tokenizer token count: CJK characters cost about one token each."""
    cjk = len(CJK.findall(text))
    return (len(text) - cjk) / chars_per_token + cjk * 1.1


@dataclass
class Call:
    """One tool call and the content its tool returned."""

    name: str
    args: dict
    content: dict | str


class Trajectory:
    """Builds a ShareGPT conversation turn by turn, tracking size and tool-call count."""

    def __init__(self, rng: random.Random, lang: str, tools: list[str], cwd: str, kind: str):
        self.rng = rng
        self.lang = lang
        self.tools = tools
        self.kind = kind
        self.cwd = cwd
        self.cpt = CHARS_PER_TOKEN[kind]
        self.turns: list[dict[str, str]] = []
        self.n_calls = 0
        self.obs: tuple[str, dict] | None = None
        self.size = 0.0
        self.add("system", system_prompt(rng, tools, cwd))

    def add(self, role: str, value: str) -> None:
        self.turns.append({"from": role, "value": value})
        self.size += est_tokens(value, self.cpt)

    def human(self, text: str) -> None:
        self.add("human", text)

    def think(self, plan_key: str, slots: dict, extra: bool = True) -> str:
        """Reasoning text: an observation about the last result, a plan, maybe a musing."""
        rng, lang = self.rng, self.lang
        parts = []
        if self.obs is not None:
            key, obs_slots = self.obs
            parts.append(rng.choice(OBSERVATIONS[lang][key]).format(**obs_slots))
        func = str(slots.get("func", ""))
        musings = [m for m in MUSINGS[self.kind][lang] if "{func}" not in m or re.fullmatch(r"[A-Za-z_]\w*", func)]
        if extra and musings and rng.random() < (0.45 if lang == "en" else 0.25):
            parts.append(rng.choice(musings).format(**{"pkg": "the package", **slots}))
        parts.append(rng.choice(PLANS[lang][plan_key]).format(**slots))
        sep = "" if lang == "zh" else " "
        text = sep.join(parts)
        if lang == "en" and rng.random() < 0.3:
            text += "\n\n" + rng.choice(
                (
                    "Plan: verify first, then change as little as possible.",
                    "I'll keep notes of the file paths and line numbers for the final summary.",
                    "If this does not confirm the hypothesis I'll step back and look at the callers.",
                )
            )
        return text

    def step(self, plan_key: str, slots: dict, calls: list[Call], obs: tuple[str, dict] | None = None) -> None:
        """One gpt turn issuing `calls`, followed by one tool turn per call."""
        rng = self.rng
        ids = [call_id(rng) for _ in calls]
        lead = rng.choice(LEADS[self.lang]) if rng.random() < 0.5 else ""
        body = f"<think>\n{self.think(plan_key, slots)}\n</think>\n" + (lead + "\n" if lead else "")
        body += "\n".join(
            f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.args}, ensure_ascii=False)}\n</tool_call>"
            for c in calls
        )
        self.add("gpt", body)
        for cid, c in zip(ids, calls):
            payload = {"tool_call_id": cid, "name": c.name, "content": c.content}
            self.add("tool", f"<tool_response>\n{json.dumps(payload, ensure_ascii=False)}\n</tool_response>")
        self.n_calls += len(calls)
        self.obs = obs or ("generic", {})

    def chat(self, text: str, reasoning: str) -> None:
        """A gpt turn that answers in prose without calling tools."""
        self.add("gpt", f"<think>\n{reasoning}\n</think>\n{text}")

    def final(self, text: str) -> None:
        """The closing gpt answer, with no tool call."""
        reasoning = self.think("final", {}, extra=False)
        self.add("gpt", f"<think>\n{reasoning}\n</think>\n{text}")


def terminal(command: str, output: str, exit_code: int = 0, error: str | None = None) -> Call:
    """A terminal call whose content is the tool's JSON result."""
    if exit_code and error is None:
        error = f"command exited with code {exit_code}"
    return Call("terminal", {"command": command}, {"output": output, "exit_code": exit_code, "error": error})


def read_call(path: str, lines: list[str], offset: int = 1, limit: int | None = None) -> Call:
    """A read_file call returning numbered lines."""
    end = len(lines) if limit is None else min(len(lines), offset - 1 + limit)
    args: dict = {"path": path}
    if offset > 1 or limit is not None:
        args.update({"offset": offset, "limit": limit or end - offset + 1})
    content = {
        "content": numbered(lines[offset - 1 : end], offset),
        "total_lines": len(lines),
        "truncated": end < len(lines),
    }
    return Call("read_file", args, content)


# ---------------------------------------------------------------------------
# Row specifications
# ---------------------------------------------------------------------------


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
                self.t.human(rng.choice(FOLLOWUPS[self.t.kind][self.lang]).format(**followup_slots))
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


# ---------------------------------------------------------------------------
# Coding runs
# ---------------------------------------------------------------------------


class CodingRun(Run):
    """One coding trajectory in a synthesized repository."""

    def __init__(self, rng: random.Random, spec: RowSpec, project: Project):
        super().__init__(rng, spec)
        self.p = project
        self.repo = Repo(rng, project)
        self.repo.warm(3)
        tools = ["terminal", "read_file", "write_file", "patch", "search_files"]
        if spec.category == "dependency_upgrade":
            tools.append("web_search")
        self.t = Trajectory(rng, spec.lang, tools, self.repo.root, "coding")
        self.module = rng.choice(project.modules[:3])
        self.path = self.repo.module_path(self.module)
        self.func = rng.choice(self.repo.functions(self.path)[:3])
        self.changes: list[tuple[str, str]] = []
        self.checks: list[tuple[str, str]] = []
        self.bug: Bug | None = None

    # -- helpers -----------------------------------------------------------

    def slots(self, **extra) -> dict:
        base = {
            "repo": self.p.name,
            "pkg": self.p.pkg,
            "path": self.path,
            "func": self.func,
            "module": self.module,
            "symbol": self.func,
            "test": self.repo.test_path(self.module),
            "dep": self.p.deps[0].split("==")[0].split("@")[0],
            "paths": "",
        }
        base.update(extra)
        return base

    def test_names(self, module: str, func: str) -> list[str]:
        """Test names in the synthesized test file of `module` that exercise `func`."""
        src = self.repo.source(self.repo.test_path(module))
        if self.p.lang == "py":
            names = re.findall(r"^def (test_\w+)\(sample_", "\n".join(src), re.M)
            own = [n for n in names if n.startswith(f"test_{func.lstrip('_')}_")]
            return own or names or re.findall(r"^def (test_\w+)\(", "\n".join(src), re.M)
        cases = re.findall(r"^  it\('([^']+)'", "\n".join(src), re.M)
        return [f"{module} › {c}" for c in cases if c.startswith(func)] or [f"{module} › {c}" for c in cases]

    def tests(
        self,
        plan: str,
        target: str | None,
        failing: list[tuple[str, str]],
        bug: Bug | None,
        n_files: int = 1,
        verbose: bool = False,
    ) -> str:
        """Run tests (targeted or full); returns the output."""
        if self.p.lang == "py":
            out, code = pytest_run(self.rng, self.repo, failing, bug, n_files, verbose=verbose, only=target)
            cmd = f"python -m pytest {target} -x" if target else "python -m pytest" + (" -v" if verbose else "")
        else:
            out, code = jest_run(self.rng, self.repo, failing, bug, only=target)
            cmd = f"npx jest {target}" if target else "npm test -- --ci"
        obs = (
            ("fail", {"test": failing[0][1], "error": error_of(out)}) if failing else ("pass", {"n": passed_count(out)})
        )
        self.t.step(plan, self.slots(test=target or "the suite"), [terminal(cmd, out, code)], obs)
        if not failing:
            self.checks.append((cmd, f"{passed_count(out)} passed, exit code 0"))
        return out

    # -- exploration actions -------------------------------------------------

    def act_read(self, plan: str = "read") -> None:
        rng = self.rng
        modules = list(self.p.modules[:4])
        path = rng.choice(
            [self.path, self.path, self.repo.module_path(rng.choice(modules)), self.repo.test_path(self.module)]
        )
        lines = self.repo.source(path)
        offset = 1 if rng.random() < 0.5 else rng.randint(1, max(1, len(lines) - 40))
        call = fit_lines(
            lines, self.room(), lambda n: read_call(path, lines, offset, None if n >= len(lines) and offset == 1 else n)
        )
        self.t.step(plan, self.slots(path=path), [call], read_obs(path))

    def act_read_many(self, plan: str = "read_many") -> None:
        rng = self.rng
        paths = rng.sample(
            [self.repo.module_path(m) for m in self.p.modules] + [self.repo.test_path(self.module)], rng.randint(2, 3)
        )
        share = self.room() / len(paths)
        calls = []
        for path in paths:
            lines = self.repo.source(path)
            calls.append(fit_lines(lines, share, lambda n, p=path, ln=lines: read_call(p, ln, 1, n)))
        self.t.step(plan, self.slots(paths=" and ".join(paths)), calls, ("code", {"path": paths[0]}))

    def act_grep(self, plan: str = "grep", symbol: str | None = None) -> None:
        rng = self.rng
        symbol = symbol or rng.choice(
            [
                self.func,
                self.func,
                rng.choice(self.repo.functions(self.path) or [self.func]),
                rng.choice(self.p.nouns) + "_id",
            ]
        )
        if rng.random() < 0.5:
            call = Call(
                "search_files",
                {"pattern": symbol, "path": ".", "file_glob": "*.py" if self.p.lang == "py" else "*.[jt]s*"},
                search_files_result(self.repo, symbol),
            )
        else:
            out = grep_output(self.repo, symbol)
            call = terminal(
                f'grep -rn "{symbol}" {self.p.pkg if self.p.lang == "py" else "src"} tests 2>/dev/null | head -40',
                out,
                0 if out else 1,
            )
        self.t.step(
            plan, self.slots(symbol=symbol), [call], ("hits", {"n": len(self.repo.grep(symbol)), "symbol": symbol})
        )

    def act_git_log(self, plan: str = "git_log") -> None:
        rng = self.rng
        long = rng.random() < 0.6
        n = int(max(3, min(18, self.room() / (95 if long else 14))))
        cmd = f"git log -n {n} {'--stat' if long else '--oneline'} -- {self.path}"
        self.t.step(plan, self.slots(), [terminal(cmd, git_log(rng, self.repo, n, long))], ("history", {}))

    def act_git_show(self, plan: str = "git_log") -> None:
        rng = self.rng
        path = self.repo.module_path(rng.choice(self.p.modules[:3]))
        lines = self.repo.source(path)
        idx = self.repo.body_line(path, rng.choice(self.repo.functions(path)))
        head = git_log(rng, self.repo, 1, True).split("\n")[:6]
        diff = unified_diff(path, lines, idx, fix_line(rng, lines[idx], self.p.lang), rng)
        self.t.step(
            plan,
            self.slots(path=path),
            [terminal(f"git show HEAD~{rng.randint(1, 6)} -- {path}", "\n".join(head + [diff]))],
            ("history", {}),
        )

    def act_repro(self, plan: str = "repro") -> None:
        rng = self.rng
        if self.p.lang != "py":
            return self.act_grep(plan)
        bug = self.bug
        noun = rng.choice(self.p.nouns)
        code = f"from {self.p.pkg}.{self.module} import {self.func}; print({self.func}([{{'{noun}_id': 1, 'size': None}}]))"
        if bug:
            out = "\n".join(
                [
                    "Traceback (most recent call last):",
                    '  File "<string>", line 1, in <module>',
                    f'  File "{self.repo.root}/{bug.path}", line {bug.line_idx + 1}, in {bug.func}',
                    f"    {self.repo.source(bug.path)[bug.line_idx].strip()}",
                    f"{bug.kind}: {bug.message}",
                ]
            )
            call = terminal(f'python -c "{code}"', out, 1)
        else:
            call = terminal(f'python -c "{code}"', repr({f"{noun}_id": 1, "size": None}), 0)
        self.t.step(plan, self.slots(), [call], ("generic", {}))

    def act_config(self, plan: str = "config") -> None:
        rng = self.rng
        path = rng.choice(
            ("pyproject.toml", ".github/workflows/ci.yml")
            if self.p.lang == "py"
            else ("package.json", ".github/workflows/ci.yml")
        )
        self.t.step(plan, self.slots(path=path), [read_call(path, self.repo.source(path))], read_obs(path))

    def act_deps(self, plan: str = "deps", dep: str | None = None) -> None:
        rng = self.rng
        dep = dep or rng.choice(self.p.deps)
        if self.p.lang == "py":
            name, _, ver = dep.partition("==")
            out = "\n".join(
                [
                    f"Name: {name}",
                    f"Version: {ver}",
                    f"Summary: {name} library",
                    f"Home-page: https://github.com/{name}/{name}",
                    "License: BSD-3-Clause",
                    "Location: /workspace/.venv/lib/python3.11/site-packages",
                    f"Requires: {', '.join(d.split('==')[0] for d in rng.sample(self.p.deps, 2))}",
                    f"Required-by: {self.p.name}",
                ]
            )
            call = terminal(f"pip show {name}", out)
        else:
            name, _, ver = dep.rpartition("@")
            tree = (
                [f"{self.p.name}@0.0.0 {self.repo.root}"]
                + [f"├── {d}" for d in self.p.deps[:-1]]
                + [f"└── {self.p.deps[-1]}"]
            )
            call = terminal("npm ls --depth=0", "\n".join(tree))
        self.t.step(plan, self.slots(dep=name), [call], ("generic", {}))

    def act_lint(self, plan: str = "lint") -> None:
        rng = self.rng
        if self.p.lang == "py":
            tool = rng.choice(("ruff", "mypy"))
            out, code = lint_output(rng, self.repo, tool)
            cmd = f"ruff check {self.p.pkg}" if tool == "ruff" else f"mypy {self.p.pkg}"
        elif self.p.name == "northwind-ui":
            out, code = tsc_output(rng, self.repo)
            cmd = "npx tsc --noEmit"
        else:
            out, code = eslint_output(rng, self.repo)
            cmd = "npx eslint src"
        self.t.step(plan, self.slots(), [terminal(cmd, out, code)], ("generic", {}))

    def act_build(self, plan: str = "build") -> None:
        rng = self.rng
        if self.p.lang == "py":
            out, code = docker_build_log(rng, self.repo, rng.random() < 0.3)
            call = terminal(f"docker build -t {self.p.name}:dev .", out, code)
        else:
            out, code = tsc_output(rng, self.repo)
            call = terminal("npm run build", out, code)
        self.t.step(plan, self.slots(), [call], ("generic", {}))

    def act_coverage(self, plan: str = "coverage") -> None:
        out = coverage_table(self.rng, self.repo)
        self.t.step(
            plan,
            self.slots(),
            [terminal(f"python -m pytest -q --cov={self.p.pkg} --cov-report=term-missing", out)],
            ("generic", {}),
        )

    def explore_actions(self) -> list[tuple[float, object]]:
        acts = [
            (4, self.act_read),
            (2, self.act_read_many),
            (2, self.act_grep),
            (1, self.act_git_log),
            (1, self.act_git_show),
            (1, self.act_config, True),
            (1, self.act_deps, True),
            (1, self.act_lint, True),
            (0.5, self.act_build, True),
        ]
        if self.p.lang == "py":
            acts += [(1, self.act_repro, True), (0.5, self.act_coverage, True)]
        return acts

    def fill_middle(self) -> None:
        self.fill(self.explore_actions(), {"func": self.func, "module": self.module})

    # -- edits and closing ---------------------------------------------------

    def apply_patch(self, bug: Bug, plan: str = "patch") -> None:
        lines = self.repo.source(bug.path)
        diff = unified_diff(bug.path, lines, bug.line_idx, bug.new, self.rng)
        call = Call(
            "patch",
            {"path": bug.path, "old_string": bug.old, "new_string": bug.new},
            ({"success": True, "path": bug.path, "replacements": 1, "diff": diff}),
        )
        self.t.step(plan, self.slots(path=bug.path, func=bug.func), [call], ("generic", {}))

    def diffstat(self) -> None:
        rng = self.rng
        paths = list(dict.fromkeys(p for p, _ in self.changes)) or [self.path]
        counts = [(rng.randint(1, 30), rng.randint(0, 8)) for _ in paths]
        out = [f" {p:<44} | {a + d:>3} {'+' * min(a, 30)}{'-' * d}" for p, (a, d) in zip(paths, counts)]
        out.append(
            f" {len(paths)} file{'s' if len(paths) > 1 else ''} changed, {sum(a for a, _ in counts)} insertions(+), "
            f"{sum(d for _, d in counts)} deletions(-)"
        )
        self.t.step("diffstat", self.slots(), [terminal("git diff --stat", "\n".join(out))], ("generic", {}))

    def closing(self, final_text: str | None = None) -> None:
        """Full suite, diff stat and the final answer (all small, so the tail stays cheap)."""
        self.tests("full_suite", None, [], None, n_files=3 if self.spec.special == "short" else len(self.p.modules) + 2)
        self.diffstat()
        self.t.final(final_text or self.final_text())

    def final_text(self) -> str:
        lang, rng = self.lang, self.rng
        bug = self.bug
        notes = rng.sample(FOLLOWUP_NOTES["coding"][lang], 2)
        if self.spec.category == "dependency_upgrade" and bug:
            cause = (
                f"The new major version of `{self.slots()['dep']}` changed a default that `{bug.func}` in `{bug.path}` relied on: "
                f"with the upgraded package, line {bug.line_idx + 1} raised `{bug.kind}: {bug.message}` on partial input."
            )
            return final_answer(lang, cause, self.changes, self.checks, notes)
        if bug and lang in BUG_CAUSE:
            cause = BUG_CAUSE[lang].format(
                func=bug.func,
                path=bug.path,
                noun=rng.choice(self.p.nouns),
                error=f"{bug.kind}: {bug.message}",
                line=bug.line_idx + 1,
            )
            return final_answer(lang, cause, self.changes, self.checks, notes)
        return final_answer(lang, self.summary_cause(), self.changes, self.checks, notes, cause_title="### Context")

    def summary_cause(self) -> str:
        return {
            "feature": f"`{self.func}` had no way to express the requested behaviour; the new option is opt-in and defaults to the old behaviour.",
            "refactor": f"`{self.func}` mixed validation, I/O and transformation in one long body, which made the edge cases hard to test.",
            "config_migration": "The old configuration relied on deprecated tooling; the new files express the same settings in the current format.",
            "dependency_upgrade": f"The new major version of `{self.slots()['dep']}` changed a keyword argument and a default that our code relied on.",
        }.get(self.spec.category, "See the changes below.")

    # -- categories ----------------------------------------------------------

    def bugfix(self) -> None:
        rng = self.rng
        self.bug = bug = plant_bug(rng, self.repo, self.module)
        self.func = bug.func
        test_path = self.repo.test_path(self.module)
        test_name = rng.choice(self.test_names(self.module, bug.func))
        lang = self.lang if self.lang in TASKS["bugfix"] else "en"
        self.t.human(
            rng.choice(TASKS["bugfix"][lang]).format(
                repo=self.p.name,
                root=self.repo.root,
                org=self.p.org,
                module=self.path,
                test=f"{test_path}::{test_name}" if self.p.lang == "py" else test_name,
                error=f"{bug.kind}: {bug.message}",
            )
        )
        self.tests("plan_tests", test_path, [(test_path, test_name)], bug)
        self.fill_middle()
        self.apply_patch(bug)
        self.changes.append((bug.path, BUG_CHANGE.get(self.lang, BUG_CHANGE["en"]).format(func=bug.func)))
        self.tests("rerun", test_path, [], None)
        if self.spec.special == "human_after_middle":
            return self.closing_with_user_request()
        if self.spec.special == "huge_tail":
            return self.closing_with_big_read()
        self.closing()

    def feature(self) -> None:
        rng = self.rng
        title, req1, req2 = rng.choice(FEATURES)
        noun = rng.choice(self.p.nouns)
        feature = title.format(func=self.func, noun=noun)
        self.t.human(
            rng.choice(TASKS["feature"]["en"]).format(
                repo=self.p.name, root=self.repo.root, org=self.p.org, feature=feature, req1=req1, req2=req2
            )
        )
        self.t.step(
            "plan_explore",
            self.slots(),
            [terminal("tree -L 2 -I node_modules", tree_output(rng, self.repo))],
            ("generic", {}),
        )
        self.fill_middle()
        self.implement(f"add {feature.split(' to ')[0].split(' for ')[0]}")
        if self.spec.special == "huge_tail":
            return self.closing_with_big_read()
        self.closing()

    def implement(self, desc: str) -> None:
        """Add a helper next to the focus function, add a test file, run it (sometimes failing first)."""
        rng = self.rng
        lines = self.repo.source(self.path)
        idx = self.repo.def_line(self.path, self.func)
        helper = (
            self.repo.gen.function(self.repo.gen.func_name(), [self.func], ["LIMIT"])
            if self.p.lang == "py"
            else self.repo.gen.function(self.repo.gen.func_name(), [self.func])
        )
        new = "\n".join(helper + ["", ""] + [lines[idx]])
        self.apply_patch(Bug(self.path, self.func, idx, lines[idx], new, "", ""))
        self.changes.append((self.path, desc))
        test_path = (
            self.repo.test_path(self.module).replace("test_", "test_new_")
            if self.p.lang == "py"
            else self.repo.test_path(self.module).replace(".test.", ".feature.test.")
        )
        content = "\n".join(self.repo.gen.test_module(self.module, [self.func]))
        self.t.step(
            "write",
            self.slots(path=test_path),
            [
                Call(
                    "write_file",
                    {"path": test_path, "content": content},
                    ({"success": True, "path": test_path, "bytes_written": len(content.encode())}),
                )
            ],
        )
        self.changes.append((test_path, "tests for the new behaviour"))
        if rng.random() < 0.5 and self.spec.special != "short":
            name = rng.choice(self.test_names(self.module, self.func))
            bug = plant_bug(rng, self.repo, self.module)
            self.tests("rerun", test_path, [(test_path, name)], bug)
            self.apply_patch(bug)
        self.tests("rerun", test_path, [], None)

    def refactor(self) -> None:
        rng = self.rng
        if self.spec.special == "huge_head":
            self.path = f"{self.p.pkg}/legacy_{self.module}.py"
            big = []
            while est_tokens(json.dumps(numbered(big))) < 5000:
                big += self.repo.gen.module(rng.choice(self.p.modules)) + ["", ""]
            self.repo.files[self.path] = big
            self.func = rng.choice(self.repo.functions(self.path))
        self.t.human(
            rng.choice(TASKS["refactor"]["en"]).format(
                repo=self.p.name, root=self.repo.root, path=self.path, func=self.func, module=self.path
            )
        )
        lines = self.repo.source(self.path)
        first = (
            read_call(self.path, lines)
            if self.spec.special == "huge_head"
            else fit_lines(lines, 700, lambda n: read_call(self.path, lines, 1, n))
        )
        self.t.step("read", self.slots(), [first], ("code", {"path": self.path}))
        self.fill_middle()
        for _ in range(rng.randint(1, 2)):
            idx = self.repo.body_line(self.path, self.func)
            helper = self.repo.gen.function(f"_{self.repo.gen.func_name()}", [self.func], ["LIMIT"])
            self.apply_patch(Bug(self.path, self.func, idx, lines[idx], "\n".join(helper + ["", lines[idx]]), "", ""))
        self.changes.append((self.path, f"split `{self.func}` into focused helpers, no behaviour change"))
        self.t.step("lint", self.slots(), [terminal(f"ruff check {self.p.pkg}", "All checks passed!")], ("generic", {}))
        self.checks.append((f"ruff check {self.p.pkg}", "All checks passed!"))
        self.closing()

    def config_migration(self) -> None:
        rng = self.rng
        variant = rng.randrange(3)
        old_path, new_path, validate = MIGRATIONS[variant]
        self.t.human(TASKS["config_migration"]["en"][variant].format(repo=self.p.name))
        self.path = old_path
        old = self.repo.source(old_path)
        self.t.step("config", self.slots(path=old_path), [read_call(old_path, old)], read_obs(old_path))
        symbols = MIGRATION_SYMBOLS[variant]
        self.fill(
            [
                (2, self.act_config),
                (2, lambda plan="grep": self.act_grep(plan, rng.choice(symbols))),
                (1, self.act_git_log),
                (1, self.act_deps, True),
                (1, self.act_build, True),
                (1, self.act_read),
            ],
            {"func": self.func, "module": self.module},
        )
        content = (pyproject_toml(rng, self.p), ci_workflow(rng, self.p), compose_spec(rng, self.p))[variant]
        good, bad, error = migration_typo(content, variant, new_path)
        written = content.replace(good, bad, 1)
        self.t.step(
            "write",
            self.slots(path=new_path),
            [
                Call(
                    "write_file",
                    {"path": new_path, "content": written},
                    {"success": True, "path": new_path, "bytes_written": len(written.encode())},
                )
            ],
        )
        self.changes.append((new_path, "new configuration in the current format"))
        self.t.step("build", self.slots(), [terminal(validate, error, 1)], ("generic", {}))
        lines = written.split("\n")
        self.repo.files[new_path] = lines
        self.apply_patch(Bug(new_path, "config", lines.index(bad), bad, good, "", ""), plan="fix_typo")
        ok = (
            f"* Creating isolated environment: venv+pip...\n* Building sdist...\nSuccessfully built {self.p.name}-0.4.0.tar.gz"
            if variant == 0
            else ""
        )
        self.t.step("build", self.slots(), [terminal(validate, ok)], ("generic", {}))
        self.checks.append((validate, "passes"))
        if variant == 0:
            self.t.step("write", self.slots(path=old_path), [terminal(f"git rm -q {old_path}", "")])
            self.changes.append((old_path, "removed"))
        self.closing()

    def dependency_upgrade(self) -> None:
        rng = self.rng
        dep = self.slots()["dep"]
        self.t.human(rng.choice(TASKS["dependency_upgrade"]["en"]).format(repo=self.p.name, org=self.p.org, dep=dep))
        self.act_deps(dep=self.p.deps[0])
        self.fill_middle()
        out, code = pip_install_log(rng, self.repo, rng.random() < 0.4 and self.spec.special != "short")
        self.t.step(
            "deps", self.slots(dep=dep), [terminal(f"pip install -U '{dep}' -e '.[dev]'", out, code)], ("generic", {})
        )
        self.bug = bug = plant_bug(rng, self.repo, self.module)
        test_path = self.repo.test_path(self.module)
        self.tests(
            "rerun",
            None,
            [(test_path, rng.choice(self.test_names(self.module, bug.func)))],
            bug,
            n_files=2 if self.spec.special == "short" else 4,
        )
        if self.spec.special != "short":
            res, _ = changelog_results(rng, dep)
            self.t.step(
                "search",
                self.slots(query=f"{dep} changelog breaking changes"),
                [Call("web_search", {"query": f"{dep} major release breaking changes migration"}, res)],
                ("web", {}),
            )
        self.apply_patch(bug)
        self.changes.append((bug.path, f"adapt `{bug.func}` to the new `{dep}` API"))
        self.changes.append(("pyproject.toml", f"raise the lower bound of `{dep}`"))
        self.closing()

    def short_middle(self) -> None:
        """Seven turns only: read a file, run a test, explain. Nothing in between to summarize."""
        rng = self.rng
        self.bug = bug = plant_bug(rng, self.repo, self.module)
        test_path = self.repo.test_path(self.module)
        name = rng.choice(self.test_names(self.module, bug.func))
        self.t.human(
            f"Don't change anything yet: just explain why `{test_path}::{name}` fails in {self.p.name}. "
            f"Look at `{bug.path}` and run the test once."
        )
        lines = self.repo.source(bug.path)
        while est_tokens(json.dumps(numbered(lines))) < 2900:
            lines += ["", ""] + self.repo.gen.function(self.repo.gen.func_name(), [bug.func], ["LIMIT"])
        self.t.step(
            "read",
            self.slots(path=bug.path),
            [fit_lines(lines, 2900, lambda n: read_call(bug.path, lines, 1, n))],
            ("code", {"path": bug.path}),
        )
        out, code = pytest_run(rng, self.repo, [(test_path, name)], bug, 6)
        self.t.step(
            "plan_tests",
            self.slots(test=test_path),
            [terminal(f"python -m pytest {test_path}", out, code)],
            ("fail", {"test": name, "error": f"{bug.kind}: {bug.message}"}),
        )
        cause = BUG_CAUSE["en"].format(
            func=bug.func,
            path=bug.path,
            noun=rng.choice(self.p.nouns),
            error=f"{bug.kind}: {bug.message}",
            line=bug.line_idx + 1,
        )
        diff = unified_diff(bug.path, lines, bug.line_idx, bug.new, rng)
        intro = (
            f"`{name}` fails because of a real bug in `{bug.func}`, not because of the test. "
            f"Suggested patch (not applied):\n\n```diff\n{diff}\n```"
        )
        self.t.final(
            final_answer(
                "en",
                cause,
                [(bug.path, f"suggested fix (not applied) around line {bug.line_idx + 1}")],
                [(f"python -m pytest {test_path}", "1 failed (expected, no change made)")],
                ["Say the word and I'll apply the fix and add a regression test."],
                intro=intro,
            )
        )

    def closing_with_user_request(self) -> None:
        """Verbose full run, then a user request in the protected tail (a human turn right after the middle)."""
        self.tests("full_suite", None, [], None, n_files=len(self.p.modules) + 4, verbose=True)
        self.t.human("Looks good. Before you wrap up, please add a line under `## [Unreleased]` in CHANGELOG.md.")
        entry = f"## [Unreleased]\n\n### Fixed\n- `{self.bug.func}` no longer fails on partial {self.p.nouns[0]}s."
        self.t.step(
            "patch",
            self.slots(path="CHANGELOG.md"),
            [
                Call(
                    "patch",
                    {"path": "CHANGELOG.md", "old_string": "## [Unreleased]", "new_string": entry},
                    ({"success": True, "path": "CHANGELOG.md", "replacements": 1}),
                )
            ],
        )
        self.changes.append(("CHANGELOG.md", "entry under Unreleased"))
        self.t.final(self.final_text())

    def closing_with_big_read(self) -> None:
        """Full suite, then a read of a very large file right before the final answer."""
        rng = self.rng
        self.tests("full_suite", None, [], None, n_files=len(self.p.modules) + 2)
        path = (
            f"{self.p.pkg}/_generated_{self.module}.py"
            if self.p.lang == "py"
            else f"src/generated/{self.module}.gen.js"
        )
        big = []
        while est_tokens(json.dumps(numbered(big))) < 5000:
            big += self.repo.gen.module(rng.choice(self.p.modules)) + [""]
        self.repo.files[path] = big
        self.t.step("read", self.slots(path=path), [read_call(path, big)], ("code", {"path": path}))
        self.t.final(self.final_text())


MIGRATIONS = (
    ("setup.cfg", "pyproject.toml", "python -m build --sdist --outdir /tmp/dist ."),
    (".github/workflows/ci.yml", ".github/workflows/ci.yml", "actionlint .github/workflows/ci.yml"),
    ("docker-compose.yml", "compose.yaml", "docker compose -f compose.yaml config --quiet"),
)
MIGRATION_SYMBOLS = (
    ("setup.cfg", "flake8", "install_requires", "__version__"),
    ("python-version", "actions/setup-python", "matrix"),
    ("depends_on", "docker-compose", "DATABASE_URL"),
)


def migration_typo(content: str, variant: int, path: str) -> tuple[str, str, str]:
    """A line of `content`, a broken version of it and the validator's complaint about it."""
    lines = content.split("\n")
    if variant == 0:
        idx = max(i for i, ln in enumerate(lines) if ">=" in ln and ln.startswith('    "'))
        good = lines[idx]
        bad = good.replace(">=", "=", 1)
        dep_index = idx - lines.index("dependencies = [") - 1
        error = (
            f"configuration error: `project.dependencies[{dep_index}]` must be pep508\nDESCRIPTION:\n"
            f"    Project dependency specification according to PEP 508\n\nGIVEN VALUE:\n    {bad.strip().rstrip(',')}\n\n"
            'OFFENDING RULE: \'format\'\n\nDEFINITION:\n    {\n        "type": "string",\n        "format": "pep508"\n    }\n'
            "ERROR Backend subprocess exited when trying to invoke get_requires_for_build_sdist"
        )
        return good, bad, error
    if variant == 1:
        idx = next(i for i, ln in enumerate(lines) if "matrix.version" in ln)
        good = lines[idx]
        bad = good.replace("matrix.version", "matrix.python")
        col = bad.index("matrix.python") + 1
        return (
            good,
            bad,
            (
                f'{path}:{idx + 1}:{col}: property "python" is not defined in object type {{version: string}} [expression]\n'
                f"   |\n{idx + 1:>2} | {bad.strip()}\n   | {' ' * (col - len(bad) + len(bad.strip()) - 1)}^~~~~~~~~~~~"
            ),
        )
    idx = next(i for i, ln in enumerate(lines) if ln.strip() == "db:" and lines[i - 1].strip() == "depends_on:")
    good = lines[idx]
    return (
        good,
        good.replace("db:", "database:"),
        'service "app" depends on undefined service "database": invalid compose project',
    )


def compose_spec(rng: random.Random, p: Project) -> str:
    """docker-compose content rewritten for the Compose specification, with healthchecks."""
    return f"""services:
  app:
    build: .
    ports:
      - "{p.port}:{p.port}"
    environment:
      DATABASE_URL: postgresql://{p.pkg}:{p.pkg}@db:5432/{p.pkg}
      REDIS_URL: redis://cache:6379/0
    depends_on:
      db:
        condition: service_healthy
      cache:
        condition: service_started
    healthcheck:
      test: ["CMD", "curl", "-fsS", "http://localhost:{p.port}/healthz"]
      interval: 10s
      timeout: 3s
      retries: 5
  db:
    image: postgres:16-alpine
    environment:
      POSTGRES_PASSWORD: {p.pkg}
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U postgres"]
      interval: 5s
      retries: 10
    volumes:
      - pgdata:/var/lib/postgresql/data
  cache:
    image: redis:7.2-alpine
    command: ["redis-server", "--maxmemory", "{rng.choice((128, 256, 512))}mb", "--maxmemory-policy", "allkeys-lru"]
volumes:
  pgdata: {{}}"""


def changelog_results(rng: random.Random, dep: str) -> tuple[dict, list[str]]:
    """web_search results about a dependency's breaking changes."""
    major = rng.randint(2, 6)
    items = [
        {
            "url": f"https://github.com/{dep}/{dep}/releases/tag/v{major}.0.0",
            "title": f"Release v{major}.0.0 · {dep}/{dep}",
            "description": f"Breaking: the `timeout` keyword is now `timeout_s`; default pool size changed from 10 to {rng.choice((4, 8, 20))}; Python 3.8 support dropped.",
        },
        {
            "url": f"https://{dep}.readthedocs.io/en/stable/migration.html",
            "title": f"Migrating to {dep} {major}.x",
            "description": f"This guide lists every API change between {major - 1}.x and {major}.0, with before/after snippets and codemods.",
        },
        {
            "url": f"https://github.com/{dep}/{dep}/issues/{rng.randint(1000, 9000)}",
            "title": f"TypeError after upgrading to {major}.0: unexpected keyword argument",
            "description": "Several users hit this after upgrading; the fix is to rename the keyword or pin the previous major until callers are updated.",
        },
        {
            "url": f"https://stackoverflow.com/questions/{rng.randint(70000000, 79999999)}",
            "title": f"{dep} {major}.0 broke my tests",
            "description": "Accepted answer: the defaults changed in the new major release; pass the old value explicitly to keep the previous behaviour.",
        },
    ]
    return ({"success": True, "data": {"web": items}}), [i["url"] for i in items]


# ---------------------------------------------------------------------------
# Research runs
# ---------------------------------------------------------------------------

RESEARCH_HEADERS = {
    "en": ("## Recommendation", "### Why", "### Comparison", "### Next steps"),
    "zh": ("## 建议", "### 理由", "### 对比", "### 后续步骤"),
}
RECOMMEND = {
    "en": "Adopt **{lib}** for {domain}. It led our local benchmark ({num:,} {metric}), supports {feature} without plugins, "
    "is {license}-licensed and ships a release roughly every {weeks} weeks. **{alt}** is a reasonable fallback if we "
    "need {feature2}; I would avoid **{alt2}** because its last release is {months} months old and the open issues "
    "include several about {feature3}.",
    "zh": "建议采用 **{lib}** 作为 {domain} 方案。它在我们的本地基准测试中表现最好（{num:,} {metric}），原生支持 {feature}，"
    "许可证为 {license}，大约每 {weeks} 周发布一次新版本。如果需要 {feature2}，**{alt}** 可以作为备选；"
    "不建议使用 **{alt2}**：它的最新版本已经是 {months} 个月前发布的，而且有多个关于 {feature3} 的未解决问题。",
}
NEXT_STEPS = {
    "en": [
        "Prototype the integration behind a feature flag in one service.",
        "Re-run the benchmark on production-sized data before rollout.",
        "Add the library to the dependency review list and pin a minimum version.",
        "Schedule a follow-up review in three months.",
    ],
    "zh": [
        "先在一个服务里通过特性开关做原型集成。",
        "上线前用生产规模的数据重新跑一次基准测试。",
        "把该库加入依赖审查清单，并固定最低版本。",
    ],
}
CHAT_QUESTIONS = (
    "How does {feature} behave when a node restarts? Do we risk losing state?",
    "What would the operational overhead look like for a team of four people?",
    "How would we test this in CI without spinning up the whole stack?",
    "Is there a risk of lock-in if we lean on {feature}?",
)


class ResearchRun(Run):
    """One library-research trajectory: search, read, benchmark, write an ADR."""

    def __init__(self, rng: random.Random, spec: RowSpec, topic: Topic):
        super().__init__(rng, spec)
        self.topic = topic
        self.cwd = f"/workspace/{rng.choice(('platform-docs', 'architecture', 'eng-handbook', 'backend'))}"
        self.t = Trajectory(
            rng, spec.lang, ["web_search", "web_extract", "terminal", "read_file", "write_file"], self.cwd, "research"
        )
        self.adr = f"docs/adr/{rng.randint(3, 60):04d}-{topic.slug}.md"
        self.urls: list[str] = []
        self.winner = rng.choice(topic.libs)
        self.versions = {lib: f"{rng.randint(0, 4)}.{rng.randint(6, 20)}.{rng.randint(0, 9)}" for lib in topic.libs}

    def slots(self, **extra) -> dict:
        base = {
            "query": self.topic.domain,
            "lib": self.winner,
            "slug": self.topic.slug,
            "path": self.adr,
            "func": self.winner,
            "pkg": self.topic.domain,
        }
        base.update(extra)
        return base

    def act_search(self, plan: str = "search") -> None:
        rng, topic = self.rng, self.topic
        query = rng.choice(
            (
                f"{topic.libs[0]} vs {topic.libs[1]} {topic.domain} benchmark",
                f"{rng.choice(topic.libs)} {rng.choice(topic.features)} production experience",
                f"python {topic.domain} library comparison 2025",
                f"{rng.choice(topic.libs)} known issues memory leak",
                f"{rng.choice(topic.libs)} license change",
            )
        )
        n = int(max(3, min(10, self.room() / 85)))
        content, urls = search_results(rng, topic, query, n)
        self.urls += urls
        self.t.step(
            plan,
            self.slots(query=f'"{query}"'),
            [Call("web_search", {"query": query, "limit": n}, content)],
            ("web", {}),
        )

    def pick_urls(self, k: int) -> list[str]:
        rng = self.rng
        if len(self.urls) < k:
            _, urls = search_results(rng, self.topic, self.topic.domain, k)
            self.urls += urls
        return rng.sample(self.urls, k)

    def act_extract(self, plan: str = "extract") -> None:
        rng = self.rng
        urls = self.pick_urls(rng.choice((1, 1, 2)))
        sections = int(max(2, min(8, self.room() / (260 * len(urls)))))
        lib = next((ln for ln in self.topic.libs if ln in urls[0]), self.winner)
        self.t.step(
            plan,
            self.slots(lib=lib),
            [Call("web_extract", {"urls": urls}, extract_result(rng, self.topic, urls, sections))],
            ("web", {}),
        )

    def act_extract_parallel(self, plan: str = "extract") -> None:
        rng = self.rng
        urls = self.pick_urls(rng.choice((2, 3)))
        sections = int(max(2, min(6, self.room() / (260 * len(urls)))))
        calls = [Call("web_extract", {"urls": [u]}, extract_result(rng, self.topic, [u], sections)) for u in urls]
        self.t.step(plan, self.slots(lib=", ".join(self.topic.libs)), calls, ("web", {}))

    def act_bench(self, plan: str = "bench") -> None:
        out = bench_script_output(self.rng, self.topic, self.versions)
        self.t.step(
            plan,
            self.slots(),
            [terminal(f"python bench/{self.topic.slug}.py --rounds 5 --warmup 1", out)],
            ("generic", {}),
        )

    def act_versions(self, plan: str = "versions") -> None:
        rng = self.rng
        lib = rng.choice(self.topic.libs)
        major, minor, patch = (int(x) for x in self.versions[lib].split("."))
        versions = [f"{major}.{m}.{p}" for m in range(minor, -1, -1) for p in range(patch if m == minor else 3, -1, -1)]
        versions = versions[: rng.randint(8, 30)]
        installed = versions[min(len(versions) - 1, rng.randint(2, 6))]
        out = f"{lib} ({versions[0]})\nAvailable versions: {', '.join(versions)}\n  INSTALLED: {installed}\n  LATEST:    {versions[0]}"
        self.t.step(plan, self.slots(dep=lib), [terminal(f"pip index versions {lib}", out)], ("generic", {}))

    def fill_middle(self) -> None:
        self.fill(
            [
                (3, self.act_extract),
                (2, self.act_extract_parallel),
                (2, self.act_search),
                (1, self.act_bench, True),
                (1, self.act_versions),
            ],
            {"func": self.winner, "module": self.topic.slug},
        )

    def adr_text(self) -> str:
        rng, topic = self.rng, self.topic
        out = [
            f"# ADR: choosing {topic.question}",
            "",
            "- Status: proposed",
            f"- Date: 2025-0{rng.randint(1, 6)}-{rng.randint(10, 28)}",
            "- Deciders: platform team",
            "",
            "## Context",
            "",
            f"We need {topic.question} for {topic.context}.",
            "",
            "## Options considered",
            "",
        ]
        for lib in topic.libs:
            out += [f"### {lib}", "", paragraph(rng, topic, lib, 3), ""]
        out += [
            "## Decision",
            "",
            f"We adopt {self.winner}.",
            "",
            "## Consequences",
            "",
            paragraph(rng, topic, self.winner, 2),
        ]
        return "\n".join(out)

    def write_adr(self) -> None:
        text = self.adr_text()
        self.t.step(
            "notes",
            self.slots(),
            [
                Call(
                    "write_file",
                    {"path": self.adr, "content": text},
                    ({"success": True, "path": self.adr, "bytes_written": len(text.encode())}),
                )
            ],
        )

    def closing(self) -> None:
        rng = self.rng
        words = rng.randint(600, 1400)
        self.t.step("diffstat", self.slots(), [terminal(f"wc -w {self.adr}", f"{words} {self.adr}")], ("generic", {}))
        self.t.step("diffstat", self.slots(), [terminal("git status --short", f"?? {self.adr}")], ("generic", {}))
        self.t.final(self.answer())

    def answer(self) -> str:
        rng, topic = self.rng, self.topic
        lang = self.lang if self.lang in RECOMMEND else "en"
        others = [ln for ln in topic.libs if ln != self.winner]
        feats = rng.sample(topic.features, 3)
        head, h_why, h_cmp, h_next = RESEARCH_HEADERS[lang]
        top = rng.randint(50, 900) * 100
        rec = RECOMMEND[lang].format(
            lib=self.winner,
            domain=topic.domain,
            num=top,
            metric=topic.metric,
            feature=feats[0],
            feature2=feats[1],
            feature3=feats[2],
            license=rng.choice(("MIT", "Apache-2.0")),
            weeks=rng.choice((3, 4, 6)),
            alt=others[0],
            alt2=others[1],
            months=rng.randint(9, 30),
        )
        if lang == "zh":
            why = [t.format(**prose_slots(rng, topic, self.winner)) for t in rng.sample(PROSE_ZH, 3)]
        else:
            why = [paragraph(rng, topic, self.winner, 1) for _ in range(3)]
        return "\n".join(
            [head, "", rec, "", h_why, ""]
            + [f"- {w}" for w in why]
            + ["", h_cmp, "", bench_table(rng, topic, self.winner, top), "", h_next, ""]
            + [f"- {s}" for s in rng.sample(NEXT_STEPS[lang], 3)]
            + ["", f"ADR: `{self.adr}`"]
        )

    def build(self) -> None:
        rng, topic = self.rng, self.topic
        if self.spec.special == "late_tool":
            return self.build_late_tool()
        lang = self.lang if self.lang in TASKS["library_research"] else "en"
        self.t.human(
            rng.choice(TASKS["library_research"][lang]).format(
                question=topic.question,
                context=topic.context,
                lib0=topic.libs[0],
                lib1=topic.libs[1],
                lib2=topic.libs[2],
                features=", ".join(topic.features[:3]),
                feature=topic.features[0],
                adr=self.adr,
                domain=topic.domain,
            )
        )
        self.act_search_first()
        self.fill_middle()
        self.write_adr()
        if self.spec.special == "huge_tail":
            return self.closing_with_big_extract()
        self.closing()

    def act_search_first(self) -> None:
        rng, topic = self.rng, self.topic
        query = f"{topic.libs[0]} {topic.libs[1]} {topic.libs[2]} comparison"
        content, urls = search_results(rng, topic, query, rng.randint(4, 6))
        self.urls += urls
        self.t.step(
            "search",
            self.slots(query=f'"{query}"'),
            [Call("web_search", {"query": query, "limit": 6}, content)],
            ("web", {}),
        )

    def closing_with_big_extract(self) -> None:
        """Re-read three long pages at the very end, then a long answer: the tail alone is over budget."""
        rng = self.rng
        urls = self.pick_urls(3)
        calls = [Call("web_extract", {"urls": [u]}, extract_result(rng, self.topic, [u], 11)) for u in urls]
        self.t.step("extract", self.slots(lib=", ".join(self.topic.libs)), calls, ("web", {}))
        self.t.final(self.answer() + "\n\n" + "\n\n".join(paragraph(rng, self.topic, ln, 4) for ln in self.topic.libs))

    def build_late_tool(self) -> None:
        """A long design discussion without tools; the first tool call comes in the second half."""
        rng, topic = self.rng, self.topic
        self.t.human(
            f"Before we write any code, let's think this through: {topic.question} for {topic.context}. "
            f"What are the main trade-offs between {', '.join(topic.libs)}?"
        )
        for q in rng.sample(CHAT_QUESTIONS, 4):
            self.chat_answer()
            self.t.human(q.format(feature=rng.choice(topic.features)))
        self.chat_answer()
        self.t.human(
            f"OK, that's helpful. Now please check current releases and benchmark claims, and write the ADR to `{self.adr}`."
        )
        self.act_search_first()
        self.act_extract()
        self.act_bench()
        self.write_adr()
        self.closing()

    def chat_answer(self) -> None:
        rng, topic = self.rng, self.topic
        lib = rng.choice(topic.libs)
        bullets = [f"- **{ln}**: {paragraph(rng, topic, ln, 1)}" for ln in rng.sample(topic.libs, 2)]
        text = "\n".join(
            [paragraph(rng, topic, lib, 2), ""]
            + bullets
            + [
                "",
                rng.choice(
                    (
                        "Want me to dig into any of these before we decide?",
                        "I'd verify these claims before committing to anything.",
                        "The honest answer is that it depends on our traffic shape.",
                    )
                ),
            ]
        )
        self.t.chat(
            text,
            rng.choice(
                (
                    "The user wants a discussion first, no tools yet. I'll lay out the trade-offs from what I know.",
                    "This is a design question; I can answer from general knowledge and flag what needs verification.",
                    "No need for tools here yet; a concise comparison is what's asked.",
                )
            ),
        )


# ---------------------------------------------------------------------------
# Operations runs
# ---------------------------------------------------------------------------

ROLLOUT_OK = {
    "en": "successfully rolled out",
    "zh": "发布成功",
    "es": "despliegue completado",
    "fr": "déploiement terminé",
}
NO_ERRORS = {
    "en": "0 matching errors in the last 10 minutes",
    "zh": "最近 10 分钟内没有匹配的错误",
    "es": "0 errores en los últimos 10 minutos",
    "fr": "0 erreur sur les 10 dernières minutes",
}


def incident_manifest(rng: random.Random, p: Project, inc: Incident) -> tuple[str, list[str], int]:
    """The config file holding the incident's faulty setting, and the index of that line."""
    if inc.key == "disk":
        lines = [
            f"/var/log/{p.name}/*.log {{",
            "    daily",
            "    missingok",
            f"    rotate {inc.fix_old}",
            "    maxsize 500M",
            "    compress",
            "    delaycompress",
            "    notifempty",
            f"    create 0640 {p.pkg} adm",
            "    sharedscripts",
            "    postrotate",
            f"        systemctl kill -s HUP {p.name}.service",
            "    endscript",
            "}",
        ]
        return f"deploy/logrotate/{p.name}.conf", lines, 3
    if inc.key == "migration":
        noun = p.nouns[0]
        lines = [
            '"""add region to ' + noun + "s",
            "",
            f"Revision ID: 0047_add_{noun}_region",
            "Revises: 0046_backfill_currency",
            '"""',
            "import sqlalchemy as sa",
            "from alembic import op",
            "",
            f'revision = "0047_add_{noun}_region"',
            'down_revision = "0046_backfill_currency"',
            "",
            "",
            "def upgrade() -> None:",
            "    op.add_column(",
            f'        "{noun}s",',
            f'        sa.Column("{noun}_region", sa.String(32), nullable=False, server_default=None),',
            "    )",
            f'    op.create_index("ix_{noun}s_region", "{noun}s", ["{noun}_region"])',
            "",
            "",
            "def downgrade() -> None:",
            f'    op.drop_index("ix_{noun}s_region", table_name="{noun}s")',
            f'    op.drop_column("{noun}s", "{noun}_region")',
        ]
        return f"migrations/versions/0047_add_{noun}_region.py", lines, 15
    lines = k8s_deployment(rng, p).split("\n")
    if inc.key == "oom":
        idx = next(i for i, ln in enumerate(lines) if ln.strip().startswith("memory:") and "limits:" in lines[i - 1])
        lines[idx] = lines[idx].split(":")[0] + f": {inc.fix_old}"
        return f"deploy/k8s/{p.name}.yaml", lines, idx
    env = next(i for i, ln in enumerate(lines) if ln.strip() == "env:")
    if inc.key == "db_pool":
        idx = next(i for i, ln in enumerate(lines) if "DB_POOL_SIZE" in ln) + 1
        lines[idx] = f'              value: "{inc.fix_old}"'
        return f"deploy/k8s/{p.name}.yaml", lines, idx
    lines[env + 1 : env + 1] = [f"            - name: {inc.fix_key}", f'              value: "{inc.fix_old}"']
    return f"deploy/k8s/{p.name}.yaml", lines, env + 2


class OpsRun(Run):
    """One log-investigation or incident trajectory against a fictional Kubernetes service."""

    def __init__(self, rng: random.Random, spec: RowSpec, project: Project):
        super().__init__(rng, spec)
        self.p = project
        self.svc = project.name
        self.ns = rng.choice(("prod", "payments", "platform", "edge"))
        self.inc = rng.choice(INCIDENTS)
        self.t = Trajectory(
            rng,
            spec.lang,
            ["terminal", "read_file", "patch", "search_files", "web_search"],
            f"/workspace/{project.name}-ops",
            "ops",
        )
        self.manifest, self.lines, self.idx = incident_manifest(rng, project, self.inc)
        self.day = rng.randint(3, 27)
        self.start = rng.randint(1, 20) * 3600 + rng.randint(0, 3599)
        self.pattern = re.sub(r"\{[a-z]+\}", ".*", self.inc.errors[0].split(":")[0])[:48]

    def slots(self, **extra) -> dict:
        base = {
            "svc": self.svc,
            "pattern": f"'{self.pattern}'",
            "key": self.inc.fix_key,
            "path": self.manifest,
            "func": self.svc,
            "pkg": self.svc,
        }
        base.update(extra)
        return base

    def error_obs(self) -> tuple[str, dict]:
        return (
            "logs",
            {
                "error": self.inc.errors[0]
                .split(":")[0]
                .format(pool=5, timeout=30, pid=1, n=1, mb=1, id=1, noun="x", svc=self.svc, ms=1, rid="0")
            },
        )

    def logs_call(self, n_lines: int) -> Call:
        out = service_log(self.rng, self.svc, self.p.nouns, self.inc, n_lines, self.day, self.start)
        self.start += n_lines * 0.7
        return terminal(f"kubectl -n {self.ns} logs deploy/{self.svc} --since=30m --tail={n_lines}", out)

    def act_logs(self, plan: str = "logs") -> None:
        n = int(max(15, min(160, self.room() / 32)))
        self.t.step(plan, self.slots(), [self.logs_call(n)], self.error_obs())

    def act_grep_logs(self, plan: str = "grep_logs") -> None:
        rng = self.rng
        n = int(max(8, min(60, self.room() / 40)))
        sample = service_log(rng, self.svc, self.p.nouns, self.inc, n * 3, self.day, self.start).split("\n")
        errors = [ln for ln in sample if " ERROR " in ln][:n]
        out = f"{rng.randint(200, 9000)}\n---\n" + "\n".join(errors)
        cmd = f"kubectl -n {self.ns} logs deploy/{self.svc} --since=2h | grep -c ERROR; kubectl -n {self.ns} logs deploy/{self.svc} --since=2h | grep ERROR | tail -{n}"
        self.t.step(plan, self.slots(), [terminal(cmd, out)], self.error_obs())

    def act_describe(self, plan: str = "describe") -> None:
        out = kubectl_describe(self.rng, self.svc, self.inc, self.ns, self.p)
        self.t.step(
            plan,
            self.slots(),
            [terminal(f"kubectl -n {self.ns} describe pod -l app.kubernetes.io/name={self.svc} | head -60", out)],
        )

    def act_health(self, plan: str = "health") -> None:
        self.t.step(
            plan,
            self.slots(),
            [
                terminal(
                    f"kubectl -n {self.ns} exec deploy/{self.svc} -- curl -s localhost:{self.p.port}/healthz",
                    health_json(self.rng, self.svc, self.inc),
                )
            ],
        )

    def act_metrics(self, plan: str = "metrics") -> None:
        q = f'sum(rate(http_requests_total{{service="{self.svc}",code=~"5.."}}[5m]))'
        self.t.step(
            plan,
            self.slots(),
            [
                terminal(
                    f"curl -s 'http://prometheus.monitoring:9090/api/v1/query_range?query={q}&step=60'",
                    metrics_json(self.rng, self.svc, "http_requests_total"),
                )
            ],
        )

    def act_disk(self, plan: str = "disk") -> None:
        self.t.step(
            plan,
            self.slots(),
            [
                terminal(
                    f"kubectl -n {self.ns} exec deploy/{self.svc} -- sh -c 'df -h; du -sh /var/log/{self.svc}/* | sort -h | tail'",
                    disk_usage(self.rng, self.svc, self.inc.key == "disk"),
                )
            ],
        )

    def act_ports(self, plan: str = "ports") -> None:
        self.t.step(
            plan,
            self.slots(),
            [terminal(f"kubectl -n {self.ns} exec deploy/{self.svc} -- ss -ltnp", listening_ports(self.rng, self.p))],
        )

    def act_manifest(self, plan: str = "config") -> None:
        self.t.step(plan, self.slots(), [read_call(self.manifest, self.lines)], ("config", {"path": self.manifest}))

    def act_events(self, plan: str = "describe") -> None:
        rng = self.rng
        rows = [f"{'LAST SEEN':<10} {'TYPE':<8} {'REASON':<22} {'OBJECT':<44} MESSAGE"]
        for _ in range(rng.randint(6, 16)):
            kind, reason, msg = rng.choice(
                (
                    ("Normal", "Scheduled", "Successfully assigned pod to node"),
                    ("Normal", "Pulled", "Container image already present on machine"),
                    ("Warning", "Unhealthy", self.inc.event.split("  ")[-1]),
                    (
                        "Normal",
                        "ScalingReplicaSet",
                        f"Scaled up replica set {self.svc}-{rand_str(rng, 'bcdfghjkmnpqrstvwxz2456789', 10)} to {rng.randint(2, 6)}",
                    ),
                    ("Warning", "BackOff", "Back-off restarting failed container"),
                )
            )
            obj = f"pod/{self.svc}-{rand_str(rng, 'bcdfghjkmnpqrstvwxz2456789', 10)}-{rand_str(rng, 'bcdfghjkmnpqrstvwxz2456789', 5)}"
            rows.append(f"{str(rng.randint(1, 59)) + 'm':<10} {kind:<8} {reason:<22} {obj:<44} {msg}")
        self.t.step(
            plan,
            self.slots(),
            [terminal(f"kubectl -n {self.ns} get events --sort-by=.lastTimestamp | tail -20", "\n".join(rows))],
        )

    def act_web(self, plan: str = "search") -> None:
        rng = self.rng
        err = self.inc.errors[0].split(":")[0].split("{")[0].strip()
        items = [
            {"url": f"https://{site}", "title": title, "description": desc}
            for site, title, desc in (
                (
                    f"stackoverflow.com/questions/{rng.randint(40000000, 79999999)}",
                    f"{err} under load",
                    "The usual cause is a limit that is smaller than the concurrency of the process; raise the limit or lower the concurrency.",
                ),
                (
                    "kubernetes.io/docs/tasks/debug/debug-application/debug-pods/",
                    "Debug Pods | Kubernetes",
                    "Use kubectl describe and kubectl logs --previous to inspect restarts, probes and events.",
                ),
                (
                    f"github.com/{self.p.org}/{self.svc}/issues/{rng.randint(100, 900)}",
                    f"{err} after upgrade",
                    "We saw this after the deploy that changed worker counts; mitigated by adjusting the config.",
                ),
                (
                    "sre.google/sre-book/effective-troubleshooting/",
                    "Effective Troubleshooting",
                    "Start from the symptoms, form hypotheses, and test them against the telemetry you have.",
                ),
            )
        ]
        self.t.step(
            plan,
            self.slots(query=f'"{err}"'),
            [Call("web_search", {"query": err}, ({"success": True, "data": {"web": items}}))],
            ("web", {}),
        )

    def fill_middle(self) -> None:
        self.fill(
            [
                (3, self.act_logs),
                (2, self.act_grep_logs),
                (1, self.act_describe, True),
                (1, self.act_health, True),
                (1, self.act_metrics, True),
                (0.7, self.act_disk, True),
                (0.5, self.act_ports, True),
                (1, self.act_manifest, True),
                (0.7, self.act_web),
                (0.6, self.act_events, True),
            ],
            {"func": self.svc, "module": self.svc},
        )

    def build(self) -> None:
        rng, inc = self.rng, self.inc
        lang = self.lang if self.lang in TASKS[self.spec.category] else "en"
        symptom = SYMPTOMS[lang][inc.key] if lang in SYMPTOMS else inc.symptom
        hh, mm = divmod(self.start // 60 % 1440, 60)
        self.t.human(
            rng.choice(TASKS[self.spec.category][lang]).format(
                svc=self.svc, ns=self.ns, symptom=symptom, hh=f"{hh:02d}", mm=f"{mm:02d}"
            )
        )
        if self.spec.special == "huge_head":
            self.t.step("logs", self.slots(), [self.logs_call(180)], self.error_obs())
        else:
            self.t.step(
                "pods",
                self.slots(),
                [
                    terminal(
                        f"kubectl -n {self.ns} get pods -o wide | head -20", kubectl_pods(rng, self.svc, inc, self.ns)
                    )
                ],
            )
        self.fill_middle()
        new = self.lines[self.idx].replace(inc.fix_old, inc.fix_new)
        diff = unified_diff(self.manifest, self.lines, self.idx, new, rng)
        self.t.step(
            "fix_config",
            self.slots(),
            [
                Call(
                    "patch",
                    {"path": self.manifest, "old_string": self.lines[self.idx], "new_string": new},
                    ({"success": True, "path": self.manifest, "replacements": 1, "diff": diff}),
                )
            ],
        )
        apply = (
            f"kubectl -n {self.ns} apply -f {self.manifest} && kubectl -n {self.ns} rollout status deploy/{self.svc} --timeout=180s"
            if self.manifest.endswith(".yaml")
            else f"make -C deploy apply SERVICE={self.svc} && kubectl -n {self.ns} rollout restart deploy/{self.svc}"
        )
        rollout = "\n".join(
            [f"deployment.apps/{self.svc} configured"]
            + [
                f'Waiting for deployment "{self.svc}" rollout to finish: {i} of {n} updated replicas are available...'
                for n in (rng.randint(3, 6),)
                for i in range(1, n)
            ]
            + [f'deployment "{self.svc}" successfully rolled out']
        )
        self.t.step("restart", self.slots(), [terminal(apply, rollout)])
        self.closing(apply)

    def closing(self, apply: str) -> None:
        rng = self.rng
        healthy = replace_status(kubectl_pods(rng, self.svc, self.inc, self.ns))
        self.t.step(
            "verify",
            self.slots(),
            [terminal(f"kubectl -n {self.ns} get pods -l app.kubernetes.io/name={self.svc}", healthy)],
        )
        grep = f"kubectl -n {self.ns} logs deploy/{self.svc} --since=10m | grep -c '{self.pattern}'"
        self.t.step("verify", self.slots(), [terminal(grep, "0", 1)], ("clean", {}))
        lang = self.lang
        cause = CAUSES[lang][self.inc.key] if lang in CAUSES else self.inc.cause
        cause = cause[0].upper() + cause[1:] + ("。" if lang == "zh" else ".")
        changes = [(self.manifest, f"`{self.inc.fix_key}`: {self.inc.fix_old} → {self.inc.fix_new}")]
        checks = [(apply.split(" && ")[-1], ROLLOUT_OK[lang]), (grep, NO_ERRORS[lang])]
        self.t.final(final_answer(lang, cause, changes, checks, rng.sample(FOLLOWUP_NOTES["ops"][lang], 2)))


def replace_status(table: str) -> str:
    """Turn a pod table into the healthy version seen after the fix."""
    out = []
    for line in table.split("\n"):
        line = re.sub(r"CrashLoopBackOff\s*", f"{'Running':<20}", line).replace("0/1 ", "1/1 ")
        out.append(re.sub(r"\d+ \(\d+m ago\)\s*", f"{'0':<16}", line))
    return "\n".join(out)


# ---------------------------------------------------------------------------
# The dataset plan and row records
# ---------------------------------------------------------------------------

# (category, language, special, count)
CODING_PLAN = (
    ("bugfix", "en", "", 10),
    ("bugfix", "zh", "", 1),
    ("bugfix", "fr", "", 1),
    ("bugfix", "en", "short", 1),
    ("bugfix", "en", "short_middle", 1),
    ("bugfix", "en", "human_after_middle", 1),
    ("feature", "en", "", 7),
    ("feature", "en", "short", 1),
    ("feature", "en", "huge_tail", 1),
    ("refactor", "en", "", 4),
    ("refactor", "en", "huge_head", 1),
    ("config_migration", "en", "", 6),
    ("config_migration", "en", "short", 1),
    ("dependency_upgrade", "en", "", 5),
    ("dependency_upgrade", "en", "short", 1),
)
RESEARCH_PLAN = (
    ("library_research", "en", "", 4),
    ("library_research", "zh", "", 1),
    ("library_research", "en", "short", 1),
    ("library_research", "en", "huge_tail", 1),
    ("library_research", "en", "late_tool", 1),
    ("log_investigation", "en", "", 3),
    ("log_investigation", "zh", "", 1),
    ("log_investigation", "en", "short", 1),
    ("log_investigation", "en", "huge_head", 1),
    ("incident_response", "en", "", 4),
    ("incident_response", "es", "", 1),
    ("incident_response", "en", "short", 1),
)
NORMAL_RANGE = (5700, 22500)
FIXED_TARGETS = {
    "short_middle": 4600,
    "late_tool": 7000,
    "human_after_middle": 8000,
    "huge_head": 11000,
    "huge_tail": 12500,
}
MODELS = ("hermes-4-70b", "hermes-4-405b", "hermes-3-llama-3.1-70b", "hermes-4-14b")


def build_plan(seed: int) -> list[RowSpec]:
    """Every row's spec; normal rows get geometrically spread size targets in a seeded order."""
    rng = random.Random(seed)
    entries = []
    for family, plan in (("coding", CODING_PLAN), ("research", RESEARCH_PLAN)):
        rows = [(family, cat, lang, special) for cat, lang, special, n in plan for _ in range(n)]
        rng.shuffle(rows)
        entries += rows
    normal = [i for i, e in enumerate(entries) if e[3] == ""]
    lo, hi = NORMAL_RANGE
    targets = [round(lo * (hi / lo) ** (k / (len(normal) - 1))) for k in range(len(normal))]
    rng.shuffle(targets)
    by_index = dict(zip(normal, targets))
    specs = []
    for i, (family, cat, lang, special) in enumerate(entries):
        if special == "short":
            target = rng.randint(1800, 3200)
        else:
            target = by_index.get(i) or FIXED_TARGETS[special]
        specs.append(RowSpec(i, family, cat, lang, target, special))
    return specs


def build_row(spec: RowSpec, seed: int) -> dict:
    """Generate one row from its spec with its own seeded RNG."""
    rng = random.Random(seed * 1000 + spec.index)
    if spec.family == "coding":
        py_only = (
            spec.category in ("refactor", "config_migration", "dependency_upgrade")
            or spec.lang != "en"
            or spec.special in ("short_middle", "human_after_middle")
        )
        run = CodingRun(rng, spec, rng.choice(PY_PROJECTS if py_only else PROJECTS))
        getattr(run, "short_middle" if spec.special == "short_middle" else spec.category)()
        env_name = f"{run.p.org}/{run.p.name}"
    elif spec.category == "library_research":
        run = ResearchRun(rng, spec, rng.choice(TOPICS))
        run.build()
        env_name = run.topic.slug
    else:
        run = OpsRun(rng, spec, rng.choice(PROJECTS))
        run.build()
        env_name = f"{run.ns}/{run.svc}"
    return row_record(rng, spec, run.t, env_name)


def row_record(rng: random.Random, spec: RowSpec, t: Trajectory, env_name: str) -> dict:
    """The JSONL row: conversations plus metadata fields of varied types."""
    completed = spec.special != "huge_head" and rng.random() < 0.9
    wall = round(rng.uniform(40, 1800), 1)
    return {
        "id": f"hermes-{spec.family}-{spec.index:03d}-{rand_str(rng, HEX, 8)}",
        "conversations": t.turns,
        "source": "trajcomp-demo/hermes-agent-synthetic",
        "model": rng.choice(MODELS),
        "task_category": spec.category,
        "language": spec.lang,
        "num_tool_calls": t.n_calls,
        "num_turns": len(t.turns),
        "reward": round(rng.uniform(0.6, 1.0) if completed else rng.uniform(0.0, 0.35), 3),
        "completed": completed,
        "toolsets": list(t.tools),
        "parent_id": None if rng.random() < 0.7 else f"hermes-{spec.family}-{rand_str(rng, HEX, 8)}",
        "metadata": {
            "env": {
                "os": "ubuntu-22.04",
                "python": "3.11.9",
                "cwd": t.cwd,
                "target": env_name,
                "commit": sha(rng, 12),
                "network": rng.choice(("restricted", "allowlist")),
            },
            "timing": {"wall_clock_s": wall, "tool_time_s": round(wall * rng.uniform(0.2, 0.7), 1)},
            "edge_case": spec.special or None,
            "generator": {"seed_index": spec.index, "target_tokens": spec.target},
        },
    }


def generate(seed: int) -> dict[str, list[dict]]:
    """All rows, grouped by output file name."""
    rows: dict[str, list[dict]] = {CODING_FILE: [], RESEARCH_FILE: []}
    for spec in build_plan(seed):
        rows[CODING_FILE if spec.family == "coding" else RESEARCH_FILE].append(build_row(spec, seed))
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """One JSON object per line, UTF-8, non-ASCII kept as is."""
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="RNG seed (default %(default)s)")
    parser.add_argument("--out-dir", default=DEFAULT_OUT_DIR, help="output folder (default %(default)s)")
    parser.add_argument("--report", action="store_true", help="print per-row token lengths with the demo tokenizer")
    parser.add_argument(
        "--tokenizer", default=None, help="tokenizer folder for --report (default OUT_DIR/demo_tokenizer)"
    )
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rows in generate(args.seed).items():
        path = out / name
        write_jsonl(path, rows)
        paths.append(path)
        print(f"wrote {len(rows)} rows to {path} ({path.stat().st_size / 1e6:.2f} MB)")
    if args.report:
        tokenizer = Path(args.tokenizer or out / "demo_tokenizer")
        if not (tokenizer / "tokenizer.json").exists():
            print(f"no tokenizer at {tokenizer}: run scripts/make_demo_tokenizer.py first", file=sys.stderr)
            return 1
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from sample_lengths import report

        report([str(p) for p in paths], str(tokenizer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
