"""The `compress` command's options, each documented once (its help is the CLI's reference); `stats`
takes the ones it shares from here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

Inputs = Annotated[list[str], typer.Argument(
    help="Input files (.jsonl, .jsonl.gz, .jsonl.zst, .json, .parquet), directories (searched "
        "recursively) or quoted globs.", show_default=False, metavar="INPUT...",
)]
Output = Annotated[Optional[str], typer.Option(
    "-o", "--output", help="Output file (one input file) or directory (a directory or several inputs; mirrors the input tree), "
        "or an object-storage URI (s3://bucket/out.jsonl). "
        "Default: <stem>_compressed.<ext> beside the file, <dir>_compressed/ beside the directory.",
)]
Config = Annotated[Optional[Path], typer.Option("-c", "--config", help="YAML config (see configs/default.yaml).")]
TargetMaxTokens = Annotated[Optional[int], typer.Option(help="Token budget per row.", min=1)]
SummaryTargetTokens = Annotated[Optional[int], typer.Option(help="Token budget of the summary turn.", min=1)]
ProtectLastN = Annotated[Optional[int], typer.Option(help="Last turns always kept verbatim.", min=0)]
Tokenizer = Annotated[Optional[str], typer.Option(help="Training tokenizer: Hugging Face name or local folder.")]
CountMode = Annotated[Optional[str], typer.Option(
    help="How a row's length is counted: turns (sum of turn values) or chat_template (the tokenizer's "
        "chat template rendering, as a trainer sees it).",
)]
ChatTemplate = Annotated[Optional[Path], typer.Option(help="A chat template file to use instead of the tokenizer's.")]
MaxPasses = Annotated[Optional[int], typer.Option(
    help="Summaries per row at most, while it is still over (default 3).", min=1,
)]
Prune = Annotated[bool, typer.Option(
    "--prune", help="Before any summary, make old tool outputs one-line stubs (the older copies of repeated "
        "outputs first, then the oldest), only as many as the row needs to fit; summarize only rows still over "
        "(compression.prune; stubs' style: compression.prune_style).",
)]
Segments = Annotated[bool, typer.Option(
    "--segments", help="Each row becomes one row per segment, as a live compactor would have cut it: every "
        "assistant turn trained in the one row where it is new, marked not trained where it is context "
        "(compression.segments; see docs/compression.md).",
)]
TokenRows = Annotated[bool, typer.Option(
    "--token-rows", help="Write each row as a trainer's token row: input_ids, attention_mask, labels (-100 but on "
        "the assistant turns it trains), assistant_masks and completion_mask, rendered by the tokenizer's chat "
        "template; needs --count-mode chat_template; a row over the target is rejected (output.rows: tokens).",
)]
Summarizer = Annotated[Optional[str], typer.Option(help="Summarizer: extractive (offline default) or openai.")]
SummaryStyle = Annotated[Optional[str], typer.Option(
    help="Summary shape: prose (default) or handoff (Active Task, Goal, Completed Actions, Active State, "
        "Relevant Files, Critical Context).",
)]
SummaryTokenizer = Annotated[Optional[Path], typer.Option(
    help="The summary model's tokenizer folder, if not the training one: the summarizer's input is "
        "fitted to its context with it.",
)]
SummaryPrefix = Annotated[Optional[str], typer.Option(
    help="Text that opens the summary turn (default '[CONTEXT SUMMARY]:'), e.g. your agent's own.",
)]
Concurrency = Annotated[Optional[int], typer.Option(help="Summarizer calls in flight at once (default 50).", min=1)]
Workers = Annotated[Optional[int], typer.Option(
    help="Processes compressing rows, each with its own tokenizer and a share of --concurrency; "
        "0: one per usable core (default 1: this process).", min=0,
)]
MaxRowsInMemory = Annotated[Optional[int], typer.Option(
    help="Rows held at once, running or done and waiting behind a slower row (default 1000).", min=1,
)]
BaseUrl = Annotated[Optional[str], typer.Option(help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")]
Model = Annotated[Optional[str], typer.Option(help="Model name the endpoint serves.")]
ApiKeyEnv = Annotated[Optional[str], typer.Option(
    help="Name of the environment variable holding the API key (the key itself is never a flag).",
)]
RequestTimeout = Annotated[Optional[float], typer.Option(help="Seconds for one HTTP call.", min=0.001)]
TrajectoryTimeout = Annotated[Optional[float], typer.Option(
    help="Seconds for one row's summary, retries included.", min=0.001,
)]
SummaryChecks = Annotated[Optional[str], typer.Option(
    help="Checks every model answer must pass before it is used (else asked again, then on_failure): all "
        "(default), none, or a comma list of refusal, repetition, language, too_little, echo.",
)]
MaxRetries = Annotated[Optional[int], typer.Option(help="Retries after a failed call.", min=0)]
RetryDelay = Annotated[Optional[float], typer.Option(help="Base of the exponential backoff, seconds.", min=0)]
OnFailure = Annotated[Optional[str], typer.Option(
    help="When no summary can be had: keep (row unchanged, flagged), extractive (offline fallback) or reject.",
)]
CannotFit = Annotated[Optional[str], typer.Option(
    help="A row no rule can make fit (its protected turns and smallest summary over the target): keep (as it "
        "was, flagged, no request; default), reject (to the rejects file) or shorten (summarized anyway, flagged).",
)]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the summary cache.")]
CacheDir = Annotated[Optional[str], typer.Option(
    help="The summary cache's folder (or an s3:// URI), shared by every process and engine (default: "
        "<output stem>_summary_cache/ beside an output file, summary_cache/ in an output folder).",
)]
BatchCacheDir = Annotated[Optional[str], typer.Option(
    "--cache-dir", help="The summary cache's folder (or an s3:// URI): required, here or as summarization.cache_dir "
        "(no default: the cache ties batch export, batch import and compress --batch together).",
)]
Batch = Annotated[bool, typer.Option(
    "--batch", help="Buy the summaries through the endpoint's Files and Batches API (about half price at hosted "
        "providers), in rounds, then write the rows from the cache; waits for the batches, resumable. With "
        "every summary already in the cache (batch import), no endpoint is contacted.",
)]
InputFormat = Annotated[Optional[str], typer.Option(
    help="Row schema: auto, sharegpt (conversations) or openai (messages).",
)]
Observations = Annotated[Optional[list[str]], typer.Option(
    "--observations",
    help="Which user turns are tool results (input.observations): a prefix such as 'OBSERVATION:', repeated "
        "for more; auto (SWE-agent's and OpenHands v0's, the default; beside prefixes, those too) or none.",
)]
OutputFormat = Annotated[Optional[str], typer.Option(
    help="Output type (.jsonl, .jsonl.gz, .jsonl.zst, .json, .parquet, or hf: a save_to_disk folder); "
        "default: the output's suffix (a dataset folder input: hf).",
)]
SummaryExamples = Annotated[Optional[str], typer.Option(
    help="Also write every summary the output used as a training row (a local .jsonl): the summarizer's request "
        "and the summary as the assistant turn, in the rows' dialect, with the source row's id and segment "
        "(output.summary_examples).",
)]
SamplePercent = Annotated[float, typer.Option(
    help="Take a deterministic sample of this percent of rows.", min=0, max=100,
)]
Seed = Annotated[int, typer.Option(help="Seed of the sample.")]
NumShards = Annotated[int, typer.Option(help="Split the rows into this many disjoint shards...", min=1)]
ShardIndex = Annotated[int, typer.Option(help="...and process this one (0-based).", min=0)]
Limit = Annotated[Optional[int], typer.Option(help="Stop after this many rows taken.", min=0)]
Restart = Annotated[bool, typer.Option("--restart", help="Discard an interrupted run's progress and start over.")]
CheckpointRows = Annotated[int, typer.Option(help="Input rows per checkpointed part.", min=1)]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Read, count and plan only: no summaries, nothing written.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar and no text report.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
Html = Annotated[bool, typer.Option(
    "--html", help="Also write the report as an HTML page beside it (<report>.html), and a page of up to 20 of "
        "its rows before and after (<stem>_rows.html: every failed one, the worst still over the limit, a sample "
        "of compressed ones), linked from it.",
)]
Engine = Annotated[str, typer.Option(
    help="local (this machine) or ray (rows compressed by Ray actors across a cluster; needs trajcomp[ray]); both resume.",
)]
RayAddress = Annotated[Optional[str], typer.Option(
    help="With --engine ray: the cluster to join (HEAD:6379, or auto); default: a Ray instance of this machine.",
)]
RayConcurrency = Annotated[int, typer.Option(
    help="With --engine ray: actors compressing rows, each with its own tokenizer "
        "and summarizer session.", min=1,
)]
