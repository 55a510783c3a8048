"""What a server reads and checks before it serves, below both ``cli`` and ``service``.

``serve`` refuses to start on what these find (``mcp`` on the keys file), and
``nautilus-ranking config --strict`` fails on the same: ``checks.py`` (the sources file,
the keys file and its grants, the profiles), ``keys_file.py`` (the API keys file: a
regular file, bounded, each key once), ``key_grants.py`` (its profile grants).
"""
