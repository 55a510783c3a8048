"""Boost levels proposed from what agents used (``nautilus-ranking feedback propose``).

Offline, above the feedback log it reads (``nautilus_ranking/feedback/``) and the
evaluation whose sweep judges a proposal: the log's core is used by every way in that
hands over a cite, so it stays below them, and this reads it from above.
"""
