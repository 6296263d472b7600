"""Rows like SWE-agent's trajectories, in three dialects: one task request, then many assistant
calls and long observations (files read, tests run, searches), some of them repeated (the same file
read twice, the same failing test), and a final answer. Used by tests/test_prune.py and make bench.

Dialects: `hermes` (ShareGPT, <tool_call> and <tool_response> blocks), `openai` (messages with
tool_calls and tool_call_id) and `llamafactory` (function_call and observation turns). Every tool
output is the same JSON object in each: {"output": TEXT, "exit_code": N}.
"""

from __future__ import annotations

import json
from random import Random

SYSTEM = "You are an autonomous programmer working in a repository through a shell. Use the bash tool."
FILES = ["src/astropy/io/fits/card.py", "src/astropy/io/fits/header.py", "src/astropy/units/core.py",
         "tests/io/test_card.py", "src/astropy/utils/misc.py"]
FAILING_TEST = "python -m pytest tests/io/test_card.py -x -q"


def _file_text(path: str, lines: int) -> str:
    return "\n".join(f"{n:5d}| {'    ' * (n % 3)}value_{n} = parse_{path.split('/')[-1][:-3]}(raw[{n}], strict={n % 2 == 0})"
                     for n in range(1, lines + 1))


def _failing_run(lines: int) -> str:
    head = [f"tests/io/test_card.py::test_case_{j} PASSED" for j in range(lines - 6)]
    tail = ["tests/io/test_card.py::test_float_repr FAILED", "Traceback (most recent call last):",
            '  File "src/astropy/io/fits/card.py", line 1301, in _format_float',
            "AssertionError: '0.009125' != '0.009124999999999999'", "FAILED tests/io/test_card.py::test_float_repr",
            "1 failed"]
    return "\n".join(head + tail)


def steps(seed: int, n: int) -> list[tuple[str, dict]]:
    """`n` (thought, output) steps: reads, searches and test runs, some repeating an earlier output."""
    rnd = Random(seed)
    out = []
    for k in range(n):
        kind = rnd.choice(("read", "read", "test", "grep"))
        if kind == "read":
            path = rnd.choice(FILES)
            command, output = f"cat {path}", {"output": _file_text(path, 10 + 4 * FILES.index(path)), "exit_code": 0}
        elif kind == "test":
            command, output = FAILING_TEST, {"output": _failing_run(14), "exit_code": 1}
        else:
            word = rnd.choice(("_format_float", "Card", "strict", "parse_card"))
            hits = [f"src/astropy/io/fits/card.py:{100 + 17 * j}: uses {word} here ({seed}.{k}.{j})" for j in range(12)]
            command, output = f"grep -rn {word} src", {"output": "\n".join(hits), "exit_code": 0}
        thought = (f"Step {k}: to find why the float repr differs I will run `{command}` and read what it shows "
                   f"about {rnd.choice(('the parser', 'the card format', 'the header', 'the failing test'))}. If it does not "
                   "explain the extra digits, I will look at how the value is rounded before it is written.")
        out.append((thought, {"command": command, "output": output}))
    return out


def row(dialect: str, seed: int, n: int) -> dict:
    """One row of `n` steps in `dialect`."""
    task = f"Task {seed}: `Card` writes 0.009125 as 0.009124999999999999; make `_format_float` use the shortest repr."
    plan = steps(seed, n)
    final = f"Task {seed}: `_format_float` now tries str(value) first; the test passes."
    if dialect == "openai":
        return {"id": seed, "messages": _openai(task, plan, final)}
    if dialect == "llamafactory":
        return {"id": seed, "conversations": _llamafactory(task, plan, final)}
    return {"id": seed, "conversations": _hermes(task, plan, final)}


def _hermes(task: str, plan, final: str) -> list[dict]:
    turns = [{"from": "system", "value": SYSTEM}, {"from": "human", "value": task}]
    for k, (thought, step) in enumerate(plan):
        call = {"name": "bash", "arguments": {"command": step["command"]}}
        turns.append({"from": "gpt", "value": f"<think>\n{thought}\n</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"})
        answer = {"tool_call_id": f"call_{k}", "name": "bash", "content": step["output"]}
        turns.append({"from": "tool", "value": f"<tool_response>\n{json.dumps(answer)}\n</tool_response>"})
    return turns + [{"from": "gpt", "value": final}]


def _openai(task: str, plan, final: str) -> list[dict]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    for k, (thought, step) in enumerate(plan):
        call = {"id": f"call_{k}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": step["command"]})}}
        messages.append({"role": "assistant", "content": thought, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{k}", "name": "bash", "content": json.dumps(step["output"])})
    return messages + [{"role": "assistant", "content": final}]


def _llamafactory(task: str, plan, final: str) -> list[dict]:
    # LLaMA-Factory's function_call turn holds the call alone: the thought has no place of its own.
    turns = [{"from": "human", "value": task}]
    for _, step in plan:
        turns.append({"from": "function_call", "value": json.dumps({"name": "bash", "arguments": {"command": step["command"]}})})
        turns.append({"from": "observation", "value": json.dumps(step["output"])})
    return turns + [{"from": "gpt", "value": final}]


def rows(dialect: str, count: int, seed: int = 0) -> list[dict]:
    """`count` rows of 8 to 30 steps."""
    rnd = Random(seed)
    return [row(dialect, seed + i, rnd.randint(8, 30)) for i in range(count)]
