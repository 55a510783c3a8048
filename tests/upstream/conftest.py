"""tests/upstream/inside/ runs inside the Python 3.13 venv with the broker (driven by
test_nautilus_broker.py), never in this suite's own interpreter."""

collect_ignore = ["inside"]
