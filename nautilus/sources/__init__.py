"""Sources: the protocol (``base``), the sources file (``config``), one module per type."""
