"""The request core: one way to turn a query request into a ranked answer, shared by
the HTTP service, the MCP server, ``nautilus-ranking query`` and the retrievers."""
