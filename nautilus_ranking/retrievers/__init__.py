"""Framework retrievers: nautilus' ranking as a LangChain or LlamaIndex retriever.

``langchain.py`` (extra ``nautilus-ranking[langchain]``) and ``llamaindex.py`` (extra
``nautilus-ranking[llamaindex]``) are thin: each turns the hits of ``source.py`` into its
framework's type. ``source.py`` asks an in-process :class:`~nautilus_ranking.broker.Broker`
or a running ``nautilus-ranking serve`` (``POST /v1/query`` over httpx), so the same
retriever code works embedded or against the shared service.
"""
