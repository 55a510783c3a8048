"""Inside the Nautilus broker (nautilus-rkm, in the Python 3.13 venv of tools/broker_venv.py):
what the ranking adds to a request's latency, to the process's memory and to an agent's tokens."""
