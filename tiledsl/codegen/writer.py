"""A tiny indented-text builder for emitted CUDA C."""

from __future__ import annotations

from contextlib import contextmanager


class Writer:
    """Accumulates lines with indentation; ``block()`` opens ``{`` … ``}``.

    Example:
        >>> w = Writer()
        >>> with w.block("if (x)"):
        ...     w("y = 1;")
        >>> print(w.text())
        if (x) {
          y = 1;
        }
        <BLANKLINE>
    """

    def __init__(self, indent: str = "  ") -> None:
        self._lines: list[str] = []
        self._depth = 0
        self._indent = indent

    def __call__(self, *lines: str) -> None:
        for text in lines:
            for line in text.split("\n"):
                self._lines.append(f"{self._indent * self._depth}{line}" if line else "")

    def blank(self) -> None:
        self._lines.append("")

    @contextmanager
    def block(self, head: str, tail: str = "}"):
        self(f"{head} {{" if head else "{")
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self(tail)

    @contextmanager
    def indented(self):
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
