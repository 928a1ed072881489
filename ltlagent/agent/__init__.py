"""Layer 5, agent: running agents — the runner (``runner``: ``Agent``, ``RunResult``, ``Step``), agent roles
(``roles``), environments and tools (``environment``, ``tools``), model loading (``loader``) and the vLLM
backend (``vllm_backend``) (docs/design.md §6, §11).
"""
