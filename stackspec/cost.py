"""What a stack costs, from its spec and the price table: pure functions, no I/O.

Three views, each a list of rows (plain dicts, the shape of ``build/<stack>/cost.json``):

- ``capacity``: every capacity option of every slice, in the order GKE tries them:
  chips × USD per chip-hour, per hour and per month (``hoursPerMonth`` of the table);
- ``standing``: what stays up all month: the system node pool, each slice pool whose first
  option is not flex-start (flex-start pools scale to zero), the bucket when its size is given;
- ``jobs``: one run of each job at ``expectedStepSeconds``: steps × seconds × chips × price,
  at the job's largest slice count and its group's first capacity option.

A price the table lacks and the spec does not give is ``None`` ("unknown") with the key to set;
totals add what is known and say whether anything was left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import prices

SCHEMA_ID = "tpu-multislice/cost/v1"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Option:
    """One capacity option of a slice: its type (on-demand, spot, flex-start, reservation) and reservation."""

    type: str
    reservation: str | None = None


def capacity_options(slice_: Any) -> list[Option]:
    """A slice's capacity options in order: a list of options, an object holding ``options``, or one capacity."""
    cap = slice_.capacity
    items = cap if isinstance(cap, list | tuple) else getattr(cap, "options", None) or [cap]
    return [Option(getattr(c, "type", c), getattr(c, "reservation", None)) for c in items]


def stays_up(slice_: Any) -> bool:
    """Whether a slice's pool is a whole slice all month (infra/slice_pool.py): one option that is not
    flex-start. Flex-start pools, every pool of a slice with fallbacks and pools GKE auto-creates scale
    from zero: they cost only while pods hold them (the job rows)."""
    options = capacity_options(slice_)
    return (len(options) == 1 and options[0].type != "flex-start"
            and not getattr(slice_, "node_pool_auto_creation", False))


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _mul(*xs: float | None) -> float | None:
    out = 1.0
    for x in xs:
        if x is None:
            return None
        out *= x
    return out


def compute(spec: Any) -> dict:
    """The cost document of one stack (see the module docstring), JSON-ready."""
    hours = prices.hours_per_month()
    over = spec.prices
    tpu_over = over.tpu_overrides()
    region = spec.region
    capacity, standing, jobs = [], [], []

    for s in spec.slices:
        shape = s.shape
        for rank, opt in enumerate(capacity_options(s), start=1):
            p = prices.tpu(shape.generation.name, opt.type, region, tpu_over)
            per_hour = _mul(shape.chips, p.usd)
            capacity.append({
                "slice": s.name, "group": s.group, "podType": shape.pod_type, "chips": shape.chips,
                "rank": rank, "capacity": opt.type, "reservation": opt.reservation, "region": region,
                "usdPerChipHour": p.usd, "usdPerHour": _round(per_hour), "usdPerMonth": _round(_mul(per_hour, hours)),
                "priceFrom": p.origin, "source": p.source,
            })

    c = spec.cluster
    mp = prices.machine(c.system_machine_type, region, over.machines)
    standing.append({
        "item": "system node pool", "what": f"{c.system_node_count} x {c.system_machine_type}",
        "usdPerHour": _round(_mul(c.system_node_count, mp.usd)),
        "usdPerMonth": _round(_mul(c.system_node_count, mp.usd, hours)), "priceFrom": mp.origin, "source": mp.source,
    })
    for s in spec.slices:
        if not stays_up(s):
            continue
        first = capacity_options(s)[0]
        p = prices.tpu(s.shape.generation.name, first.type, region, tpu_over)
        standing.append({
            "item": f"slice {s.name}", "what": f"{s.shape.pod_type} ({s.shape.chips} chips), {first.type}",
            "usdPerHour": _round(_mul(s.shape.chips, p.usd)), "usdPerMonth": _round(_mul(s.shape.chips, p.usd, hours)),
            "priceFrom": p.origin, "source": p.source,
        })
    notes = []
    st = spec.storage
    if over.bucket_gb is not None:
        sp = prices.storage(st.storage_class, st.location or region, over.storage_gb_month)
        standing.append({
            "item": f"bucket {st.bucket}", "what": f"{over.bucket_gb:g} GB {st.storage_class}",
            "usdPerHour": _round(_mul(over.bucket_gb, sp.usd, 1 / hours)),
            "usdPerMonth": _round(_mul(over.bucket_gb, sp.usd)), "priceFrom": sp.origin, "source": sp.source,
        })
    else:
        notes.append("bucket storage not estimated: set prices.bucketGb (expected GB kept)")

    up = {s.group for s in spec.slices if stays_up(s)}
    for j in spec.jobs:
        g = spec.group(j.group)
        first = capacity_options(g.slices[0])[0]
        p = prices.tpu(g.shape.generation.name, first.type, region, tpu_over)
        chips = (j.slices or 0) * g.shape.chips
        step = spec.step_time(j)  # the job's expectedStepSeconds, else the seed's measured step
        run_hours = None if step is None else j.steps * step[0] / 3600
        # The last option is what a run costs when no cheaper capacity comes (usually on-demand).
        last = capacity_options(g.slices[0])[-1]
        worst = prices.tpu(g.shape.generation.name, last.type, region, tpu_over)
        jobs.append({
            "job": j.name, "group": g.name, "slices": j.slices, "chips": chips, "steps": j.steps,
            "expectedStepSeconds": None if step is None else step[0],
            "stepFrom": None if step is None else step[1],
            "hours": None if run_hours is None else round(run_hours, 3),
            "capacity": first.type, "usdPerChipHour": p.usd, "usd": _round(_mul(chips, p.usd, run_hours)),
            "fallbackCapacity": last.type, "usdFallback": _round(_mul(chips, worst.usd, run_hours)),
            # On slice pools that stay up, a run spends standing capacity rather than adding to it.
            "inStanding": g.name in up,
            "priceFrom": p.origin if run_hours is not None else "missing",
            "source": p.source if run_hours is not None else f"set jobs[{spec.jobs.index(j)}].expectedStepSeconds",
        })

    missing = sorted({r["source"].rsplit("set ", 1)[-1] for r in [*capacity, *standing, *jobs]
                      if r["priceFrom"] == "missing"})
    known = [r["usdPerMonth"] for r in standing if r["usdPerMonth"] is not None]
    return {
        "schema": SCHEMA_ID, "stack": spec.stack, "currency": prices.table()["currency"], "region": region,
        "hoursPerMonth": hours, "priceTable": {"file": prices.TABLE_FILE, "read": prices.table_date()},
        "capacity": capacity, "standing": standing, "jobs": jobs,
        "totals": {
            "standingUsdPerMonth": round(sum(known), 2),
            "standingComplete": len(known) == len(standing),
            "jobsUsd": round(sum(r["usd"] for r in jobs if r["usd"] is not None), 2),
            "jobsComplete": all(r["usd"] is not None for r in jobs),
        },
        "missing": missing, "notes": notes,
    }


# --------------------------------------------------------------------------- the document's schema

_NUM = {"type": ["number", "null"]}
_ROW_BASE = {"priceFrom": {"enum": ["table", "spec", "missing"]}, "source": {"type": "string"}}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "stack", "currency", "region", "hoursPerMonth", "priceTable", "capacity", "standing",
                 "jobs", "totals", "missing", "notes"],
    "properties": {
        "schema": {"const": SCHEMA_ID}, "stack": {"type": "string"}, "currency": {"type": "string"},
        "region": {"type": "string"}, "hoursPerMonth": {"type": "number"},
        "priceTable": {"type": "object", "required": ["file", "read"], "additionalProperties": False,
                       "properties": {"file": {"type": "string"}, "read": {"type": "string"}}},
        "capacity": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["slice", "group", "podType", "chips", "rank", "capacity", "reservation", "region",
                         "usdPerChipHour", "usdPerHour", "usdPerMonth", "priceFrom", "source"],
            "properties": {"slice": {"type": "string"}, "group": {"type": "string"}, "podType": {"type": "string"},
                           "chips": {"type": "integer"}, "rank": {"type": "integer"}, "capacity": {"type": "string"},
                           "reservation": {"type": ["string", "null"]}, "region": {"type": "string"},
                           "usdPerChipHour": _NUM, "usdPerHour": _NUM, "usdPerMonth": _NUM, **_ROW_BASE}}},
        "standing": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["item", "what", "usdPerHour", "usdPerMonth", "priceFrom", "source"],
            "properties": {"item": {"type": "string"}, "what": {"type": "string"}, "usdPerHour": _NUM,
                           "usdPerMonth": _NUM, **_ROW_BASE}}},
        "jobs": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["job", "group", "slices", "chips", "steps", "expectedStepSeconds", "hours", "capacity",
                         "stepFrom", "usdPerChipHour", "usd", "fallbackCapacity", "usdFallback", "inStanding",
                         "priceFrom", "source"],
            "properties": {"job": {"type": "string"}, "group": {"type": "string"}, "slices": {"type": "integer"},
                           "chips": {"type": "integer"}, "steps": {"type": "integer"}, "expectedStepSeconds": _NUM,
                           "stepFrom": {"type": ["string", "null"]},
                           "hours": _NUM, "capacity": {"type": "string"}, "usdPerChipHour": _NUM, "usd": _NUM,
                           "fallbackCapacity": {"type": "string"}, "usdFallback": _NUM,
                           "inStanding": {"type": "boolean"}, **_ROW_BASE}}},
        "totals": {"type": "object", "additionalProperties": False,
                   "required": ["standingUsdPerMonth", "standingComplete", "jobsUsd", "jobsComplete"],
                   "properties": {"standingUsdPerMonth": {"type": "number"}, "standingComplete": {"type": "boolean"},
                                  "jobsUsd": {"type": "number"}, "jobsComplete": {"type": "boolean"}}},
        "missing": {"type": "array", "items": {"type": "string"}},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
}


# --------------------------------------------------------------------------- views


def usd(x: float | None) -> str:
    return UNKNOWN if x is None else f"${x:,.2f}"


def _rate(x: float | None) -> str:
    return UNKNOWN if x is None else f"${x:,.4f}".rstrip("0").rstrip(".")


def tables(doc: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of the three views and the totals, as text cells."""
    t = doc["totals"]
    cap = [[r["slice"], str(r["rank"]), r["capacity"] + (f" ({r['reservation']})" if r["reservation"] else ""),
            str(r["chips"]), _rate(r["usdPerChipHour"]), usd(r["usdPerHour"]), usd(r["usdPerMonth"]), r["priceFrom"]]
           for r in doc["capacity"]]
    up = [[r["item"], r["what"], usd(r["usdPerHour"]), usd(r["usdPerMonth"]), r["priceFrom"]] for r in doc["standing"]]
    up.append(["total", "" if t["standingComplete"] else "known rows only", "",
               usd(t["standingUsdPerMonth"]), ""])
    jobs = [[r["job"], str(r["slices"]), str(r["chips"]), str(r["steps"]),
             UNKNOWN if r["expectedStepSeconds"] is None else f"{r['expectedStepSeconds']:g}",
             UNKNOWN if r["hours"] is None else f"{r['hours']:g}", r["capacity"], usd(r["usd"]),
             f"{usd(r['usdFallback'])} ({r['fallbackCapacity']})", "yes" if r["inStanding"] else "no"]
            for r in doc["jobs"]]
    if jobs:
        fallback = sum(r["usdFallback"] or 0 for r in doc["jobs"])
        jobs.append(["total", "", "", "", "", "", "", usd(t["jobsUsd"]) + ("" if t["jobsComplete"] else
                                                                          " (known rows only)"),
                     usd(fallback), ""])
    return [
        ("Capacity options (per slice, in the order GKE tries them)",
         ["slice", "#", "capacity", "chips", "$/chip-h", "$/hour", "$/month", "price"], cap),
        ("Stays up (per month)", ["item", "what", "$/hour", "$/month", "price"], up),
        ("One run of each job", ["job", "slices", "chips", "steps", "s/step", "hours", "capacity", "cost",
                                 "cost on the last fallback", "on standing pools"], jobs),
    ]


def footer(doc: dict) -> list[str]:
    lines = [f"Prices: {doc['priceTable']['file']} (read {doc['priceTable']['read']}), {doc['currency']}, "
             f"{doc['hoursPerMonth']:g} h/month; overrides under tpu-multislice:prices."]
    lines += [f"unknown until set: {m}" for m in doc["missing"]]
    lines += doc["notes"]
    return lines


# --------------------------------------------------------------------------- change against a base


def _keyed(doc: dict | None) -> dict[tuple[str, str], float | None]:
    if not doc:
        return {}
    out: dict[tuple[str, str], float | None] = {}
    for r in doc.get("standing", []):
        out[("stays up, per month", r["item"])] = r["usdPerMonth"]
    out[("stays up, per month", "total")] = doc["totals"]["standingUsdPerMonth"]
    for r in doc.get("capacity", []):
        out[("capacity option, per month", f"{r['slice']} #{r['rank']} {r['capacity']}")] = r["usdPerMonth"]
    for r in doc.get("jobs", []):
        out[("job run", r["job"])] = r["usd"]
    out[("job run", "total")] = doc["totals"]["jobsUsd"]
    return out


def _change(old: float | None, new: float | None, present: tuple[bool, bool]) -> str:
    if not present[0]:
        return "added"
    if not present[1]:
        return "removed"
    if old is None or new is None:
        return "unchanged" if old == new else "now known" if new is not None else "now unknown"
    d = new - old
    if abs(d) < 0.005:
        return "unchanged"
    pct = f" ({d / old:+.0%})" if old else ""
    return f"{'+' if d > 0 else '-'}${abs(d):,.2f}{pct}"


def diff_markdown(stack: str, base: dict | None, head: dict) -> str:
    """The cost change of one stack against the default branch, as Markdown (changed rows and the totals)."""
    b, h = _keyed(base), _keyed(head)
    rows = []
    for key in [*h, *(k for k in b if k not in h)]:
        old, new = b.get(key), h.get(key)
        change = _change(old, new, (key in b, key in h))
        if change != "unchanged" or key[1] == "total":
            rows.append(f"| {key[0]} | {key[1]} | {usd(old) if key in b else '—'} | {usd(new) if key in h else '—'} "
                        f"| {change} |")
    lines = [f"### Cost of `{stack}` against the default branch", ""]
    if base is None:
        lines += ["The default branch has no cost for this stack (new stack, or before cost.json existed): "
                  "every row is new.", ""]
    lines += ["| view | row | base | this PR | change |", "|---|---|---|---|---|", *rows, ""]
    lines += [f"- {line}" for line in footer(head)]
    return "\n".join(lines)
