"""A worker counts with the main process's tokenizer, sent as the Rust tokenizer's serialization
(TokenCounter.portable): the same counts and encodings, and no transformers to import."""

from __future__ import annotations

import json
import pickle
import shutil
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import processes
from conftest import CORPUS, DEMO_TOKENIZER
from test_fits import qwen3_folder

from trajcomp.core.config import CompressionConfig
from trajcomp.core.counting.tokens import TokenCounter
from trajcomp.engines.runners.fork_server import TOKENIZER_LOADER, preload_for

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "[CLS]", "[SEP]", "[UNK]"]


@pytest.fixture(scope="module")
def counters(bpe_tokenizer, wordpiece_tokenizer, tmp_path_factory) -> dict[str, TokenCounter]:
    """Each tokenizer loaded as the main process loads it, and one with split_special_tokens, whose
    special tokens are text: a setting of the loaded object that tokenizer.json does not hold."""
    split = tmp_path_factory.mktemp("split_specials")
    shutil.copytree(bpe_tokenizer, split, dirs_exist_ok=True)
    config = json.loads((split / "tokenizer_config.json").read_text())
    (split / "tokenizer_config.json").write_text(json.dumps({**config, "split_special_tokens": True}))
    folders = {"demo": DEMO_TOKENIZER, "bpe": bpe_tokenizer, "wordpiece": wordpiece_tokenizer,
               "qwen3": qwen3_folder(), "split_specials": split}
    return {name: TokenCounter(str(folder)) for name, folder in folders.items()}


def rebuilt(counter: TokenCounter) -> TokenCounter:
    """As a worker gets it: the portable form through a pipe (pickled), then rebuilt."""
    return TokenCounter.from_portable(pickle.loads(pickle.dumps(counter.portable())))


@pytest.fixture(scope="module")
def workers_counters(counters) -> dict[str, TokenCounter]:
    return {name: rebuilt(counter) for name, counter in counters.items()}


texts = st.lists(
    st.one_of(st.text(max_size=80), st.sampled_from(CORPUS + SPECIALS),
              st.tuples(st.text(max_size=20), st.sampled_from(SPECIALS), st.text(max_size=20)).map("".join)),
    min_size=1, max_size=8,
)


@pytest.mark.parametrize("name", ["demo", "bpe", "wordpiece", "qwen3", "split_specials"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=texts)
def test_a_rebuilt_counter_counts_and_encodes_as_the_loaded_one(counters, workers_counters, name, batch):
    loaded, worker = counters[name], workers_counters[name]
    assert worker.count(batch) == loaded.count(batch)
    assert [e.ids for e in worker.encode(batch)] == [e.ids for e in loaded.encode(batch)]
    assert [e.offsets for e in worker.encode(batch)] == [e.offsets for e in loaded.encode(batch)]


def test_split_special_tokens_survive_the_trip(counters):
    """The setting the serialization lacks is carried apart: a special token stays text."""
    loaded, plain = counters["split_specials"], counters["bpe"]
    assert loaded.specials_as_text and not plain.specials_as_text
    worker = rebuilt(loaded)
    assert worker.specials_as_text
    assert worker.count(["<|endoftext|>"]) == loaded.count(["<|endoftext|>"]) > plain.count(["<|endoftext|>"]) == [1]
    assert worker.info == loaded.info


def test_a_worker_counting_with_the_sent_tokenizer_imports_no_transformers(tmp_path):
    """In a fresh interpreter, as a forked worker of a `turns` run starts: the row core (the fork
    server's preload) and the counter rebuilt; transformers (~1 s to import) is never imported."""
    sent = tmp_path / "counter.pickle"
    sent.write_bytes(pickle.dumps(TokenCounter(str(DEMO_TOKENIZER)).portable()))
    probe = (
        "import pickle, sys\n"
        "import trajcomp.engines.runners.workers\n"
        "from trajcomp.core.counting.tokens import TokenCounter\n"
        f"counter = TokenCounter.from_portable(pickle.loads(open({str(sent)!r}, 'rb').read()))\n"
        "print(counter.count(['def main(argv):']), 'transformers' in sys.modules)\n"
    )
    out = processes.run([sys.executable, "-c", probe], text=True)
    assert out.stdout.split() == [str(TokenCounter(str(DEMO_TOKENIZER)).count(["def main(argv):"])), "False"], out.stderr


@pytest.mark.parametrize("mode, summary_tokenizer, loads", [
    ("turns", None, False),  # counts with the tokenizer sent
    ("chat_template", None, True),  # renders the template: the whole tokenizer, loaded
    ("turns", str(DEMO_TOKENIZER), True),  # the input guard's own tokenizer, loaded
])
def test_the_fork_server_imports_transformers_only_for_workers_that_load_a_tokenizer(mode, summary_tokenizer, loads):
    config = CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), count_mode=mode, summarizer="openai",
                               summary_tokenizer=summary_tokenizer)
    modules = preload_for(config)
    assert (TOKENIZER_LOADER in modules) is loads
    assert "trajcomp.summarizers.openai" in modules  # the summarizer's module, from its entry point
