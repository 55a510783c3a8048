"""``nautilus-ranking calibrate``: the confidence fitted on the operator's own sources.

Off-topic queries (``null_queries.txt``, shipped, and the operator's) learn what
"nothing relevant here" scores on this corpus; judged queries, when given, what an
answer scores. ``fit.py`` fits and picks the threshold, ``collect.py`` runs the
queries through the configured broker, ``command.py`` is the command.
"""
