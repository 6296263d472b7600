"""The ShareGPT conversation being built: system prompt, reasoning turns, tool calls and answers."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from .data import load
from .randtext import call_id, numbered

PHRASES = load("phrases")
PROMPT = load("prompt")
SYSTEM_PROMPT = "\n".join(PROMPT["system"])

# Rough characters per demo-tokenizer token by kind of run, used only to size rows while generating.
CHARS_PER_TOKEN = {"coding": 3.4, "research": 3.9, "ops": 3.2}
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")


def est_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN["coding"]) -> float:
    """Rough demo-tokenizer token count: CJK characters cost about one token each."""
    cjk = len(CJK.findall(text))
    return (len(text) - cjk) / chars_per_token + cjk * 1.1


@dataclass
class Call:
    """One tool call and the content its tool returned."""

    name: str
    args: dict
    content: dict | str


def system_prompt(rng: random.Random, tools: list[str], cwd: str) -> str:
    """A Hermes-style function-calling system prompt listing `tools`."""
    specs = [{"type": "function", "function": {"name": name, **PROMPT["tool_schemas"][name]}} for name in tools]
    kind = "research" if "web_extract" in tools else "coding" if "write_file" in tools else "ops"
    date = f"2025-{rng.randint(1, 6):02d}-{rng.randint(1, 28):02d}"
    persona = rng.choice(PROMPT["personas"][kind])
    return SYSTEM_PROMPT.format(persona=persona, tools=json.dumps(specs), cwd=cwd, date=date)


class Trajectory:
    """Builds a ShareGPT conversation turn by turn, tracking size and tool-call count."""

    def __init__(self, rng: random.Random, lang: str, tools: list[str], cwd: str, kind: str):
        self.rng = rng
        self.lang = lang
        self.tools = tools
        self.kind = kind
        self.cwd = cwd
        self.cpt = CHARS_PER_TOKEN[kind]
        self.turns: list[dict[str, str]] = []
        self.n_calls = 0
        self.obs: tuple[str, dict] | None = None
        self.size = 0.0
        self.add("system", system_prompt(rng, tools, cwd))

    def add(self, role: str, value: str) -> None:
        self.turns.append({"from": role, "value": value})
        self.size += est_tokens(value, self.cpt)

    def human(self, text: str) -> None:
        self.add("human", text)

    def think(self, plan_key: str, slots: dict, extra: bool = True) -> str:
        """Reasoning text: an observation about the last result, a plan, maybe a musing."""
        rng, lang = self.rng, self.lang
        parts = []
        if self.obs is not None:
            key, obs_slots = self.obs
            parts.append(rng.choice(PHRASES["observations"][lang][key]).format(**obs_slots))
        func = str(slots.get("func", ""))
        musings = [
            m
            for m in PHRASES["musings"][self.kind][lang]
            if "{func}" not in m or re.fullmatch(r"[A-Za-z_]\w*", func)
        ]
        if extra and musings and rng.random() < (0.45 if lang == "en" else 0.25):
            parts.append(rng.choice(musings).format(**{"pkg": "the package", **slots}))
        parts.append(rng.choice(PHRASES["plans"][lang][plan_key]).format(**slots))
        text = ("" if lang == "zh" else " ").join(parts)
        if lang == "en" and rng.random() < 0.3:
            text += "\n\n" + rng.choice(PHRASES["asides"])
        return text

    def step(self, plan_key: str, slots: dict, calls: list[Call], obs: tuple[str, dict] | None = None) -> None:
        """One gpt turn issuing `calls`, followed by one tool turn per call."""
        rng = self.rng
        ids = [call_id(rng) for _ in calls]
        lead = rng.choice(PHRASES["leads"][self.lang]) if rng.random() < 0.5 else ""
        body = f"<think>\n{self.think(plan_key, slots)}\n</think>\n" + (lead + "\n" if lead else "")
        body += "\n".join(
            f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.args}, ensure_ascii=False)}\n</tool_call>"
            for c in calls
        )
        self.add("gpt", body)
        for cid, c in zip(ids, calls):
            payload = {"tool_call_id": cid, "name": c.name, "content": c.content}
            self.add("tool", f"<tool_response>\n{json.dumps(payload, ensure_ascii=False)}\n</tool_response>")
        self.n_calls += len(calls)
        self.obs = obs or ("generic", {})

    def chat(self, text: str, reasoning: str) -> None:
        """A gpt turn that answers in prose without calling tools."""
        self.add("gpt", f"<think>\n{reasoning}\n</think>\n{text}")

    def final(self, text: str) -> None:
        """The closing gpt answer, with no tool call."""
        reasoning = self.think("final", {}, extra=False)
        self.add("gpt", f"<think>\n{reasoning}\n</think>\n{text}")


def terminal(command: str, output: str, exit_code: int = 0, error: str | None = None) -> Call:
    """A terminal call whose content is the tool's JSON result."""
    if exit_code and error is None:
        error = f"command exited with code {exit_code}"
    return Call("terminal", {"command": command}, {"output": output, "exit_code": exit_code, "error": error})


def read_call(path: str, lines: list[str], offset: int = 1, limit: int | None = None) -> Call:
    """A read_file call returning numbered lines."""
    end = len(lines) if limit is None else min(len(lines), offset - 1 + limit)
    args: dict = {"path": path}
    if offset > 1 or limit is not None:
        args.update({"offset": offset, "limit": limit or end - offset + 1})
    content = {
        "content": numbered(lines[offset - 1 : end], offset),
        "total_lines": len(lines),
        "truncated": end < len(lines),
    }
    return Call("read_file", args, content)


def write_call(path: str, content: str) -> Call:
    """A write_file call and its success result."""
    return Call(
        "write_file",
        {"path": path, "content": content},
        {"success": True, "path": path, "bytes_written": len(content.encode())},
    )


def final_answer(
    lang: str,
    cause: str,
    changes: list[tuple[str, str]],
    checks: list[tuple[str, str]],
    notes: list[str],
    intro: str = "",
    cause_title: str | None = None,
) -> str:
    """A markdown final report with localized headings."""
    head, h_cause, h_changes, h_checks, h_notes = PHRASES["answer_headers"][lang]
    h_cause = cause_title or h_cause
    out = [head, ""]
    if intro:
        out += [intro, ""]
    out += [h_cause, "", cause, "", h_changes, ""] + [f"- `{path}`: {desc}" for path, desc in changes]
    out += ["", h_checks, ""] + [f"- `{cmd}` → {result}" for cmd, result in checks]
    if notes:
        out += ["", h_notes, ""] + [f"- {note}" for note in notes]
    return "\n".join(out)
