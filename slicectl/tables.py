"""Plain-text and Markdown tables the commands print (preview, cost)."""

from __future__ import annotations

from stackspec import cost


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def md_table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def cost_text(doc: dict) -> str:
    lines = []
    views, sources = cost.tables(doc)
    for title, header, rows in views:
        lines += [f"{title}:", indent(text_table(header, rows)), ""]
    return "\n".join(lines + cost.footer(doc) + ["Price sources:", *map(indent, sources)])


def cost_markdown(doc: dict) -> str:
    parts = []
    views, sources = cost.tables(doc)
    for title, header, rows in views:
        parts += [f"#### {title}", md_table(header, rows)]
    parts.append("\n".join(f"- {line}" for line in cost.footer(doc)))
    parts.append("Price sources:\n\n" + "\n".join(f"- {line}" for line in sources))
    return "\n\n".join(parts)
