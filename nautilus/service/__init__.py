"""``nautilus serve``: the broker as an HTTP service (extra ``nautilus-ranking[serve]``).

``app.py`` wires the FastAPI application; ``problems.py`` (RFC 9457 error bodies),
``overrides.py`` (per-request knobs), ``limits.py`` (body size, concurrency, API keys),
``metrics.py`` (Prometheus), ``readiness.py`` (source probes), ``runner.py`` (the
broker's own event loop) and ``server.py`` (uvicorn) each hold one concept.
``manifest.py`` reads the ``NAUTILUS_*`` environment of a deployment manifest for
``nautilus config --manifest`` and needs no web stack.
"""
