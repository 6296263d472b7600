"""Pruning: old tool outputs become one-line stubs (stubs.py), before any summary, in one order.

The order (`candidates`), among the tool turns outside the protected head and tail:
1. older copies of a duplicated output (the same tool's output, identical to a later one's,
   whatever the call ids), oldest first; their stub names the newest copy's call, which stays true
   whatever else is stubbed or summarized later;
2. then every other tool output, oldest first (the newest copy among them, as the live compactor
   prunes it: the trajectory still says what it held, through its call and the older copies' stubs).
Each output is decided alone, also beside others in one turn: one of `prune_min_chars` characters
or fewer is never stubbed, nor one whose stub would not be shorter; its siblings may be. Only a stub's output changes: the turn keeps its role and place, and the ids and
names its dialect pairs calls and results by (Hermes `<tool_response>` JSON, OpenAI `tool_call_id`
and `name`; LLaMA-Factory pairs by place), and an observation's head (`OBSERVATION:`, OpenHands'
`EXECUTION RESULT of [tool]:`), which keeps it an observation; its call is read from the text-call
markup or fenced command of the turn before it (text_calls.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..dialects.observations import split, tool_named
from .planner import PlanParams, protected_bounds
from .stubs import Output, StubStyle
from ..dialects.text_calls import fenced_call, markup_calls
from ..dialects.turn import Turn

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
OPEN_RESPONSE = re.compile(r"<tool_response>\s*")
CLOSE_RESPONSE = re.compile(r"\s*</tool_response>")
_DECODER = json.JSONDecoder()
# The keys a <tool_response> JSON object holds its output under, most usual first; its other keys (ids, name) stay.
OUTPUT_KEYS = ("content", "result", "output", "observation", "response")


@dataclass(frozen=True)
class Candidate:
    """A tool turn that may be stubbed: its index, the turn stubbed (native and as the planner sees it)."""

    index: int
    native: dict[str, Any]
    text: str
    duplicate: bool  # an older copy of a later identical output


@dataclass(frozen=True)
class Block:
    """One output inside a tool turn: its tool's name, its content, and where it lies in the turn's text."""

    name: str | None
    content: Any
    payload: dict[str, Any] | None  # the <tool_response> JSON object holding it (None: the turn's whole text)
    span: tuple[int, int] | None  # of the block's JSON in the turn's text
    key: str | None = None  # the payload's key holding the output (None with a payload: no output to stub)
    call_id: str | None = None  # the id of the call it answers, when the result names one

    @property
    def stubbable(self) -> bool:
        return self.payload is None or self.key is not None


def candidates(native: Sequence[dict], fmt, turns: Sequence[Turn], params: PlanParams, style: StubStyle,
               min_chars: int, within: Sequence[int] | None = None) -> list[Candidate]:
    """The tool turns pruning may stub, in the order it stubs them: those outside the protected head and
    tail, or `within` (a segment's closing outputs, core/segments/segments.py)."""
    roles = [t.role for t in turns]
    eligible = within if within is not None else range(*protected_bounds(roles, params))
    outputs = _outputs(native, fmt, turns)
    newest: dict[tuple, int] = {}  # an output's identity -> the last turn holding it
    for i, blocks in outputs.items():
        newest[_identity(blocks)] = i
    dups, others = [], []
    for i in eligible:
        if i not in outputs:
            continue
        j = newest[_identity(outputs[i])]
        later = outputs[j][0][1] if j > i else None
        stubs = [_stub(block, output, style, later, min_chars) for block, output in outputs[i]]
        if not any(stubs):
            continue
        stubbed = _stubbed(native, fmt, turns, i, outputs[i], stubs)
        (dups if later is not None else others).append(Candidate(i, *stubbed, later is not None))
    return dups + others


def _stub(block: Block, output: Output, style: StubStyle, later: Output | None, min_chars: int) -> str | None:
    """The stub of one output of a turn; None: it stays (short, not stubbable, or its stub is not shorter)."""
    if not block.stubbable or len(output.text) <= min_chars:
        return None
    stub = style.text(output, later)
    written = block.content if isinstance(block.content, str) else json.dumps(block.content, ensure_ascii=False)
    return stub if len(stub) < len(written) else None


def _identity(blocks: list[tuple[Block, Output]]) -> tuple:
    return tuple((o.tool, json.dumps(b.content, sort_keys=True, ensure_ascii=False)) for b, o in blocks)


def _outputs(native: Sequence[dict], fmt, turns: Sequence[Turn]) -> dict[int, list[tuple[Block, Output]]]:
    """Every tool turn's outputs, each with what a stub says of it (its call found in the turn before the results)."""
    found: dict[int, list[tuple[Block, Output]]] = {}
    calls: list[dict] = []
    position = 0  # the outputs seen since the calls' turn: the next one answers calls[position]
    for i, turn in enumerate(turns):
        if turn.role != "tool":
            answered = i + 1 < len(native) and _observation(fmt, native[i + 1]) is not None
            calls, position = (_calls(native[i], fmt, turn.text, answered) if turn.role == "gpt" else []), 0
            continue
        pairs = []
        for block in _blocks(native[i], fmt, turn.text):
            call = _call_for(calls, position, block)
            position += 1
            name = block.name or call.get("name") or ""
            pairs.append((block, Output.of(name, call.get("arguments"), block.content)))
        found[i] = pairs
    return found


def _call_for(calls: list[dict], position: int, block: Block) -> dict:
    """The call an output answers: the one its id names; without ids, the one at its place, unless
    the output names another tool."""
    by_id = next((c for c in calls if block.call_id is not None and _call_id(c) == block.call_id), None)
    if by_id is not None:
        return by_id
    name = block.name
    if position < len(calls) and (name is None or calls[position].get("name") == name):
        return calls[position]
    return next((c for c in calls if name is not None and c.get("name") == name), {})


def _calls(turn: dict, fmt, text: str, answered: bool = False) -> list[dict]:
    """A gpt turn's calls as {"name", "arguments", "id"?}: an OpenAI message's tool_calls, Hermes
    <tool_call> blocks, `<function=...>` markup, a fenced command an observation answers, or a
    LLaMA-Factory function_call's JSON."""
    native = fmt.tool_calls(turn)
    if native:  # an OpenAI message without calls ([]) may still write them in its text
        return native
    if marked := markup_calls(text):
        return marked
    if answered and "<tool_call>" not in text and (fenced := fenced_call(text)):
        return [fenced]
    if native is not None:  # an OpenAI message: no text call, and its content is no function_call JSON
        return []
    found = [_loads(raw) for raw in TOOL_CALL.findall(text)] if "<tool_call>" in text else [_loads(text)]
    found = [item for value in found for item in (value if isinstance(value, list) else [value])]
    return [call for call in found if isinstance(call, dict)]


def _blocks(turn: dict, fmt, text: str) -> list[Block]:
    """A tool turn's outputs: an OpenAI message's content (from its fields), else its <tool_response>
    blocks, else its whole text as one output."""
    result = fmt.tool_result(turn)
    if result is not None:
        return [Block(result.get("name"), result["content"], result, None, "content", result.get("tool_call_id"))]
    prefix = _observation(fmt, turn)
    if prefix is not None:  # the output after its head, which the stub keeps
        head, output = split(text, prefix)
        return [Block(tool_named(head), output, None, (len(head), len(text)))]
    return _text_blocks(text)


def _observation(fmt, turn: dict) -> str | None:
    """The observation prefix a ShareGPT turn opens with (None: not an observation, or another dialect)."""
    prefix_of = getattr(fmt, "observation_prefix", None)
    return prefix_of(turn) if prefix_of is not None else None


def response_ids(text: str) -> list[dict[str, Any] | None]:
    """What a stub leaves of a tool turn's text: each <tool_response> JSON object without its output
    (its ids and name), None for an output that is not such an object."""
    return [None if b.payload is None else {k: v for k, v in b.payload.items() if k != b.key} for b in _text_blocks(text)]


def _text_blocks(text: str) -> list[Block]:
    blocks, cursor = [], 0
    while opened := OPEN_RESPONSE.search(text, cursor):
        block, cursor = _json_block(text, opened.end()) or _raw_block(text, opened.end())
        if block is None:
            break
        blocks.append(block)
    return blocks or [Block(None, text, None, None)]


def _json_block(text: str, start: int) -> tuple[Block, int] | None:
    """The block whose JSON starts at `start`, read to the JSON's own end (an output may hold the
    text `</tool_response>`), and the index after its close; None: no JSON closed there."""
    try:
        payload, end = _DECODER.raw_decode(text, start)
    except ValueError:
        return None
    closed = CLOSE_RESPONSE.match(text, end)
    if closed is None:
        return None
    if isinstance(payload, dict):
        name = payload.get("name") if isinstance(payload.get("name"), str) else None
        key = next((k for k in OUTPUT_KEYS if k in payload), None)
        block = Block(name, payload.get(key), payload, (start, end), key, _call_id(payload))
        return block, closed.end()
    return Block(None, text[start:end], None, (start, end)), closed.end()


def _raw_block(text: str, start: int) -> tuple[Block | None, int]:
    """A block that is not JSON: its text up to the first close (None: the block is never closed)."""
    closed = CLOSE_RESPONSE.search(text, start)
    if closed is None:
        return None, len(text)
    return Block(None, text[start : closed.start()], None, (start, closed.start())), closed.end()


def _stubbed(native: Sequence[dict], fmt, turns: Sequence[Turn], i: int, outputs: list[tuple[Block, Output]],
             stubs: list[str]) -> tuple[dict, str]:
    """Turn `i` with a stub in place of each output, and its new text as the planner sees it."""
    turn, text = native[i], turns[i].text
    if fmt.tool_result(turn) is not None:  # the content is the output; the adapter renders the rest
        return _rendered(native, fmt, turns, i, fmt.with_text(turn, stubs[0]))
    pieces, cursor = [], 0
    for (block, _), stub in zip(outputs, stubs):
        if block.span is None:
            return fmt.with_text(turn, stub), stub
        if stub is None:  # this output stays as it is
            continue
        body = json.dumps({**block.payload, block.key: stub}, ensure_ascii=False) if block.payload is not None else stub
        pieces += [text[cursor : block.span[0]], body]
        cursor = block.span[1]
    new_text = "".join(pieces) + text[cursor:]
    return fmt.with_text(turn, new_text), new_text


def _rendered(native: Sequence[dict], fmt, turns: Sequence[Turn], i: int, new: dict) -> tuple[dict, str]:
    """`new` in place of turn `i`, and its text rendered by the adapter beside the call it answers."""
    caller = next((j for j in range(i - 1, -1, -1) if turns[j].role != "tool"), None)
    context = [native[caller]] if caller is not None else []
    return new, fmt.turns([*context, new])[-1].text


def _call_id(value: dict) -> str | None:
    """The id a call or a result carries (Hermes JSON says `id` or `tool_call_id`), if any."""
    found = value.get("tool_call_id", value.get("id"))
    return found if isinstance(found, str) else None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
