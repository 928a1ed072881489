"""Layer 1, text: regular languages over bytes — the prompt-string lexer (``lexer``) and content constraints
(``content``: ``:choices``/``:regex`` as DFAs). Imports only ``errors`` and ``graph``; the spec reader uses it
to refuse unsupported regex features early (docs/design.md §4, §11).
"""
