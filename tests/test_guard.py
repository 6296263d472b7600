"""The summarizer's input guard: turns fitted into a token room, longest tool outputs elided first."""

from __future__ import annotations

import re

from conftest import DEMO_TOKENIZER

from trajcomp.core.dialects.rows import Turn
from trajcomp.summarizers.guard import JOIN_SLACK, MARKER, MIN_KEPT, fit_turns
from trajcomp.core.counting.tokens import TokenCounter

COUNTER = TokenCounter(str(DEMO_TOKENIZER))
LOG = "\n".join(f"[{k:04d}] step {k}: tests/test_mod{k % 7}.py::test_{k} PASSED in {k * 3} ms" for k in range(400))


def turns() -> list[Turn]:
    return [
        Turn("gpt", "Let me run the tests.\n<tool_call>{\"name\": \"terminal\"}</tool_call>"),
        Turn("tool", "BEGIN-OF-LOG\n" + LOG + "\nEND-OF-LOG"),
        Turn("gpt", "The failing test is test_17; I will read the parser next."),
        Turn("tool", "short answer: ok"),
        Turn("tool", "HEAD-2\n" + LOG[: len(LOG) // 2] + "\nTAIL-2"),
    ]


def test_within_room_nothing_changes():
    texts = [t.text for t in turns()]
    assert fit_turns(turns(), sum(COUNTER.count(texts)), COUNTER) == texts


def test_the_longest_tool_outputs_are_cut_to_one_cap_keeping_both_ends():
    given = turns()
    whole = COUNTER.count([t.text for t in given])
    room = sum(whole) // 3
    for costs in (None, whole):  # counted by the guard, or handed over by the caller: the same
        texts = fit_turns(given, room, COUNTER, costs)
        assert sum(COUNTER.count(texts)) <= room
        assert [texts[0], texts[2], texts[3]] == [given[0].text, given[2].text, given[3].text]  # not tool, or short
        for i, (head, tail) in ((1, ("BEGIN-OF-LOG", "END-OF-LOG")), (4, ("HEAD-2", "TAIL-2"))):
            assert texts[i].startswith(head) and texts[i].endswith(tail)
            left_out = int(re.search(r"\[\.\.\. (\d+) tokens left out \.\.\.\]", texts[i]).group(1))
            kept = COUNTER.count([texts[i].replace(re.search(r"\n\[\.\.\..*?\]\n", texts[i]).group(0), "")])[0]
            assert abs(whole[i] - left_out - kept) <= 3, (whole[i], left_out, kept)  # the marker says what went
        if costs is None:
            first = texts
    assert texts == first


def test_a_room_below_the_fixed_parts_gives_the_shortest_form_and_stops():
    """Every turn longer than a marker is cut to little more than its marker: as short as it gets."""
    given = turns()
    texts = fit_turns(given, 10, COUNTER)
    for text, cost, original in zip(texts, COUNTER.count(texts), COUNTER.count([t.text for t in given])):
        marker = COUNTER.count([MARKER.format(n=original)])[0]
        if "tokens left out" not in text:
            assert text in (t.text for t in given) and original <= marker + 4
        else:
            assert cost <= marker + 4


def test_so_many_turns_that_min_kept_each_is_too_much_still_fit_the_room():
    """Twenty long turns in a room below 20 x MIN_KEPT: the cap goes under MIN_KEPT rather than over the room."""
    given = [Turn("gpt" if k % 2 == 0 else "tool", f"turn {k}\n" + LOG[: 3000]) for k in range(20)]
    room = 20 * MIN_KEPT * 3 // 4
    texts = fit_turns(given, room, COUNTER)
    assert sum(COUNTER.count(texts)) <= room
    assert all("tokens left out" in text for text in texts)
    # tool outputs went down first: the gpt turns keep more, their openings among it
    assert all(text.startswith(f"turn {k}") for k, text in enumerate(texts) if k % 2 == 0)
    assert max(COUNTER.count(texts[1::2])) < min(COUNTER.count(texts[0::2]))
    # With room for MIN_KEPT each, no turn goes under it (less the slack kept for a cut's joins).
    roomy = fit_turns(given, 20 * (MIN_KEPT + 16), COUNTER)
    assert sum(COUNTER.count(roomy)) <= 20 * (MIN_KEPT + 16) and min(COUNTER.count(roomy)) >= MIN_KEPT - JOIN_SLACK


def test_an_edge_is_where_the_whole_texts_tokens_put_it_whatever_part_was_encoded():
    """Only the ends of a text are encoded; the edge must still be a token boundary of the whole text,
    even where a long word straddles the part's end (a hash, a base64 blob, a run of spaces) or a
    contraction takes a character from the word after it."""
    from trajcomp.summarizers.guard import _edges

    texts = [
        LOG,
        "word " * 50 + "f" * 3000 + " end " * 50,
        "x=" + "".join(f"{k:x}" for k in range(2000)) + "\n" + "tail line\n" * 40,
        "start " + " " * 500 + "Ünïcödé текст " * 200 + "\t" * 300 + " done",
        "a" * 5000,
        "abc " * 30 + " 'd" + "a" * 33,  # from the end, 8 tokens: "'d" is one word only in the part
        "we're " * 300,
    ]
    encodings = COUNTER.encode(texts)
    totals = [len(e.ids) for e in encodings]
    for n in (1, 7, 8, 48, 200, 900):
        tokens = [min(n, total - 1) for total in totals]
        heads = _edges(texts, tokens, totals, COUNTER, from_end=False)
        tails = _edges(texts, tokens, totals, COUNTER, from_end=True)
        for e, k, head, tail in zip(encodings, tokens, heads, tails):
            assert head == e.offsets[k - 1][1]
            assert tail == e.offsets[len(e.ids) - k][0]
