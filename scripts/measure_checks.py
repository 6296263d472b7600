"""The summary checks over good summaries: how many a check would wrongly turn away (docs/summarizers.md, "Summary checks").

Three sets, each judged against the request body trajcomp would send for it:
  extractive   the extractive summarizer's summaries of every row of data_samples/, prose and handoff
  server       the test server's normal answer to each of those requests (tests/openai_server.py)
  handwritten  tests/fixtures/good_summaries.json: prose and handoff notes in English, Chinese,
               Spanish and French, each for its row of data_samples/
and, the other way, the refusals a model writes that must fail the refusal check:
  refusals     tests/fixtures/refusals.json: three shapes (a refusal paragraph, "unfortunately" with
               reasons and an offer, one line) in each language the refusal check knows
    python scripts/measure_checks.py     (prints each set's answers and false positives, and the
                                          refusals that pass)
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from openai_server import summarize as server_answer  # noqa: E402

from trajcomp.core.compressor import TrajectoryCompressor  # noqa: E402
from trajcomp.core.config import load_config  # noqa: E402
from trajcomp.core.summary.summarizer import Summarizer  # noqa: E402
from trajcomp.core.counting.tokens import TokenCounter  # noqa: E402
from trajcomp.summarizers.checks import Checks, failed_check  # noqa: E402
from trajcomp.summarizers.extractive import ExtractiveSummarizer  # noqa: E402
from trajcomp.summarizers.openai import OpenAISummarizer, clean_summary  # noqa: E402

SAMPLES = sorted((ROOT / "data_samples").glob("*.jsonl"))
HANDWRITTEN = ROOT / "tests" / "fixtures" / "good_summaries.json"
REFUSALS = ROOT / "tests" / "fixtures" / "refusals.json"
STYLES = ("prose", "handoff")


@dataclass
class Measured:
    answers: int = 0
    failures: list = field(default_factory=list)  # (check, row id, answer)

    @property
    def rate(self) -> float:
        return len(self.failures) / self.answers if self.answers else 0.0


class Recording(Summarizer):
    """The extractive summarizer, noting each request and its summary with the row it came from."""

    name = "extractive"

    def __init__(self, inner: Summarizer, row_id: list):
        self.inner, self.row_id, self.seen = inner, row_id, []

    async def summarize(self, request):
        summary = await self.inner.summarize(request)
        self.seen.append((self.row_id[0], request, summary.text))
        return summary


def requests(style: str, limit: int | None = None):
    """(row id, request, extractive summary) of every summary made for the samples under configs/demo.yaml."""
    config = load_config(ROOT / "configs" / "demo.yaml", summary_style=style)
    counter = TokenCounter(config.tokenizer_name)
    current = [None]
    recording = Recording(ExtractiveSummarizer(config, counter), current)
    compressor = TrajectoryCompressor(config, counter, recording)
    rows = [json.loads(line) for path in SAMPLES for line in path.read_text(encoding="utf-8").splitlines()]

    async def run():
        for row in rows[:limit]:
            current[0] = row["id"]
            await compressor.compress_row(row)

    asyncio.run(run())
    return config, counter, recording.seen


def measure(limit: int | None = None) -> dict[str, Measured]:
    """Each set's answers and the ones a check fails."""
    sets = {name: Measured() for name in ("extractive", "server", "handwritten")}
    handwritten = json.loads(HANDWRITTEN.read_text(encoding="utf-8"))
    for style in STYLES:
        config, counter, seen = requests(style, limit)
        checks, openai = Checks.from_config(config), OpenAISummarizer(config, counter)
        first_body = {}
        for row_id, request, text in seen:
            body = openai.payload(request)
            first_body.setdefault(row_id, body)
            _judge(sets["extractive"], checks, counter, row_id, text, body)
            _judge(sets["server"], checks, counter, row_id, clean_summary(server_answer(body["messages"])), body)
        for entry in handwritten:
            if entry["style"] == style and entry["id"] in first_body:
                _judge(sets["handwritten"], checks, counter, entry["id"], entry["text"], first_body[entry["id"]])
    return sets


def refusals() -> dict[str, Measured]:
    """Each language's refusals, judged against a real request body; `failures` lists those caught."""
    config, counter, seen = requests("prose", limit=1)
    body, checks = OpenAISummarizer(config, counter).payload(seen[0][1]), Checks.from_config(config)
    measured = {}
    for lang, texts in json.loads(REFUSALS.read_text(encoding="utf-8")).items():
        measured[lang] = Measured()
        for text in texts:
            _judge(measured[lang], checks, counter, lang, text, body)
    return measured


def _judge(into: Measured, checks: Checks, counter, row_id: str, text: str, body: dict) -> None:
    into.answers += 1
    failed = failed_check(text, body, checks, counter)
    if failed:
        into.failures.append((failed, row_id, text))


def main() -> None:
    for name, m in measure().items():
        print(f"{name:12} {m.answers:4} answers, {len(m.failures)} failed a check ({m.rate:.1%})")
        for check, row_id, text in m.failures:
            print(f"    {check}: {row_id}: {text[:160]!r}")
    measured = refusals()
    caught = {lang: sum(check == "refusal" for check, _, _ in m.failures) for lang, m in measured.items()}
    answers = sum(m.answers for m in measured.values())
    print(f"refusals     {answers:4} answers in {len(caught)} languages, "
          f"{sum(caught.values())} failed the refusal check")
    print("    " + ", ".join(f"{lang} {caught[lang]} of {m.answers}" for lang, m in measured.items()))


if __name__ == "__main__":
    main()
