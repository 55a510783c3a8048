"""Sources: the protocol (``base``), the sources file (``schema``, ``factory``), seeds and
SQL text shared by the backends, and one subpackage per backend (``sqlite``, ``postgres``)."""
