"""Planted bugs and the test runs that expose them: pytest and jest output, unified diffs."""

from __future__ import annotations

import random
import re

from .codegen import CODE, VERBS
from .data import load
from .randtext import sha
from .repo import Bug, Repo

DEVTOOLS = load("devtools")


def error_for_line(rng: random.Random, line: str, noun: str, lang: str) -> tuple[str, str]:
    """An exception (type, message) that `line` could plausibly raise on a partial record."""
    attrs = re.findall(r"\.([a-z_]+)\b(?!\()", line)
    attr = attrs[0] if attrs else f"{noun}_id"
    slots = {"attr": attr, "noun": noun, "NOUN": noun.upper()}
    if lang != "py":
        kind, message = rng.choice(DEVTOOLS["js_errors"])
        return kind, message.format(**slots)
    for needle, kind, message in DEVTOOLS["py_errors"]:
        if needle in line:
            return kind, message.format(**slots)
    kind, message = DEVTOOLS["py_default_error"]
    return kind, message.format(**slots)


def plant_bug(rng: random.Random, repo: Repo, module: str) -> Bug:
    """Choose a function and a line in `module` to blame, the error it raises and a plausible fix."""
    path = repo.module_path(module)
    funcs = repo.functions(path)[:3] or repo.functions(path)
    func = rng.choice(funcs)
    idx = repo.body_line(path, func)
    old = repo.source(path)[idx]
    kind, message = error_for_line(rng, old, rng.choice(repo.p.nouns), repo.p.lang)
    return Bug(path, func, idx, old, fix_line(rng, old, repo.p.lang), kind, message)


def fix_line(rng: random.Random, line: str, lang: str) -> str:
    """A small, plausible edit of `line` (possibly adding a guard line above it)."""
    for old, new in CODE["fix_swaps"]:
        if old in line and rng.random() < 0.6:
            var = re.findall(r"[a-z_]+", line)
            return line.replace(old, new.replace("{x}", var[0] if var else "value"), 1)
    pad = line[: len(line) - len(line.lstrip())]
    lhs, _, rhs = line.partition("=")
    keywords = CODE["keywords"]
    words = [w for w in re.findall(r"\b([a-z][a-zA-Z_]+)\b", rhs) if w not in keywords]
    names = [w for w in re.findall(r"\b([a-z][a-zA-Z_]+)\b", lhs) if w not in keywords]
    guard_var = words[-1] if words else names[-1] if names else "value"
    if lang == "py":
        return f"{pad}if {guard_var} is None:\n{pad}    {guard_var} = {{}}\n{line}"
    return f"{pad}if ({guard_var} == null) return [];\n{line}"


def unified_diff(path: str, lines: list[str], idx: int, new_block: str, rng: random.Random) -> str:
    """A git-style unified diff replacing lines[idx] with `new_block`."""
    new_lines = new_block.split("\n")
    lo, hi = max(0, idx - 3), min(len(lines), idx + 4)
    header = next((ln for ln in reversed(lines[:idx]) if re.match(r"^\s*(def|class|export|function) ", ln)), "")
    out = [
        f"diff --git a/{path} b/{path}",
        f"index {sha(rng, 7)}..{sha(rng, 7)} 100644",
        f"--- a/{path}",
        f"+++ b/{path}",
        f"@@ -{lo + 1},{hi - lo} +{lo + 1},{hi - lo - 1 + len(new_lines)} @@ {header.strip()}",
    ]
    out += [" " + ln for ln in lines[lo:idx]] + ["-" + lines[idx]] + ["+" + ln for ln in new_lines]
    return "\n".join(out + [" " + ln for ln in lines[idx + 1 : hi]])


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
    row0 = f"{{'{noun}_id': 0, 'name': '{noun}-0', 'size': 0}}"
    row1 = f"{{'{noun}_id': 1, 'name': '{noun}-1', 'size': 10}}"
    out = [f"{'_' * 22} {test_name} {'_' * 22}", "", f"{fixture} = [{row0}, {row1}, ...]", ""]
    out += [("    " if k != call else ">   ") + ln for k, ln in enumerate(test_lines[: call + 1])]
    out += ["", f"{test_path}:{first + call}: ", "_ " * 40, "", f"{param} = [{row0}, ...], limit = 4", ""]
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
    files = [repo.test_path(m) for m in repo.p.modules]
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
        f"plugins: {', '.join(rng.sample(DEVTOOLS['pytest_plugins'], 3))}",
        f"collected {total} items",
        "",
    ]
    skipped = _pytest_progress(rng, repo, out, files, counts, [f for f, _ in failing], verbose)
    passed = total - len(failing) - skipped
    secs = rng.uniform(0.8, 40.0)
    if failing:
        out += _pytest_failures(rng, repo, failing, bug)
    parts = (f"{len(failing)} failed" if failing else "", f"{passed} passed", f"{skipped} skipped" if skipped else "")
    out.append(f"{'=' * 20} {', '.join(x for x in parts if x)} in {secs:.2f}s {'=' * 20}")
    return "\n".join(out), 1 if failing else 0


def _pytest_progress(
    rng: random.Random,
    repo: Repo,
    out: list[str],
    files: list[str],
    counts: list[int],
    fail_paths: list[str],
    verbose: bool,
) -> int:
    """Append one progress line per file (or per test when verbose); returns the number skipped."""
    total = sum(counts)
    done = skipped = 0
    words = {".": "PASSED", "F": "FAILED", "s": "SKIPPED"}
    for path, count in zip(files, counts):
        marks = ["." for _ in range(count)]
        for _ in range(fail_paths.count(path)):
            marks[rng.randrange(count)] = "F"
        if rng.random() < 0.3:
            marks[rng.randrange(count)] = "s"
        skipped += marks.count("s")
        if verbose:
            for i, mark in enumerate(marks, 1):
                name = f"test_{rng.choice(VERBS)}_{rng.choice(repo.p.nouns)}_{rng.choice(('basic', 'empty', 'unicode', 'large', 'nested', 'defaults'))}"
                out.append(f"{path}::{name} {words[mark]} [{(done + i) * 100 // total:>3}%]")
        else:
            out.append(f"{path} {''.join(marks):<{max(10, 60 - len(path))}} [{(done + count) * 100 // total:>3}%]")
        done += count
    return skipped


def _pytest_failures(rng: random.Random, repo: Repo, failing: list[tuple[str, str]], bug: Bug | None) -> list[str]:
    """The FAILURES and short test summary sections."""
    out = ["", "=" * 36 + " FAILURES " + "=" * 36]
    for i, (path, name) in enumerate(failing):
        if bug is not None and i == 0:
            out.append(py_failure_block(rng, repo, bug, path, name))
        else:
            out.append(py_assert_block(rng, path, name, rng.choice(repo.p.nouns)))
    out += ["=" * 29 + " short test summary info " + "=" * 26]
    for i, (path, name) in enumerate(failing):
        reason = f"{bug.kind.rsplit('.', 1)[-1]}: {bug.message}" if bug and i == 0 else "AssertionError: assert 3 == 4"
        out.append(f"FAILED {path}::{name} - {reason}")
    return out


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
        out += ["", f"  ● {name}", ""] + _jest_failure(rng, repo, path, bug)
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


def _jest_failure(rng: random.Random, repo: Repo, path: str, bug: Bug | None) -> list[str]:
    """The body of one failed jest test: the error with a code frame, or a plain expectation failure."""
    code = repo.source(bug.path) if bug else []
    ln = (bug.line_idx + 1) if bug else rng.randint(10, 80)
    if not bug:
        return [
            "    expect(received).toHaveLength(expected)",
            "",
            "    Expected length: 2",
            "    Received length: 3",
            f"      at Object.<anonymous> ({path}:{rng.randint(10, 90)}:22)",
        ]
    out = [f"    {bug.kind}: {bug.message}", ""]
    for j in range(max(0, ln - 3), min(len(code), ln + 2)):
        out.append(f"    {'>' if j + 1 == ln else ' '} {j + 1:>3} | {code[j]}")
    return out + [
        "",
        f"      at {bug.func} ({bug.path}:{ln}:{rng.randint(5, 40)})",
        f"      at Object.<anonymous> ({path}:{rng.randint(10, 90)}:{rng.randint(5, 30)})",
    ]
