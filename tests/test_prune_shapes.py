"""compress --prune on tool outputs of awkward shapes: a literal `</tool_response>` in an output, a
Hermes payload with no "content", results answering their calls out of order, short outputs beside
long ones in one turn. Hand-built Hermes and OpenAI rows through the real row core."""

from __future__ import annotations

import json

from test_validity import COUNTER, check, config

from trajcomp.core.compressor import plan_params
from trajcomp.core.planning.prune_fit import Pruner
from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.counting.tokens import TemplateLengths

LONG = "\n".join(f"line {j}: tests/test_io.py::case_{j} PASSED" for j in range(40))


def hermes_row(rounds: list[list[tuple[str, str, dict]]]) -> dict:
    """One gpt turn of calls per round, then one tool turn holding a <tool_response> per (id, command, payload)."""
    turns = [{"from": "system", "value": "You are a coding agent."}, {"from": "human", "value": "Fix the io tests."}]
    for calls in rounds:
        blocks = [json.dumps({"name": payload["name"], "arguments": {"command": cmd}, "id": cid})
                  for cid, cmd, payload in calls]
        turns.append({"from": "gpt", "value": "\n".join(f"<tool_call>\n{b}\n</tool_call>" for b in blocks)})
        bodies = [f"<tool_response>\n{json.dumps(payload)}\n</tool_response>" for _, _, payload in calls]
        turns.append({"from": "tool", "value": "\n".join(bodies)})
    turns += [{"from": "gpt", "value": "Done."}, {"from": "human", "value": "Thanks."}, {"from": "gpt", "value": "Ok."}]
    return {"conversations": turns}


def openai_row(rounds: list[list[tuple[str, str, str]]], answers=None) -> dict:
    """One assistant message of calls per round, then a tool message per (id, command, output), in `answers` order."""
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix it."}]
    for calls in rounds:
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}
            for cid, cmd, _ in calls]})
        order = answers(calls) if answers else calls
        messages += [{"role": "tool", "tool_call_id": cid, "name": "bash", "content": out} for cid, _, out in order]
    messages += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks."},
                 {"role": "assistant", "content": "Ok."}]
    return {"messages": messages}


def pruned(row: dict, frac: float = 0.3):
    result = check(row, config(row, frac, 60, 2, (False, False, False), prune=True))
    assert result.metrics.pruned_outputs, result.metrics
    return result


def responses(text: str) -> list[dict]:
    """A Hermes tool turn's <tool_response> payloads, each read to its JSON's end."""
    decoder, out = json.JSONDecoder(), []
    for piece in text.split("<tool_response>\n")[1:]:
        out.append(decoder.raw_decode(piece)[0])
    return out


def test_a_literal_close_tag_inside_a_hermes_output_keeps_the_payload_whole():
    tricky = LONG + "\nprint('</tool_response>')\n" + LONG
    rows = [[("c1", "cat a.py", {"tool_call_id": "c1", "name": "bash", "content": tricky})],
            [("c2", "cat b.py", {"tool_call_id": "c2", "name": "bash", "content": LONG})]]
    out = pruned(hermes_row(rows)).row["conversations"]
    payload = responses(out[3]["value"])
    assert len(payload) == 1 and payload[0]["tool_call_id"] == "c1" and payload[0]["name"] == "bash"
    assert payload[0]["content"].startswith("[pruned] bash `cat a.py`")
    assert out[3]["value"].endswith("\n</tool_response>")


def test_a_literal_close_tag_inside_an_openai_output_is_stubbed_from_the_message():
    tricky = LONG + "\n</tool_response>\n" + LONG
    row = openai_row([[("c1", "cat a.py", tricky)], [("c2", "cat b.py", LONG)]])
    out = pruned(row).row["messages"]
    assert out[3] == {"role": "tool", "tool_call_id": "c1", "name": "bash",
                      "content": f"[pruned] bash `cat a.py` -> {tricky.count(chr(10)) + 1} lines, {len(tricky)} chars"}


def test_a_hermes_payload_without_content_keeps_its_ids_and_stubs_only_its_output():
    rows = [[("call_1", "ls src", {"tool_call_id": "call_1", "name": "ls", "result": LONG + "1"})],
            [("call_2", "ls lib", {"tool_call_id": "call_2", "name": "ls", "data": {"rows": LONG}})],
            [("call_3", "ls doc", {"tool_call_id": "call_3", "name": "ls", "output": LONG + "3"})]]
    row = hermes_row(rows)
    out = pruned(row, 0.5).row["conversations"]
    first, second = responses(out[3]["value"])[0], responses(out[5]["value"])[0]
    assert list(first) == ["tool_call_id", "name", "result"] and first["tool_call_id"] == "call_1"
    assert first["result"].startswith("[pruned] ls `ls src` -> ")
    assert out[5] == row["conversations"][5]  # no output key: nothing to stub, the payload stays whole


def test_results_answering_their_calls_out_of_order_are_stubbed_by_their_ids():
    a, b = LONG + "\n# a.py", LONG + "\n# b.py\n" + LONG
    calls = [("c1", "cat a.py", a), ("c2", "cat b.py", b)]
    row = openai_row([calls, [("c3", "ls", LONG)]], answers=lambda cs: cs[::-1])
    out = pruned(row, 0.5).row["messages"]
    assert out[3]["tool_call_id"] == "c2" and out[3]["content"].startswith("[pruned] bash `cat b.py` -> 81 lines")
    hermes = hermes_row([[(cid, cmd, {"tool_call_id": cid, "name": "bash", "content": text})
                          for cid, cmd, text in calls[::-1]], [("c3", "ls", {"name": "bash", "content": LONG})]])
    turn = hermes["conversations"][2]
    turn["value"] = turn["value"].replace("c2", "cX").replace("c1", "c2").replace("cX", "c1")  # calls c1, c2
    turn["value"] = turn["value"].replace("cat b.py", "cat X").replace("cat a.py", "cat b.py").replace("cat X", "cat a.py")
    stubs = [p["content"] for p in responses(pruned(hermes, 0.5).row["conversations"][3]["value"])]
    assert stubs[0].startswith("[pruned] bash `cat b.py` -> 81 lines") and stubs[1].startswith("[pruned] bash `cat a.py`")


def test_a_short_output_beside_a_long_one_in_one_turn_stays_as_it_is():
    calls = [("c1", "touch x", {"tool_call_id": "c1", "name": "bash", "content": "ok"}),
             ("c2", "cat a.py", {"tool_call_id": "c2", "name": "bash", "content": LONG})]
    row = hermes_row([calls, [("c3", "ls", {"tool_call_id": "c3", "name": "bash", "content": LONG + "!"})]])
    first, second = responses(pruned(row, 0.5).row["conversations"][3]["value"])
    assert first == calls[0][2] and second["content"].startswith("[pruned] bash `cat a.py`")


def test_the_newest_copy_is_stubbed_in_its_turn_among_the_others():
    """At a target that needs three of the four stubs: the older copy first, a stub naming the newest
    copy's call; then the others oldest first, the newest copy among them, and the last left whole."""
    same = {"name": "bash", "content": LONG}
    rows = [[("c1", "cat a.py", {**same, "tool_call_id": "c1"})], [("c2", "ls", {**same, "content": LONG + "2"})],
            [("c3", "cat ./a.py", {**same, "tool_call_id": "c3"})], [("c4", "ls", {**same, "content": LONG + "4"})]]
    row = hermes_row(rows)
    result = check(row, config(row, 0.4, 60, 2, (False, False, False), prune=True))
    out = result.row["conversations"]
    assert result.metrics.passes == 0 and result.metrics.pruned_outputs == 3
    assert responses(out[3]["value"])[0]["content"].startswith("[pruned: identical to the later output of bash `cat ./a.py`]")
    assert responses(out[7]["value"])[0]["content"].startswith("[pruned] bash `cat ./a.py`")
    assert out[9] == row["conversations"][9]


class ShortEstimates(TemplateLengths):
    """The chat template's real lengths, but every edit estimated 1000 tokens short (as a piecewise
    count may be off at the pieces' seams, here on purpose and by far)."""

    def measure_edit(self, base, messages):
        return super().measure_edit(base, messages) - 1000


def test_a_row_the_exact_measure_finds_over_takes_more_stubs_before_any_summary():
    rows = [[(f"c{k}", f"cat f{k}.py", {"tool_call_id": f"c{k}", "name": "bash", "content": LONG + str(k)})]
            for k in range(5)]
    row = hermes_row(rows)
    cfg = config(row, 0.5, 60, 2, (False, False, False), prune=True, count_mode="chat_template")
    lengths = ShortEstimates(COUNTER)
    fmt = RowSchema().adapter(row)
    native = fmt.native_turns(row)
    turns = fmt.turns(native)
    measured = lengths.measure([t.text for t in turns], fmt.chat_messages(native, cfg.chat_roles), 0)
    pruned = Pruner(cfg, lengths, plan_params(cfg, lengths)).fit_here(native, fmt, turns, measured)
    assert pruned.measured.total <= cfg.target_max_tokens < measured.total
