"""A synthesized working tree, stable within one trajectory, and the config files in it."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from .codegen import JsGen, PyGen
from .data import Project, joined, load

FILES = joined(load("files")["templates"])


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
        return FILES["readme"].format(p=p)
    settings = (
        ("log_level", "info"),
        ("port", p.port),
        ("workers", rng.randint(2, 16)),
        ("timeout_s", rng.choice((5, 15, 30))),
    )
    return "\n".join(f"{p.pkg.upper()}_{k.upper()}={v}" for k, v in settings)


# The template fillers below pass their random values as keyword arguments, which Python evaluates
# left to right: keep them in the order the values appear in the file, or every later sample changes.


def pyproject_toml(rng: random.Random, p: Project) -> str:
    return FILES["pyproject_toml"].format(
        p=p,
        version=f"{rng.randint(0, 3)}.{rng.randint(1, 19)}.{rng.randint(0, 9)}",
        description=p.blurb.capitalize(),
        python_minor=rng.choice((9, 10, 11)),
        deps="\n".join(f'    "{d.replace("==", ">=")}",' for d in p.deps),
        line_length=rng.choice((99, 100, 110, 120)),
        strict=rng.choice(("true", "false")),
    )


def setup_cfg(rng: random.Random, p: Project) -> str:
    return FILES["setup_cfg"].format(
        p=p,
        classifier_minor=rng.choice((8, 9, 10)),
        python_minor=rng.choice((8, 9)),
        deps="\n".join(f"    {d}" for d in p.deps),
        entry_module=p.modules[0],
        line_length=rng.choice((88, 100, 120)),
    )


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
    py = p.lang == "py"
    versions = rng.sample(["3.9", "3.10", "3.11", "3.12"], 3) if py else ["18.x", "20.x"]
    return FILES["ci_workflow"].format(
        timeout=rng.choice((15, 20, 30)),
        versions=", ".join(f'"{v}"' for v in sorted(versions)),
        setup_action="actions/setup-python@v5" if py else "actions/setup-node@v4",
        version_key="python-version" if py else "node-version",
        cache="pip" if py else "npm",
        install="pip install -e '.[dev]'" if py else "npm ci",
        lint="ruff check ." if py else "npm run lint",
        test="pytest -q --cov=" + p.pkg if py else "npm test -- --ci",
        env_prefix=p.pkg.upper().replace("-", "_"),
    )


def compose_yaml(rng: random.Random, p: Project) -> str:
    return FILES["compose_yaml"].format(
        p=p,
        redis_db=rng.randint(0, 3),
        log_level=rng.choice(("info", "debug", "warning")),
        postgres=rng.choice(("14", "15", "16")),
        maxmemory=rng.choice((128, 256, 512)),
    )


def compose_spec(rng: random.Random, p: Project) -> str:
    """docker-compose content rewritten for the Compose specification, with healthchecks."""
    return FILES["compose_spec"].format(p=p, maxmemory=rng.choice((128, 256, 512)))


def k8s_deployment(rng: random.Random, p: Project) -> str:
    return FILES["k8s_deployment"].format(
        p=p,
        namespace=rng.choice(("prod", "payments", "platform", "default")),
        replicas=rng.choice((2, 3, 4, 6)),
        version=f"{rng.randint(1, 3)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}",
        pool_size=rng.choice((5, 10, 20)),
        pool_timeout=rng.choice((5, 10, 30)),
        cpu=rng.choice(("100m", "250m", "500m")),
        memory=rng.choice(("128Mi", "256Mi", "512Mi")),
        memory_limit=rng.choice(("256Mi", "512Mi", "1Gi")),
        delay=rng.choice((5, 15, 30)),
    )
