"""OpenAI `messages` rows: read (validated, every tool message answering a call) and written back,
tool_calls and content parts kept; see `OpenAIMessages`."""

from __future__ import annotations

import json
from typing import Any, Sequence

from .frame import NO_FRAME, Chat, Frame, frame_of
from .observations import prefix_of
from .turn import RowError, Turn

# OpenAI role -> planner role. "function" is the legacy (pre-tool_calls) form of "tool".
OPENAI_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "human",
    "assistant": "gpt",
    "tool": "tool",
    "function": "tool",
}
# Planner role -> the OpenAI role a new message of it takes (and a new turn of an OpenAI-style ShareGPT row).
OPENAI_NAMES = {"system": "system", "human": "user", "gpt": "assistant"}


class OpenAIMessages:
    """`{"messages": [{"role": ..., "content": ..., "tool_calls"?, "tool_call_id"?, "name"?}, ...], ...}` rows.

    Roles map to the planner's: system/developer -> "system", user -> "human", assistant -> "gpt",
    tool (and legacy function) -> "tool".

    `content` is a string, a list of parts, or null (only on an assistant message that makes calls).
    The text of a list of parts is the concatenation of its `{"type": "text", "text": ...}` parts, with
    no separator (as multimodal chat templates render them); other parts (images, audio...) are kept
    as they are but add no text.

    `Turn.text`, which is counted and summarized, is the message's text plus, on an assistant
    message, its `reasoning_content` first as `<think>\n...\n</think>\n\n` (as Qwen3 renders it) and one `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>` block per call (on its
    own line after the text; arguments decoded from their JSON string when they parse), and, on a
    tool message, `<tool_response>\n{"tool_call_id": ..., "name": ..., "content": ...}\n</tool_response>`
    (the name taken from the call it answers when the message has none). These are the Hermes blocks
    the extractive summarizer reads. It approximates, not reproduces, a training template's count
    (the JSON escaping of tool output costs a few tokens more than a raw rendering would).

    Tool pairing. The planner keeps a "gpt" turn together with the "tool" turns right after it:
    they are summarized together or kept together. That keeps every call with its answer only if
    each tool message answers a call of the nearest non-tool message before it, so `native_turns`
    requires exactly that and rejects anything else as "orphan_tool_message": a tool message with
    no call to answer, or one answering a call made before another message (a user turn, or a
    second assistant message). Compressing such a row could summarize the call and keep its
    answer, or the reverse, and leave an id without its partner. (Calls left unanswered in the
    input are accepted: compression moves them only together with their message.)

    A user message opening with one of `observations` (observations.py: SWE-agent's and OpenHands
    v0's results, sent as user messages) is a "tool" turn to the planner; the row keeps it as it is.
    """

    name = "openai"
    key = "messages"
    alternation = False  # tool messages pair with calls by id; `input.roles`/`input.dialect` do not apply

    def __init__(self, observations: tuple[str, ...] = (), frame: Frame = NO_FRAME):
        self.observations = observations
        self.frame = frame  # the row's top-level system and tools, rendered around its messages (frame.py)

    def bind(self, row: Any, schema: Any) -> "OpenAIMessages":
        """This adapter for one row: the schema's observation prefixes and the row's frame (no role names or
        dialect apply)."""
        prefixes = tuple(getattr(schema, "observations", ()))
        messages = row.get(self.key) if isinstance(row, dict) else None
        first = messages[0] if isinstance(messages, list) and messages and isinstance(messages[0], dict) else {}
        role = first.get("role")
        frame = frame_of(row, isinstance(role, str) and OPENAI_ROLES.get(role) == "system") if isinstance(row, dict) else NO_FRAME
        return self if (prefixes, frame) == (self.observations, self.frame) else OpenAIMessages(prefixes, frame)

    def observation_prefix(self, message: dict[str, Any]) -> str | None:
        """The prefix that makes a user message an observation (None: it is not one)."""
        if not self.observations or message.get("role") != "user":
            return None
        return prefix_of(content_text(message.get("content")), self.observations)

    def native_turns(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        """The row's message objects, validated (see the class docstring for tool pairing).

        Reasons: missing_messages, messages_not_a_list, turn_not_an_object, turn_missing_field,
        turn_not_a_string, unknown_role, invalid_content_part, invalid_tool_call, orphan_tool_message.
        """
        if self.key not in row:
            raise RowError("missing_messages", "the row has no 'messages' field")
        messages = row[self.key]
        if not isinstance(messages, list):
            raise RowError("messages_not_a_list", f"'messages' is {type(messages).__name__}, not a list")
        called_at: dict[str, int] = {}  # every call id seen so far -> the message that made it
        group = -1  # the nearest non-tool message
        for i, message in enumerate(messages):
            _check_message(i, message)
            role = message["role"]
            if role in ("tool", "function"):
                _check_answers(i, message, messages, group, called_at)
            else:
                group = i
                for call in _calls(message):
                    called_at[call["id"]] = i
        return messages

    def turns(self, native: list[dict[str, Any]]) -> list[Turn]:
        out = []
        names: dict[str, str] = {}  # call id -> function name, for the current assistant message
        for message in native:
            role = message["role"]
            if role not in ("tool", "function"):
                names = {c["id"]: c["function"]["name"] for c in _calls(message)}
            planner_role = "tool" if self.observation_prefix(message) is not None else OPENAI_ROLES[role]
            out.append(Turn(planner_role, _message_text(message, names)))
        return out

    def make_turn(self, role: str, text: str, like: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        """A new message of planner role `role`; not "tool", which needs a call to answer. Its content is
        in the shape of the row's messages `like` (parts_shaped): one text part, or a string."""
        if role not in OPENAI_NAMES:
            raise ValueError(f"cannot make an OpenAI message of role {role!r}")
        content: Any = [{"type": "text", "text": text}] if parts_shaped(like) else text
        return {"role": OPENAI_NAMES[role], "content": content}

    def with_text(self, turn: dict[str, Any], text: str) -> dict[str, Any]:
        """`turn` with its text set to `text`, every other field kept (the input is not changed).

        Meant for system/developer/user messages, which the compressor edits. String content is
        replaced. A list of parts keeps all its non-text parts: when `text` extends the current
        text (a prefix such as the summary, or a suffix such as the notice) one text part is added
        before or after the others; otherwise the text parts are replaced by one, where the first
        was. On an assistant message the rendered calls at the end of `text`, if there, are
        dropped (the calls themselves cannot be edited this way), and so is its rendered reasoning (its
        `reasoning_content` stays as it was); on a tool message `text` becomes
        the content. So `turns([with_text(m, t)])[0].text == t`, except on tool messages and on an
        assistant message whose calls do not end `t` (they are rendered after it again).
        """
        content = turn.get("content")
        old = content_text(content)
        if turn["role"] == "assistant":
            reasoning = _reasoning(turn)  # rendered into the text, kept in its own field: never in the content
            text = text.replace(reasoning, "", 1) if reasoning else text
            calls = _render_calls(turn)
            if calls and text.endswith(calls):
                text = text[: -len(calls)]
                text = text[:-1] if text.endswith("\n") else text  # the separator _message_text adds
        if isinstance(content, list):
            new_content: Any = _with_parts_text(content, old, text)
        elif content is None and text == "":
            new_content = None
        else:
            new_content = text
        return {**turn, "content": new_content}

    def with_turns(self, row: dict[str, Any], turns: list[dict[str, Any]]) -> dict[str, Any]:
        return {**row, self.key: turns}

    def tool_result(self, turn: dict[str, Any]) -> dict[str, Any] | None:
        """A tool message's output and ids, from its fields: {"tool_call_id"?, "name"?, "content"} (None: not a tool message)."""
        if turn.get("role") not in ("tool", "function"):
            return None
        fields = {"tool_call_id": turn.get("tool_call_id"), "name": turn.get("name")}
        return {**{k: v for k, v in fields.items() if v is not None}, "content": content_text(turn.get("content"))}

    def tool_calls(self, turn: dict[str, Any]) -> list[dict[str, Any]] | None:
        """An assistant message's calls as {"id"?, "name", "arguments"}, in order (the legacy function_call has no id)."""
        calls = [{"id": c["id"], **c["function"]} for c in _calls(turn)]
        legacy = turn.get("function_call") if turn.get("role") == "assistant" else None
        return calls + ([dict(legacy)] if legacy is not None else [])

    def chat_messages(self, native: list[dict[str, Any]], chat_roles: dict[str, str]) -> Chat:
        """The messages as they are (tool_calls, reasoning_content, name and all): OpenAI rows already
        speak the templates' language; with the row's frame."""
        return Chat(native, self.frame)


def _check_message(i: int, message: Any) -> None:
    if not isinstance(message, dict):
        raise RowError("turn_not_an_object", f"message {i} is {type(message).__name__}, not an object")
    if "role" not in message:
        raise RowError("turn_missing_field", f"message {i} has no 'role'")
    role = message["role"]
    if not isinstance(role, str):
        raise RowError("turn_not_a_string", f"message {i} 'role' is {type(role).__name__}, not a string")
    if role not in OPENAI_ROLES:
        raise RowError("unknown_role", f"message {i} has role {role!r} (expected one of {', '.join(OPENAI_ROLES)})")
    for field in ("name", "tool_call_id", "reasoning_content"):
        value = message.get(field)
        if value is not None and not isinstance(value, str):
            raise RowError("turn_not_a_string", f"message {i} '{field}' is {type(value).__name__}, not a string")
    if role == "tool" and message.get("tool_call_id") is None:
        raise RowError("turn_missing_field", f"message {i} (tool) has no 'tool_call_id'")
    calls = _check_calls(i, message)
    content = message.get("content")
    if content is None:
        if role == "assistant" and calls:
            return
        if "content" not in message:
            raise RowError("turn_missing_field", f"message {i} has no 'content'")
        raise RowError("turn_not_a_string", f"message {i} ({role}) 'content' is null")
    if isinstance(content, list):
        for j, part in enumerate(content):
            _check_part(i, j, part)
    elif not isinstance(content, str):
        raise RowError(
            "turn_not_a_string",
            f"message {i} 'content' is {type(content).__name__}, not a string, a list of parts or null",
        )


def _check_part(i: int, j: int, part: Any) -> None:
    where = f"message {i} content part {j}"
    if not isinstance(part, dict):
        raise RowError("invalid_content_part", f"{where} is {type(part).__name__}, not an object")
    if not isinstance(part.get("type"), str):
        raise RowError("invalid_content_part", f"{where} has no string 'type'")
    if part["type"] == "text" and not isinstance(part.get("text"), str):
        raise RowError("invalid_content_part", f"{where} is a text part without a string 'text'")


def _check_calls(i: int, message: dict[str, Any]) -> bool:
    """Validate `tool_calls` and legacy `function_call`; whether the message makes any call."""
    calls = message.get("tool_calls")
    legacy = message.get("function_call")
    if (calls or legacy is not None) and message["role"] != "assistant":
        raise RowError("invalid_tool_call", f"message {i} ({message['role']}) makes calls; only assistant messages may")
    if legacy is not None:
        _check_function(f"message {i} 'function_call'", legacy)
    if calls is None:
        return legacy is not None
    if not isinstance(calls, list):
        raise RowError("invalid_tool_call", f"message {i} 'tool_calls' is {type(calls).__name__}, not a list")
    seen: set[str] = set()
    for j, call in enumerate(calls):
        where = f"message {i} tool call {j}"
        if not isinstance(call, dict):
            raise RowError("invalid_tool_call", f"{where} is {type(call).__name__}, not an object")
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise RowError("invalid_tool_call", f"{where} has no string 'id'")
        if call["id"] in seen:
            raise RowError("invalid_tool_call", f"{where} repeats id {call['id']!r} of the same message")
        seen.add(call["id"])
        if call.get("type", "function") != "function":
            raise RowError("invalid_tool_call", f"{where} has type {call.get('type')!r}, not 'function'")
        _check_function(f"{where} 'function'", call.get("function"))
    return bool(calls) or legacy is not None


def _check_function(where: str, function: Any) -> None:
    if not isinstance(function, dict):
        raise RowError("invalid_tool_call", f"{where} is {type(function).__name__}, not an object")
    for field in ("name", "arguments"):
        if not isinstance(function.get(field), str):
            raise RowError("invalid_tool_call", f"{where} has no string '{field}'")


def _check_answers(i: int, message: dict[str, Any], messages: list, group: int, called_at: dict[str, int]) -> None:
    """A tool message must answer a call of the nearest non-tool message before it."""
    caller = messages[group] if group >= 0 else None
    if message["role"] == "function":  # legacy: no ids, it answers the function_call just before
        if caller is None or caller.get("function_call") is None:
            raise RowError("orphan_tool_message", f"message {i} (function) follows no assistant 'function_call'")
        return
    call_id = message["tool_call_id"]
    if caller is not None and any(c["id"] == call_id for c in _calls(caller)):
        return
    if call_id in called_at:
        detail = (
            f"message {i} answers tool call {call_id!r} of message {called_at[call_id]}, but message {group} "
            "comes between them: compressing could keep one and summarize the other"
        )
    else:
        detail = f"message {i} answers tool call {call_id!r}, which no assistant message before it made"
    raise RowError("orphan_tool_message", detail)


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    return (message.get("tool_calls") or []) if message.get("role") == "assistant" else []


def content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p["text"] for p in content if p.get("type") == "text")
    return content or ""


def _decoded(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _render_calls(message: dict[str, Any]) -> str:
    functions = [c["function"] for c in _calls(message)]
    if message.get("function_call") is not None:
        functions.append(message["function_call"])
    return "\n".join(
        "<tool_call>\n"
        + json.dumps({"name": f["name"], "arguments": _decoded(f["arguments"])}, ensure_ascii=False)
        + "\n</tool_call>"
        for f in functions
    )


def _message_text(message: dict[str, Any], names: dict[str, str]) -> str:
    text = content_text(message.get("content"))
    role = message["role"]
    if role == "assistant":
        calls = _render_calls(message)
        return _reasoning(message) + (f"{text}\n{calls}" if text and calls else text or calls)
    if role in ("tool", "function"):
        call_id = message.get("tool_call_id")
        name = message.get("name") or names.get(call_id or "")
        payload = {"tool_call_id": call_id, "name": name, "content": text}
        body = json.dumps({k: v for k, v in payload.items() if v is not None}, ensure_ascii=False)
        return f"<tool_response>\n{body}\n</tool_response>"
    return text


def _reasoning(message: dict[str, Any]) -> str:
    """An assistant message's reasoning_content as Qwen3-style templates render it before the text: part
    of the turn, counted with it in count_mode `turns` and summarized with it (never shortened apart)."""
    reasoning = message.get("reasoning_content") if message.get("role") == "assistant" else None
    return f"<think>\n{reasoning.strip()}\n</think>\n\n" if reasoning else ""


def parts_shaped(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether a row's messages hold their content as lists of parts: its first user message's does (the
    summary is a user message, so it takes that shape), or, with no user content, its first content's."""
    contents = [m.get("content") for m in messages if m.get("role") == "user" and m.get("content") is not None]
    contents = contents or [m.get("content") for m in messages if m.get("content") is not None]
    return bool(contents) and isinstance(contents[0], list)


def _with_parts_text(parts: list[dict[str, Any]], old: str, new: str) -> list[dict[str, Any]]:
    if new.endswith(old):  # a prefix: the summary opening the message
        head = new[: len(new) - len(old)]
        return ([{"type": "text", "text": head}] if head else []) + list(parts)
    if new.startswith(old):  # a suffix: the notice closing it
        return list(parts) + [{"type": "text", "text": new[len(old) :]}]
    # Otherwise one text part, where the first one was (or first of all), and every other part.
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.get("type") != "text":
            out.append(part)
        elif not any(p.get("type") == "text" for p in out):
            out.append({"type": "text", "text": new})
    if not any(p.get("type") == "text" for p in out):
        out.insert(0, {"type": "text", "text": new})
    return out


OPENAI = OpenAIMessages()
