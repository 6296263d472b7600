"""The run that wrote an output, found from its report: the report named after the output beside it (a
single-file run), else the nearest compression_metrics.json in a folder above it (a folder run), and
only a report that names the output among the files its run wrote."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...core.config import CompressionConfig, ConfigError, as_config
from ...formats import OUTPUT_SUFFIXES, is_dataset_folder, split_suffix
from ..reading import load
from ..schema import NotAReport, Report

# What a folder run writes at its output folder's root (metrics.output_file's default: a report given
# another name there is not found, and show asks for --tokenizer).
FOLDER_REPORT = CompressionConfig().metrics_output_file


@dataclass(frozen=True)
class Run:
    """What the run that wrote an output tells about it: its config (the report's, else the defaults) and report."""

    config: CompressionConfig
    report: Report | None = None
    report_path: Path | None = None


def run_of(output: Path) -> Run:
    """The run that wrote `output`, from its report; the default config when none is found."""
    found = _report_of(Path(os.path.abspath(output)))
    if found is None:
        return Run(CompressionConfig())
    path, report = found
    try:
        config = as_config(report.config) if report.config else CompressionConfig()
    except (ConfigError, TypeError):  # a report of another version's keys: its figures still hold
        config = CompressionConfig()
    return Run(config, report, path)


def _report_of(output: Path, read: dict[Path, Report | None] | None = None) -> tuple[Path, Report] | None:
    """The report beside `output` named after it, else the nearest folder run's report above it
    (`read`: the reports read so far, by path, when several outputs are looked up)."""
    read = {} if read is None else read
    stem = split_suffix(output)[0]
    for name in (f"{stem}_metrics.json", f"{output.name}_metrics.json"):
        report = _read(output.parent / name, read)
        if report is not None and _names(report, Path(output.name), beside=True):
            return output.parent / name, report
    for folder in output.parents:
        report = _read(folder / FOLDER_REPORT, read)
        if report is not None and _names(report, output.relative_to(folder)):
            return folder / FOLDER_REPORT, report
    return None


def _read(path: Path, read: dict[Path, Report | None]) -> Report | None:
    """The report at `path`, None when there is none or it is not one; read once."""
    if path not in read:
        try:
            read[path] = load(path) if path.is_file() else None
        except NotAReport:
            read[path] = None
    return read[path]


def _names(report: Report, relative: Path, beside: bool = False) -> bool:
    """Whether the report's run wrote the output at `relative` below the report's folder. Its outputs are
    recorded as the run named them (relative to where it ran, or absolute): the same last parts name
    the same file, wherever the folder was run from or moved to. A report beside its output that
    records no outputs (written before they were recorded) is taken, as it always was."""
    outputs = report.processing.outputs if report.processing is not None else []
    if beside and not outputs:
        return True
    return any(Path(o).parts[-len(relative.parts):] == relative.parts for o in outputs)


def outputs_named(path: Path) -> list[str] | None:
    """The outputs a report names, when `path` is named as compress names reports and is one; else None."""
    if not (path.name.endswith("_metrics.json") or path.name == FOLDER_REPORT):
        return None  # an output of .json rows is not read whole here
    report = _read(Path(path), {})
    return report.processing.outputs if report is not None and report.processing is not None else None


def folder_outputs(folder: Path) -> list[Path]:
    """The output files under `folder` that a folder run's report (at or above it) names, in the order
    of the folder's tree; when several runs wrote into it, those of the report highest up. [] when none."""
    read: dict[Path, Report | None] = {}
    found = [(path, _report_of(Path(os.path.abspath(path)), read)) for path in _data_files(folder)]
    reports = {r[0] for _, r in found if r is not None and r[0].name == FOLDER_REPORT}
    if not reports:
        return []
    top = min(reports, key=lambda r: (len(r.parts), r))
    return [path for path, r in found if r is not None and r[0] == top]


def _data_files(folder: Path) -> list[Path]:
    """Files and dataset folders under `folder` that compress can write, hidden ones left out."""
    files = []
    for root, dirs, names in os.walk(folder):
        datasets = sorted(d for d in dirs if is_dataset_folder(Path(root) / d))
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in datasets)
        written = [n for n in names if not n.startswith(".") and split_suffix(Path(n))[1] in OUTPUT_SUFFIXES]
        files += [Path(root) / n for n in sorted(written + datasets)]
    return files
