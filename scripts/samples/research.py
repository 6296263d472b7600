"""Library-research runs: search the web, read pages, benchmark locally, write an ADR."""

from __future__ import annotations

import random

from .data import Topic
from .run import Run, RowSpec
from .trajectory import PHRASES, Call, Trajectory, terminal, write_call
from .webtools import RESEARCH, bench_script_output, bench_table, extract_result, paragraph, prose_slots, search_results


class ResearchRun(Run):
    """One library-research trajectory: search, read, benchmark, write an ADR."""

    def __init__(self, rng: random.Random, spec: RowSpec, topic: Topic):
        super().__init__(rng, spec)
        self.topic = topic
        self.cwd = f"/workspace/{rng.choice(('platform-docs', 'architecture', 'eng-handbook', 'backend'))}"
        tools = ["web_search", "web_extract", "terminal", "read_file", "write_file"]
        self.t = Trajectory(rng, spec.lang, tools, self.cwd, "research")
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

    # -- actions -------------------------------------------------------------

    def search(self, query: str, n: int, limit: int, plan: str = "search") -> None:
        """A web_search step whose result URLs become candidates for later extracts."""
        content, urls = search_results(self.rng, self.topic, query, n)
        self.urls += urls
        call = Call("web_search", {"query": query, "limit": limit}, content)
        self.t.step(plan, self.slots(query=f'"{query}"'), [call], ("web", {}))

    def act_search(self, plan: str = "search") -> None:
        rng, topic = self.rng, self.topic
        # Every query's random parts are drawn, in this order, before one query is chosen.
        slots = {
            "lib0": topic.libs[0],
            "lib1": topic.libs[1],
            "domain": topic.domain,
            "lib_a": rng.choice(topic.libs),
            "feature": rng.choice(topic.features),
            "lib_b": rng.choice(topic.libs),
            "lib_c": rng.choice(topic.libs),
        }
        query = rng.choice(RESEARCH["queries"]).format(**slots)
        n = int(max(3, min(10, self.room() / 85)))
        self.search(query, n, n, plan)

    def act_search_first(self) -> None:
        libs = self.topic.libs
        self.search(f"{libs[0]} {libs[1]} {libs[2]} comparison", self.rng.randint(4, 6), 6)

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
        call = Call("web_extract", {"urls": urls}, extract_result(rng, self.topic, urls, sections))
        self.t.step(plan, self.slots(lib=lib), [call], ("web", {}))

    def extract_each(self, urls: list[str], sections: int, plan: str = "extract") -> None:
        """One web_extract call per URL, all in one turn."""
        rng = self.rng
        calls = [Call("web_extract", {"urls": [u]}, extract_result(rng, self.topic, [u], sections)) for u in urls]
        self.t.step(plan, self.slots(lib=", ".join(self.topic.libs)), calls, ("web", {}))

    def act_extract_parallel(self, plan: str = "extract") -> None:
        urls = self.pick_urls(self.rng.choice((2, 3)))
        self.extract_each(urls, int(max(2, min(6, self.room() / (260 * len(urls))))), plan)

    def act_bench(self, plan: str = "bench") -> None:
        out = bench_script_output(self.rng, self.topic, self.versions)
        cmd = f"python bench/{self.topic.slug}.py --rounds 5 --warmup 1"
        self.t.step(plan, self.slots(), [terminal(cmd, out)], ("generic", {}))

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

    # -- the decision record and the answer ----------------------------------

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
        out += ["## Decision", "", f"We adopt {self.winner}.", "", "## Consequences", ""]
        return "\n".join(out + [paragraph(rng, topic, self.winner, 2)])

    def write_adr(self) -> None:
        self.t.step("notes", self.slots(), [write_call(self.adr, self.adr_text())])

    def closing(self) -> None:
        words = self.rng.randint(600, 1400)
        self.t.step("diffstat", self.slots(), [terminal(f"wc -w {self.adr}", f"{words} {self.adr}")], ("generic", {}))
        self.t.step("diffstat", self.slots(), [terminal("git status --short", f"?? {self.adr}")], ("generic", {}))
        self.t.final(self.answer())

    def answer(self) -> str:
        rng, topic = self.rng, self.topic
        lang = self.lang if self.lang in RESEARCH["recommend"] else "en"
        head, h_why, h_cmp, h_next = RESEARCH["headers"][lang]
        feats = rng.sample(topic.features, 3)
        top = rng.randint(50, 900) * 100
        rec = self.recommendation(lang, feats, top)
        if lang == "zh":
            why = [t.format(**prose_slots(rng, topic, self.winner)) for t in rng.sample(RESEARCH["prose_zh"], 3)]
        else:
            why = [paragraph(rng, topic, self.winner, 1) for _ in range(3)]
        return "\n".join(
            [head, "", rec, "", h_why, ""]
            + [f"- {w}" for w in why]
            + ["", h_cmp, "", bench_table(rng, topic, self.winner, top), "", h_next, ""]
            + [f"- {s}" for s in rng.sample(RESEARCH["next_steps"][lang], 3)]
            + ["", f"ADR: `{self.adr}`"]
        )

    def recommendation(self, lang: str, feats: list[str], top: int) -> str:
        """The recommendation paragraph: the winner, a fallback and one to avoid."""
        rng, topic = self.rng, self.topic
        others = [ln for ln in topic.libs if ln != self.winner]
        return RESEARCH["recommend"][lang].format(
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

    # -- the run -------------------------------------------------------------

    def build(self) -> None:
        topic = self.topic
        if self.spec.special == "late_tool":
            return self.build_late_tool()
        tasks = PHRASES["tasks"]["library_research"]
        lang = self.lang if self.lang in tasks else "en"
        self.t.human(
            self.rng.choice(tasks[lang]).format(
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

    def closing_with_big_extract(self) -> None:
        """Re-read three long pages at the very end, then a long answer: the tail alone is over budget."""
        self.extract_each(self.pick_urls(3), 11)
        answer = self.answer()
        extra = "\n\n".join(paragraph(self.rng, self.topic, ln, 4) for ln in self.topic.libs)
        self.t.final(answer + "\n\n" + extra)

    def build_late_tool(self) -> None:
        """A long design discussion without tools; the first tool call comes in the second half."""
        rng, topic = self.rng, self.topic
        self.t.human(
            f"Before we write any code, let's think this through: {topic.question} for {topic.context}. "
            f"What are the main trade-offs between {', '.join(topic.libs)}?"
        )
        for q in rng.sample(RESEARCH["chat_questions"], 4):
            self.chat_answer()
            self.t.human(q.format(feature=rng.choice(topic.features)))
        self.chat_answer()
        self.t.human(
            "OK, that's helpful. Now please check current releases and benchmark claims, "
            f"and write the ADR to `{self.adr}`."
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
            [paragraph(rng, topic, lib, 2), ""] + bullets + ["", rng.choice(RESEARCH["chat_closers"])]
        )
        self.t.chat(text, rng.choice(RESEARCH["chat_reasoning"]))
