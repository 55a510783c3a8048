"""``python -m nautilus.cli``: the ``nautilus`` command."""

import sys

from nautilus.cli import main

if __name__ == "__main__":
    sys.exit(main())
