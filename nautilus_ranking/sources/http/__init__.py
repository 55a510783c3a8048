"""The ``http`` source type and its presets (``elasticsearch``, ``typesense``): any
HTTP/JSON search API, declared in the sources file (extra ``http``; docs/sources.md)."""
