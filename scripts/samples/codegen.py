"""Synthesized source code: plausible Python and JS/TS modules and their test files."""

from __future__ import annotations

import random

from .data import Project, load
from .randtext import indent, title_case

CODE = load("code")
VERBS = CODE["verbs"]


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
        return title_case(self.noun()) + self.rng.choice(CODE["class_suffixes"])

    def const_name(self) -> str:
        return f"{self.noun().upper()}_{self.rng.choice(CODE['const_suffixes'])}"

    def statement(self, ctx: dict) -> list[str]:
        """One statement (possibly compound) as unindented lines; records new variables in ctx."""
        rng = self.rng
        noun = self.noun()
        var = f"{noun}_{rng.choice(('map', 'list', 'value', 'result', 'spec', 'rows', 'ids', 'key'))}"
        pool = ctx["args"] + ctx["vars"]
        # The draws happen in this order; changing it changes every sample after it.
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
            "exc": rng.choice(CODE["exceptions"]),
            "fn": ctx["fn"],
            "T": rng.choice(("dict", "list", "str", "int", "Path", "tuple")),
            "CONST": rng.choice(ctx["consts"]),
            "default": rng.choice(CODE["defaults"]),
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
        lines = rng.choice(CODE["py_statements"]).format(**slots).split("\n")
        if var in lines[0] or any(line.startswith(var) for line in lines):
            ctx["vars"].append(var)
        return lines

    def signature(self, args: list[str], method: bool) -> str:
        types = CODE["arg_types"]
        return ", ".join((["self"] if method else []) + [f"{a}: {types.get(a, 'Any')}" for a in args])

    def function(self, name: str, helpers: list[str], consts: list[str], method: bool = False) -> list[str]:
        """A full function definition with docstring and a synthesized body."""
        rng = self.rng
        args = rng.sample(CODE["arg_names"], rng.randint(1, 3))
        first = f"{self.noun()}s"
        args = [first] + [a for a in args if a != first]
        ret = rng.choice(("dict[str, Any]", "list[Any]", "str | None", "int", "bool", "Any", "None"))
        verb, _, rest = name.lstrip("_").partition("_")
        doc = f"{verb.capitalize()} {rest.replace('_', ' ') or 'the input'} " + rng.choice(CODE["doc_endings"])
        ctx = {"args": args, "vars": [], "helpers": helpers, "consts": consts, "fn": name}
        body: list[str] = [f'"""{doc.replace(" ;", ";")}"""']
        for _ in range(rng.randint(3, 7)):
            body += self.statement(ctx)
        body.append(f"return {ctx['vars'][-1]}" if ctx["vars"] and ret != "None" else "return None")
        return [f"def {name}({self.signature(args, method)}) -> {ret}:"] + indent(body)

    def dataclass_block(self, cls: str) -> list[str]:
        rng = self.rng
        doc = f'    """{self.noun().capitalize()} settings as loaded from config."""'
        lines = ["@dataclass", f"class {cls}:", doc, ""]
        names: list[str] = []
        for _ in range(rng.randint(3, 6)):
            fname = self.noun() + rng.choice(("_id", "_count", "_name", "_ttl", "_enabled", "s"))
            if fname in names:
                continue
            names.append(fname)
            # Every candidate is built (drawing its random parts) before one is chosen.
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
        for _ in range(self.rng.randint(2, 4)):
            lines += indent(self.function(self.func_name(), helpers, consts, method=True)) + [""]
        return lines[:-1]

    def module(self, module: str) -> list[str]:
        """A whole module: docstring, imports, constants, classes and functions."""
        rng = self.rng
        others = [m for m in self.p.modules if m != module]
        funcs = [self.func_name() for _ in range(rng.randint(4, 8))]
        helpers = [self.func_name() for _ in range(3)] + funcs
        consts = [self.const_name() for _ in range(rng.randint(2, 4))]
        role = rng.choice(("helpers for", "core logic for", "the public API of", "internal plumbing for"))
        doc = f'"""{self.p.pkg}.{module}: {role} {self.noun()} handling."""'
        lines = [doc, "", "from __future__ import annotations", ""]
        lines += self.imports()
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

    def imports(self) -> list[str]:
        """The module's import block: the common base plus a few random extras, isort-ordered."""
        base = CODE["py_base_imports"]
        extra = self.rng.sample([i for i in CODE["py_imports"] if i not in base], self.rng.randint(2, 5))
        plain = sorted(i for i in base + extra if i.startswith("import "))
        return plain + sorted(i for i in base + extra if i.startswith("from ")) + [""]

    def test_module(self, module: str, funcs: list[str]) -> list[str]:
        """A pytest module exercising `funcs` from `module`."""
        rng = self.rng
        under_test = f"from {self.p.pkg}.{module} import {', '.join(funcs)}"
        lines = ["import json", "", "import pytest", "", under_test, "", ""]
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
            for behaviour in rng.sample(CODE["py_test_behaviours"], rng.randint(2, 4)):
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
            stmt = rng.choice(CODE["js_statements"]).format(**slots)
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
            for case in rng.sample(CODE["jest_cases"], rng.randint(2, 3)):
                limit = rng.choice((1, 2, 10))
                expect = rng.choice(("toHaveLength(2)", "toEqual([])", "toBeDefined()", "toMatchObject({ id: 1 })"))
                lines += [
                    f"  it('{func} {case}', async () => {{",
                    "    const input = [{ id: 1, seq: 2 }, { id: 2, seq: 1 }];",
                    f"    const result = await {func}(input, {{ limit: {limit} }});",
                    f"    expect(result).{expect};",
                    "  });",
                    "",
                ]
        return lines[:-1] + ["});"]
