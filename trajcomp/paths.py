"""Where a run writes: outputs, report and rejects, derived from the input like the reference did."""

from __future__ import annotations

from pathlib import Path

from .config import CompressionConfig, ConfigError
from .formats import INPUT_SUFFIXES
from .pipeline import FileJob, RunSpec


def split_suffix(path: Path) -> tuple[str, str]:
    """('data', '.jsonl') for data.jsonl; the longest known suffix wins (.jsonl.gz before .gz)."""
    for suffix in sorted(INPUT_SUFFIXES, key=len, reverse=True):
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)], suffix
    return path.stem, path.suffix


def input_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and split_suffix(p)[1] in INPUT_SUFFIXES)


def resolve(input_path: Path, output: Path | None, config: CompressionConfig, **spec_options) -> RunSpec:
    """The RunSpec for one input file or directory; bad paths raise ConfigError (exit 2)."""
    if not input_path.exists():
        raise ConfigError(f"input not found: {input_path}")
    if input_path.is_dir():
        out_dir = output or input_path.with_name(input_path.name + config.output_suffix)
        if out_dir.resolve() == input_path.resolve():
            raise ConfigError(f"the output directory must differ from the input directory: {input_path}")
        files = [FileJob(f, out_dir / f.name) for f in input_files(input_path)]
        return RunSpec(
            files, out_dir / config.metrics_output_file, out_dir / "rejects.jsonl", out_dir / "summary_cache.sqlite",
            **spec_options,
        )
    stem, suffix = split_suffix(input_path)
    if suffix not in INPUT_SUFFIXES:
        raise ConfigError(f"unsupported input file type '{suffix}' ({input_path}); supported: {', '.join(INPUT_SUFFIXES)}")
    out = output or input_path.with_name(stem + config.output_suffix + suffix)
    if out.resolve() == input_path.resolve():
        raise ConfigError(f"the output file must differ from the input file: {input_path}")
    out_stem, _ = split_suffix(out)
    return RunSpec(
        [FileJob(input_path, out)],
        out.with_name(out_stem + "_metrics.json"),
        out.with_name(out_stem + "_rejects.jsonl"),
        out.with_name(out_stem + "_summary_cache.sqlite"),
        **spec_options,
    )
