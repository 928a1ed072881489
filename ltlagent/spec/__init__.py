"""Layer 2, spec: the spec language — the positioned s-expression reader (``sexp``) and the spec's
data model, reader and static checks (``syntax``). Imports ``text``, ``spotlib`` and ``errors``
only (docs/design.md §2, §11).
"""
