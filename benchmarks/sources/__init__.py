"""What a kind of source gives and costs: SQLite beside PostgreSQL on the shared collections,
an HTTP source's own work and connections, and a real Typesense engine's relevance."""
