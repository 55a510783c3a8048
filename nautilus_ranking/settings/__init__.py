"""Settings: every ``NAUTILUS_*`` variable, read, parsed and declared in one place.

- ``model.py``: :class:`NautilusSettings`, the one settings model (fields and their
  validators together), warn-and-skip and strict mode;
- ``knobs.py``: every setting declared once (which turn ranking on, which a profile may
  set, what each does inside the broker);
- ``parsing.py``: the parsers every setting, and a request's overrides, go through;
- ``boost_entries.py``: ``NAUTILUS_SOURCE_BOOSTS`` entries, each bad one a Problem;
- ``unknown_variables.py``: ``NAUTILUS_*`` names that are a typo of a setting;
- ``profile_variables.py``: the names of the profiles' variables, left to their reader.

``nautilus_ranking.config`` keeps the public import path of the model.
"""
