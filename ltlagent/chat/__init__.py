"""Chat conversations as traces: OpenAI-format messages → events (one step each), and chat-log
files → conversations (docs/design.md §2.5, §12)."""
