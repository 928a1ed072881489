"""``python -m ltlagent``: the ``ltlagent`` command."""

from ltlagent.cli import main

raise SystemExit(main())
