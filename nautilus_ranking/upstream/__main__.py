"""``python -m nautilus_ranking.upstream serve --config nautilus.yaml``: the broker's
``nautilus serve`` (every flag its own), with our ranking attached; ``python -m
nautilus_ranking.upstream calibrate --config nautilus.yaml …``: ``nautilus-ranking
calibrate`` with its queries asked through the broker (``calibrate.py``)."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["calibrate"]:
        from nautilus_ranking.upstream.calibrate import main as calibrate

        sys.exit(calibrate(sys.argv[2:]))
    from nautilus_ranking.upstream.serve import main

    sys.exit(main())
