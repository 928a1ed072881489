"""Layer 5, guard: a policy checked before each tool call runs, for agents on any OpenAI-compatible
endpoint (issue 20; docs/design.md §13) — the shared judgement of a reply (``screen``), the library's
guarded chat loop (``chat``: ``Guard``, ``GuardedConversation``), the text-format (ReAct) guard
(``react``: ``TextGuard``), and the HTTP proxies (``proxy``, ``stream``; ``mcp``, in front of an
MCP server: need the ``guard`` extra, imported only by ``ltlagent guard``).
"""

from ltlagent.guard.chat import FunctionTool, Guard, GuardedConversation, TurnResult
from ltlagent.guard.react import TextGuard, react_tools
from ltlagent.guard.screen import REFUSAL_MARK, Refusal, Screening, screen

__all__ = ["Guard", "GuardedConversation", "FunctionTool", "TurnResult", "Refusal", "Screening",
           "screen", "REFUSAL_MARK", "TextGuard", "react_tools"]
