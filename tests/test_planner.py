"""Property and example tests of `trajcomp.core.planning.planner.plan`.

The planner is a pure function of roles and token counts, so hypothesis drives it directly.
Each plan is applied the way the compressor applies it, and the resulting role sequence is
checked, next to an independent brute-force model of which regions are allowed at all.
"""

from __future__ import annotations

import dataclasses

from typing import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajcomp.core.planning.planner import Decision, Plan, PlanParams, plan

ROLES = ("system", "human", "gpt", "tool")
FLAGS = ("protect_first_system", "protect_first_human", "protect_first_gpt", "protect_first_tool")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- helpers


def apply_plan(roles: Sequence[str], p: Plan) -> list[str]:
    """The output roles, built the way the compressor assembles the row."""
    roles = list(roles)
    if p.merge_into_next:
        assert roles[p.end] == "human"
        return roles[: p.start] + roles[p.end :]  # the summary opens the human turn at `end`
    return roles[: p.start] + ["human"] + roles[p.end :]


def pairs(roles: Sequence[str]) -> set[tuple[str, str]]:
    return set(zip(roles, roles[1:]))


def tail_start(n: int, params: PlanParams) -> int:
    return max(0, n - params.protect_last_n_turns)


def protected_head(roles: Sequence[str], params: PlanParams) -> list[int]:
    """Indices of the first system/human/gpt/tool turn (per switched-on flag) before the tail."""
    ts = tail_start(len(roles), params)
    out = []
    for role, flag in zip(ROLES, FLAGS):
        if getattr(params, flag):
            first = next((i for i, r in enumerate(roles[:ts]) if r == role), None)
            if first is not None:
                out.append(first)
    return out


def follows_llamafactory(roles: Sequence[str]) -> bool:
    """LLaMA-Factory's sharegpt rule: after an optional system turn, user side (human/observation) at
    odd positions, gpt side (gpt/function_call) at even ones, ending on the gpt side."""
    body = list(roles[1:] if roles[:1] in (["system"], ("system",)) else roles)
    return (len(body) % 2 == 0 and all(r in ("human", "tool") for r in body[0::2])
            and all(r == "gpt" for r in body[1::2]))


def keeps_alternation(roles: Sequence[str], params: PlanParams) -> bool:
    return params.alternation and follows_llamafactory(roles)


def valid_regions(roles: Sequence[str], params: PlanParams) -> list[tuple[int, int]]:
    """Every [s, e) the rules allow, by brute force (independent of the planner's code)."""
    n = len(roles)
    ts = tail_start(n, params)
    head = protected_head(roles, params)
    lo = max(head) + 1 if head else 0
    lf = keeps_alternation(roles, params)
    out = []
    for s in range(lo, ts):
        if roles[s] == "tool":  # an observation answers its call: the summary never stands for it
            continue
        if lf:  # else only the output's alternation matters (brute force: apply and check)
            out += [(s, e) for e in range(s + 1, min(ts, n - 1) + 1)
                    if follows_llamafactory(apply_plan(roles, Plan(Decision.COMPRESS, 0, s, e, 0, roles[e] == "human")))]
            continue
        if s > 0 and roles[s - 1] == "human":
            continue
        for e in range(s + 1, min(ts, n - 1) + 1):  # the last turn always stays: its role ends the row
            if roles[e] == "tool":
                continue
            out.append((s, e))
    return out


def params_(target: int, summary: int, last_n: int = 4, **flags: bool) -> PlanParams:
    return PlanParams(target, summary, protect_last_n_turns=last_n, **flags)


# --------------------------------------------------------------------------- strategies


@st.composite
def hermes_roles(draw) -> list[str]:
    """system, human, then gpt turns each followed by 0-3 tool turns, with occasional human follow-ups."""
    roles = ["system", "human"]
    for _ in range(draw(st.integers(0, 10))):
        roles.append("gpt")
        roles.extend(["tool"] * draw(st.integers(0, 3)))
        if draw(st.integers(0, 5)) == 0:
            roles.append("human")
    if draw(st.booleans()):
        roles.append("gpt")
    if draw(st.integers(0, 4)) == 0:
        roles = roles[1:]  # some datasets have no system prompt
    return roles


arbitrary_roles = st.lists(st.sampled_from(ROLES), min_size=0, max_size=24)


@st.composite
def cases(draw, roles_strategy) -> tuple[list[str], list[int], PlanParams]:
    roles = draw(roles_strategy)
    # Mixed scales: some turns tiny, some huge, so every decision (and merges) come up often.
    turn_count = st.one_of(st.integers(0, 5000), st.integers(0, 60))
    counts = draw(st.lists(turn_count, min_size=len(roles), max_size=len(roles)))
    total = sum(counts)
    # Half the time pick the target relative to the total so that compression is actually needed.
    if total > 1 and draw(st.booleans()):
        target = draw(st.integers(1, max(1, min(50000, total - 1))))
    else:
        target = draw(st.integers(1, 50000))
    summary = draw(st.integers(0, target - 1))
    flags = {f: draw(st.booleans()) for f in FLAGS}
    last_n = draw(st.integers(0, 8))
    alternation = draw(st.booleans())  # set for rows in LLaMA-Factory's dialect; no effect unless they alternate
    return roles, counts, PlanParams(target, summary, protect_last_n_turns=last_n, alternation=alternation, **flags)


@st.composite
def llamafactory_roles(draw) -> list[str]:
    """LLaMA-Factory agent rows: human, then function_call/observation pairs (gpt/tool), plain gpt replies
    and human follow-ups, ending on gpt; sometimes a system turn first."""
    roles = ["system"] if draw(st.booleans()) else []
    roles.append(draw(st.sampled_from(["human", "human", "tool"])))
    for _ in range(draw(st.integers(0, 10))):
        roles += ["gpt", draw(st.sampled_from(["tool", "tool", "human"]))]
    return roles + ["gpt"]


# --------------------------------------------------------------------------- the invariants


def check_plan(roles: list[str], counts: list[int], params: PlanParams) -> Plan:
    n = len(roles)
    total = sum(counts)
    p = plan(roles, counts, params)
    assert p.total_tokens == total

    # Determinism: same input, same plan (also with tuples instead of lists).
    assert plan(list(roles), list(counts), params) == p
    assert plan(tuple(roles), tuple(counts), params) == p

    if total <= params.target_max_tokens:
        assert p.decision is Decision.SKIPPED_UNDER_TARGET
        return p
    assert p.decision is not Decision.SKIPPED_UNDER_TARGET

    regions = valid_regions(roles, params)
    # The planner gives up only when no region is allowed, or when even the biggest one is no bigger
    # than a summary.
    if not regions:
        assert p.decision is Decision.NOTHING_TO_COMPRESS and p.cannot_fit
        return p
    assert p.decision is not Decision.NOTHING_TO_COMPRESS
    s_min = min(s for s, _ in regions)
    e_max = max(e for s, e in regions if s == s_min)
    biggest = sum(counts[s_min:e_max])
    if biggest <= params.summary_tokens:
        assert p.decision is Decision.NO_NET_SAVINGS and p.cannot_fit
        assert p.region_tokens <= params.summary_tokens
        return p
    assert p.decision is Decision.COMPRESS

    start, end = p.start, p.end
    lf = keeps_alternation(roles, params)
    assert 0 <= start < end <= n
    assert (start, end) in regions
    assert start == s_min, "the region starts right after the protected head"
    assert roles[start] != "tool"  # the summary never takes a result's place
    assert end < n and roles[end] != "tool"  # nor ends the row, nor stands before a result
    for i in protected_head(roles, params):
        assert i < start, f"protected head turn {i} ({roles[i]}) is inside the region [{start}, {end})"
    assert end <= tail_start(n, params), "a protected tail turn is inside the region"
    assert p.region_tokens == sum(counts[start:end])
    assert p.region_tokens > params.summary_tokens
    assert total - p.region_tokens + params.summary_tokens <= total - 1
    assert p.merge_into_next == (end < n and roles[end] == "human")

    # Output role sequence: no new tool-after-non-call and no new human-after-human adjacency.
    out = apply_plan(roles, p)
    before, after = pairs(roles), pairs(out)
    for a, b in after - before:
        assert not (b == "tool" and a not in ("gpt", "tool")), f"new ({a}, {b}) in {out}"
        assert (a, b) != ("human", "human"), f"new (human, human) in {out}"
    assert out.count("human") >= 1
    if lf:
        assert follows_llamafactory(out), f"{roles} -> {out} breaks LLaMA-Factory's alternation"
        assert end < n and out[-1] == "gpt"

    # A gpt turn and the tool turns right after it are all in or all out of the region (Hermes rows).
    for i, role in enumerate(roles):
        if lf or role != "gpt":
            continue
        j = i + 1
        while j < n and roles[j] == "tool":
            j += 1
        inside = {start <= k < end for k in range(i, j)}
        assert len(inside) == 1, f"gpt group [{i}, {j}) split by region [{start}, {end})"

    # Greedy minimality; and cannot_fit exactly when even the whole middle is not enough.
    need = total - params.target_max_tokens + params.summary_tokens
    assert p.limit == e_max
    assert p.cannot_fit == (biggest < need)
    if p.region_tokens >= need:
        shorter = [e for s, e in regions if s == start and e < end]
        assert sum(counts[start:max(shorter, default=start)]) < need, "the region is bigger than needed"
    else:
        assert end == e_max, "short of the need, yet the region stops before the furthest allowed end"
    return p


@SETTINGS
@given(cases(hermes_roles()))
def test_plan_invariants_hermes_shaped(case):
    check_plan(*case)


@SETTINGS
@given(cases(arbitrary_roles))
def test_plan_invariants_arbitrary_roles(case):
    check_plan(*case)


@SETTINGS
@given(cases(hermes_roles()), st.integers(0, 3000))
def test_fixed_tokens_count_against_the_target_and_belong_to_no_turn(case, fixed):
    """A template's fixed overhead adds to the total and to the need: the same plan as a target lower by as much."""
    roles, counts, params = case
    p = plan(roles, counts, params, fixed=fixed)
    assert p.total_tokens == fixed + sum(counts)
    lowered = plan(roles, counts, dataclasses.replace(params, target_max_tokens=params.target_max_tokens - fixed))
    assert dataclasses.replace(p, total_tokens=lowered.total_tokens) == lowered


@SETTINGS
@given(cases(llamafactory_roles()))
def test_plan_invariants_llamafactory_rows(case):
    """With the flag set, an alternating row stays alternating; without it, Hermes' rules as above."""
    check_plan(*case)


def test_llamafactory_strategy_reaches_every_decision_with_alternation_kept():
    seen: set[Decision] = set()
    merged = observation_start = False

    @settings(max_examples=1500, deadline=None, database=None, derandomize=True)
    @given(cases(llamafactory_roles()))
    def collect(case):
        nonlocal merged, observation_start
        roles, counts, params = case
        if not params.alternation:
            return
        assert follows_llamafactory(roles)
        p = plan(roles, counts, params)
        seen.add(p.decision)
        if p.decision is Decision.COMPRESS:
            merged |= p.merge_into_next
            observation_start |= roles[p.start] == "tool"

    collect()
    assert seen == set(Decision)
    assert merged and not observation_start


def test_strategies_reach_every_decision():
    """Hermes-shaped and arbitrary samples together hit all four decisions (guards against vacuous tests)."""
    seen: set[Decision] = set()
    merged = False

    @settings(max_examples=200, deadline=None, database=None, derandomize=True)
    @given(st.one_of(cases(hermes_roles()), cases(arbitrary_roles)))
    def collect(case):
        nonlocal merged
        p = plan(*case)
        seen.add(p.decision)
        merged |= p.merge_into_next

    collect()
    assert seen == set(Decision)
    assert merged


# --------------------------------------------------------------------------- named examples


def hermes(steps: int, *, tools_per_step: int = 1, system: bool = True) -> list[str]:
    roles = (["system"] if system else []) + ["human"]
    for _ in range(steps):
        roles += ["gpt"] + ["tool"] * tools_per_step
    return roles + ["gpt"]


def test_first_tool_in_second_half_summarizes_the_heavy_middle_not_the_setup():
    """Reference bug: it split head/tail at n//2, so a long human/gpt setup got summarized and the
    heavy tool outputs after the first tool call were kept. Here the setup is the protected head."""
    setup = ["system"] + ["human", "gpt"] * 5  # 0..10, light
    work = ["gpt", "tool", "gpt", "tool", "gpt", "tool", "gpt", "tool", "gpt", "tool"]  # 11..20
    roles = setup + work + ["gpt", "human", "gpt"]  # 21..23
    n = len(roles)
    first_tool = roles.index("tool")
    assert first_tool >= n // 2
    counts = [50] * len(setup) + [40, 100] + [40, 3000] * 4 + [60, 40, 60]
    assert len(counts) == n
    p = check_plan(roles, counts, params_(4000, 300))
    assert p.decision is Decision.COMPRESS
    assert p.start == first_tool + 1  # the first call/response pair stays with the head
    heavy = [i for i, c in enumerate(counts) if c == 3000]
    summarized = set(range(p.start, p.end))
    assert summarized <= set(range(first_tool + 1, n - 4))
    assert len(summarized & set(heavy)) >= 3
    assert not summarized & set(range(len(setup))), "setup turns must not be summarized"
    # The tail (last 4) opens with the tool turn 20, so its gpt call 19 stays too: the region is every
    # turn between the head's first call/response pair and that call.
    assert (p.start, p.end) == (13, 19)
    assert p.region_tokens == sum(counts[13:19]) == 9120


def test_parallel_tool_calls_straddling_the_cut_are_taken_together():
    roles = ["system", "human", "gpt", "tool",  # protected head 0..3
             "gpt", "tool",                    # 4, 5
             "gpt", "tool", "tool", "tool",    # 6: three parallel calls, answered by 7, 8, 9
             "gpt", "tool", "gpt", "tool", "gpt"]  # 10..14; last four (11..14) protected
    counts = [100, 100, 100, 100, 100, 900, 100, 1000, 1000, 1000, 100, 100, 100, 100, 100]
    total = sum(counts)
    target, summary = total - 1500, 300  # need = 1801: reached inside the parallel block, after tool 7
    p = check_plan(roles, counts, params_(target, summary))
    assert p.decision is Decision.COMPRESS
    assert (p.start, p.end) == (4, 10)
    assert roles[p.end] == "gpt"
    assert sum(counts[4:8]) >= 1801  # greedy would have been satisfied in the middle of the block


def test_tiny_middle_gives_no_net_savings():
    roles = ["system", "human", "gpt", "tool", "gpt", "tool", "gpt", "tool", "gpt", "tool", "gpt"]
    counts = [100, 100, 100, 3000, 20, 20, 3000, 3000, 3000, 3000, 100]
    p = check_plan(roles, counts, params_(5000, 100, last_n=5))
    assert p.decision is Decision.NO_NET_SAVINGS
    assert (p.start, p.end) == (4, 6)
    assert p.region_tokens == 40 <= 100


def test_long_protected_tail_still_compresses_the_middle_and_stays_over_limit():
    roles = hermes(8)  # 0 system, 1 human, gpt/tool pairs 2..17, 18 final gpt
    counts = [100, 100] + [50, 400] * 8 + [50]
    counts[-4:] = [5000, 5000, 5000, 5000]  # the protected tail alone exceeds the target
    target, summary = 8000, 200
    p = check_plan(roles, counts, params_(target, summary))
    assert p.decision is Decision.COMPRESS
    assert p.region_tokens < total_need(counts, target, summary)
    assert (p.start, p.end) == (4, len(roles) - 4 - 1)  # the tail opens with a tool: its gpt call stays
    after = sum(counts) - p.region_tokens + summary
    assert after < sum(counts)
    assert after > target  # still over the limit: the compressor reports still_over_limit


def total_need(counts, target, summary):
    return sum(counts) - target + summary


def test_human_right_after_the_region_is_merged_into():
    roles = ["system", "human", "gpt", "tool", "gpt", "tool", "gpt", "tool",
             "human", "gpt", "tool", "gpt"]  # tail: 8..11, opens with a human follow-up
    counts = [100, 100, 100, 100, 2000, 2000, 2000, 2000, 50, 100, 100, 100]
    p = check_plan(roles, counts, params_(1000, 100))
    assert p.decision is Decision.COMPRESS
    assert (p.start, p.end) == (4, 8)
    assert p.merge_into_next
    out = apply_plan(roles, p)
    assert out == ["system", "human", "gpt", "tool", "human", "gpt", "tool", "gpt"]
    assert ("human", "human") not in pairs(out)


def test_no_merge_when_a_gpt_turn_follows_the_region():
    roles = hermes(6)
    counts = [100, 100] + [100, 2000] * 6 + [100]
    p = check_plan(roles, counts, params_(6000, 100))
    assert p.decision is Decision.COMPRESS
    assert roles[p.end] == "gpt" and not p.merge_into_next


def test_tail_opening_with_tool_turns_keeps_their_gpt_call():
    roles = ["system", "human", "gpt", "tool", "gpt", "tool", "gpt", "tool", "gpt", "tool", "tool", "tool"]
    counts = [100, 100, 100, 100, 2000, 2000, 2000, 2000, 100, 100, 100, 100]
    p = check_plan(roles, counts, params_(1000, 100, last_n=2))  # tail_start = 10, a tool turn
    assert p.decision is Decision.COMPRESS
    assert p.end == 8, "the gpt call at 8 owns the tail's tool turns and stays with them"
    assert roles[p.end] == "gpt"
    assert apply_plan(roles, p)[-5:] == ["human", "gpt", "tool", "tool", "tool"]


def test_tail_of_only_a_call_and_its_tools_leaves_nothing():
    roles = ["system", "human", "gpt", "tool", "tool", "tool"]
    counts = [10, 10, 10, 5000, 5000, 5000]
    p = check_plan(roles, counts, params_(1000, 100, last_n=2, protect_first_system=False,
                                          protect_first_human=False, protect_first_gpt=False,
                                          protect_first_tool=False))
    # start 0 (system); tail starts at 4 (tool) -> back to 2 (gpt): region [0, 2) = 20 tokens
    assert p.decision is Decision.NO_NET_SAVINGS
    assert (p.start, p.end) == (0, 2)


def test_protect_last_n_zero_summarizes_up_to_the_last_turn_but_not_it():
    roles = hermes(4)
    counts = [100, 100] + [100, 3000] * 4 + [100]
    p = check_plan(roles, counts, params_(1000, 100, last_n=0))
    assert p.decision is Decision.COMPRESS
    assert p.start == 4
    assert p.end == len(roles) - 1  # short of the need: everything after the head but the last turn
    assert not p.merge_into_next
    assert apply_plan(roles, p) == ["system", "human", "gpt", "tool", "human", "gpt"]


def test_all_protection_flags_off_starts_at_turn_zero():
    roles = hermes(4)
    counts = [2000, 100] + [100, 3000] * 4 + [100]
    off = dict.fromkeys(FLAGS, False)
    p = check_plan(roles, counts, params_(9500, 100, last_n=2, **off))
    assert p.decision is Decision.COMPRESS
    assert p.start == 0
    # need = 14600 - 9500 + 100 = 5200 = system 2000 + human 100 + gpt 100 + tool 3000; a gpt follows
    assert p.end == 4
    assert apply_plan(roles, p)[:2] == ["human", "gpt"]


def test_all_flags_off_and_no_tail_summarizes_everything_allowed():
    roles = ["human", "gpt", "tool", "gpt"]
    counts = [1000, 1000, 1000, 1000]
    off = dict.fromkeys(FLAGS, False)
    p = check_plan(roles, counts, params_(100, 10, last_n=0, **off))
    assert (p.decision, p.start, p.end) == (Decision.COMPRESS, 0, 3)
    assert apply_plan(roles, p) == ["human", "gpt"]


def test_region_never_starts_right_after_a_human_turn():
    off = dict.fromkeys(FLAGS, False)
    roles = ["human", "human", "gpt", "tool", "gpt", "tool", "gpt"]
    counts = [10, 10, 10, 3000, 10, 3000, 10]
    p = check_plan(roles, counts, params_(100, 10, last_n=1, **off))
    assert p.decision is Decision.COMPRESS
    assert p.start == 0  # turn 0 has nothing before it
    # Head = system 0 and human 1; turn 2 is a second human, so neither 2 nor 3 may open the region,
    # 4 is a tool turn: the region opens at the gpt turn 5.
    roles2 = ["system", "human", "human", "gpt", "tool", "gpt", "tool", "gpt"]
    flags = dict(protect_first_gpt=False, protect_first_tool=False)
    p2 = check_plan(roles2, [10, 10, 10, 10, 3000, 10, 3000, 10], params_(100, 10, last_n=1, **flags))
    assert (p2.decision, p2.start) == (Decision.COMPRESS, 5)


def test_empty_trajectory_is_under_any_target():
    p = plan([], [], params_(1, 0))
    assert p == Plan(Decision.SKIPPED_UNDER_TARGET, 0)


@pytest.mark.parametrize("role", ROLES)
def test_single_turn_trajectory(role):
    over = plan([role], [5000], params_(1000, 100))
    assert over.decision is Decision.NOTHING_TO_COMPRESS  # the one turn is in the protected tail
    under = plan([role], [500], params_(1000, 100))
    assert under.decision is Decision.SKIPPED_UNDER_TARGET
    off = dict.fromkeys(FLAGS, False)
    bare = check_plan([role], [5000], params_(1000, 100, last_n=0, **off))
    assert bare.decision is Decision.NOTHING_TO_COMPRESS  # the one turn is the last: it stays


def test_exactly_at_target_is_skipped_and_one_over_is_not():
    roles = hermes(3)
    counts = [100] * len(roles)
    assert plan(roles, counts, params_(sum(counts), 10)).decision is Decision.SKIPPED_UNDER_TARGET
    assert plan(roles, counts, params_(sum(counts) - 1, 10)).decision is not Decision.SKIPPED_UNDER_TARGET


def test_plan_params_from_config_reads_every_field():
    from trajcomp.core.config import CompressionConfig

    cfg = CompressionConfig(target_max_tokens=900, summary_target_tokens=90, protect_first_tool=False,
                            protect_last_n_turns=7)
    assert PlanParams.from_config(cfg) == PlanParams(900, 90, True, True, True, False, 7)


def test_llamafactory_agent_row_with_one_user_turn_stays_as_it_was():
    """system, human, then function_call/observation pairs (gpt/tool), a final gpt: the summary, a
    user turn, could only stand where an observation was, leaving a call answered by the user."""
    roles = ["system", "human"] + ["gpt", "tool"] * 6 + ["gpt"]
    counts = [50, 50] + [40, 2000] * 6 + [40]
    p = check_plan(roles, counts, PlanParams(3000, 200, alternation=True))
    assert (p.decision, p.cannot_fit) == (Decision.NOTHING_TO_COMPRESS, True)
    # h f o f o f o f o g h g (the row): neither; with a later user turn, the region opens there.
    row = ["human", "gpt", "tool", "gpt", "tool", "gpt", "tool", "gpt", "tool", "gpt", "human", "gpt"]
    assert check_plan(row, [100, 50] + [50, 2000] * 4 + [50, 50, 50], PlanParams(1000, 100, alternation=True)).decision \
        is Decision.NOTHING_TO_COMPRESS
    longer = row[:11] + ["gpt", "tool"] * 3 + ["gpt", "human", "gpt"]
    counts = [100, 50] + [50, 2000] * 4 + [50, 50] + [50, 2000] * 3 + [50, 50, 50]
    p = check_plan(longer, counts, PlanParams(2000, 100, alternation=True))
    assert p.decision is Decision.COMPRESS and longer[p.start] == "human" and p.start == 10
    assert follows_llamafactory(apply_plan(longer, p))


def test_llamafactory_flag_changes_nothing_for_rows_that_do_not_alternate():
    roles = hermes(5, tools_per_step=2)  # gpt, tool, tool: not alternating
    counts = [100, 100] + [100, 2000, 2000] * 5 + [100]
    assert not follows_llamafactory(roles)
    assert plan(roles, counts, PlanParams(5000, 200, alternation=True)) == plan(roles, counts, PlanParams(5000, 200))
