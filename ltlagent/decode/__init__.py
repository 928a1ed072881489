"""Layer 4, decode: constrained decoding — the tokenizer's vocabulary (``vocab``), the byte machine
(``machine``), masks and steering (``masks``, ``steering``), the per-sequence cursor (``monitor``), the index
cache and warm masks (``cache``, ``warm``), and the logits processors for transformers (``processor``) and
vLLM (``vllm_processor``) (docs/design.md §5, §11).
"""
