"""``python -m nautilus_ranking.cli``: the ``nautilus-ranking`` command."""

import sys

from nautilus_ranking.cli import main

if __name__ == "__main__":
    sys.exit(main())
