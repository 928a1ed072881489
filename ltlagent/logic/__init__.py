"""Layer 3, logic: from a spec to its automaton — LTLf/SERE formulas (``ltl``), Spot's translation read into
the immutable table with its derived views (``automaton``), and the compiled spec bundle (``compiled``)
(docs/design.md §3, §11).
"""
