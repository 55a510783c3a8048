"""``python -m nautilus.cli``: the ``nautilus`` command."""

import sys

from nautilus.cli import main

sys.exit(main())
