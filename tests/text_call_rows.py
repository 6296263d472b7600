"""Rows in the shapes of SWE-agent and OpenHands v0 trajectories, written by hand for the tests.

Both carry a top-level `system` string and `conversations` of `role`/`content` turns, call tools in
the assistant's text and send each result back as a user turn:
- `swe_agent`: the function-call markup (`<function=bash>`, `<parameter=command>`) or, with
  `fenced=True`, the thought-action style (a DISCUSSION and the command in a ``` fence); results
  open with `OBSERVATION:`;
- `openhands`: the same markup with OpenHands' tool names; results open with
  `EXECUTION RESULT of [<tool>]:`.
Each has one task request first and a second real user message midway, so a test can check that
every real user turn is kept verbatim and that no observation is quoted as one.
"""

from __future__ import annotations

TASK = "Fix the lexer: Tokenise drops the last token when the input has no trailing newline."
FOLLOW_UP = "Also keep the public API unchanged, please; other packages import Tokenise."
SYSTEM = "You are a careful software engineer working in a Go repository through a shell."


def _file(name: str, lines: int) -> str:
    """A source file's text that holds the word error without reporting one."""
    body = [f"{n:4d}\tfunc step{n}(s *scanner) error {{ return s.next({n}) }}" for n in range(1, lines + 1)]
    return "\n".join([f"// {name}: the lexer (returns an error when the input is not valid UTF-8)", *body])


def _failing_test() -> str:
    return "\n".join(["=== RUN   TestTokenise", "    lexer_test.go:41: got 2 tokens, want 3",
                      "--- FAIL: TestTokenise (0.00s)", "FAIL", "exit status 1"])


def _markup(name: str, **params: str) -> str:
    return f"<function={name}>\n" + "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items()) + "</function>"


def _steps(files: int, lines: int) -> list[tuple[str, str, str]]:
    """(thought, command, output) steps: files read, then the failing test."""
    names = [f"lexer{k}.go" for k in range(files)]
    steps = [(f"Let me read {n} to see how Tokenise ends.", f"cat {n}", _file(n, lines)) for n in names]
    return steps + [("Now run the tests.", "go test ./...", _failing_test())]


def swe_agent(files: int = 6, lines: int = 40, fenced: bool = False, follow_at: int | None = None) -> dict:
    turns = [{"role": "user", "content": TASK}]
    for k, (thought, command, output) in enumerate(_steps(files, lines)):
        call = f"DISCUSSION\n{thought}\n\n```\n{command}\n```" if fenced else f"{thought}\n\n" + _markup("bash", command=command)
        turns += [{"role": "assistant", "content": call}, {"role": "user", "content": f"OBSERVATION:\n{output}"}]
        if k == (files // 2 if follow_at is None else follow_at):
            turns += [{"role": "assistant", "content": "I found where the last token is lost."},
                      {"role": "user", "content": FOLLOW_UP}]
    turns.append({"role": "assistant", "content": "The loop now emits the pending token at end of input."})
    return {"system": SYSTEM, "conversations": turns}


def openhands(files: int = 6, lines: int = 40, follow_at: int | None = None) -> dict:
    turns = [{"role": "user", "content": TASK}]
    for k, (thought, command, output) in enumerate(_steps(files, lines)):
        turns += [{"role": "assistant", "content": f"{thought}\n" + _markup("execute_bash", command=command)},
                  {"role": "user", "content": f"EXECUTION RESULT of [execute_bash]:\n{output}"}]
        if k == (files // 2 if follow_at is None else follow_at):
            turns += [{"role": "assistant", "content": "I found where the last token is lost."},
                      {"role": "user", "content": FOLLOW_UP}]
    turns.append({"role": "assistant", "content": "The loop now emits the pending token at end of input."})
    return {"system": SYSTEM, "conversations": turns}


def as_messages(row: dict) -> dict:
    """The same row as OpenAI `messages` (the system prompt its first message), as SFT sets also ship them."""
    return {"messages": [{"role": "system", "content": row["system"]}, *row["conversations"]]}
