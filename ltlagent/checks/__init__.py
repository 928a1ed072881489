"""Layer 4, checks: questions about specs and prompts — few-shot prompt validation (``validate``), spec
equivalence (``equiv``) and inspection (``show``); no argparse here, the CLI is in :mod:`ltlagent.cli`
(docs/design.md §7, §8, §11).
"""
