"""Row schemas: read the turns out of a row and put new turns back, keeping everything else.

An adapter (`ShareGPT` here, `OpenAIMessages` in openai_rows.py) has one API: `native_turns(row)` validates the row and
returns its turn objects, `turns(native)` gives the planner's view of them (`Turn(role, text)`),
`make_turn(role, text, like)` (`like`: the row's turns, whose shape a new one takes), `with_text(turn, text)`
and `with_turns(row, turns)` build new ones.
`detect_format(row)` picks the adapter for a row; `FORMATS_BY_NAME` maps the CLI's names to them.
`RowSchema` (the config's `input` section) binds an adapter to one row: its role names and dialect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from .frame import NO_FRAME, Chat, Frame, frame_of
from .observations import BUILT_IN, prefix_of, resolve
from .openai_rows import OPENAI, OPENAI_NAMES
from .outcome import json_or_none
from .turn import RowError, Turn  # noqa: F401  (the turn types, named with the row schemas)

ROLES = ("system", "human", "gpt", "tool")

# A ShareGPT row's role names -> the planner's roles (`input.roles`). Hermes' own names, LLaMA-Factory's
# (`function_call` is an assistant turn making a tool call, `observation` the tool's answer) and the
# OpenAI-style names that axolotl and LLaMA-Factory datasets also use in `conversations`.
DEFAULT_ROLES: Mapping[str, str] = MappingProxyType({
    "system": "system",
    "human": "human",
    "user": "human",
    "gpt": "gpt",
    "assistant": "gpt",
    "function_call": "gpt",
    "tool": "tool",
    "observation": "tool",
})
# Names only LLaMA-Factory's sharegpt dialect uses: a row with one of them follows its alternation rule.
LLAMAFACTORY_NAMES = frozenset({"observation", "function_call"})
DIALECTS = ("auto", "hermes", "llamafactory")


class ShareGPT:
    """`{"conversations": [{"from": ..., "value": ...}, ...], ...}` rows.

    Role names go through `roles` (a dataset's name -> planner role) and are written back as they
    were; a new turn takes the name the row itself uses for its role (`user` in a row that says
    user). Turns keyed `role`/`content` instead of `from`/`value` (axolotl's chat_template rows) are
    read and written with those keys. `alternation` says whether the row is in LLaMA-Factory's
    dialect, whose alternation rule the planner then keeps (see `RowSchema`). A human turn opening with
    one of `observations` (prefixes, observations.py) is a tool's result: a `tool` turn to the planner.
    """

    name = "sharegpt"
    key = "conversations"

    def __init__(self, roles: Mapping[str, str] = DEFAULT_ROLES, keys: tuple[str, str] = ("from", "value"),
                 names: Mapping[str, str] | None = None, alternation: bool = False,
                 observations: tuple[str, ...] = (), frame: Frame = NO_FRAME):
        self.roles = roles
        self.role_key, self.text_key = keys
        self.names = names or {}  # planner role -> the name this row uses for it
        self.alternation = alternation
        self.observations = observations
        self.frame = frame  # the row's top-level system and tools, rendered around its turns (frame.py)

    def bind(self, row: Any, schema: "RowSchema") -> "ShareGPT":
        """This adapter for one row: its keys and role names, the schema's mapping and dialect."""
        turns = row.get(self.key) if isinstance(row, dict) else None
        turns = [t for t in turns if isinstance(t, dict)] if isinstance(turns, list) else []
        # role/content when the first turn names its role there (a Parquet round trip adds null from/value)
        first = turns[0] if turns else {}
        keys = ("role", "content") if first.get("from") is None and "role" in first else ("from", "value")
        used = [t.get(keys[0]) for t in turns]
        used = [name for name in used if isinstance(name, str) and name in schema.roles]
        names: dict[str, str] = {}
        for name in used:
            names.setdefault(schema.roles[name], name)
        if keys[0] == "role":  # a new turn in an OpenAI-style row says user/assistant
            names = {**OPENAI_NAMES, **names}
        lf = schema.dialect == "llamafactory" or (schema.dialect == "auto" and not LLAMAFACTORY_NAMES.isdisjoint(used))
        role = first.get(keys[0])
        opens_with_system = isinstance(role, str) and schema.roles.get(role) == "system"  # LLaMA-Factory's rule
        return ShareGPT(schema.roles, keys, names, lf, schema.observations, frame_of(row, opens_with_system))

    def native_turns(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        """The row's turn objects, validated."""
        turns = row.get(self.key)
        if self.key not in row:
            raise RowError("missing_conversations", "the row has no 'conversations' field")
        if not isinstance(turns, list):
            raise RowError("conversations_not_a_list", f"'conversations' is {type(turns).__name__}, not a list")
        for i, turn in enumerate(turns):
            self._check_turn(i, turn)
        return turns

    def _check_turn(self, i: int, turn: Any) -> None:
        if not isinstance(turn, dict):
            raise RowError("turn_not_an_object", f"turn {i} is {type(turn).__name__}, not an object")
        for field_name in (self.role_key, self.text_key):
            if field_name not in turn:
                raise RowError("turn_missing_field", f"turn {i} has no '{field_name}'")
            if not isinstance(turn[field_name], str):
                kind = type(turn[field_name]).__name__
                raise RowError("turn_not_a_string", f"turn {i} '{field_name}' is {kind}, not a string")
        if turn[self.role_key] not in self.roles:
            known = ", ".join(self.roles)
            raise RowError("unknown_role", f"turn {i} has role {turn[self.role_key]!r} (expected one of {known}; see input.roles)")

    def turns(self, native: list[dict[str, Any]]) -> list[Turn]:
        return [Turn(self._role(t), t[self.text_key]) for t in native]

    def _role(self, turn: dict[str, Any]) -> str:
        role = self.roles[turn[self.role_key]]
        return "tool" if role == "human" and self.observation_prefix(turn) is not None else role

    def observation_prefix(self, turn: dict[str, Any]) -> str | None:
        """The prefix that makes a human turn an observation (None: it is not one, or not a human turn)."""
        if not self.observations or self.roles.get(turn.get(self.role_key)) != "human":
            return None
        text = turn.get(self.text_key)
        return prefix_of(text, self.observations) if isinstance(text, str) else None

    def make_turn(self, role: str, text: str, like: Any = ()) -> dict[str, Any]:  # `like`: OpenAI rows' only
        return {self.role_key: self.names.get(role, role), self.text_key: text}

    def with_text(self, turn: dict[str, Any], text: str) -> dict[str, Any]:
        return {**turn, self.text_key: text}

    def with_turns(self, row: dict[str, Any], turns: list[dict[str, Any]]) -> dict[str, Any]:
        return {**row, self.key: turns}

    def tool_result(self, turn: dict[str, Any]) -> dict[str, Any] | None:
        """None: a ShareGPT turn's outputs and ids are in its text (<tool_response> blocks, or the whole text)."""
        return None

    def tool_calls(self, turn: dict[str, Any]) -> list[dict[str, Any]] | None:
        """None: a ShareGPT turn's calls are in its text (<tool_call> blocks, or a function_call's JSON)."""
        return None

    def chat_messages(self, native: list[dict[str, Any]], chat_roles: dict[str, str]) -> Chat:
        """The turns as a chat template takes them: {"role", "content"}, roles mapped by `chat_roles` (an
        observation by its row's role name: the template renders the user turn it is); with the row's frame."""
        return Chat([self._message(t, chat_roles) for t in native], self.frame)

    def _message(self, turn: dict[str, Any], chat_roles: dict[str, str]) -> dict[str, Any]:
        message = {"role": chat_roles[self.roles[turn[self.role_key]]], "content": turn[self.text_key]}
        if turn[self.role_key] == "function_call":
            # LLaMA-Factory renders a call from its JSON, not as the text (its chatml: "Action: NAME\nAction
            # Input: ARGS"); a template that renders it so (configs/templates/) reads the call here. Others
            # ignore the key.
            call = json_or_none(turn[self.text_key])
            if isinstance(call, (dict, list)):
                message["function_call"] = call
        return message


SHAREGPT = ShareGPT()
FORMATS_BY_NAME: dict[str, Any] = {SHAREGPT.name: SHAREGPT, OPENAI.name: OPENAI}


def detect_format(row: dict[str, Any]):
    """The adapter for `row`: OpenAIMessages when it has a `messages` list, else ShareGPT when it
    has `conversations`, else OpenAIMessages when it has a (malformed) `messages`, so the reject says why."""
    if not isinstance(row, dict):
        raise RowError("not_an_object", f"the row is {type(row).__name__}, not an object")
    if isinstance(row.get(OPENAI.key), list):
        return OPENAI
    if SHAREGPT.key in row:
        return SHAREGPT
    if OPENAI.key in row:
        return OPENAI
    raise RowError("missing_conversations", "the row has neither a 'conversations' nor a 'messages' field")


@dataclass(frozen=True)
class RowSchema:
    """How rows are read (the config's `input` section): schema, role names and dialect.

    `dialect` decides which ShareGPT rows keep LLaMA-Factory's alternation rule: `llamafactory` all of
    them, `auto` those that use `observation` or `function_call`, `hermes` none. `observations`: the
    prefixes of the human turns that are tool results (`input.observations`, resolved).
    """

    format: str = "auto"
    roles: Mapping[str, str] = field(default_factory=lambda: DEFAULT_ROLES)
    dialect: str = "auto"
    observations: tuple[str, ...] = BUILT_IN

    @classmethod
    def from_config(cls, cfg) -> "RowSchema":
        prefixes = resolve(getattr(cfg, "input_observations", "auto"))
        return cls(cfg.input_format, cfg.input_roles, cfg.input_dialect, prefixes or ())

    def adapter(self, row: Any):
        """The adapter for `row`, bound to it (raises RowError when the row is not an object)."""
        if not isinstance(row, dict):
            raise RowError("not_an_object", f"the row is {type(row).__name__}, not an object")
        fmt = detect_format(row) if self.format == "auto" else FORMATS_BY_NAME[self.format]
        return fmt.bind(row, self)


def adapter_for(row: dict[str, Any], input_format: str = "auto"):
    """The adapter `--input-format` names, or the one the row's own keys call for ("auto"), default roles."""
    return RowSchema(input_format).adapter(row)
