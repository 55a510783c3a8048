"""What a server reads and checks before it serves, below both ``cli`` and ``service``.

``serve`` and ``mcp`` refuse to start on what these find, and ``nautilus-ranking config
--strict`` fails on the same: ``key_grants.py`` (the API keys file's profile grants).
"""
