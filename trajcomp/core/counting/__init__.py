"""Token counts with the training tokenizer.

- `tokens.py`: `TokenCounter`: a row measured by turns or as the chat template renders it; the rows in
  flight share batches, the urgent ones alone and first.
- `batching.py`: the coalescing of counting requests into tokenizer calls small enough to stay in the CPU's
  caches.
- `bare_texts.py`: a rendered row's assistant texts counted from its rendering's pieces, not encoded again.
- `count_cache.py`: a repeated text's count kept.
- `split_tokens.py`: a rendering's tokens split into per-turn costs.
- `template_spans.py`: the turns' spans in a chat-template rendering, from the stretches between added tokens.
- `token_rows.py`: a row as the training tokenizer renders it: `input_ids`, `attention_mask` and `labels`
  on the assistant turns it trains.
- `tokenizer_loading.py`: the training tokenizer loaded, or one line saying why not; the template's own errors told apart.
"""
