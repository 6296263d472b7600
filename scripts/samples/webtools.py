"""Research tool outputs: web search results, extracted pages, prose and benchmark tables."""

from __future__ import annotations

import random
import re

from .data import Topic, load

RESEARCH = load("research")


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
    return " ".join(t.format(**prose_slots(rng, topic, lib)) for t in rng.sample(RESEARCH["prose"], n))


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
        if lib == best:
            value = best_value
        elif not best:
            value = rng.randint(3, 900) * 100
        else:
            value = rng.randint(3, max(4, best_value // 130)) * 100
        rows.append(
            f"| {lib:<16} | {value:>14,} | {rng.uniform(0.2, 20):>6.1f} | {rng.uniform(10, 400):>6.1f} | {rng.randint(40, 900):>6} |"
        )
    return "\n".join(rows)


def web_page(rng: random.Random, topic: Topic, lib: str, url: str, n_sections: int) -> str:
    """Markdown text of a fetched page about `lib`."""
    # Drawn before the title is chosen, whichever title is picked.
    feature = rng.choice(topic.features)
    title = rng.choice(RESEARCH["page_titles"]).format(
        lib=lib, domain=topic.domain, other=topic.libs[2], feature=feature
    )
    updated = f"{rng.randint(1, 28)} {rng.choice(('Jan', 'Feb', 'Mar', 'Apr'))} 2025"
    out = [f"# {title}", "", f"*Source: {url} · updated {updated}*", ""]
    headings = RESEARCH["headings"]
    for heading in rng.sample(headings, min(n_sections, len(headings))):
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
        site = rng.choice(RESEARCH["sites"]).format(lib=lib)
        slug = "-".join(re.findall(r"[a-z0-9]+", f"{lib} {rng.choice(topic.features)}".lower()))
        url = f"https://{site}/{rng.choice(('', 'blog/', 'guide/', 'issues/'))}{slug}"
        # Every title's random parts are drawn, in this order, before one title is chosen.
        slots = {
            "lib": lib,
            "domain": topic.domain,
            "other": rng.choice(topic.libs),
            "feature": rng.choice(topic.features),
            "issue": rng.randint(100, 4000),
            "feature2": rng.choice(topic.features),
        }
        title = rng.choice(RESEARCH["result_titles"]).format(**slots)
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
    out += [f"[{lib}] installed version {versions[lib]}" for lib in topic.libs]
    for r in range(1, 6):
        for lib in topic.libs:
            out.append(
                f"round {r} {lib:<14} {rng.randint(3, 900) * 100:>8,} {topic.metric:<12} p99={rng.uniform(1, 300):7.2f}ms rss={rng.randint(40, 900)}MB"
            )
    out += ["", bench_table(rng, topic)]
    return "\n".join(out)
