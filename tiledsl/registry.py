"""Shipped schedules: named presets per op family, read from the ``schedules`` package's JSON.

``schedules/<family>/presets.json`` maps a preset name to ``{"schedule": {...}, "note": "..."}``.
Every preset is validated when loaded (a broken preset raises ScheduleError naming it).
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from .errors import ScheduleError


@functools.cache
def _raw(family: str) -> dict:
    text = resources.files("schedules").joinpath(family, "presets.json").read_text()
    return json.loads(text)


def presets(family: str) -> dict:
    """Name -> schedule object for the op family ("gemm", ...), in file order.

    Raises:
        ScheduleError: a shipped preset breaks its rule table (names the preset).
    """
    from .api import family as get_family

    cls = get_family(family).schedule_type
    out = {}
    for name, entry in _raw(family).items():
        try:
            out[name] = cls.from_dict(entry["schedule"])
        except ScheduleError as exc:
            raise ScheduleError(f"shipped preset {family}/{name}: {exc}", exc.rule) from exc
    return out


def preset(family: str, name: str):
    """One named preset. Raises ScheduleError listing the names when ``name`` is unknown."""
    table = presets(family)
    if name not in table:
        raise ScheduleError(f"no {family} preset {name!r}; presets: {', '.join(table)}", "preset")
    return table[name]
