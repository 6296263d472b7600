"""The `trajcomp compress` command end to end: real files, real tokenizers, the CLI as a subprocess.

Every CLI invocation costs a Python start-up (~1.5 s with transformers), so runs are shared by
module-scoped fixtures and each test groups the assertions one run supports.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import trajcomp
from conftest import read_jsonl, run_cli, write_jsonl

TARGET = 2500
SUMMARY = 200
BUDGET = ("--target-max-tokens", str(TARGET), "--summary-target-tokens", str(SUMMARY))

# ---------------------------------------------------------------------------
# Realistic Hermes-style rows
# ---------------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "terminal",
            "description": "Run a shell command in the sandbox and return stdout, stderr and the exit code.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file and return its lines with line numbers.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
]
SYSTEM_PROMPT = (
    "You are a function calling AI model. You are provided with function signatures within <tools></tools> "
    "XML tags. You may call one or more functions to assist with the user query. Don't make assumptions "
    "about what values to plug into functions.\n<tools>\n"
    + json.dumps(TOOLS)
    + "\n</tools>\nFor each function call return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags."
)
TASKS = [
    "Fix the failing test in src/app.py and make `pytest -x` pass.",
    "修复解析器中的错误，然后重新运行测试。",
    "Le test échoue parce que le fichier de configuration est absent ; corrige-le.",
]
COMMANDS = ["pytest -x tests/test_parser.py", "git diff --stat", "python -m app --check", "ls -la src/", "grep -rn 'def parse' src/"]


def _log(rng: random.Random, n_lines: int) -> str:
    lines = []
    for i in range(n_lines):
        kind = rng.random()
        if kind < 0.2:
            lines.append(f'  File "src/app.py", line {rng.randint(1, 400)}, in parse_{rng.randint(0, 99)}')
        elif kind < 0.3:
            lines.append(f"AssertionError: expected {rng.randint(0, 9)} got {rng.randint(10, 99)}")
        elif kind < 0.4:
            lines.append("我们需要修复解析器中的错误 ✓")
        else:
            lines.append(
                f"[{i:04d}] INFO worker-{rng.randint(1, 8)} processed batch {rng.randint(0, 10**6)} "
                f"in {rng.random():.3f}s"
            )
    return "\n".join(lines)


def _gpt(rng: random.Random, step: int, final: bool = False) -> str:
    think = f"<think>\nStep {step}: the test fails because the parser drops the last field. Let me check.\n</think>\n"
    if final:
        return think + "The parser now keeps the last field and all tests pass. 完成 ✅"
    call = {"name": rng.choice(["terminal", "read_file"]),
            "arguments": {"command": rng.choice(COMMANDS), "path": f"src/mod_{step}.py"}}
    return think + "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"


def _tool(rng: random.Random, step: int, call_id: str, n_lines: int) -> str:
    body = {"tool_call_id": call_id, "name": "terminal", "content": f"exit code {step % 2}\n" + _log(rng, n_lines)}
    return "<tool_response>\n" + json.dumps(body, ensure_ascii=False) + "\n</tool_response>"


def hermes_row(rng: random.Random, idx: int, steps: int, n_lines: int) -> dict:
    conv = [{"from": "system", "value": SYSTEM_PROMPT}, {"from": "human", "value": rng.choice(TASKS)}]
    for s in range(steps):
        conv.append({"from": "gpt", "value": _gpt(rng, s)})
        conv.append({"from": "tool", "value": _tool(rng, s, f"call_{idx}_{s}", n_lines)})
    conv.append({"from": "gpt", "value": _gpt(rng, steps, final=True)})
    return {
        "id": f"traj-{idx:03d}",
        "conversations": conv,
        "completed": idx % 3 != 0,
        "partial": False,
        "api_calls": steps + 1,
        "reward": round(rng.uniform(-1, 1), 6) + 1e-9,
        "meta": {"model": "hermes-4", "temperature": 0.6, "nested": {"list": [1, 2.5, True, None, "ü"], "empty": {}}},
        "tool_stats": {"terminal": {"count": steps, "success": max(0, steps - 1), "failure": 1}},
        "note": f"日本語 ✓ 🚀 row {idx}",
        "big_int": 2**53 + idx,
        "tiny": 1e-300,
        "flag": None,
    }


def hermes_rows(n: int, seed: int = 0) -> list[dict]:
    """Rows of three kinds: short (under target), one-step with huge logs (nothing to compress), long."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        if i % 4 == 0:
            rows.append(hermes_row(rng, i, steps=1, n_lines=2))
        elif i % 6 == 5:
            rows.append(hermes_row(rng, i, steps=1, n_lines=150))
        else:
            rows.append(hermes_row(rng, i, steps=rng.randint(5, 9), n_lines=rng.randint(6, 20)))
    return rows


# One bad line per reject reason: (line text or bytes, expected reason).
BAD_LINES: list[tuple[str | bytes, str]] = [
    ('{"conversations": [{"from": "human", "value": "unterminated"', "invalid_json"),
    (b'{"conversations": [{"from": "human", "value": "caf\xe9 \xff"}]}', "invalid_utf8"),
    ('[{"from": "human", "value": "a list, not a row"}]', "not_an_object"),
    ("42", "not_an_object"),
    ('"just a string"', "not_an_object"),
    ('{"id": "no-conv", "turns": [{"from": "human", "value": "hi"}]}', "missing_conversations"),
    ('{"id": "conv-str", "conversations": "hello"}', "conversations_not_a_list"),
    ('{"conversations": [{"from": "system", "value": "s"}, "hi"]}', "turn_not_an_object"),
    ('{"conversations": [{"value": "no role"}]}', "turn_missing_field"),
    ('{"conversations": [{"from": "human"}]}', "turn_missing_field"),
    ('{"conversations": [{"from": "human", "value": 5}]}', "turn_not_a_string"),
    ('{"conversations": [{"from": ["human"], "value": "hi"}]}', "turn_not_a_string"),  # a role no dict key can be
    ('{"conversations": [{"from": "robot", "value": "hi"}]}', "unknown_role"),
]


def write_lines(path: Path, lines: list[str | bytes | dict]) -> Path:
    """Each item one line: dicts as JSON, str as text, bytes verbatim."""
    with open(path, "wb") as f:
        for item in lines:
            if isinstance(item, dict):
                item = json.dumps(item, ensure_ascii=False)
            f.write((item.encode("utf-8") if isinstance(item, str) else item) + b"\n")
    return path


def mixed_lines(valid: list[dict]) -> tuple[list, dict[int, str], int]:
    """Valid rows with every bad line and some blank lines between them.

    Returns (lines, {1-based line: expected reason}, number of blank lines)."""
    lines: list = []
    expected: dict[int, str] = {}
    blanks = 0
    rows = iter(valid)
    for i, (bad, reason) in enumerate(BAD_LINES):
        lines.append(next(rows))
        if i % 4 == 1:
            lines.append("")
            blanks += 1
        if i % 4 == 3:
            lines.append("   \t")
            blanks += 1
        lines.append(bad)
        expected[len(lines)] = reason
    lines.extend(rows)
    lines.append("")
    blanks += 1
    return lines, expected, blanks


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under root (hidden ones too) with size and mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def run_parallel(*commands: tuple[str, ...]) -> list:
    """Independent CLI runs at once (each is mostly interpreter start-up); results in order."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(commands), os.cpu_count() or 1))) as pool:
        return list(pool.map(lambda args: run_cli(*args), commands))


def assert_ok(res) -> None:
    assert res.code == 0, f"exit {res.code}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    assert "Traceback" not in res.stderr, res.stderr


# ---------------------------------------------------------------------------
# The main run: a file of realistic rows
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def main_run(tmp_path_factory, bpe_tokenizer):
    d = tmp_path_factory.mktemp("main")
    rows = hermes_rows(16, seed=7)
    src = write_jsonl(d / "hermes_runs.jsonl", rows)
    res = run_cli("compress", str(src), "--tokenizer", str(bpe_tokenizer), *BUDGET)
    return d, src, rows, res


def test_compress_file_writes_rows_in_order_with_other_fields_untouched(main_run):
    d, src, rows, res = main_run
    assert_ok(res)
    out = d / "hermes_runs_compressed.jsonl"
    report_path = d / "hermes_runs_compressed_metrics.json"
    assert sorted(p.name for p in d.iterdir()) == sorted(
        [src.name, out.name, report_path.name]
    ), "no rejects file (nor stray temp files) when every row is valid"
    assert str(report_path) in res.stdout  # the text report names where the report went

    written = read_jsonl(out)
    assert [r["id"] for r in written] == [r["id"] for r in rows]
    text = out.read_text(encoding="utf-8")
    assert "日本語 ✓ 🚀" in text, "unicode is written as UTF-8, not \\u-escaped"

    outcomes = set()
    for before, after in zip(rows, written):
        assert list(after) == list(before) + ["compression_metrics"], "field order kept, metrics appended"
        for key, value in before.items():
            if key != "conversations":
                assert after[key] == value and type(after[key]) is type(value), key
        m = after["compression_metrics"]
        outcomes.add(m["outcome"])
        assert m["original_turns"] == len(before["conversations"])
        assert m["compressed_turns"] == len(after["conversations"])
        if m["outcome"] != "compressed":
            assert after["conversations"] == before["conversations"]
            continue
        conv_in, conv_out = before["conversations"], after["conversations"]
        assert len(conv_out) < len(conv_in)
        summaries = [t for t in conv_out if "[CONTEXT SUMMARY]:" in t["value"]]
        assert len(summaries) == 1 and summaries[0]["from"] == "human"
        # Protected head (first system/human/gpt/tool) and the last 4 turns are kept verbatim,
        # except the summary notice appended to the system prompt.
        assert conv_out[0]["from"] == "system" and conv_out[0]["value"].startswith(conv_in[0]["value"])
        assert conv_out[1:4] == conv_in[1:4]
        assert conv_out[-4:] == conv_in[-4:]
    assert {"compressed", "skipped_under_target", "nothing_to_compress"} <= outcomes, outcomes

    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["rows"]["written"] == len(rows) and report["rows"]["rejected"] == 0
    assert report["processing"]["rejects_file"] is None
    compression = report["config"]["compression"]
    assert (compression["target_max_tokens"], compression["summary_target_tokens"]) == (TARGET, SUMMARY)


# ---------------------------------------------------------------------------
# Rejects
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reject_run(tmp_path_factory, bpe_tokenizer):
    """The mixed file compressed twice with the same command; the bytes of the first run are kept."""
    d = tmp_path_factory.mktemp("rejects")
    valid = hermes_rows(len(BAD_LINES) + 2, seed=3)
    lines, expected, blanks = mixed_lines(valid)
    src = write_lines(d / "mixed.jsonl", lines)
    args = ("compress", str(src), "--tokenizer", str(bpe_tokenizer), *BUDGET, "--quiet")
    res = run_cli(*args)
    outputs = ("mixed_compressed.jsonl", "mixed_compressed_rejects.jsonl")
    first = {name: (d / name).read_bytes() for name in outputs if (d / name).exists()}
    rerun = run_cli(*args)
    return d, src, valid, lines, expected, blanks, res, args, first, rerun


def test_every_reject_reason_goes_to_the_rejects_file(reject_run):
    d, src, valid, lines, expected, blanks, res, *_ = reject_run
    assert_ok(res)
    out = read_jsonl(d / "mixed_compressed.jsonl")
    assert [r["id"] for r in out] == [r["id"] for r in valid], "only the valid rows, in order"

    rejects = read_jsonl(d / "mixed_compressed_rejects.jsonl")
    assert [r["line"] for r in rejects] == sorted(expected)
    raw_lines = src.read_bytes().split(b"\n")
    for rec in rejects:
        assert set(rec) == {"source", "line", "reason", "detail", "raw"}, rec
        assert rec["reason"] == expected[rec["line"]], rec
        assert Path(rec["source"]).name == src.name
        assert isinstance(rec["detail"], str) and rec["detail"]
        original = raw_lines[rec["line"] - 1]
        if rec["reason"] == "invalid_utf8":
            assert rec["raw"] == original.decode("utf-8", errors="backslashreplace")
        else:
            assert rec["raw"] == original.decode("utf-8")

    report = json.loads((d / "mixed_compressed_metrics.json").read_text(encoding="utf-8"))
    rows = report["rows"]
    reasons: dict[str, int] = {}
    for reason in expected.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    assert rows["rejected"] == len(expected)
    assert rows["reject_reasons"] == reasons
    non_blank = sum(1 for line in raw_lines if line.strip())
    assert rows["written"] + rows["rejected"] == non_blank == rows["read"]
    assert report["processing"]["rejects_file"] == str(d / "mixed_compressed_rejects.jsonl")
    assert res.stdout == "" and res.stderr == ""  # --quiet


def test_rerun_is_byte_identical(reject_run):
    d, *_, first, rerun = reject_run
    assert_ok(rerun)
    assert set(first) == {"mixed_compressed.jsonl", "mixed_compressed_rejects.jsonl"}
    for name, data in first.items():
        assert (d / name).read_bytes() == data, name


def test_stale_rejects_file_is_removed(tmp_path, reject_run):
    d, src, valid, lines, expected, blanks, res, args, first, rerun = reject_run
    # A copy of the earlier run's directory (input, output, report, rejects), then the same
    # input without its bad lines: the old rejects file must go.
    work = tmp_path / "copy"
    shutil.copytree(d, work)
    rejects = work / "mixed_compressed_rejects.jsonl"
    assert rejects.exists()
    write_lines(work / src.name, [line for i, line in enumerate(lines, 1) if i not in expected])
    args = tuple(str(work / src.name) if a == str(src) else a for a in args)
    assert_ok(run_cli(*args))
    assert not rejects.exists()
    assert (work / "mixed_compressed.jsonl").read_bytes() == first["mixed_compressed.jsonl"]
    report = json.loads((work / "mixed_compressed_metrics.json").read_text(encoding="utf-8"))
    assert report["rows"]["rejected"] == 0 and report["processing"]["rejects_file"] is None
    assert sorted(p.name for p in work.iterdir()) == [
        "mixed.jsonl", "mixed_compressed.jsonl", "mixed_compressed_metrics.json",
    ], "no temp files left"


def test_empty_input_gives_empty_output_and_zero_report(tmp_path, bpe_tokenizer):
    src = tmp_path / "empty.jsonl"
    src.write_bytes(b"")
    res = run_cli("compress", str(src), "--tokenizer", str(bpe_tokenizer), "--json")
    assert_ok(res)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "empty.jsonl", "empty_compressed.jsonl", "empty_compressed_metrics.json",
    ]
    assert (tmp_path / "empty_compressed.jsonl").read_bytes() == b""
    report = json.loads((tmp_path / "empty_compressed_metrics.json").read_text(encoding="utf-8"))
    assert json.loads(res.stdout) == report
    rows = report["rows"]
    assert rows["read"] == rows["written"] == rows["rejected"] == rows["not_sampled"] == 0
    assert rows["reject_reasons"] == {}
    assert all(v == 0 for k, v in rows.items() if k != "reject_reasons"), rows
    assert report["summary"]["total_trajectories"] == 0
    assert set(report["summary"]["outcomes"].values()) == {0}
    assert report["tokens"] == {"total_original": 0, "total_compressed": 0, "total_saved": 0,
                                "overall_compression_ratio": 1.0, "assistant": 0, "trained": 0, "trained_share": None}
    assert report["turns"] == {"total_original": 0, "total_compressed": 0, "total_removed": 0}
    assert set(report["averages"].values()) == {0.0}
    zero = {"min": 0, "p50": 0, "p90": 0, "p99": 0, "max": 0}
    assert report["distribution"] == {"before": zero, "after": zero}
    assert report["processing"]["rejects_file"] is None


def test_version():
    res = run_cli("--version")
    assert res.code == 0 and res.stdout == f"trajcomp {trajcomp.__version__}\n"


def test_a_tokenizer_name_neither_cached_nor_reachable_fails_at_once(tmp_path):
    """Not a minute of retries against a Hub that cannot answer: one line naming the tokenizer."""
    src = write_jsonl(tmp_path / "in.jsonl", hermes_rows(2, seed=3))
    with socket.socket() as refusing:  # bound, never listening: the "Hub" refuses connections
        refusing.bind(("127.0.0.1", 0))
        hub = f"http://127.0.0.1:{refusing.getsockname()[1]}"
        res = run_cli("compress", str(src), "--tokenizer", "some-org/never-downloaded-tokenizer",
                      env={"HF_HUB_OFFLINE": "", "HF_ENDPOINT": hub, "HF_HOME": str(tmp_path / "hf")})
    assert res.code == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "some-org/never-downloaded-tokenizer" in res.stderr
    assert not (tmp_path / "in_compressed.jsonl").exists()


def test_an_output_that_cannot_be_written_is_one_line_not_a_traceback(tmp_path, bpe_tokenizer):
    src = write_jsonl(tmp_path / "in.jsonl", hermes_rows(2, seed=3))
    res = run_cli("compress", str(src), "--tokenizer", str(bpe_tokenizer), "-o", "/proc/trajcomp-nowhere/out.jsonl")
    assert res.code == 1, res.stderr
    assert res.stderr.startswith("trajcomp: error: cannot write /proc/trajcomp-nowhere") and res.stderr.count("\n") == 1


# ---------------------------------------------------------------------------
# Usage errors: exit 2, one line on stderr, nothing written
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def error_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("errors")
    write_jsonl(d / "in.jsonl", hermes_rows(3, seed=1))
    (d / "unknown_key.yaml").write_text("compression:\n  target_max_tokens: 2000\n  target_max_tokenz: 5\n")
    (d / "not_a_tokenizer").mkdir()
    (d / "not_a_tokenizer" / "README.txt").write_text("no tokenizer.json here\n")
    (d / "a_file").write_text("not a folder\n")
    (d / "rows").mkdir()
    write_jsonl(d / "rows" / "part.jsonl", hermes_rows(2, seed=2))
    return d


@pytest.mark.parametrize(
    "case",
    ["missing_input", "bad_int", "unknown_flag", "unknown_config_key", "missing_tokenizer", "tokenizer_folder_empty",
     "output_is_input", "output_is_input_spelled_differently", "output_dir_is_input_dir",
     "output_under_a_file", "output_dir_is_a_file", "output_without_a_type", "no_tokenizer", "tokenizer_file"],
)
def test_usage_errors_exit_2_with_one_line_and_write_nothing(case, error_dir, bpe_tokenizer):
    d = error_dir
    src = d / "in.jsonl"
    tok = ("--tokenizer", str(bpe_tokenizer))
    args, must_name = {
        "missing_input": (("compress", str(d / "nope.jsonl"), *tok), ["nope.jsonl"]),
        "bad_int": (("compress", str(src), *tok, "--target-max-tokens", "abc"), ["--target-max-tokens"]),
        "unknown_flag": (("compress", str(src), *tok, "--bogus"), ["--bogus"]),
        "unknown_config_key": (
            ("compress", str(src), *tok, "-c", str(d / "unknown_key.yaml")),
            ["target_max_tokenz", "unknown_key.yaml"],
        ),
        "missing_tokenizer": (
            ("compress", str(src), "--tokenizer", str(d / "no_such_tokenizer")), ["no_such_tokenizer"],
        ),
        "tokenizer_folder_empty": (
            ("compress", str(src), "--tokenizer", str(d / "not_a_tokenizer")), ["not_a_tokenizer"],
        ),
        "output_is_input": (("compress", str(src), *tok, "-o", str(src)), ["in.jsonl"]),
        "output_is_input_spelled_differently": (
            ("compress", str(src), *tok, "-o", str(d / "." / "sub" / ".." / "in.jsonl")), ["in.jsonl"],
        ),
        "output_dir_is_input_dir": (("compress", str(d), *tok, "-o", str(d) + "/"), [d.name]),
        "output_under_a_file": (("compress", str(src), *tok, "-o", str(d / "a_file" / "out.jsonl")), ["a_file"]),
        "output_dir_is_a_file": (("compress", str(d / "rows"), *tok, "-o", str(d / "a_file")), ["a_file", "not a folder"]),
        "output_without_a_type": (("compress", str(src), *tok, "-o", str(d / "new_folder")), ["new_folder"]),
        "no_tokenizer": (("compress", str(src)), ["no tokenizer given", "--tokenizer"]),
        "tokenizer_file": (
            ("compress", str(src), "--tokenizer", str(bpe_tokenizer / "tokenizer.json")), [str(bpe_tokenizer)],
        ),
    }[case]
    before = snapshot(d.parent)
    res = run_cli(*args)
    after = snapshot(d.parent)
    assert res.code == 2, (res.code, res.stderr)
    lines = res.stderr.strip("\n").splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("trajcomp: error: "), lines[0]
    for name in must_name:
        assert name in lines[0], (name, lines[0])
    assert res.stdout == ""
    assert after == before, "nothing created, changed or left behind (hidden temp files included)"


def test_dot_directory_input(tmp_path, bpe_tokenizer):
    d = tmp_path / "runs"
    d.mkdir()
    write_jsonl(d / "a.jsonl", hermes_rows(2, seed=2))
    res = run_cli("compress", ".", "--tokenizer", str(bpe_tokenizer), "--quiet", cwd=d)
    assert res.code == 0, res.stderr
    assert (tmp_path / "runs_compressed" / "a.jsonl").exists()


def test_malformed_json_array_input_is_a_clean_error(tmp_path, bpe_tokenizer):
    src = tmp_path / "rows.json"
    src.write_text('{"conversations": []}\n')
    res = run_cli("compress", str(src), "--tokenizer", str(bpe_tokenizer), "--quiet")
    assert "Traceback" not in res.stderr, res.stderr[-500:]
    assert res.code == 1  # unreadable data: the run could not go on (exit 2 is for flags and config)
    lines = res.stderr.strip("\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith("trajcomp: error: ") and "rows.json" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.json"], "nothing written, no work folder left"


# ---------------------------------------------------------------------------
# Directory input, -o
# ---------------------------------------------------------------------------


def test_directory_input_default_and_custom_output(tmp_path, bpe_tokenizer):
    d = tmp_path / "batch"
    d.mkdir()
    a_rows = hermes_rows(5, seed=21)
    write_jsonl(d / "a.jsonl", a_rows)
    b_rows = hermes_rows(4, seed=22)
    write_lines(d / "b.jsonl", [b_rows[0], "not json", b_rows[1], "", b_rows[2], "[]", b_rows[3]])
    (d / "notes.txt").write_text("not an input\n")
    (d / "c.csv").write_text("id,conversations\n")

    custom = tmp_path / "elsewhere" / "mine"
    res, res_custom = run_parallel(
        ("compress", str(d), "--tokenizer", str(bpe_tokenizer), *BUDGET, "--json"),
        ("compress", str(d), "--tokenizer", str(bpe_tokenizer), *BUDGET, "-o", str(custom), "--quiet"),
    )
    assert_ok(res)
    assert_ok(res_custom)
    out = tmp_path / "batch_compressed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch", "batch_compressed", "elsewhere"]
    assert sorted(p.name for p in custom.parent.iterdir()) == ["mine"]
    assert sorted(p.name for p in out.iterdir()) == ["a.jsonl", "b.jsonl", "compression_metrics.json", "rejects.jsonl"]
    assert [r["id"] for r in read_jsonl(out / "a.jsonl")] == [r["id"] for r in a_rows]
    assert [r["id"] for r in read_jsonl(out / "b.jsonl")] == [r["id"] for r in b_rows]
    rejects = read_jsonl(out / "rejects.jsonl")
    assert [(Path(r["source"]).name, r["line"], r["reason"]) for r in rejects] == [
        ("b.jsonl", 2, "invalid_json"), ("b.jsonl", 6, "not_an_object"),
    ]
    report = json.loads((out / "compression_metrics.json").read_text(encoding="utf-8"))
    assert json.loads(res.stdout) == report
    assert report["rows"]["written"] == 9 and report["rows"]["rejected"] == 2
    assert [Path(p).name for p in report["processing"]["inputs"]] == ["a.jsonl", "b.jsonl"]

    # -o DIR: the same files, the same rows, nothing in the default place from that run.
    assert sorted(p.name for p in custom.iterdir()) == sorted(p.name for p in out.iterdir())
    for name in ("a.jsonl", "b.jsonl", "rejects.jsonl"):
        assert (custom / name).read_bytes() == (out / name).read_bytes()
    assert res_custom.stdout == "" and res_custom.stderr == ""


# ---------------------------------------------------------------------------
# --dry-run
# ---------------------------------------------------------------------------


def test_dry_run_writes_nothing(tmp_path, main_run, bpe_tokenizer):
    _, _, rows, _ = main_run
    lines, expected, _ = mixed_lines(rows)
    src = write_lines(tmp_path / "dry.jsonl", lines)
    before = snapshot(tmp_path)

    text, res = run_parallel(
        ("compress", str(src), "--tokenizer", str(bpe_tokenizer), *BUDGET, "--dry-run"),
        ("compress", str(src), "--tokenizer", str(bpe_tokenizer), *BUDGET, "--dry-run", "--json"),
    )
    assert_ok(text)
    assert_ok(res)
    assert snapshot(tmp_path) == before, "a dry run writes nothing at all"
    assert "dry run" in text.stdout and f"{len(rows)} rows" in text.stdout
    est = json.loads(res.stdout)
    assert est["rows"] == len(rows)
    assert est["rows_rejected"] == len(expected)
    assert est["target_max_tokens"] == TARGET and est["summary_target_tokens"] == SUMMARY
    assert est["inputs"] == [str(src)] and est["tokenizer"]["name"] == str(bpe_tokenizer)  # as `stats` says it

    # Cross-check with the real run on the same rows (main_run): same counts, same decisions.
    written = read_jsonl(main_run[0] / "hermes_runs_compressed.jsonl")
    metrics = [r["compression_metrics"] for r in written]
    assert est["over_target"] == sum(m["original_tokens"] > TARGET for m in metrics)
    summarized = sum(m["outcome"] in ("compressed", "summary_too_long", "failed") for m in metrics)
    assert est["summarizer_calls_needed"] == summarized
    assert est["decisions"]["skipped_under_target"] == sum(m["outcome"] == "skipped_under_target" for m in metrics)
    assert est["tokens_before"]["max"] == max(m["original_tokens"] for m in metrics)


# ---------------------------------------------------------------------------
# --sample-percent, --seed, --quiet
# ---------------------------------------------------------------------------


def test_sampling_is_deterministic_and_seeded(tmp_path, bpe_tokenizer):
    rows = hermes_rows(40, seed=9)
    lines = rows[:20] + ["{broken"] + rows[20:]
    src = write_lines(tmp_path / "big.jsonl", lines)
    base = ("compress", str(src), "--tokenizer", str(bpe_tokenizer), *BUDGET, "--sample-percent", "50")

    deep = tmp_path / "deep" / "er" / "s2.jsonl"  # -o FILE into folders that do not exist yet
    quiet, loud, other = run_parallel(
        (*base, "--seed", "1", "-o", str(tmp_path / "s1a.jsonl"), "--quiet"),
        (*base, "--seed", "1", "-o", str(tmp_path / "s1b.jsonl")),
        (*base, "--seed", "2", "-o", str(deep), "--json"),
    )
    for res in (quiet, loud, other):
        assert_ok(res)
    assert quiet.stdout == "" and quiet.stderr == "", "--quiet: no report text and no progress bar"
    assert "not_sampled: " in loud.stdout and str(tmp_path / "s1b_metrics.json") in loud.stdout
    assert other.stderr == "", "--json: no progress bar either"
    seed1_rejected = json.loads((tmp_path / "s1a_metrics.json").read_text(encoding="utf-8"))["rows"]["rejected"]
    seed2_rejected = json.loads(other.stdout)["rows"]["rejected"]
    expected = ["big.jsonl", "deep", "s1a.jsonl", "s1a_metrics.json", "s1b.jsonl", "s1b_metrics.json"]
    expected += ["s1a_rejects.jsonl", "s1b_rejects.jsonl"] if seed1_rejected else []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(expected), "outputs only where -o said"
    assert sorted(p.name for p in deep.parent.iterdir()) == sorted(
        ["s2.jsonl", "s2_metrics.json"] + (["s2_rejects.jsonl"] if seed2_rejected else [])
    )
    assert json.loads((deep.parent / "s2_metrics.json").read_text(encoding="utf-8")) == json.loads(other.stdout)

    assert (tmp_path / "s1a.jsonl").read_bytes() == (tmp_path / "s1b.jsonl").read_bytes()
    ids1 = [r["id"] for r in read_jsonl(tmp_path / "s1a.jsonl")]
    ids2 = [r["id"] for r in read_jsonl(deep)]
    all_ids = [r["id"] for r in rows]
    assert ids1 != ids2
    for ids in (ids1, ids2):
        assert ids == [i for i in all_ids if i in set(ids)], "a sample keeps input order"
        assert 8 <= len(ids) <= 32, len(ids)

    for report_path in (tmp_path / "s1a_metrics.json", deep.parent / "s2_metrics.json"):
        report = json.loads(report_path.read_text(encoding="utf-8"))
        r = report["rows"]
        assert r["not_sampled"] + r["written"] + r["rejected"] == len(lines) == r["read"]
        selection = report["processing"].get("selection", report["processing"])
        assert selection["sample_percent"] == 50.0
    processing = json.loads(other.stdout)["processing"]
    assert processing.get("selection", processing)["seed"] == 2
    assert json.loads(other.stdout)["processing"]["outputs"] == [str(deep)]
