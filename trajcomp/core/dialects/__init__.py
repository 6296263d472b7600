"""Row dialects and the rule every row keeps.

- `turn.py`: `Turn` (role, text) and `RowError`, the planner's view of a turn.
- `rows.py`: ShareGPT rows (`conversations`, Hermes' and LLaMA-Factory's role names, axolotl's role/content
  keys), `RowSchema` (the config's `input` section bound to a row) and `detect_format`.
- `openai_rows.py`: OpenAI `messages` rows (content as text or parts, `tool_calls`, a row's `tools`).
- `validity.py`: what a row must keep to stay trainable: every call followed by its own result, and
  LLaMA-Factory's alternation (`alternation_parity`).
- `frame.py`: a row's top-level `system` and `tools`, rendered around its turns as the trainer does.
- `observations.py`: which user turns are tool results (SWE-agent's `OBSERVATION:`, OpenHands v0's
  `EXECUTION RESULT of [`, or the config's prefixes).
- `text_calls.py`: calls written as text in an assistant turn (`<function=...>` markup, a fenced command).
- `outcome.py`: what a tool output says: its lines, characters, and whether it reports a failure.
- `compaction.py`: a live agent's own summary turn and note, recognised.
- `summary_turn.py`: trajcomp's summary turn: its prefix and styles, recognised and parsed back.
"""
