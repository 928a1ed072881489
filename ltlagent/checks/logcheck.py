"""``check-log``: conversations from chat-log files checked against a policy (docs/design.md §12).

Records stream through in order; with ``jobs`` > 1 they are parsed and checked in a process pool
(the compiled :class:`~ltlagent.logic.policy.Policy` is pickled once per worker), in chunks, and
the results come back in input order; ``jobs`` is capped at the cores this process may run on
(more processes than cores only add start-up and switching). Memory stays constant for JSON Lines.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ltlagent.chat.logs import LogRecord, RawRecord, iter_raw, parse_record
from ltlagent.logic.policy import VERDICTS, ConversationReport, Policy

__all__ = ["LogResult", "Summary", "check_logs", "check_record", "usable_cores"]

#: Conversations per chunk handed to a worker process.
CHUNK = 256


@dataclass(frozen=True)
class LogResult:
    """One conversation's verdict with where it came from."""

    file: str
    line: int
    conversation: object  # the record's id, else its 0-based index in its file
    messages: int
    report: ConversationReport
    json_error: str | None = None  # set when the record's JSON could not be read

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"file": self.file, "line": self.line,
                                "conversation": self.conversation, "messages": self.messages}
        d.update(self.report.to_dict())
        return d


@dataclass
class Summary:
    """Counts over every conversation checked: by verdict and by violated constraint."""

    conversations: int = 0
    messages: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    constraints: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0  # records whose JSON was malformed

    def add(self, r: LogResult) -> None:
        self.conversations += 1
        self.messages += r.messages
        self.verdicts[r.report.verdict] += 1
        for v in r.report.violations:
            self.constraints[v.constraint or "(no state matches)"] += 1
        if r.json_error is not None:
            self.unreadable += 1

    @property
    def all_ok(self) -> bool:
        return self.verdicts["ok"] == self.conversations

    def to_dict(self) -> dict[str, object]:
        return {"conversations": self.conversations, "messages": self.messages,
                "verdicts": {v: self.verdicts[v] for v in VERDICTS},
                "constraints": dict(self.constraints.most_common()),
                "unreadable": self.unreadable}


def check_record(policy: Policy, rec: LogRecord, file: str) -> LogResult:
    """Check one parsed record (malformed JSON or a missing message list is ``malformed``)."""
    if rec.messages is None:
        err = rec.error
        json_error = str(err) if err is not None and err.line is not None else None
        report = ConversationReport("malformed", error=json_error or
                                    (err.message if err else "unreadable"))
        return LogResult(file, rec.line, rec.id, 0, report, json_error=json_error)
    try:
        report = policy.check(rec.messages)
    except RecursionError:  # a message nested deeper than Python can walk: that record's error
        report = ConversationReport("malformed", error="a message is nested too deep to read")
    return LogResult(file, rec.line, rec.id, len(rec.messages), report)


def _check_chunk(args: tuple[Policy, str, str | None, list[RawRecord]]) -> list[LogResult]:
    policy, file, key, raws = args
    return [check_record(policy, parse_record(r, file, key), file) for r in raws]


_WORKER_POLICY: list[Policy] = []  # one per worker process, set by the pool's initializer


def _init_worker(policy: Policy) -> None:
    _WORKER_POLICY[:] = [policy]


def _check_chunk_in_worker(args: tuple[str, str | None, list[RawRecord]]) -> list[LogResult]:
    file, key, raws = args
    return _check_chunk((_WORKER_POLICY[0], file, key, raws))


def usable_cores() -> int:
    """The number of cores this process may run on (its affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def check_logs(policy: Policy, files: Sequence[str], messages_key: str | None = None,
               jobs: int = 1) -> Iterator[LogResult]:
    """Every conversation of every file, checked, in input order, in ``jobs`` processes at most
    (capped at :func:`usable_cores`). A file that cannot be read at all raises
    :class:`~ltlagent.errors.LogError` when it is reached."""
    jobs = min(jobs, usable_cores())
    if jobs <= 1:
        for file in files:
            for raw in iter_raw(file):
                yield check_record(policy, parse_record(raw, file, messages_key), file)
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn" if mp.get_start_method(allow_none=True) == "spawn" else "fork")
    sent: deque[tuple[str, list[RawRecord]]] = deque()  # chunks handed out, not yet answered

    def work() -> Iterator[tuple[str, str | None, list[RawRecord]]]:
        for file in files:
            for chunk in _chunks(iter_raw(file), CHUNK):
                sent.append((file, chunk))
                yield file, messages_key, chunk

    with ctx.Pool(jobs, initializer=_init_worker, initargs=(policy,)) as pool:
        answers = pool.imap(_check_chunk_in_worker, work(), chunksize=1)
        while True:
            try:
                results = next(answers)
            except StopIteration:
                return
            except RecursionError:  # a parsed record too deep to pickle: checked here instead
                results = _check_chunk((policy, sent[0][0], messages_key, sent[0][1]))
            sent.popleft()
            yield from results


def _chunks(items: Iterable[RawRecord], n: int) -> Iterator[list[RawRecord]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, n)):
        yield chunk
