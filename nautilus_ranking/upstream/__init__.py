"""Beside and inside the Nautilus broker (``nautilus-rkm``, whose package is
``nautilus``). See docs/nautilus-broker.md."""
