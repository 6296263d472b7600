"""The synthetic Hermes-style trajectory generator behind scripts/make_samples.py.

Canned text (word lists, statement and file templates, prose, phrasebooks, the row plan) lives
in data/*.json; the modules here hold only the logic that draws from it:

- data: loads the JSON files once and builds the Project, Incident and Topic records
- randtext: random identifiers and small text-formatting helpers
- codegen: synthesized Python and JS/TS modules and their tests
- repo: a lazily synthesized working tree and its config files
- testruns, devtools: coding tool outputs (test runs, diffs, git, lint, builds)
- opstools: operations tool outputs (service logs, kubectl, health checks)
- webtools: research tool outputs (web search, page extracts, benchmarks)
- trajectory: the ShareGPT conversation being built and its tool calls
- run: what every kind of run shares (row spec, size budget, exploration loop)
- coding_steps, coding: coding runs; ops: incident runs; research: library research runs
- rows: the seeded dataset plan and the JSONL row records
"""
