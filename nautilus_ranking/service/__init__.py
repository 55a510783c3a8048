"""``nautilus-ranking serve``: the broker as an HTTP service (extra ``nautilus-ranking[serve]``).

``app.py`` wires the FastAPI application over the request core (``nautilus_ranking/request/``);
``state.py`` (what a server shares, the MCP server too), ``problems.py`` (RFC 9457 error
bodies), ``limits.py`` (body size, concurrency, API keys), ``protocol.py`` (the header
deadline), ``metrics.py`` (Prometheus), ``readiness.py`` (source probes), ``runner.py``
(the broker's own event loop) and ``server.py`` (uvicorn) each hold one concept.
``manifest.py`` reads the ``NAUTILUS_*`` environment of a deployment manifest for
``nautilus-ranking config --manifest`` and needs no web stack.
"""
