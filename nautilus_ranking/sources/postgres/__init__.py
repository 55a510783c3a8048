"""The PostgreSQL sources (extra ``postgres``), one module per type, and
``nautilus-ranking load``."""
