"""Shipped schedules as data: ``<family>/presets.json`` (named presets) per op family."""
