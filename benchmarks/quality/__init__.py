"""Relevance on the shared IR collections: what ranking the union the sources return gives
(nDCG@10, recall, shares) and the rules tuned on it. ``ir_collections`` loads the collections
and ``partitioned`` serves each through three real sources; the other rooms use them too."""
