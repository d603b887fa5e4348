"""The elicitation tools of ``elicitation_servers`` as a stdio server, for the tests:
``python elicitation_stdio_server.py``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from elicitation_servers import ElicitationLog, build_elicitation_server

if __name__ == "__main__":
    build_elicitation_server(ElicitationLog()).run("stdio")
