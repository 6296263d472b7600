"""The training tokenizer: load it once, count many texts per call, off the event loop.

Two ways to measure a row (`compression.count_mode`):
- `turns`: the sum of its turns' token counts, no special tokens (no BOS per turn), plus its frame's
  (its top-level system prompt and tools, frame.py: `Frame.texts`) as the fixed overhead;
- `chat_template`: the length of the tokenizer's chat template rendering of the whole conversation
  (what `apply_chat_template(messages, tools=tools, tokenize=True)` gives an SFT trainer, the frame's
  system prompt leading the messages), split into per-turn costs that add up exactly to it (see
  `TemplateLengths.costs`; the frame's share is overhead).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence

from .batching import BATCHES_AT_ONCE, ENCODE_CHARS, MAX_CHARS, CoalescingCounter, counting_threads, split_by_chars
from .bare_texts import rendered
from .count_cache import CountCache
from ..dialects.frame import frame_of_messages, parts
from ..dialects.turn import RowError
from .split_tokens import Pieces, SplitTokens
from .template_spans import spans
from .tokenizer_loading import TokenizerLoadError, load, raised_by_template, read_template


@dataclass(frozen=True)
class TokenizerInfo:
    name: str
    class_name: str
    vocab_size: int


@dataclass(frozen=True)
class PortableCounter:
    """A TokenCounter's tokenizer as another process rebuilds it (`TokenCounter.from_portable`): the Rust
    tokenizer's own serialization, so its vocabulary, normalizer, pre-tokenizer and added tokens are
    those this process loaded, transformers' changes to tokenizer.json included."""

    name: str | None
    backend: str  # tokenizers.Tokenizer.to_str()
    specials_as_text: bool  # split_special_tokens: set on the object, not in its serialization
    info: TokenizerInfo


# A row whose characters hold this share of its target's tokens, at the characters a token counted so far,
# is likely over it: its count goes before the others waiting (the sooner its summary is asked for, the
# less a run's end waits), and a chat_template rendering goes straight to the encoding that a row over its
# target needs for its costs.
LIKELY_OVER = 0.9


class TokenCounter:
    """Counts tokens of texts without special tokens, in batched calls to the Rust backend."""

    def __init__(self, name_or_path: str | None, trust_remote_code: bool = False, chat_template: str | None = None,
                 at_once: int = BATCHES_AT_ONCE):
        _calls_on_one_thread()
        tokenizer = load(name_or_path, trust_remote_code)
        if chat_template is not None:
            tokenizer.chat_template = read_template(chat_template)
        info = TokenizerInfo(name_or_path, type(tokenizer).__name__, len(tokenizer))
        self._start(name_or_path, tokenizer, tokenizer.backend_tokenizer, info, at_once)

    def _start(self, name: str | None, tokenizer: Any, backend: Any, info: TokenizerInfo, at_once: int) -> None:
        """`at_once`: the tokenizer calls made at once, on as many threads (one a core this process may use)."""
        self.name = name
        self._tokenizer = tokenizer  # None in a counter built from_portable: it counts, it cannot render
        # The Rust tokenizer behind the fast tokenizer: encode_batch runs in parallel without the GIL.
        self._backend = backend
        # A tokenizer.json may carry padding or truncation: counts must be of the text alone, whatever the batch.
        self._backend.no_padding()
        self._backend.no_truncation()
        self.info = info
        # One batch per counting thread, encoded in calls of ENCODE_CHARS; a lone row over MAX_CHARS split.
        # Past the count cache or not, the same threads: at most `at_once` batches at once.
        threads = counting_threads(at_once)
        self._at_once, self._count_threads = at_once, threads
        self._coalesced = CoalescingCounter(self.count, at_once, threads)
        self._coalesced_unkept = CoalescingCounter(self._count_new, at_once, threads)
        self._counted = (0, 0)  # characters encoded and their tokens (`chars`, and likely_over's average)
        self._chars_lock = threading.Lock()
        # count()'s large calls, one part per core at once (threads start on first use)
        self._threads = ThreadPoolExecutor(at_once, thread_name_prefix="trajcomp-count-large")
        self._cache = CountCache()  # the texts this process counted: a repeated one is encoded once

    def portable(self) -> "PortableCounter":
        """What another process needs to count exactly as this one does, without loading the tokenizer."""
        return PortableCounter(self.name, self._backend.to_str(), self.specials_as_text, self.info)

    @classmethod
    def from_portable(cls, portable: "PortableCounter", at_once: int = BATCHES_AT_ONCE) -> "TokenCounter":
        """A counter of the same counts, built from the Rust tokenizer's serialization alone: no
        transformers import (~1 s in a new process). It counts and encodes; it has no chat template."""
        from tokenizers import Tokenizer

        _calls_on_one_thread()
        backend = Tokenizer.from_str(portable.backend)
        backend.encode_special_tokens = portable.specials_as_text  # a setting of the object, not of its file
        counter = cls.__new__(cls)
        counter._start(portable.name, None, backend, portable.info, at_once)
        return counter

    @classmethod
    def for_config(cls, cfg, at_once: int = BATCHES_AT_ONCE) -> "TokenCounter":
        """The config's tokenizer, checked to measure rows as `compression.count_mode` says."""
        counter = cls(cfg.tokenizer_name, cfg.trust_remote_code, cfg.chat_template, at_once)
        lengths_for(cfg.count_mode, counter)  # TokenizerLoadError when the mode needs a template it lacks
        return counter

    def coalesced(self, count) -> CoalescingCounter:
        """Requests of `count` (texts in, one result each out) coalesced on this counter's counting threads."""
        return CoalescingCounter(count, self._at_once, self._count_threads)

    def in_model(self, token: int) -> bool:
        """Whether the tokenizer's model gives the token id `token` itself (not only as an added token)."""
        return self._backend.model.id_to_token(token) is not None

    def added_tokens(self) -> dict[int, Any]:
        """The tokenizer's added tokens by id (`tokenizers.AddedToken`: content and matching options)."""
        return self._backend.get_added_tokens_decoder()

    @property
    def specials_as_text(self) -> bool:
        """Whether special tokens in a text are tokenized as text (`split_special_tokens`)."""
        return bool(getattr(self._backend, "encode_special_tokens", False))

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self._tokenizer, "chat_template", None))

    @property
    def tokenizer(self) -> Any:
        """The transformers tokenizer (None in a counter built from_portable): token rows ask its template for
        the generation blocks' mask (token_rows.py)."""
        return self._tokenizer

    def render(self, messages: Sequence[dict[str, Any]]) -> str:
        """The chat template's text for `messages`, with no generation prompt (as SFT trainers render rows);
        a Chat's frame with them: its system prompt first, its tools as `tools=` (frame.py)."""
        every, tools = parts(messages)
        try:
            return self._tokenizer.apply_chat_template(every, tools=tools, tokenize=False, add_generation_prompt=False)
        except Exception as exc:
            if not raised_by_template(exc):
                raise  # not the row's fault (memory, recursion, a fault around the call): the run names it internal_error
            # the trainer's rendering fails the same way, so it is the row's reason
            raise RowError("template_error", f"the chat template cannot render the row: "
                                             f"{type(exc).__name__}: {exc}") from None

    def encode(self, texts: Sequence[str]) -> list[Any]:
        """Encodings (ids and character offsets) of `texts`, no special tokens added, in one batched call."""
        if not texts:
            return []
        encodings = self._backend.encode_batch(list(texts), add_special_tokens=False)
        self._tally(texts, sum(map(len, encodings)))
        return encodings

    def count(self, texts: Sequence[str]) -> list[int]:
        """Token counts of `texts`: those counted before from the cache, the others in one batch, or for
        many texts a batch per core at once."""
        return self._cache.counts(texts, self._count_new)

    def _count_new(self, texts: list[str]) -> list[int]:
        parts = split_by_chars(texts, MAX_CHARS)
        if len(parts) <= 1:
            return self._count(parts[0]) if parts else []
        return [n for counts in self._threads.map(self._count, parts) for n in counts]

    def _count(self, texts: list[str]) -> list[int]:
        # len(e), not len(e.ids), which builds a Python list of every id
        return [len(e) for part in split_by_chars(texts, ENCODE_CHARS) for e in self.encode_fast(part)]

    def _tally(self, texts: Sequence[str], tokens: int) -> None:
        n = sum(map(len, texts))
        with self._chars_lock:
            chars, counted = self._counted
            self._counted = (chars + n, counted + tokens)  # one tuple: read whole, without the lock

    @property
    def chars(self) -> int:
        """Characters encoded so far, counted or with offsets: how much tokenizer work a run did, against
        its rows' own text (the report's processing.tokenizer_chars; make bench prints the ratio)."""
        return self._counted[0]

    def likely_over(self, texts: Sequence[str], tokens: int) -> bool:
        """Whether `texts` probably hold LIKELY_OVER of `tokens` tokens or more, at the characters a token
        the texts encoded so far averaged. A guess: it decides what is counted first, and whether a
        chat_template rendering goes straight to the encoding its costs need; never a count."""
        chars, counted = self._counted
        return counted > 0 and sum(map(len, texts)) * counted > LIKELY_OVER * tokens * chars

    async def acount(self, texts: Sequence[str], urgent: bool = False) -> list[int]:
        """`count` off the event loop, in one batch together with the other rows' requests meanwhile;
        `urgent` ones first (batching.py)."""
        return await self._coalesced.count(texts, urgent)

    async def acount_once(self, texts: Sequence[str]) -> list[int]:
        """`acount` of texts that will not come again (a row's whole rendering): not kept in the count
        cache, where they would push out the texts that do (a shared prompt, a file read again)."""
        return await self._coalesced_unkept.count(texts)

    def encode_fast(self, texts: Sequence[str]) -> list[Any]:
        """Encodings of `texts` without character offsets (their ids): the same tokens in a count's time,
        where offsets may take twice it (Qwen3's tokenizer tracks them through its normalizer), and
        encodings that free quicker."""
        encodings = self._backend.encode_batch_fast(list(texts), add_special_tokens=False)
        self._tally(texts, sum(map(len, encodings)))
        return encodings

    @property
    def trims_offsets(self) -> bool:
        """Whether the post-processor trims tokens' offsets (a whitespace token's may then begin at its end)."""
        processor = self._backend.post_processor
        return processor is not None and b'"trim_offsets":true' in processor.__getstate__()


def _calls_on_one_thread() -> None:
    """Each tokenizer call on the thread that makes it, unless the user chose otherwise.

    trajcomp counts on its own threads, a call per core at once (batching.py). The Rust tokenizer's
    thread pool on top of them only adds work: its idle threads spin between calls, on the cores the
    event loop and the other calls need (a summarizer-bound run: ~25% more CPU, ~15% more time).
    tokenizers reads the variable at every call.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class Measured:
    """A row's length as the trainer sees it, and each turn's share of it (None when not needed)."""

    total: int
    costs: list[int] | None = None
    overhead: int = 0  # tokens no turn owns (the template's fixed part); total == overhead + sum(costs)
    # chat_template: how to measure an edit of this rendering, and its texts' counts (bare_texts.py)
    pieces: Pieces | None = None


class TurnLengths:
    """count_mode `turns`: a row is the sum of its turns' texts, counted without special tokens."""

    mode = "turns"

    def __init__(self, counter: TokenCounter):
        self.counter = counter

    def measure(self, texts: Sequence[str], messages: Sequence[dict[str, Any]], costs_above: int | None) -> Measured:
        """The row's length; per-turn costs always (they are how it is counted). A Chat's frame (its system
        prompt and tools, frame.py) is counted by `Frame.texts`' rule, as the fixed overhead."""
        fixed = frame_of_messages(messages).texts()
        return _by_turns(self.counter.count([*texts, *fixed]), len(texts))

    async def ameasure(self, texts: Sequence[str], messages: Sequence[dict[str, Any]], costs_above: int | None) -> Measured:
        """`measure` off the event loop, counted together with the other rows in flight."""
        fixed = frame_of_messages(messages).texts()
        urgent = bool(costs_above) and self.counter.likely_over([*texts, *fixed], costs_above)
        return _by_turns(await self.counter.acount([*texts, *fixed], urgent), len(texts))

    def turn_markup(self, chat_role: str) -> int:
        return 0  # bare values: a turn costs its text and nothing more


def _by_turns(counts: list[int], turns: int) -> Measured:
    """The turns' counts as costs, the frame's after them as the overhead."""
    overhead = sum(counts[turns:])
    return Measured(sum(counts[:turns]) + overhead, counts[:turns], overhead)


# Only where a chat_template row goes first (a count, or the encoding its costs need): far more characters a
# token than any tokenizer's text averages, so a rendering longer than this many a token of the target is
# over it. Either way its length is exact.
CHARS_A_TOKEN_AT_MOST = 12


class TemplateLengths:
    """count_mode `chat_template`: a row is its chat template rendering, tokenized as trainers do."""

    mode = "chat_template"

    def __init__(self, counter: TokenCounter):
        if not counter.has_chat_template:
            raise TokenizerLoadError(
                f"count_mode chat_template: tokenizer '{counter.name}' has no chat template (none in its "
                "tokenizer_config.json or chat_template.jinja); set tokenizer.chat_template to a template file"
            )
        self.counter = counter
        self.split = SplitTokens(counter.added_tokens(), counter.specials_as_text, counter.in_model)
        # A rendering's length with its pieces, its assistant texts' counts read from them (bare_texts.py)
        self._rendered = counter.coalesced(lambda texts: rendered(self.split, counter.encode_fast, texts))
        # Costs from the pieces (`_by_pieces`) need each token's first character inside its own text. A
        # post-processor that trims offsets may put it past a space the tokenizer added (a prefix space,
        # NFKC's space before a combining mark), at the piece's end: there the offsets decide.
        self._by_ids = self.split.splits and not counter.trims_offsets

    def measure(self, texts: Sequence[str], messages: Sequence[dict[str, Any]], costs_above: int | None) -> Measured:
        """The rendered length; per-turn costs only when it is over `costs_above` (they take a render per turn),
        and then the rendering's pieces, to measure its edits."""
        if not messages:
            return Measured(0, [])
        return self._measured(self.counter.render(messages), messages, costs_above)

    def _measured(self, text: str, messages: Sequence[dict[str, Any]], costs_above: int | None) -> Measured:
        """`measure` of the rendering `text` of `messages`. Over `costs_above`, its turns' costs come
        from its pieces (their counts read from its ids, which take a count's time) or else from its
        offsets (~2.3x a count's time with Qwen3's tokenizer, which tracks them through its normalizer)."""
        if self._by_ids:
            encoding = self.counter.encode_fast([text])[0]
            pieces = self.split.pieces(text, encoding.ids)
            if costs_above is None or len(encoding) <= costs_above:
                return Measured(len(encoding), pieces=pieces)
            measured = None if pieces is None else self._by_pieces(messages, text, len(encoding), pieces)
            if measured is not None:
                return measured
        encoding = self.counter.encode([text])[0]
        if costs_above is None or len(encoding) <= costs_above:
            return Measured(len(encoding), pieces=self.split.pieces(text, encoding.ids))
        measured = self.costs(messages, text, encoding)
        return dataclasses.replace(measured, pieces=self.split.pieces(text, encoding.ids))

    def measure_edit(self, base: Measured, messages: Sequence[dict[str, Any]]) -> int:
        """The rendered length of `messages`, an edit of the row `base` measured: only the pieces of the
        rendering that `base`'s lacks are counted (all of it when `base` has no pieces)."""
        text = self.counter.render(messages)
        if base.pieces is None:
            return self.counter.count([text])[0]
        return self.split.count(text, base.pieces, self.counter.count)

    async def ameasure(self, texts: Sequence[str], messages: Sequence[dict[str, Any]], costs_above: int | None) -> Measured:
        """`measure` off the event loop. The rendering is Python work, done in a worker thread; its count
        goes with the other rows' in flight (most rows are under the target); a row over `costs_above`
        is encoded again for its costs (`_measured`)."""
        if not messages:
            return Measured(0, [])
        text = await asyncio.to_thread(self.counter.render, messages)
        likely = costs_above is not None and (len(text) > costs_above * CHARS_A_TOKEN_AT_MOST
                                              or self.counter.likely_over([text], costs_above))
        # A row likely over goes straight to the encoding its costs need: counted first, it would be
        # encoded twice (~11% of a pass-through run's tokenizer input at a p90 target).
        if not likely:  # with its pieces: a row under the target has its assistant texts counted from them
            ((total, pieces),) = await self._rendered.count([text])
            if costs_above is None or total <= costs_above:
                return Measured(total, pieces=pieces)
        return await asyncio.to_thread(self._measured, text, messages, costs_above)

    def turn_markup(self, chat_role: str) -> int:
        """About how many tokens the template adds around a turn of `chat_role` (0 if it cannot tell)."""
        base = [{"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi."}]
        probe = "Thanks."
        with_probe = base + [{"role": chat_role, "content": probe}]
        try:
            before, after = (self.counter.encode([self.counter.render(m)])[0] for m in (base, with_probe))
        except Exception:  # templates may refuse a role order; the passes measure the real length anyway
            return 0
        return max(0, len(after) - len(before) - self.counter.count([probe])[0])

    def costs(self, messages: Sequence[dict[str, Any]], text: str, encoding: Any) -> Measured:
        """Each token of the rendering goes to the turn whose span holds its first character (template_spans.py);
        what every rendering opens with (a BOS, a default system prompt's header) and what the row's frame
        adds (its system prompt, its tools) are the fixed overhead."""
        counts = [0] * (len(messages) + 1)  # the last: the overhead
        owner = spans(messages, text, self.counter.render).owner
        for begin, _ in encoding.offsets:
            counts[owner(begin)] += 1
        return Measured(len(encoding), counts[:-1], counts[-1])

    def _by_pieces(self, messages: Sequence[dict[str, Any]], text: str, total: int, pieces: Pieces) -> Measured | None:
        """`costs` from the rendering's `pieces` (split_tokens.py), exactly as from its offsets: a part
        inside one turn's span is all that turn's; only a part that crosses a span's start is encoded
        with its offsets (None if that encoding disagrees with the pieces)."""
        found = spans(messages, text, self.counter.render)
        owner = found.owner
        counts = [0] * (len(messages) + 1)  # the last: the overhead
        for part in self.split.parts(text, pieces):
            turn = found.whole(part.start, part.end)
            if turn is not None:
                counts[turn] += part.tokens
            elif part.tokens:
                offsets = self.counter.encode([part.prefix + part.text])[0].offsets[1 if part.prefix else 0:]
                if len(offsets) != part.tokens:
                    return None
                shift = part.start - len(part.prefix)
                for begin, _ in offsets:
                    counts[owner(begin + shift)] += 1
        return Measured(total, counts[:-1], counts[-1], pieces)


def lengths_for(mode: str, counter: TokenCounter) -> TurnLengths | TemplateLengths:
    """The row measure `compression.count_mode` names."""
    return TemplateLengths(counter) if mode == "chat_template" else TurnLengths(counter)
