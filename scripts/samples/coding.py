"""Coding runs: bug fixes, features, refactors, config migrations and dependency upgrades."""

from __future__ import annotations

import json

from .coding_steps import CodingSteps
from .data import joined, load
from .devtools import changelog_results, pip_install_log, tree_output
from .randtext import numbered
from .repo import Bug, ci_workflow, compose_spec, pyproject_toml
from .run import fit_lines, read_obs
from .testruns import plant_bug, pytest_run, unified_diff
from .trajectory import PHRASES, Call, est_tokens, final_answer, read_call, terminal, write_call

MIGRATIONS = load("files")["migrations"]
MIGRATION_ERRORS = joined(load("files")["migration_errors"])
TASKS = PHRASES["tasks"]


class CodingRun(CodingSteps):
    """One coding trajectory; the method named after its category builds it."""

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
        change = PHRASES["bug_change"].get(self.lang, PHRASES["bug_change"]["en"])
        self.changes.append((bug.path, change.format(func=bug.func)))
        self.tests("rerun", test_path, [], None)
        if self.spec.special == "human_after_middle":
            return self.closing_with_user_request()
        if self.spec.special == "huge_tail":
            return self.closing_with_big_read()
        self.closing()

    def feature(self) -> None:
        rng = self.rng
        title, req1, req2 = rng.choice(PHRASES["features"])
        feature = title.format(func=self.func, noun=rng.choice(self.p.nouns))
        self.t.human(
            rng.choice(TASKS["feature"]["en"]).format(
                repo=self.p.name, root=self.repo.root, org=self.p.org, feature=feature, req1=req1, req2=req2
            )
        )
        tree = terminal("tree -L 2 -I node_modules", tree_output(rng, self.repo))
        self.t.step("plan_explore", self.slots(), [tree], ("generic", {}))
        self.fill_middle()
        self.implement(f"add {feature.split(' to ')[0].split(' for ')[0]}")
        if self.spec.special == "huge_tail":
            return self.closing_with_big_read()
        self.closing()

    def implement(self, desc: str) -> None:
        """Add a helper next to the focus function, add a test file, run it (sometimes failing first)."""
        rng, gen = self.rng, self.repo.gen
        lines = self.repo.source(self.path)
        idx = self.repo.def_line(self.path, self.func)
        if self.p.lang == "py":
            helper = gen.function(gen.func_name(), [self.func], ["LIMIT"])
        else:
            helper = gen.function(gen.func_name(), [self.func])
        new = "\n".join(helper + ["", ""] + [lines[idx]])
        self.apply_patch(Bug(self.path, self.func, idx, lines[idx], new, "", ""))
        self.changes.append((self.path, desc))
        test_path = self.repo.test_path(self.module)
        if self.p.lang == "py":
            test_path = test_path.replace("test_", "test_new_")
        else:
            test_path = test_path.replace(".test.", ".feature.test.")
        content = "\n".join(gen.test_module(self.module, [self.func]))
        self.t.step("write", self.slots(path=test_path), [write_call(test_path, content)])
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
            self.repo.files[self.path] = self.big_module(["", ""])
            self.func = rng.choice(self.repo.functions(self.path))
        self.t.human(
            rng.choice(TASKS["refactor"]["en"]).format(
                repo=self.p.name, root=self.repo.root, path=self.path, func=self.func, module=self.path
            )
        )
        lines = self.repo.source(self.path)
        if self.spec.special == "huge_head":
            first = read_call(self.path, lines)
        else:
            first = fit_lines(lines, 700, lambda n: read_call(self.path, lines, 1, n))
        self.t.step("read", self.slots(), [first], ("code", {"path": self.path}))
        self.fill_middle()
        for _ in range(rng.randint(1, 2)):
            idx = self.repo.body_line(self.path, self.func)
            helper = self.repo.gen.function(f"_{self.repo.gen.func_name()}", [self.func], ["LIMIT"])
            self.apply_patch(Bug(self.path, self.func, idx, lines[idx], "\n".join(helper + ["", lines[idx]]), "", ""))
        self.changes.append((self.path, f"split `{self.func}` into focused helpers, no behaviour change"))
        ruff = f"ruff check {self.p.pkg}"
        self.t.step("lint", self.slots(), [terminal(ruff, "All checks passed!")], ("generic", {}))
        self.checks.append((ruff, "All checks passed!"))
        self.closing()

    def big_module(self, gap: list[str]) -> list[str]:
        """Synthesized modules, separated by `gap` lines, until the file reads as about 5,000 tokens."""
        big: list[str] = []
        while est_tokens(json.dumps(numbered(big))) < 5000:
            big += self.repo.gen.module(self.rng.choice(self.p.modules)) + gap
        return big

    def config_migration(self) -> None:
        rng = self.rng
        variant = rng.randrange(3)
        migration = MIGRATIONS[variant]
        old_path, new_path, validate = migration["old"], migration["new"], migration["validate"]
        self.t.human(TASKS["config_migration"]["en"][variant].format(repo=self.p.name))
        self.path = old_path
        old = self.repo.source(old_path)
        self.t.step("config", self.slots(path=old_path), [read_call(old_path, old)], read_obs(old_path))
        symbols = migration["symbols"]
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
        self.t.step("write", self.slots(path=new_path), [write_call(new_path, written)])
        self.changes.append((new_path, "new configuration in the current format"))
        self.t.step("build", self.slots(), [terminal(validate, error, 1)], ("generic", {}))
        lines = written.split("\n")
        self.repo.files[new_path] = lines
        self.apply_patch(Bug(new_path, "config", lines.index(bad), bad, good, "", ""), plan="fix_typo")
        ok = ""
        if variant == 0:
            built = f"Successfully built {self.p.name}-0.4.0.tar.gz"
            ok = f"* Creating isolated environment: venv+pip...\n* Building sdist...\n{built}"
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
        install = terminal(f"pip install -U '{dep}' -e '.[dev]'", out, code)
        self.t.step("deps", self.slots(dep=dep), [install], ("generic", {}))
        self.bug = bug = plant_bug(rng, self.repo, self.module)
        failing = [(self.repo.test_path(self.module), rng.choice(self.test_names(self.module, bug.func)))]
        self.tests("rerun", None, failing, bug, n_files=2 if self.spec.special == "short" else 4)
        if self.spec.special != "short":
            res, _ = changelog_results(rng, dep)
            search = Call("web_search", {"query": f"{dep} major release breaking changes migration"}, res)
            self.t.step("search", self.slots(query=f"{dep} changelog breaking changes"), [search], ("web", {}))
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
        read = fit_lines(lines, 2900, lambda n: read_call(bug.path, lines, 1, n))
        self.t.step("read", self.slots(path=bug.path), [read], ("code", {"path": bug.path}))
        out, code = pytest_run(rng, self.repo, [(test_path, name)], bug, 6)
        fail = ("fail", {"test": name, "error": f"{bug.kind}: {bug.message}"})
        run = terminal(f"python -m pytest {test_path}", out, code)
        self.t.step("plan_tests", self.slots(test=test_path), [run], fail)
        cause = self.bug_cause("en", bug)
        diff = unified_diff(bug.path, lines, bug.line_idx, bug.new, rng)
        intro = (
            f"`{name}` fails because of a real bug in `{bug.func}`, not because of the test. "
            f"Suggested patch (not applied):\n\n```diff\n{diff}\n```"
        )
        changes = [(bug.path, f"suggested fix (not applied) around line {bug.line_idx + 1}")]
        checks = [(f"python -m pytest {test_path}", "1 failed (expected, no change made)")]
        notes = ["Say the word and I'll apply the fix and add a regression test."]
        self.t.final(final_answer("en", cause, changes, checks, notes, intro=intro))

    def closing_with_user_request(self) -> None:
        """Verbose full run, then a user request in the protected tail (a human turn right after the middle)."""
        self.tests("full_suite", None, [], None, n_files=len(self.p.modules) + 4, verbose=True)
        self.t.human("Looks good. Before you wrap up, please add a line under `## [Unreleased]` in CHANGELOG.md.")
        entry = f"## [Unreleased]\n\n### Fixed\n- `{self.bug.func}` no longer fails on partial {self.p.nouns[0]}s."
        patch = Call(
            "patch",
            {"path": "CHANGELOG.md", "old_string": "## [Unreleased]", "new_string": entry},
            {"success": True, "path": "CHANGELOG.md", "replacements": 1},
        )
        self.t.step("patch", self.slots(path="CHANGELOG.md"), [patch])
        self.changes.append(("CHANGELOG.md", "entry under Unreleased"))
        self.t.final(self.final_text())

    def closing_with_big_read(self) -> None:
        """Full suite, then a read of a very large file right before the final answer."""
        self.tests("full_suite", None, [], None, n_files=len(self.p.modules) + 2)
        if self.p.lang == "py":
            path = f"{self.p.pkg}/_generated_{self.module}.py"
        else:
            path = f"src/generated/{self.module}.gen.js"
        big = self.repo.files[path] = self.big_module([""])
        self.t.step("read", self.slots(path=path), [read_call(path, big)], ("code", {"path": path}))
        self.t.final(self.final_text())


def migration_typo(content: str, variant: int, path: str) -> tuple[str, str, str]:
    """A line of `content`, a broken version of it and the validator's complaint about it."""
    lines = content.split("\n")
    if variant == 0:
        idx = max(i for i, ln in enumerate(lines) if ">=" in ln and ln.startswith('    "'))
        good = lines[idx]
        bad = good.replace(">=", "=", 1)
        index = idx - lines.index("dependencies = [") - 1
        return good, bad, MIGRATION_ERRORS["pep508"].format(index=index, given=bad.strip().rstrip(","))
    if variant == 1:
        idx = next(i for i, ln in enumerate(lines) if "matrix.version" in ln)
        good = lines[idx]
        bad = good.replace("matrix.version", "matrix.python")
        col = bad.index("matrix.python") + 1
        pad = " " * (col - len(bad) + len(bad.strip()) - 1)
        error = MIGRATION_ERRORS["actionlint"].format(path=path, line=idx + 1, col=col, text=bad.strip(), pad=pad)
        return good, bad, error
    idx = next(i for i, ln in enumerate(lines) if ln.strip() == "db:" and lines[i - 1].strip() == "depends_on:")
    good = lines[idx]
    return good, good.replace("db:", "database:"), MIGRATION_ERRORS["compose"]
