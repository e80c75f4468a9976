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
    for title, header, rows in cost.tables(doc):
        lines += [f"{title}:", indent(text_table(header, rows)), ""]
    return "\n".join(lines + cost.footer(doc))


def cost_markdown(doc: dict) -> str:
    parts = []
    for title, header, rows in cost.tables(doc):
        parts += [f"#### {title}", md_table(header, rows)]
    parts.append("\n".join(f"- {line}" for line in cost.footer(doc)))
    return "\n\n".join(parts)
