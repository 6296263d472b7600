"""Coding tool outputs besides test runs: git, search, linters, installs, builds, coverage."""

from __future__ import annotations

import random
import re

from .data import load
from .randtext import sha, title_case
from .repo import Repo

DEVTOOLS = load("devtools")
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def commit_message(rng: random.Random, repo: Repo) -> str:
    p = repo.p
    module = rng.choice(p.modules)
    return rng.choice(DEVTOOLS["commit_templates"]).format(
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
        if long:
            out += _stat_entry(rng, repo, msg, day - i)
        else:
            out.append(f"{sha(rng, 7)} {msg}")
    return "\n".join(out).rstrip()


def _stat_entry(rng: random.Random, repo: Repo, msg: str, day: int) -> list[str]:
    """One `git log --stat` commit: header, message and the files it touched."""
    author = rng.choice(DEVTOOLS["authors"]).format(org=repo.p.org)
    out = [
        f"commit {sha(rng)}",
        f"Author: {author}",
        f"Date:   {WEEKDAYS[day % 7]} Mar {max(1, day)} {rng.randint(8, 19):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} 2025 +0{rng.choice((0, 1, 2))}00",
        "",
        f"    {msg}",
        "",
    ]
    files = rng.sample(
        [repo.module_path(m) for m in repo.p.modules] + [repo.test_path(m) for m in repo.p.modules], rng.randint(1, 3)
    )
    for f in files:
        a, d = rng.randint(1, 60), rng.randint(0, 30)
        out.append(f" {f:<40} | {a + d:>3} {'+' * min(a, 20)}{'-' * min(d, 12)}")
    summary = f" {len(files)} files changed, {rng.randint(5, 90)} insertions(+), {rng.randint(0, 40)} deletions(-)"
    return out + [summary, ""]


def grep_output(repo: Repo, symbol: str) -> str:
    """`grep -rn` output over the synthesized files."""
    return "\n".join(f"{path}:{line}:{text}" for path, line, text in repo.grep(symbol))


def search_files_result(repo: Repo, pattern: str) -> dict:
    """The search_files tool's JSON result."""
    hits = repo.grep(pattern, limit=30)
    return {
        "total_count": len(hits),
        "truncated": len(hits) >= 30,
        "matches": [{"path": p, "line": n, "content": t.strip()} for p, n, t in hits],
    }


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
                code, msg = rng.choice(DEVTOOLS["ruff_codes"])
                col = rng.randint(1, 40)
                out.append(f"{path}:{idx + 1}:{col}: {code} {msg.format(name=name, n=rng.randint(101, 140))}")
            else:
                msg = rng.choice(DEVTOOLS["mypy_errors"]).format(name=name, Name=title_case(name))
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
            # The old inline table drew a noun while being built, before the choice; keep that draw.
            noun = rng.choice(repo.p.nouns)
            code, msg = rng.choice(DEVTOOLS["tsc_errors"])
            out.append(f"{path}({rng.randint(5, 200)},{rng.randint(3, 40)}): error {code}: {msg.format(noun=noun)}")
    out.append(f"\nFound {len(out)} errors in 3 files.")
    return "\n".join(out), 2


def eslint_output(rng: random.Random, repo: Repo) -> tuple[str, int]:
    """`eslint` stylish-format output."""
    out, errors, warnings = [], 0, 0
    for module in rng.sample(repo.p.modules, 3):
        out.append(f"{repo.root}/{repo.module_path(module)}")
        for _ in range(rng.randint(1, 4)):
            # Two nouns are drawn whichever rule is picked (the old inline table built both messages).
            nouns = {"noun": rng.choice(repo.p.nouns), "noun2": rng.choice(repo.p.nouns)}
            rule, level, msg = rng.choice(DEVTOOLS["eslint_errors"])
            errors += level == "error"
            warnings += level == "warning"
            out.append(f"  {rng.randint(3, 180)}:{rng.randint(1, 40)}  {level:<7}  {msg.format(**nouns)}  {rule}")
        out.append("")
    out.append(f"✖ {errors + warnings} problems ({errors} errors, {warnings} warnings)")
    return "\n".join(out), 1 if errors else 0


def docker_build_log(rng: random.Random, repo: Repo, fail: bool) -> tuple[str, int]:
    """BuildKit-style `docker build` output."""
    digest = sha(rng, 64)
    out = []
    t = 0.0
    for i, step in enumerate((s.format(digest=digest) for s in DEVTOOLS["docker_steps"]), 1):
        t += rng.uniform(0.0, 3.0)
        out.append(f"#{i} {step}")
        if "pip install" in step:
            out += [f"#{i} {t:.3f} Collecting {dep}" for dep in repo.p.deps]
            if fail:
                return "\n".join(out + _pip_wheel_failure(repo, i, t)), 1
        out.append(f"#{i} DONE {rng.uniform(0.0, 20):.1f}s")
    out.append(
        f"#10 exporting to image\n#10 writing image sha256:{sha(rng, 64)} done\n#10 naming to docker.io/{repo.p.org}/{repo.p.name}:dev done"
    )
    return "\n".join(out), 0


def _pip_wheel_failure(repo: Repo, i: int, t: float) -> list[str]:
    """The tail of a docker build whose `pip install` step failed to build a wheel."""
    failed = 'process "/bin/sh -c pip install --no-cache-dir ." did not complete successfully: exit code: 1'
    return [
        f"#{i} {t + 4:.3f} error: subprocess-exited-with-error",
        f"#{i} {t + 4:.3f}   × Building wheel for {repo.p.deps[0].split('==')[0]} (pyproject.toml) did not run successfully.",
        f"#{i} {t + 4:.3f}   │ exit code: 1",
        f"#{i} ERROR: {failed}",
        "------",
        f"ERROR: failed to solve: {failed}",
    ]


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
    out.append(f"├── {p.pkg if p.lang == 'py' else 'src'}")
    out += [f"│   ├── {repo.module_path(m).rsplit('/', 1)[-1]}" for m in p.modules]
    if p.lang == "py":
        out += ["│   └── __init__.py", "├── tests", "│   ├── conftest.py"] + [f"│   ├── test_{m}.py" for m in p.modules]
    n_files = len(out) + 2
    out += ["├── .github", "│   └── workflows", "│       └── ci.yml", "└── Dockerfile", ""]
    return "\n".join(out + [f"{rng.randint(4, 9)} directories, {n_files} files"])


def changelog_results(rng: random.Random, dep: str) -> tuple[dict, list[str]]:
    """web_search results about a dependency's breaking changes."""
    major = rng.randint(2, 6)
    slots = {
        "dep": dep,
        "major": major,
        "previous": major - 1,
        "pool": rng.choice((4, 8, 20)),
        "issue": rng.randint(1000, 9000),
        "question": rng.randint(70000000, 79999999),
    }
    items = [{k: v.format(**slots) for k, v in item.items()} for item in DEVTOOLS["changelog_results"]]
    return ({"success": True, "data": {"web": items}}), [i["url"] for i in items]
