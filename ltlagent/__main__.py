"""``python -m ltlagent``: the ``ltlagent`` command."""

from .cli import main

raise SystemExit(main())
