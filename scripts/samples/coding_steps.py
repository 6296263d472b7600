"""The steps a coding run is made of: test runs, exploration actions, patches and the closing."""

from __future__ import annotations

import random
import re

from .data import Project
from .devtools import (
    coverage_table,
    docker_build_log,
    eslint_output,
    git_log,
    grep_output,
    lint_output,
    search_files_result,
    tsc_output,
)
from .repo import Bug, Repo
from .run import Run, RowSpec, error_of, fit_lines, passed_count, read_obs
from .testruns import fix_line, jest_run, pytest_run, unified_diff
from .trajectory import PHRASES, Call, Trajectory, final_answer, read_call, terminal


class CodingSteps(Run):
    """A coding trajectory in a synthesized repository, and the steps its categories combine."""

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
        src = "\n".join(self.repo.source(self.repo.test_path(module)))
        if self.p.lang == "py":
            names = re.findall(r"^def (test_\w+)\(sample_", src, re.M)
            own = [n for n in names if n.startswith(f"test_{func.lstrip('_')}_")]
            return own or names or re.findall(r"^def (test_\w+)\(", src, re.M)
        cases = re.findall(r"^  it\('([^']+)'", src, re.M)
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
            glob = "*.py" if self.p.lang == "py" else "*.[jt]s*"
            call = Call(
                "search_files",
                {"pattern": symbol, "path": ".", "file_glob": glob},
                search_files_result(self.repo, symbol),
            )
        else:
            out = grep_output(self.repo, symbol)
            where = self.p.pkg if self.p.lang == "py" else "src"
            call = terminal(f'grep -rn "{symbol}" {where} tests 2>/dev/null | head -40', out, 0 if out else 1)
        hits = ("hits", {"n": len(self.repo.grep(symbol)), "symbol": symbol})
        self.t.step(plan, self.slots(symbol=symbol), [call], hits)

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
        show = terminal(f"git show HEAD~{rng.randint(1, 6)} -- {path}", "\n".join(head + [diff]))
        self.t.step(plan, self.slots(path=path), [show], ("history", {}))

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
        first = "pyproject.toml" if self.p.lang == "py" else "package.json"
        path = self.rng.choice((first, ".github/workflows/ci.yml"))
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
            deps = self.p.deps
            tree = [f"{self.p.name}@0.0.0 {self.repo.root}"] + [f"├── {d}" for d in deps[:-1]]
            tree.append(f"└── {deps[-1]}")
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
        cmd = f"python -m pytest -q --cov={self.p.pkg} --cov-report=term-missing"
        self.t.step(plan, self.slots(), [terminal(cmd, coverage_table(self.rng, self.repo))], ("generic", {}))

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
        diff = unified_diff(bug.path, self.repo.source(bug.path), bug.line_idx, bug.new, self.rng)
        call = Call(
            "patch",
            {"path": bug.path, "old_string": bug.old, "new_string": bug.new},
            {"success": True, "path": bug.path, "replacements": 1, "diff": diff},
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

    def bug_cause(self, lang: str, bug: Bug) -> str:
        """Why the planted bug fails, in `lang`."""
        return PHRASES["bug_cause"][lang].format(
            func=bug.func,
            path=bug.path,
            noun=self.rng.choice(self.p.nouns),
            error=f"{bug.kind}: {bug.message}",
            line=bug.line_idx + 1,
        )

    def final_text(self) -> str:
        lang, bug = self.lang, self.bug
        notes = self.rng.sample(PHRASES["followup_notes"]["coding"][lang], 2)
        if self.spec.category == "dependency_upgrade" and bug:
            cause = PHRASES["upgrade_cause"].format(
                dep=self.slots()["dep"],
                func=bug.func,
                path=bug.path,
                line=bug.line_idx + 1,
                error=f"{bug.kind}: {bug.message}",
            )
            return final_answer(lang, cause, self.changes, self.checks, notes)
        if bug and lang in PHRASES["bug_cause"]:
            return final_answer(lang, self.bug_cause(lang, bug), self.changes, self.checks, notes)
        return final_answer(lang, self.summary_cause(), self.changes, self.checks, notes, cause_title="### Context")

    def summary_cause(self) -> str:
        causes = PHRASES["summary_causes"]
        if self.spec.category not in causes:
            return "See the changes below."
        return causes[self.spec.category].format(func=self.func, dep=self.slots()["dep"])
