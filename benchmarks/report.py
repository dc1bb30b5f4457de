"""What a run found, as tables: printed with rich while it runs, written as Markdown at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table as RichTable


@dataclass
class Table:
    """One result table: a title, columns, rows of text, and notes printed under it."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        """Append a row (each cell rendered with ``str``)."""
        self.rows.append([str(c) for c in cells])

    def show(self, console: Console) -> None:
        """Print the table with rich."""
        table = RichTable(title=self.title, title_justify="left")
        for column in self.columns:
            table.add_column(column, overflow="fold")
        for row in self.rows:
            table.add_row(*row)
        console.print(table)
        for note in self.notes:
            console.print(f"  [dim]{note}[/dim]", highlight=False)

    def markdown(self) -> str:
        """The table as GitHub Markdown."""
        lines = [f"**{self.title}**", ""]
        lines.append("| " + " | ".join(self.columns) + " |")
        lines.append("|" + "|".join("---" for _ in self.columns) + "|")
        for row in self.rows:
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
        if self.notes:
            lines.append("")
            lines.extend(f"- {note}" for note in self.notes)
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Verdict:
    """One target of the issue: what it asks, what was measured, and whether it is met."""

    target: str
    measured: str
    met: bool | None  # None: not measured in this run
    note: str = ""

    @property
    def mark(self) -> str:
        """``met``, ``NOT met`` or ``not measured``."""
        return {True: "met", False: "NOT met", None: "not measured"}[self.met]


@dataclass
class Section:
    """A group of tables under one heading, with prose that explains them."""

    name: str
    heading: str
    intro: str = ""
    tables: list[Table] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)

    def markdown(self, measured_on: str = "") -> str:
        """The section as Markdown, under its heading the run it comes from (``measured_on``)."""
        parts = [f"## {self.heading}", ""]
        if measured_on:
            parts += [f"*{measured_on}*", ""]
        if self.intro:
            parts += [self.intro, ""]
        parts += [t.markdown() for t in self.tables]
        if self.findings:
            parts += ["".join(f"- {f}\n" for f in self.findings)]
        return "\n".join(parts)


def verdict_table(verdicts: list[Verdict], commit: str) -> Table:
    """Every target with its verdict and the commit it was measured on."""
    table = Table("Targets", ["target", "measured", "verdict", "commit", "note"])
    for v in verdicts:
        table.add(v.target, v.measured, v.mark, commit, v.note)
    return table


def ms(seconds: float) -> str:
    """Seconds as milliseconds with sensible precision."""
    value = seconds * 1000.0
    return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 100 else f"{value:.0f}"


def rate(per_second: float) -> str:
    """Operations per second, rounded."""
    return f"{per_second:,.0f}"
