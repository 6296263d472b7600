"""Checked parts: a committed part truncated, overwritten or lost after a kill is computed again, never used.

One real run is killed with SIGKILL once for the module; each case restores a copy of the work folder
it left, damages it and resumes with the real CLI: the bytes are an uninterrupted run's, and one
warning line names the part.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import io
import json
import os
import shutil
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import SAMPLES, read_jsonl, run_cli, write_jsonl
from openai_server import ServerThread
from test_resume import args, hermes_row, run_held_midway, thaw

from trajcomp import cli
from trajcomp.engines.parts import work as part_work
from trajcomp.engines.parts.checkpoint import WorkDir
from trajcomp.engines.runners import pipeline

ROWS = 24
CHECKPOINT_ROWS = 3  # args() runs with --checkpoint-rows 3


@pytest.fixture(scope="module")
def killed(tmp_path_factory, bpe_tokenizer):
    """A reference run, and a copy of what a run killed with SIGKILL after 4 finished parts left."""
    tmp = tmp_path_factory.mktemp("checked")
    rows = [hermes_row(i) for i in range(ROWS)]
    rows.insert(5, "this line is not JSON")  # a rejects part in part 1
    src = write_jsonl(tmp / "data.jsonl", rows)
    with ServerThread(latency=0.1) as server:
        ref = tmp / "ref" / "out.jsonl"
        assert run_cli(*args(src, ref, bpe_tokenizer, server.base_url, "--no-cache")).code == 0
        out = tmp / "run" / "out.jsonl"
        proc = run_held_midway(server, src, out, bpe_tokenizer, 4)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        thaw(server)
        shutil.copytree(out.parent, tmp / "killed")
        yield SimpleNamespace(src=src, ref=ref, out=out, server=server, tok=bpe_tokenizer, copy=tmp / "killed")


def _work(out: Path) -> Path:
    return out.parent / f".{out.name}.trajcomp-work"


def rows_of(work: Path, index: int, suffix: str = ".jsonl", file: int = 0) -> tuple[Path, int, int | None]:
    """Where a part's file `suffix` is, by its checkpoint: a file of its own (path, 0, None), or the part's
    range of the file that holds the rows of parts written in turn (WorkDir.rows)."""
    folder = WorkDir(work, {})
    own, done, rows = folder.part(file, index, suffix), folder.part(file, index, ".done.json"), folder.rows(file, suffix)
    files = json.loads(done.read_text()).get("files", {}) if done.exists() else {}
    if own.name in files or rows.name not in files:
        return own, 0, None
    return rows, files[rows.name]["at"], files[rows.name]["bytes"]


def _file(where: Path | tuple[Path, int, int | None]) -> Path:
    return where[0] if isinstance(where, tuple) else where  # a whole file, or rows_of's range of one


def _middle(where: Path | tuple[Path, int, int | None]) -> tuple[Path, int]:
    path, at, size = where if isinstance(where, tuple) else (where, 0, None)
    return path, at + (path.stat().st_size if size is None else size) // 2


def truncate(where: Path | tuple[Path, int, int | None]) -> None:
    """The file cut in the middle of the part's bytes."""
    path, middle = _middle(where)
    path.write_bytes(path.read_bytes()[:middle])


def overwrite(where: Path | tuple[Path, int, int | None]) -> None:
    """A few bytes in the middle of the part's changed, the size kept (a lost block, a stale page)."""
    path, middle = _middle(where)
    data = bytearray(path.read_bytes())
    data[middle:middle + 8] = b"\0" * 8
    path.write_bytes(bytes(data))


def delete(where: Path | tuple[Path, int, int | None]) -> None:
    _file(where).unlink()


def older_checkpoint(where: Path | tuple[Path, int, int | None]) -> None:
    """The checkpoint as a trajcomp from before manifests wrote it: no sizes, no checksums."""
    done = _file(where)
    checkpoint = json.loads(done.read_text())
    del checkpoint["files"]
    done.write_text(json.dumps(checkpoint))


@pytest.mark.parametrize("damage,part,suffix,workers,why", [
    (truncate, 1, ".jsonl", (), "expected"),
    (overwrite, 2, ".jsonl", ("--workers", "2"), "sha256"),
    (delete, 1, ".rejects.jsonl", (), "missing"),
    (delete, 0, ".jsonl", (), "missing"),
    (older_checkpoint, 3, ".done.json", (), "no checksums"),
    (truncate, 2, ".done.json", (), "unreadable"),  # the checkpoint itself torn
])
def test_a_damaged_part_after_a_kill_is_computed_again(killed, damage, part, suffix, workers, why):
    shutil.rmtree(killed.out.parent, ignore_errors=True)
    shutil.copytree(killed.copy, killed.out.parent)
    damaged = rows_of(_work(killed.out), part, suffix)
    damage(damaged)
    result = run_cli(*args(killed.src, killed.out, killed.tok, killed.server.base_url, *workers))
    assert result.code == 0, result.stderr
    assert killed.out.read_bytes() == killed.ref.read_bytes()
    rejects = killed.out.parent / "out_rejects.jsonl"
    assert rejects.read_bytes() == (killed.ref.parent / "out_rejects.jsonl").read_bytes()
    (warning,) = result.stderr.splitlines()  # one line, under -q too
    assert warning.startswith("trajcomp: warning: ") and why in warning
    assert f"part-{part:06d}" in warning and damaged[0].name in warning
    report = json.loads((killed.out.parent / "out_metrics.json").read_text())
    assert report["processing"]["rows_from_checkpoint"] == CHECKPOINT_ROWS * part  # the parts before it


def test_what_a_killed_part_left_after_the_last_checkpoint_is_cut_off_not_joined(killed):
    """The rows of the part a kill interrupted stay in the file the parts are written into in turn, after
    the last finished part's range: the resume writes its next part over them, and no warning is due."""
    shutil.rmtree(killed.out.parent, ignore_errors=True)
    shutil.copytree(killed.copy, killed.out.parent)
    rows, at, size = rows_of(_work(killed.out), 3)
    with open(rows, "ab") as handle:
        handle.write(b'{"half a row": "of the part the kill stopped')
    assert rows.stat().st_size > at + size
    result = run_cli(*args(killed.src, killed.out, killed.tok, killed.server.base_url))
    assert result.code == 0 and result.stderr == "", result.stderr
    assert killed.out.read_bytes() == killed.ref.read_bytes()
    assert not rows.exists()  # in place as the output, then removed


def run_inproc(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            cli.main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, err.getvalue()


def offline(src: Path, out: Path, *extra: str) -> list[str]:
    return ["compress", str(src), "-o", str(out), "-c", str(SAMPLES.parent / "configs" / "demo.yaml"),
            "--checkpoint-rows", "2", "-q", *extra]


def test_a_part_damaged_after_the_resume_checked_it_is_computed_again_before_the_join(tmp_path, monkeypatch):
    """The join checks the parts right before it reads them: one damaged since is redone, not joined."""
    src = write_jsonl(tmp_path / "in.jsonl", [*read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:5], "{oops"])
    assert run_inproc(offline(src, tmp_path / "ref.jsonl"))[0] == 0
    real, calls = part_work.join_parts, []

    def damaging_join(work, index, *rest):
        calls.append(index)
        if len(calls) == 1:
            truncate(rows_of(work.path, 1))
        return real(work, index, *rest)

    monkeypatch.setattr(part_work, "join_parts", damaging_join)
    code, stderr = run_inproc(offline(src, tmp_path / "out.jsonl"))
    assert code == 0, stderr
    assert calls == [0, 0] and "rows.jsonl, part-000001's bytes: size" in stderr and stderr.count("warning") == 1
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "ref.jsonl").read_bytes()
    assert (tmp_path / "out_rejects.jsonl").read_bytes() == (tmp_path / "ref_rejects.jsonl").read_bytes()


def _stop(*_: object) -> None:
    raise SystemExit(137)  # the process ends here, as SIGKILL would end it


def test_a_kill_after_the_output_is_in_place_and_before_its_file_is_marked_joined_loses_no_part(tmp_path, monkeypatch):
    """The join puts the parts' file in place as the output before it marks the file joined: a run stopped
    between the two resumes with every part whole (no warning, nothing computed again)."""
    src = write_jsonl(tmp_path / "in.jsonl", [*read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:5], "{oops"])
    assert run_inproc(offline(src, tmp_path / "ref.jsonl"))[0] == 0
    with monkeypatch.context() as patched:
        patched.setattr(WorkDir, "mark_file_done", _stop)
        code, _ = run_inproc(offline(src, tmp_path / "out.jsonl"))
    assert code == 137 and (tmp_path / "out.jsonl").exists()
    gc.collect()  # the stopped run's work folder lock, held by this process, is let go
    code, stderr = run_inproc(offline(src, tmp_path / "out.jsonl"))
    assert code == 0 and stderr == "", stderr
    report = json.loads((tmp_path / "out_metrics.json").read_text())
    assert report["processing"]["rows_from_checkpoint"] == 6  # every part kept
    for name in ("out.jsonl", "out_rejects.jsonl"):
        assert (tmp_path / name).read_bytes() == (tmp_path / name.replace("out", "ref")).read_bytes()


def test_a_part_damaged_before_a_workers_join_is_computed_again(tmp_path, monkeypatch):
    """With whole parts a worker checks and joins the file: a part damaged since its commit comes back
    named, and the file is computed again (row by row), not joined."""
    from trajcomp.engines.runners.workers import WorkerPool

    src = write_jsonl(tmp_path / "in.jsonl", [*read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:5], "{oops"])
    assert run_inproc(offline(src, tmp_path / "ref.jsonl"))[0] == 0
    real, joins = WorkerPool.join_file, []

    async def damaging_join(self, task):
        if not joins:
            truncate(rows_of(task.work, 1))
        joins.append(task.file_index)
        return await real(self, task)

    monkeypatch.setattr(WorkerPool, "join_file", damaging_join)
    code, stderr = run_inproc(offline(src, tmp_path / "out.jsonl", "--workers", "2"))
    assert code == 0, stderr
    assert joins == [0] and "part-000001.jsonl: size" in stderr and stderr.count("warning") == 1
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "ref.jsonl").read_bytes()
    assert (tmp_path / "out_rejects.jsonl").read_bytes() == (tmp_path / "ref_rejects.jsonl").read_bytes()


def test_a_joined_files_damaged_rejects_part_redoes_that_file(tmp_path):
    """A file already joined keeps only its rejects parts: one damaged has the whole file computed again.
    The run is stopped after the first file by a corrupt second input, restored (size and time kept)."""
    rows = read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:6]
    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", [*rows[:3], "{oops", *rows[3:]])
    good = gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in rows), mtime=0)
    (folder / "b.jsonl.gz").write_bytes(good)
    assert run_inproc(offline(folder, tmp_path / "ref"))[0] == 0
    stamp = os.stat(folder / "b.jsonl.gz").st_mtime_ns
    corrupt = bytearray(good)
    corrupt[len(good) // 2:len(good) // 2 + 16] = b"\xff" * 16
    (folder / "b.jsonl.gz").write_bytes(bytes(corrupt))
    os.utime(folder / "b.jsonl.gz", ns=(stamp, stamp))  # the same identity as the good file the resume reads
    stopped = run_cli(*offline(folder, tmp_path / "out"))  # a process of its own: it ends, and its lock with it
    assert stopped.code == 1 and "b.jsonl.gz" in stopped.stderr, stopped.stderr
    (folder / "b.jsonl.gz").write_bytes(good)
    os.utime(folder / "b.jsonl.gz", ns=(stamp, stamp))
    work = tmp_path / "out" / ".trajcomp-work"
    assert (work / "file-00000" / "joined").exists()
    overwrite(rows_of(work, 1, ".rejects.jsonl"))
    code, stderr = run_inproc(offline(folder, tmp_path / "out"))
    assert code == 0, stderr
    assert stderr.count("warning") == 1 and "part-000001.rejects.jsonl: sha256" in stderr
    for name in ("a.jsonl", "b.jsonl.gz", "rejects.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name


def test_a_part_damaged_at_every_join_stops_the_run_resumably(tmp_path, monkeypatch):
    """Storage that loses every write: after three attempts the run stops (exit 1), no output written."""
    src = write_jsonl(tmp_path / "in.jsonl", read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:4])
    real = part_work.join_parts

    def damaging_join(work, index, *rest):
        truncate(rows_of(work.path, 0))
        return real(work, index, *rest)

    monkeypatch.setattr(part_work, "join_parts", damaging_join)
    code, stderr = run_inproc(offline(src, tmp_path / "out.jsonl"))
    assert code == 1 and stderr.count("warning") == 3, stderr
    assert "again after 3 attempts" in stderr.splitlines()[-1] and "run the same command again" in stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_a_rejects_part_damaged_before_the_runs_end_stops_it_and_the_resume_redoes_its_file(tmp_path, monkeypatch):
    """Rejects parts are read last, after the outputs' joins: one damaged by then stops the run (exit 1),
    and the same command computes its file again."""
    src = write_jsonl(tmp_path / "in.jsonl", [*read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:4], "{oops"])
    assert run_inproc(offline(src, tmp_path / "ref.jsonl"))[0] == 0
    real = pipeline.gather

    def damaging_gather(work, layout):
        overwrite(rows_of(work.path, 2, ".rejects.jsonl"))
        return real(work, layout)

    with monkeypatch.context() as patched:
        patched.setattr(pipeline, "gather", damaging_gather)
        code, stderr = run_inproc(offline(src, tmp_path / "out.jsonl"))
    assert code == 1 and "part-000002.rejects.jsonl: sha256" in stderr, stderr
    gc.collect()  # the stopped run's work folder lock, held by this process, is let go
    code, stderr = run_inproc(offline(src, tmp_path / "out.jsonl"))
    assert code == 0 and "part-000002.rejects.jsonl: sha256" in stderr and "from part 0" in stderr, stderr
    for name in ("out.jsonl", "out_rejects.jsonl"):
        assert (tmp_path / name).read_bytes() == (tmp_path / name.replace("out", "ref")).read_bytes()
