"""``nautilus-ranking mcp``: the broker as an MCP server (extra ``nautilus-ranking[mcp]``).

``tools.py`` holds the two tools (``search``, ``list_sources``): their schemas and
descriptions, written for a model to read, and their answers. They go through the
service's own request parsing, limits and metrics (nautilus_ranking/service/), so a tool
call means what ``POST /v1/query`` means. ``server.py`` serves them over stdio (a
desktop agent starts the command) or streamable HTTP (with the service's API keys).
"""
