"""The docs checker: what README.md and docs/*.md say, held against the files, the CLI and the config.

Each check is a function of a `Docs` that yields `Problem`s; `CHECKS` lists them, so a new promise is one
more function. docs/pending/ is not read: its pages are other branches' notes, merged into the pages later.

Conventions the pages keep so that they can be checked:
- an options table's header opens with `` `trajcomp CMD` option `` (`trajcomp` alone for the root's), and
  its first column names each option in backticks (`-o, --output PATH`, `--base-url URL`, ...);
- a config key is written in backticks with its section, `section.key` (`compression.prune: true` too).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import yaml

# Mappings whose keys are the user's own (role names), not config keys: a key of the config stops there.
FREE_MAPPINGS = frozenset({"input.roles", "compression.chat_roles"})
# Backticked `section.x` spans that are no config key: file names, the report's own sections' fields, and
# a key trajcomp removed (the pages say it is refused). Add here only what is deliberately not a key.
NOT_KEYS = frozenset({
    "tokenizer.json", "metrics.py", "tokenizer.encode", "tokenizer.apply_chat_template",
    "processing.workers", "processing.tokenizer_chars", "processing.skipped_files", "summarization.checks_seconds",
    "summarization.max_turn_chars",
})

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_REF = re.compile(r"""\b(?:href|src|srcset)\s*=\s*["']([^"']+)["']""")
HTML_ANCHOR = re.compile(r"""<a\s+(?:id|name)\s*=\s*["']([^"']+)["']""")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FLAG = re.compile(r"(?<![\w./-])(--?[A-Za-z][\w-]*)")
OPTIONS_HEADER = re.compile(r"^\|\s*`trajcomp((?: [\w-]+)*)` option\s*\|")


@dataclass(frozen=True)
class Problem:
    page: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.what}"


@dataclass
class Docs:
    """What the checks read: the pages (path relative to root -> text), the CLI's options by command
    ("" for the root, "batch export" for a subcommand), the config keys that exist and those
    configs/default.yaml lists."""
    root: Path
    pages: dict[str, str]
    commands: dict[str, set[str]]
    known_keys: set[str]
    default_keys: list[str]
    sections: set[str] = field(default_factory=set)
    code_keys: set[str] = field(default_factory=set)  # the config code's own keys (its layout)


def page_paths(root: Path) -> list[Path]:
    """README.md and docs/*.md; docs/pending/ (a folder) is not matched."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield number, line


def code_blocks(text: str, lang: str) -> Iterator[tuple[int, str]]:
    """(line of the opening fence, body) of each fenced block in `lang`."""
    for match in re.finditer(rf"^```{lang}\n(.*?)^```", text, re.S | re.M):
        yield text.count("\n", 0, match.start()) + 1, match.group(1)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lowercased, punctuation but - and _ removed,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found, seen = set(), {}
    for _, line in prose_lines(text):
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def check_links(docs: Docs) -> Iterator[Problem]:
    """Every relative link and image resolves to a file, and every #anchor to a heading of its page."""
    headings: dict[Path, set[str]] = {}  # each linked page's anchors, found once
    for name, text in docs.pages.items():
        here = (docs.root / name).parent
        for number, line in prose_lines(text):
            refs = LINK.findall(line) + [ref for refs in HTML_REF.findall(line) for ref in refs.split(",")]
            for ref in (r.strip().split(" ")[0] for r in refs):
                if not ref or re.match(r"^[a-z][a-z0-9+.-]*:", ref):
                    continue  # http:, https:, mailto: ...: not this repository's to check
                path, _, anchor = ref.partition("#")
                target = (here / path).resolve() if path else (docs.root / name).resolve()
                if not target.exists():
                    yield Problem(name, number, f"link to {ref}: {path} does not exist")
                    continue
                if anchor and target.suffix == ".md" and target not in headings:
                    headings[target] = anchors(target.read_text(encoding="utf-8"))
                if anchor and target.suffix == ".md" and anchor not in headings[target]:
                    yield Problem(name, number, f"link to {ref}: no heading #{anchor} in {path or name}")


def options_tables(text: str) -> Iterator[tuple[int, str, set[str]]]:
    """(line, command, flags its first column names) of each options table."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        header = OPTIONS_HEADER.match(line)
        if not header:
            continue
        flags: set[str] = set()
        for row in lines[index + 2:]:
            if not row.startswith("|"):
                break
            first = row.strip("|").split(" | ")[0]
            flags.update(flag for span in CODE_SPAN.findall(first) for flag in FLAG.findall(span))
        yield index + 1, header.group(1).strip(), flags


def check_options(docs: Docs) -> Iterator[Problem]:
    """Each command's options table names every option it has and none it lacks."""
    documented: dict[str, set[str]] = {}
    for name, text in docs.pages.items():
        for number, command, flags in options_tables(text):
            if command not in docs.commands:
                yield Problem(name, number, f"options table of `trajcomp {command}`: no such command")
                continue
            documented.setdefault(command, set()).update(flags)
            for flag in sorted(flags - docs.commands[command]):
                yield Problem(name, number, f"`trajcomp {command}` has no option {flag}")
    for command, flags in docs.commands.items():
        missing = sorted(f for f in flags if f.startswith("--") and f not in documented.get(command, set()))
        if missing:
            yield Problem("docs", 0, f"`trajcomp {command}`: no options table documents {', '.join(missing)}")


def shell_commands(body: str) -> Iterator[str]:
    """The `trajcomp ...` commands of a shell block, continuation lines joined, comments dropped."""
    for line in body.replace("\\\n", " ").splitlines():
        line = re.split(r"\s#\s", " " + line.strip(), maxsplit=1)[0].strip()
        if line.startswith("trajcomp ") or line == "trajcomp":
            yield line


def command_problems(docs: Docs, command_line: str) -> Iterator[str]:
    """What is wrong with one `trajcomp ...` command as a page writes it: a subcommand that does not
    exist, or a flag its command lacks (`--help` every command has)."""
    words = command_line.split()[1:]
    command = max((c for c in docs.commands if words[:len(c.split())] == c.split()), key=len)
    rest = words[len(command.split()):]
    if rest and re.fullmatch(r"[a-z][a-z-]*", rest[0]) and command in groups(docs):
        yield f"`trajcomp {command} {rest[0]}`: no such command"
    for flag in FLAG.findall(" ".join(words).replace("[", " ")):
        if flag != "--help" and flag not in docs.commands[command] and flag not in docs.commands[""]:
            yield f"`trajcomp {command}` has no option {flag}"


def groups(docs: Docs) -> set[str]:
    """The commands that hold subcommands (the root, `batch`): a word after one must be one of them."""
    return {c.rpartition(" ")[0] for c in docs.commands if c}


def check_examples(docs: Docs) -> Iterator[Problem]:
    """Every `trajcomp` command in a shell block or an inline code span names a command that exists,
    and only options that command has."""
    for name, text in docs.pages.items():
        for number, body in code_blocks(text, "sh"):
            for command_line in shell_commands(body):
                for what in command_problems(docs, command_line):
                    yield Problem(name, number, f"example `{command_line[:60]}`: {what}")
        for number, line in prose_lines(text):
            for span in CODE_SPAN.findall(line):
                if span.startswith("trajcomp "):
                    for what in command_problems(docs, span):
                        yield Problem(name, number, f"`{span[:60]}`: {what}")


def mentioned_keys(docs: Docs) -> Iterator[tuple[str, int, str]]:
    """(page, line, key) of every backticked `section.key`."""
    for name, text in docs.pages.items():
        for number, line in prose_lines(text):
            for span in CODE_SPAN.findall(line):
                match = re.match(r"([a-z_]+)(\.[A-Za-z_*][\w*]*)+", span)
                if match and match.group(1) in docs.sections:
                    yield name, number, match.group(0)


def is_known(docs: Docs, key: str) -> bool:
    if key in docs.known_keys or key in NOT_KEYS:
        return True
    if "*" in key:
        return any(fnmatch.fnmatchcase(k, key) for k in docs.known_keys)
    return any(key.startswith(free + ".") for free in FREE_MAPPINGS)


def yaml_keys(data: object, prefix: str = "") -> Iterator[str]:
    """Every key path of a config mapping, stopping at the free mappings."""
    if isinstance(data, dict) and prefix not in FREE_MAPPINGS:
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from yaml_keys(value, path)


def check_config_mentions(docs: Docs) -> Iterator[Problem]:
    """Every config key a page names, in prose or in a YAML block of config sections, exists."""
    for name, line, key in mentioned_keys(docs):
        if not is_known(docs, key):
            yield Problem(name, line, f"config key `{key}` does not exist")
    for name, text in docs.pages.items():
        for number, body in code_blocks(text, "yaml"):
            data = yaml.safe_load(body)
            if isinstance(data, dict) and set(data) <= docs.sections:
                for key in yaml_keys(data):
                    if not is_known(docs, key):
                        yield Problem(name, number, f"config key `{key}` (YAML block) does not exist")


def check_default_keys(docs: Docs) -> Iterator[Problem]:
    """Every key of configs/default.yaml is named, with its section, on some page."""
    named = {key for _, _, key in mentioned_keys(docs)}
    for key in docs.default_keys:
        if key not in named:
            yield Problem("configs/default.yaml", 0, f"key `{key}` is explained on no page")
        if not any(key == k or key.startswith(k + ".") for k in docs.code_keys):
            yield Problem("configs/default.yaml", 0, f"key `{key}` is not a key of the config code")


CHECKS: list[Callable[[Docs], Iterator[Problem]]] = [
    check_links, check_options, check_examples, check_config_mentions, check_default_keys,
]


def cli_options(click_command, path: str = "") -> dict[str, set[str]]:
    """Every command's options, from the Click command tree (no subprocess, no --help parsing)."""
    found = {path: {opt for p in click_command.params if p.param_type_name == "option"
                    for opt in (*p.opts, *p.secondary_opts)}}
    for name, sub in getattr(click_command, "commands", {}).items():
        found.update(cli_options(sub, f"{path} {name}".strip()))
    return found


def leaf_keys(data: dict) -> list[str]:
    """default.yaml's keys to explain: its leaves, a free mapping counted as one key."""
    paths = list(yaml_keys(data))
    return [p for p in paths if p in FREE_MAPPINGS or not any(q.startswith(p + ".") for q in paths)]


def load(root: Path, click_command, layout: dict[str, dict[str, str]], aliases: set[str] = frozenset(),
         default_yaml: Path | None = None) -> Docs:
    default = yaml.safe_load((default_yaml or root / "configs" / "default.yaml").read_text(encoding="utf-8"))
    code = {f"{s}.{k}" for s, keys in layout.items() for k in keys} | set(aliases)
    known = code | set(layout) | set(yaml_keys(default))
    pages = {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in page_paths(root)}
    return Docs(root, pages, cli_options(click_command), known, leaf_keys(default), set(layout), code)


def problems(docs: Docs) -> list[Problem]:
    return [problem for check in CHECKS for problem in check(docs)]
