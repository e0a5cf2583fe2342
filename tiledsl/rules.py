"""Rule tables: each schedule constraint declared once.

A :class:`Rule` holds one constraint as an expression over named quantities (the schedule's fields in
upper case, e.g. ``BM``, and derived values such as ``THREADS``). The same text is

* evaluated in Python at construction (``check``), raising :class:`ScheduleError` naming the rule,
* used by the search to prune a sampled point before it is compiled (``violations``),
* emitted into the kernel as a ``static_assert`` when the rule's scope is ``"schedule"``,
* rendered as the documentation table (``markdown``).

Expressions use only ``+ - * % == != <= >= < > and or not`` on integers, which Python and C read the
same way (``and``/``or``/``not`` are translated to ``&&``/``||``/``!`` for C).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import ResourceError, ScheduleError

_SAFE = re.compile(r"^[A-Za-z0-9_ +\-*%=!<>()]+$")


@dataclass(frozen=True)
class Rule:
    """One constraint.

    Attributes:
        name: short identifier, quoted in errors ("thread_tile_divides_block").
        expr: the condition that must hold, over upper-case names.
        message: format string for the error, using the same names and ``{cls}``.
        scope: "schedule" (the schedule alone; also a static_assert), "op" (needs the op),
            or "target" (needs the device limits).
        resource: a violation is a :class:`ResourceError` (needs more than the device has).
        when: the condition under which the rule applies ("" = always), e.g. ``"MMA == 0"`` for a rule
            of the FMA kernel only; a rule that does not apply holds.
    """

    name: str
    expr: str
    message: str
    scope: str = "schedule"
    resource: bool = False
    when: str = ""

    def __post_init__(self) -> None:
        for text in (self.expr, self.when):
            if text and not _SAFE.match(text.replace(" and ", " ").replace(" or ", " ").replace("not ", "")):
                raise ValueError(f"rule {self.name}: unsupported characters in {text!r}")

    def applies(self, env: Mapping[str, int]) -> bool:
        """True when the rule's ``when`` condition holds for ``env`` (always, without one)."""
        return not self.when or bool(eval(_code(self.when), {"__builtins__": {}}, dict(env)))  # noqa: S307

    def holds(self, env: Mapping[str, int]) -> bool:
        """True when the rule does not apply or its expression holds for ``env`` (a division by zero
        counts as broken)."""
        try:
            return not self.applies(env) or bool(eval(_code(self.expr), {"__builtins__": {}}, dict(env)))  # noqa: S307
        except ZeroDivisionError:
            return False

    def c_expr(self) -> str:
        """The expression in C spelling (for ``static_assert``)."""
        text = re.sub(r"\band\b", "&&", self.expr)
        text = re.sub(r"\bor\b", "||", text)
        return re.sub(r"\bnot\b", "!", text)

    def error(self, env: Mapping[str, int], cls: str) -> ScheduleError:
        """The error this rule raises for ``env`` (ResourceError for resource rules)."""
        err_type = ResourceError if self.resource else ScheduleError
        return err_type(f"{self.message.format(cls=cls, **env)} (rule {self.name})", self.name)


@functools.cache
def _code(expr: str):
    """The rule text compiled once (rules are evaluated for every sampled schedule)."""
    return compile(expr, "<rule>", "eval")


def violations(rules: Sequence[Rule], env: Mapping[str, int], scopes: Sequence[str]) -> list[Rule]:
    """The rules of the given scopes that do not hold for ``env`` (in table order)."""
    out = []
    for rule in rules:
        if rule.scope in scopes and not rule.holds(env):
            out.append(rule)
    return out


def check(rules: Sequence[Rule], env: Mapping[str, int], scopes: Sequence[str], cls: str) -> None:
    """Raise the first violated rule's :class:`ScheduleError` (or :class:`ResourceError`).

    Rules are checked in table order and checking stops at the first broken one, so later rules may
    assume earlier ones hold (e.g. divide by a field an earlier rule proved positive).
    """
    for rule in rules:
        if rule.scope in scopes and not rule.holds(env):
            raise rule.error(env, cls)


def static_asserts(rules: Sequence[Rule], env: Mapping[str, int] | None = None) -> list[str]:
    """``static_assert`` lines for the schedule-scope rules (names must be constexpr in the kernel).

    ``env``: the schedule's names; rules whose ``when`` does not hold for it are left out (a tensor-core
    kernel has no thread tile RM×RN to check). None keeps the rules that apply always.
    """
    return [f'static_assert({r.c_expr()}, "rule {r.name}");' for r in rules
            if r.scope == "schedule" and (r.applies(env) if env is not None else not r.when)]



def markdown(rules: Sequence[Rule], title: str) -> str:
    """The rule table as Markdown (for the docs; regenerated, never hand-edited)."""
    if not any(r.when for r in rules):
        lines = [f"### {title}", "", "| rule | must hold | scope |", "| --- | --- | --- |"]
        lines += [f"| `{r.name}` | `{r.expr}` | {r.scope} |" for r in rules]
        return "\n".join(lines) + "\n"
    lines = [f"### {title}", "", "| rule | must hold | applies when | scope |", "| --- | --- | --- | --- |"]
    lines += [f"| `{r.name}` | `{r.expr}` | {f'`{r.when}`' if r.when else 'always'} | {r.scope} |" for r in rules]
    return "\n".join(lines) + "\n"
