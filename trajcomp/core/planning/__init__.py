"""What to shorten: the region to summarize, and the tool outputs to stub.

- `planner.py`: the region, a pure function of the turns' roles and counts and the protected turns.
- `fit.py`: whether any rule can make a row fit: what no rule may shorten (the protected turns, the
  smallest summary, with `--segments` the first group), decided before any summary is bought.
- `pruning.py`: `--prune`'s candidates: old tool outputs that may become stubs, in their order, each stubbed
  with its dialect's ids and names kept.
- `prune_fit.py`: the fewest of them that fit the row, counted per stub or measured on the rendering.
- `stubs.py`: a stub's words in each style (hermes, swe-agent, openhands, template).
"""
