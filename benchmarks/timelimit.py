"""A wall-clock limit for one compile in the schema benchmarks (``bench_schema_*.py``).

``with time_limit(s): …`` raises :class:`Overtime` in the body once ``s`` seconds have passed
(``SIGALRM``, main thread only). The alarm is cancelled in the ``with``'s own exit, before any
handler of the caller runs, so an alarm cannot land in the caller's ``except`` clauses or after the
loop; one that fires while it is being cancelled still comes out as :class:`Overtime` (the compile
was at the limit).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


class Overtime(Exception):
    """A compile that ran past its time limit."""


def _alarm(_signum: int, _frame: object) -> None:
    raise Overtime


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`Overtime` in the body past ``seconds`` of wall time."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous)
