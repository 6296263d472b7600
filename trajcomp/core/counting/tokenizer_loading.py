"""Loading the training tokenizer: a local folder or the Hugging Face cache, through transformers, with
one clear line when it cannot be loaded; and its chat template's own errors told from trajcomp's."""

from __future__ import annotations

import os
import socket
from functools import partial
from urllib.parse import urlsplit


class TokenizerLoadError(RuntimeError):
    """The tokenizer could not be loaded; the message says how to fix it."""


def quiet_transformers() -> None:
    """Before transformers is imported: it warns loudly when no deep-learning framework is installed;
    we only need tokenizers."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def load(name_or_path: str | None, trust_remote_code: bool):
    quiet_transformers()
    from transformers import AutoTokenizer

    if not name_or_path:
        raise TokenizerLoadError(
            "no tokenizer given: pass --tokenizer with your training tokenizer (a local folder holding "
            "tokenizer.json, or a Hugging Face name in the local cache), or set tokenizer.name in the config"
        )
    path = os.path.expanduser(name_or_path)
    if os.path.isfile(path):
        raise TokenizerLoadError(
            f"the tokenizer is the folder holding tokenizer.json, not a file: {os.path.dirname(name_or_path) or '.'}"
        )
    if name_or_path.startswith(("./", "../", "/", "~")) and not os.path.isdir(path):
        raise TokenizerLoadError(f"tokenizer folder not found: {name_or_path}")
    load = partial(AutoTokenizer.from_pretrained, path, use_fast=True, trust_remote_code=trust_remote_code)
    try:
        tokenizer = load(local_files_only=True)  # a folder, or the local Hugging Face cache
    except Exception as exc:  # transformers raises many types here (OSError, ValueError, HTTP errors)
        # Asking a Hub that is out of reach costs a minute of retries: only ask one that answers.
        is_folder = os.path.isdir(path)
        if is_folder or not _hub_reachable():
            raise TokenizerLoadError(_load_hint(name_or_path, exc, is_folder)) from None
        try:
            tokenizer = load()
        except Exception as exc:
            raise TokenizerLoadError(_load_hint(name_or_path, exc, False)) from None
    if not getattr(tokenizer, "is_fast", False):
        raise TokenizerLoadError(
            f"tokenizer '{name_or_path}' has no fast (Rust) implementation; trajcomp needs one "
            "(a tokenizer.json in the tokenizer folder)"
        )
    return tokenizer


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face Hub (or HF_ENDPOINT) takes a connection; through a proxy, assume so."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
    except (OSError, ValueError):
        return False
    return True


def _load_hint(name_or_path: str, exc: Exception, is_folder: bool) -> str:
    reason = " ".join(str(exc).split())[:300]
    if is_folder:
        return f"cannot load tokenizer from folder '{name_or_path}': {reason}"
    return (
        f"cannot load tokenizer '{name_or_path}': it is neither a local folder nor in the Hugging Face "
        f"cache, and the Hub did not provide it ({reason}). Pass a local folder with --tokenizer PATH "
        "(or tokenizer.name in the config), or download it once where the Hub is reachable"
    )


def read_template(path: str) -> str:
    try:
        return open(os.path.expanduser(path), encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenizerLoadError(f"cannot read tokenizer.chat_template {path}: {exc}") from None


def raised_by_template(exc: BaseException) -> bool:
    """Whether rendering failed on the row itself, as a trainer's rendering of it would: Jinja's own errors (an
    undefined name, the template's `raise_exception`), a Python error from inside the compiled template (Qwen3's
    on content given as parts), or transformers' check of the row's messages and tools (a tool that is no JSON
    schema). Anything else (memory, recursion, an error from elsewhere) is not the row's and is raised on."""
    import jinja2  # transformers' own dependency; imported only when a rendering failed

    if isinstance(exc, jinja2.TemplateError):
        return True
    files = []
    frame = exc.__traceback__
    while frame is not None:
        files.append(frame.tb_frame.f_code.co_filename)
        frame = frame.tb_next
    if "<template>" in files:
        return True
    return isinstance(exc, (ValueError, TypeError)) and bool(files) and files[-1].endswith("chat_template_utils.py")
