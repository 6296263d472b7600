"""The seeded dataset plan and the JSONL row records: what generate(seed) returns."""

from __future__ import annotations

import random

from .coding import CodingRun
from .data import PROJECTS, PY_PROJECTS, TOPICS, load
from .ops import OpsRun
from .randtext import HEX, rand_str, sha
from .research import ResearchRun
from .run import RowSpec
from .trajectory import Trajectory

CODING_FILE = "hermes_coding_runs.jsonl"
RESEARCH_FILE = "hermes_research_runs.jsonl"
PLAN = load("plan")


def build_plan(seed: int) -> list[RowSpec]:
    """Every row's spec; normal rows get geometrically spread size targets in a seeded order."""
    rng = random.Random(seed)
    entries = []
    for family in ("coding", "research"):
        rows = [(family, r["category"], r["lang"], r["special"]) for r in PLAN[family] for _ in range(r["count"])]
        rng.shuffle(rows)
        entries += rows
    normal = [i for i, e in enumerate(entries) if e[3] == ""]
    lo, hi = PLAN["normal_range"]
    targets = [round(lo * (hi / lo) ** (k / (len(normal) - 1))) for k in range(len(normal))]
    rng.shuffle(targets)
    by_index = dict(zip(normal, targets))
    specs = []
    for i, (family, cat, lang, special) in enumerate(entries):
        if special == "short":
            target = rng.randint(1800, 3200)
        else:
            target = by_index.get(i) or PLAN["fixed_targets"][special]
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
        "model": rng.choice(PLAN["models"]),
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
