"""``python -m ltlagent.cli``: the ``ltlagent`` command."""

from . import main

raise SystemExit(main())
