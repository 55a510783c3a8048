"""``python -m nautilus_ranking.upstream serve --config nautilus.yaml``: the broker's
``nautilus serve`` (every flag its own), with our ranking attached."""

from __future__ import annotations

import sys

from nautilus_ranking.upstream.serve import main

if __name__ == "__main__":
    sys.exit(main())
