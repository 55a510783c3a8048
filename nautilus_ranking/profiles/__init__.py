"""Ranking profiles: each agent, tenant or caller ranked by its own named set of knobs.

``read.py`` gathers what is written (variables, ``.env``, the YAML file), ``build.py``
turns it into :class:`~nautilus_ranking.profiles.build.Profiles` once at start-up;
``request/profile_choice.py`` picks a request's profile and checks what its caller may
override. Nothing is imported here, so importing one module loads only what it needs.
"""
