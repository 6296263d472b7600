"""Where a run reads and writes: input files, outputs, report, rejects, cache and work folder."""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Collection

from ...core.config import CompressionConfig, ConfigError
from ...formats import HF, INPUT_SUFFIXES, OUTPUT_FORMATS, OUTPUT_SUFFIXES, is_dataset_folder, name_suffix, split_suffix
from ..storage.remote import is_uri


@dataclass(frozen=True)
class FileJob:
    input: Path
    output: Path
    key: str  # the input's path relative to its root: names it in samples, shards and reports
    source: str | None = None  # the input's name in rejects and reports when not its path (the URI it came from)
    dest: str | None = None  # the output's name when not its path (the URI it is uploaded to)
    listed: tuple[int, int] | None = None  # (size, time in ns) of an input in object storage not fetched here yet

    def absolute(self) -> "FileJob":
        """The job with absolute paths (symlinks kept: a format is known by its name), for a worker or
        Ray actor running in another folder; its rows still named as the run names the input."""
        return replace(self, input=Path(os.path.abspath(self.input)), output=Path(os.path.abspath(self.output)),
                       source=self.source or str(self.input))


@dataclass(frozen=True)
class Layout:
    files: list[FileJob]
    report: Path
    rejects: Path
    cache: Path | str  # a folder, or an object-storage URI (summarization.cache_dir; beside an output there, Stage.localize)
    work: Path  # checkpoints and finished parts; removed when the run completes
    skipped: tuple[Path, ...] = ()  # files in input folders that are not data
    folder: Path | None = None  # the output folder of a folder run (None: one output file)
    work_mirror: str | None = None  # where the work folder is copied as it grows (an output in object storage)
    examples: Path | None = None  # --summary-examples: every summary the output used, as a training row

    def strays(self) -> list[Path]:
        """Data files in the output folder that this run did not write (left by an earlier run)."""
        if self.folder is None or not self.folder.is_dir():
            return []
        written = {job.output.resolve() for job in self.files}
        data, _ = _scan(self.folder, "")
        return [path for path in data if path.resolve() not in written]


@dataclass(frozen=True)
class Inputs:
    pairs: list[tuple[Path, Path]]  # (file, the root its output path is mirrored from)
    skipped: tuple[Path, ...]  # files in input folders that are not data, for the report


def expand_inputs(inputs: list[str], output_suffix: str = "_compressed", listed: Collection[str] = ()) -> Inputs:
    """Files and dataset folders as given, directories recursively, globs expanded; sorted per argument.
    `listed`: files that are not here yet but count as there (a lazy stage's, remote.stage)."""
    pairs: list[tuple[Path, Path]] = []
    skipped: list[Path] = []
    for text in inputs:
        path = Path(text)
        if is_dataset_folder(path):  # a save_to_disk folder is one input, like a file
            pairs.append((path, path.parent))
        elif path.is_dir():
            files, not_data = _scan(path, output_suffix, listed)
            if not files:
                raise ConfigError(
                    f"no data files in {text} (looked for {', '.join(INPUT_SUFFIXES)} and save_to_disk folders)"
                )
            pairs.extend((f, path) for f in files)
            skipped.extend(not_data)
        elif path.is_file() or text in listed:
            pairs.append((path, path.parent))
        elif _is_glob(text):
            files, not_data = _matches(text, output_suffix)
            if not files:
                raise ConfigError(f"no input file matches {text}")
            pairs.extend((f, Path(_glob_root(text))) for f in files)
            skipped.extend(not_data)
        else:
            raise ConfigError(f"input not found: {text}")
    return Inputs(pairs, tuple(skipped))


def _scan(directory: Path, output_suffix: str, listed: Collection[str] = ()) -> tuple[list[Path], list[Path]]:
    """A folder's data files and dataset folders, and the files of input types in it that are not data.

    A save_to_disk folder is one data item (not searched further). Not data: hidden files and folders (trajcomp's own work files and temp outputs), an earlier
    run's output beside its input (x_compressed.jsonl beside x.jsonl, data_compressed/ beside
    data/), rejects files, and .json files that are not arrays (tokenizer.json).
    """
    data, not_data = [], []
    absent: dict[str, list[str]] = {}  # folder -> its listed files' names
    for path in map(Path, listed):
        absent.setdefault(str(path.parent), []).append(path.name)
    for root, dirs, names in os.walk(directory):
        names = sorted(set(names) | set(absent.get(root, ())))
        stems = _stems(dirs + names)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not _earlier_output(d, stems, output_suffix))
        datasets = [d for d in dirs if is_dataset_folder(Path(root) / d)]
        dirs[:] = [d for d in dirs if d not in datasets]
        for name in sorted([n for n in names if not n.startswith(".")] + datasets):
            path = Path(root) / name
            if name in datasets:
                data.append(path)
                continue
            if split_suffix(path)[1] not in INPUT_SUFFIXES:
                continue
            (not_data if _not_data(path, stems, output_suffix) else data).append(path)
    return data, not_data


def _matches(pattern: str, output_suffix: str) -> tuple[list[Path], list[Path]]:
    """A glob's data files, and the files it matched that are not data (by _scan's rules)."""
    matches = sorted(Path(m) for m in glob.glob(pattern, recursive=True))
    files = [m for m in matches if (m.is_file() and split_suffix(m)[1] in INPUT_SUFFIXES) or is_dataset_folder(m)]
    stems = {folder: _stems(os.listdir(folder)) for folder in {f.parent for f in files}}
    data, not_data = [], []
    for path in files:
        (not_data if _not_data(path, stems[path.parent], output_suffix) else data).append(path)
    return data, not_data


def _not_data(path: Path, sibling_stems: set[str], output_suffix: str) -> bool:
    """An earlier run's output beside its input, a rejects file, or a .json file that is not rows."""
    return _earlier_output(path.name, sibling_stems, output_suffix) or _side_file(path)


def _stems(names: list[str]) -> set[str]:
    """Every name of a folder listing, with and without its file suffix."""
    return set(names) | {split_suffix(Path(n))[0] for n in names}


def _earlier_output(name: str, stems: set[str], output_suffix: str) -> bool:
    """`name` is what trajcomp writes for a sibling (x_compressed.jsonl beside x.jsonl)."""
    if not output_suffix:  # outputs then carry their input's own name: nothing to tell apart
        return False
    match = re.fullmatch(rf"(.+){re.escape(output_suffix)}(?:\.shard-\d+-of-\d+)?(\..+)?", name)
    return match is not None and match.group(1) in stems


def _side_file(path: Path) -> bool:
    """Rejects files, and .json files that are not arrays of rows."""
    if path.name == "rejects.jsonl" or path.name.endswith("_rejects.jsonl"):
        return True
    if split_suffix(path)[1] != ".json":
        return False
    with open(path, "rb") as f:
        head = f.read(4096).lstrip()
    return not head.startswith(b"[")


def _is_glob(text: str) -> bool:
    """An input argument that expand_inputs treats as a glob."""
    return not Path(text).exists() and glob.has_magic(text)


def _glob_matches(pattern: str, path: Path) -> bool:
    """Whether glob.glob(pattern, recursive=True) could return `path` (both taken as absolute)."""
    want, parts = Path(os.path.abspath(pattern)).parts, Path(os.path.abspath(path)).parts

    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(parts)
        if want[i] == "**":
            return any(match(i + 1, k) for k in range(j, len(parts) + 1))
        return j < len(parts) and fnmatch.fnmatchcase(parts[j], want[i]) and match(i + 1, j + 1)
    return match(0, 0)


def _glob_root(pattern: str) -> str:
    """The folder part of a glob before its first wildcard: outputs mirror the tree below it."""
    parts = Path(pattern).parts
    fixed = parts[: next(i for i, p in enumerate(parts) if glob.has_magic(p))]
    return str(Path(*fixed)) if fixed else "."


def resolve(
    inputs: list[str],
    output: Path | None,
    config: CompressionConfig,
    output_format: str | None = None,
    shard: tuple[int, int] | None = None,
    listed: Collection[str] = (),
) -> Layout:
    """The Layout of a run; impossible combinations raise ConfigError (exit 2). `listed`: expand_inputs'."""
    if output_format is not None and output_format not in OUTPUT_FORMATS:
        choices = ", ".join(s.lstrip(".") if s == HF else s for s in OUTPUT_FORMATS)
        raise ConfigError(f"unknown output format '{output_format}' (choose from {choices})")
    found = expand_inputs(inputs, config.output_suffix, listed)
    if len(inputs) == 1 and (Path(inputs[0]).is_file() or inputs[0] in listed or is_dataset_folder(inputs[0])):
        layout = _single_file(found.pairs[0][0], output, config, output_format, shard)
    else:
        layout = _folder_output(inputs, found, output, config, output_format, shard)
    _check_writable(layout.work.parent)
    return layout


def _folder_output(inputs: list[str], found: Inputs, output, config, output_format, shard) -> Layout:
    if len(inputs) > 1 and output is None:
        raise ConfigError("several inputs need -o OUTPUT_DIR")
    out_dir = output
    if out_dir is None:  # named after the real folder (`compress .`), or after a glob's root folder
        first = Path(inputs[0] if Path(inputs[0]).is_dir() else _glob_root(inputs[0])).resolve()
        out_dir = _with_shard(first.with_name(first.name + config.output_suffix), shard)
    for text in inputs:
        if Path(text).is_dir() and out_dir.resolve().is_relative_to(Path(text).resolve()):
            # Its outputs would be read as inputs by the next run of the same command.
            raise ConfigError(f"the output folder {out_dir} must not be inside the input folder {text}")
    jobs = []
    for file, root in found.pairs:
        rel = file.relative_to(root)
        stem, kind = _kind(file)
        jobs.append(FileJob(file, out_dir / rel.with_name(stem + name_suffix(output_format or kind)), str(rel)))
    _check_distinct(jobs, [file for file, _ in found.pairs])
    for text in (t for t in inputs if _is_glob(t)):
        caught = next((job.output for job in jobs if _glob_matches(text, job.output)), None)
        if caught is not None:  # the same command run again would read it as an input
            raise ConfigError(f"the output {caught} would match the input glob {text}; choose another -o")
    report = out_dir / config.metrics_output_file
    if not report.resolve().is_relative_to(out_dir.resolve()) or report.resolve() == out_dir.resolve():
        raise ConfigError(f"metrics.output_file must name a file inside the output folder {out_dir} "
                          f"(it is {config.metrics_output_file!r})")
    return Layout(
        jobs, report, out_dir / "rejects.jsonl",
        _cache(config, out_dir / "summary_cache"), out_dir / ".trajcomp-work", found.skipped, out_dir,
    )


def _cache(config, default: Path) -> Path | str:
    """The summary cache: summarization.cache_dir (a folder, or a URI kept as written), or a folder beside the output."""
    if not config.cache_dir:
        return default
    return config.cache_dir if is_uri(config.cache_dir) else Path(config.cache_dir)


def _kind(path: Path) -> tuple[str, str]:
    """(name stem, format): ('data', '.jsonl.gz') for data.jsonl.gz, (name, HF) for a dataset folder."""
    return (path.name, HF) if is_dataset_folder(path) else split_suffix(path)


def _single_file(path: Path, output, config, output_format, shard) -> Layout:
    stem, kind = _kind(path)
    if kind not in INPUT_SUFFIXES and kind != HF:
        raise ConfigError(f"unsupported input file type '{kind}' ({path}); supported: {', '.join(INPUT_SUFFIXES)}")
    out_kind = output_format or (kind if kind in OUTPUT_FORMATS else ".jsonl")
    default_name = stem + config.output_suffix + _shard_tag(shard) + name_suffix(out_kind)
    if output is not None and output.is_dir() and not is_dataset_folder(output):
        output = output / default_name
    out = output or path.with_name(default_name)
    out_stem = _output_stem(out, output_format, folder=out_kind == HF)
    job = FileJob(path, out, path.name)
    _check_distinct([job], [path])
    side = out_stem if _owns_stem(out, out_stem, split_suffix(out)[1]) else out.name
    return Layout(
        [job],
        out.with_name(side + "_metrics.json"),
        out.with_name(side + "_rejects.jsonl"),
        _cache(config, out.with_name(side + "_summary_cache")),
        out.with_name(f".{out.name}.trajcomp-work"),
    )


def _output_stem(out: Path, output_format: str | None, folder: bool) -> str:
    """The output's name without its type; ConfigError when its name and the format disagree.
    `folder`: a name with no file type is a dataset folder (--output-format hf, or a dataset input)."""
    out_stem, given_suffix = split_suffix(out)
    if given_suffix not in OUTPUT_SUFFIXES and (folder or is_dataset_folder(out)):
        if out.is_file():
            raise ConfigError(f"the output {out} is a file: a dataset folder cannot be written there")
        return out.name  # a save_to_disk folder: any name without a file type
    if not given_suffix:
        raise ConfigError(
            f"the output {out} has no file type: name a file such as out.jsonl, or an existing folder "
            "(or write a dataset folder with --output-format hf)"
        )
    if given_suffix not in OUTPUT_SUFFIXES:
        raise ConfigError(f"cannot write '{given_suffix}' files ({out}); name the output with one of {', '.join(OUTPUT_SUFFIXES)}")
    if output_format is not None and given_suffix != output_format:
        raise ConfigError(f"--output-format {output_format.lstrip('.') if output_format == HF else output_format} "
                          f"contradicts the output name {out}")
    return out_stem


def _owns_stem(out: Path, stem: str, suffix: str) -> bool:
    """Whether the output's side files may keep today's names (o1_metrics.json for o1.parquet).

    Not when another output of the same stem and another type (o1.jsonl.gz) is beside it or owns
    the report already: then each output's side files carry its full name (o1.parquet_metrics.json),
    so that neither run's report, rejects or cache replaces the other's.
    """
    report = out.with_name(stem + "_metrics.json")
    if report.exists():
        return out.name in _report_outputs(report)
    others = [out.with_name(stem + s) for s in OUTPUT_SUFFIXES if s != suffix]
    return not any(o.exists() or o.with_name(f".{o.name}.trajcomp-work").exists() for o in others)


def _report_outputs(report: Path) -> set[str]:
    """The file names of the outputs an existing report names (it sits beside them; none when unreadable)."""
    try:
        outputs = json.loads(report.read_text(encoding="utf-8"))["processing"]["outputs"]
        return {Path(o).name for o in outputs}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def _check_writable(folder: Path) -> None:
    """The run's output folder exists or can be made, by a user allowed to write there."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"cannot write into {folder}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write into {folder}: no permission to write in {existing}")


def _shard_tag(shard: tuple[int, int] | None) -> str:
    return f".shard-{shard[0]}-of-{shard[1]}" if shard else ""


def _with_shard(path: Path, shard: tuple[int, int] | None) -> Path:
    return path.with_name(path.name + _shard_tag(shard))


def _check_distinct(jobs: list[FileJob], inputs: list[Path]) -> None:
    """No output may overwrite any input, nor another output."""
    read = {p.resolve() for p in inputs}
    seen: dict[Path, Path] = {}
    for job in jobs:
        out = job.output.resolve()
        if out in read:
            raise ConfigError(f"the output {job.output} would overwrite an input")
        if out in seen:
            raise ConfigError(f"{seen[out]} and {job.input} would both be written to {job.output}")
        seen[out] = job.input


def with_examples(layout: Layout, name: str | None) -> Layout:
    """The layout writing --summary-examples to `name` (a local JSON Lines file, none of the run's other files)."""
    if name is None:
        return layout
    if not name.endswith(".jsonl") or is_uri(name):
        raise ConfigError(f"--summary-examples (output.summary_examples) must name a local .jsonl file, got {name}")
    path = Path(name)
    taken = {p.resolve() for job in layout.files for p in (job.input, job.output)}
    if path.resolve() in taken | {layout.rejects.resolve(), layout.report.resolve()}:
        raise ConfigError(f"--summary-examples (output.summary_examples) {path} would overwrite one of the run's inputs or outputs")
    return replace(layout, examples=path)
