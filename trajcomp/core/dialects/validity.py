"""What a trainer needs of a row's structure, in every dialect, stated once.

`problems(native, fmt)` counts what a row breaks: a call not followed by its result, a result that
follows no call, two human turns in a row, LLaMA-Factory's alternation broken. An output row may
break nothing its input did not, and keeps its last turn's role (`new_problems`): the row core's
promise, property-tested in every dialect (tests/test_validity.py).

A segment row that the next one continues (`continued`, ShareGPT dialects) may end on a call: in
LLaMA-Factory's alternation a row ends on the assistant's side, and in a chain of calls each such turn is
a call, so no cut keeps a call and its observation in one row. The segment ends on the call (LLaMA-Factory
trains every assistant turn), and the next segment leaves the call out: its observation joins that
segment's summary turn (a user turn there), so LLaMA-Factory, which reads no mark, trains the call once.

Calls and results, by dialect:
- Hermes ShareGPT: a gpt turn holding `<tool_call>` blocks, answered by the `tool` turn(s) right after it;
- LLaMA-Factory: a `function_call` turn, answered by the `observation` right after it;
- SWE-agent and OpenHands v0 (text calls, observations.py): a gpt turn holding `<function=...>` markup
  or answered by an observation, paired with the observation right after it by place;
- OpenAI `messages`: an assistant's `tool_calls`, each answered by id in the tool messages right
  after it (parallel calls included); the legacy `function_call`, by the `function` message after it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from .openai_rows import OpenAIMessages
from .text_calls import markup_calls

CALL_UNANSWERED = "call_unanswered"
RESULT_WITHOUT_CALL = "result_without_call"
HUMAN_AFTER_HUMAN = "human_after_human"
ALTERNATION_BROKEN = "alternation_broken"
LAST_ROLE_CHANGED = "last_role_changed"


def alternation_parity(roles: Sequence[str]) -> int | None:
    """The index parity of the user-side turns when `roles` follow LLaMA-Factory's alternation rule, else None.

    The rule: after an optional leading system turn, user-side turns (human, or tool: an observation)
    and gpt turns (a reply or a function_call) alternate, starting user-side and ending on gpt.
    """
    first = 1 if roles and roles[0] == "system" else 0
    body = roles[first:]
    sides_ok = all((role == "gpt") == (i % 2 == 1) and role != "system" for i, role in enumerate(body))
    return first if sides_ok and len(body) % 2 == 0 else None


def problems(native: Sequence[Any], fmt, continued: bool = False) -> Counter:
    """How often the row breaks each rule (an empty Counter: a row a trainer takes as it is); a `continued`
    row's last call is answered in the next segment."""
    turns = fmt.turns(native)
    roles = [t.role for t in turns]
    found: Counter = Counter()
    found[HUMAN_AFTER_HUMAN] = sum(a == b == "human" for a, b in zip(roles, roles[1:]))
    if isinstance(fmt, OpenAIMessages):
        _openai_pairs(native, found)
    else:
        _turn_pairs([_is_call(fmt, native, turns, i) for i in range(len(turns))], roles, found, continued)
    if getattr(fmt, "alternation", False) and alternation_parity(roles) is None:
        found[ALTERNATION_BROKEN] = 1
    return +found  # only what is there


def new_problems(before: Sequence[Any], after: Sequence[Any], fmt) -> Counter:
    """What `after` (a compressed row) breaks that `before` (its input) did not; and a changed last role."""
    added = problems(after, fmt) - problems(before, fmt)
    roles = ([t.role for t in fmt.turns(rows)][-1:] for rows in (before, after))
    if next(roles) != next(roles):
        added[LAST_ROLE_CHANGED] = 1
    return added


def _is_call(fmt, native: Sequence[dict], turns: Sequence, i: int) -> bool:
    view = turns[i]
    if view.role != "gpt":
        return False
    if native[i].get(fmt.role_key) == "function_call" or "<tool_call>" in view.text or markup_calls(view.text):
        return True
    # a thought-action turn (SWE-agent's fenced command) is a call where an observation answers it
    prefix_of = getattr(fmt, "observation_prefix", None)
    return i + 1 < len(native) and prefix_of is not None and prefix_of(native[i + 1]) is not None


def _turn_pairs(calls: list[bool], roles: list[str], found: Counter, continued: bool) -> None:
    """ShareGPT dialects: a call is followed by a result (the last turn's, in a continued row, in the next
    segment); a result follows a call or another result."""
    for i, role in enumerate(roles):
        if calls[i] and (roles[i + 1] != "tool" if i + 1 < len(roles) else not continued):
            found[CALL_UNANSWERED] += 1
        if role == "tool" and (i == 0 or not (calls[i - 1] or roles[i - 1] == "tool")):
            found[RESULT_WITHOUT_CALL] += 1


def _openai_pairs(messages: Sequence[dict], found: Counter) -> None:
    """Every call id answered in the tool messages right after its assistant message, and every tool
    message answering a call of that message."""
    waiting: set[str] = set()
    legacy = False  # a function_call awaiting its function message
    for message in messages:
        role = message.get("role")
        if role == "tool":
            answered = message.get("tool_call_id")
            if answered in waiting:
                waiting.discard(answered)
            else:
                found[RESULT_WITHOUT_CALL] += 1
            continue
        if role == "function":
            found[RESULT_WITHOUT_CALL] += not legacy
            legacy = False
            continue
        found[CALL_UNANSWERED] += len(waiting) + legacy
        waiting = {c["id"] for c in message.get("tool_calls") or []} if role == "assistant" else set()
        legacy = role == "assistant" and message.get("function_call") is not None
    found[CALL_UNANSWERED] += len(waiting) + legacy
