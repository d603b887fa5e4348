"""``python -m fevex.cli``: the ``fevex`` command."""

from fevex.cli.program import main

raise SystemExit(main())
