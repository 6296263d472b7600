"""The training tokenizer: load it once, count many texts per call, off the event loop."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from functools import partial
from typing import Sequence


class TokenizerLoadError(RuntimeError):
    """The tokenizer could not be loaded; the message says how to fix it."""


@dataclass(frozen=True)
class TokenizerInfo:
    name: str
    class_name: str
    vocab_size: int


class TokenCounter:
    """Counts tokens of texts without special tokens, in batched calls to the Rust backend."""

    def __init__(self, name_or_path: str, trust_remote_code: bool = False):
        self.name = name_or_path
        tokenizer = _load(name_or_path, trust_remote_code)
        # The Rust tokenizer behind the fast tokenizer: encode_batch runs in parallel without the GIL.
        self._backend = tokenizer.backend_tokenizer
        self.info = TokenizerInfo(name_or_path, type(tokenizer).__name__, len(tokenizer))

    def count(self, texts: Sequence[str]) -> list[int]:
        """Token counts of `texts`, in one batched call."""
        if not texts:
            return []
        encodings = self._backend.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]

    async def acount(self, texts: Sequence[str]) -> list[int]:
        """`count` in a worker thread, so the event loop keeps serving HTTP calls."""
        return await asyncio.to_thread(self.count, texts)


def _load(name_or_path: str, trust_remote_code: bool):
    # transformers warns loudly when no deep-learning framework is installed; we only need tokenizers.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoTokenizer

    if name_or_path.startswith(("./", "../", "/", "~")) and not os.path.isdir(os.path.expanduser(name_or_path)):
        raise TokenizerLoadError(f"tokenizer folder not found: {name_or_path}")
    load = partial(AutoTokenizer.from_pretrained, os.path.expanduser(name_or_path), use_fast=True,
                   trust_remote_code=trust_remote_code)
    try:
        # The local cache first: where the Hub is out of reach, asking it costs a minute of retries.
        tokenizer = _first_success(partial(load, local_files_only=True), load)
    except Exception as exc:  # transformers raises many types here (OSError, ValueError, HTTP errors)
        raise TokenizerLoadError(_load_hint(name_or_path, exc)) from None
    if not getattr(tokenizer, "is_fast", False):
        raise TokenizerLoadError(
            f"tokenizer '{name_or_path}' has no fast (Rust) implementation; trajcomp needs one "
            "(a tokenizer.json in the tokenizer folder)"
        )
    return tokenizer


def _first_success(*attempts):
    """The first attempt that does not raise; the last one's error otherwise."""
    for attempt in attempts[:-1]:
        try:
            return attempt()
        except Exception:
            continue
    return attempts[-1]()


def _load_hint(name_or_path: str, exc: Exception) -> str:
    reason = " ".join(str(exc).split())[:300]
    if os.path.isdir(name_or_path):
        return f"cannot load tokenizer from folder '{name_or_path}': {reason}"
    return (
        f"cannot load tokenizer '{name_or_path}': {reason}. It is neither a local folder nor in the "
        "Hugging Face cache; pass a local folder with --tokenizer PATH (or tokenizer.name in the config), "
        "or download it once where the Hub is reachable and run with HF_HUB_OFFLINE=1"
    )
