"""Optuna search over tiledsl schedules (see ``python -m search.tune --help``)."""
