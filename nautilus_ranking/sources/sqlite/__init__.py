"""The embedded SQLite sources: built from seed files, one module per type."""
