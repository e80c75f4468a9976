"""What a stack costs, from its spec and the price table: pure functions, no I/O.

Three views, each a list of rows (plain dicts, the shape of ``build/<stack>/cost.json``):

- ``capacity``: every capacity option of every slice, in the order GKE tries them:
  chips × USD per chip-hour, per hour and per month (``hoursPerMonth`` of the table);
- ``standing``: what stays up all month: the system node pool, each slice pool whose first
  option is not flex-start (flex-start pools scale to zero), the bucket when its size is given;
- ``jobs``: one run of each job at ``expectedStepSeconds``: steps × seconds × chips × price,
  at the job's largest slice count, on its group's first capacity option and on its last fallback.

Every row carries its price as ``{usd, from, source, published, read, key}``: ``from`` is ``table``
(``source`` is the page, with the date its figure was published and the date it was read),
``spec`` (the stack's override key) or ``missing``. A missing price is ``None``, never zero. A total
is ``{usd, knownUsd, unknown}``: ``usd`` is ``None`` as soon as one part is unknown, ``knownUsd``
adds the known parts and ``unknown`` lists the keys to set; the views print it as
"≥ $X (N prices unknown)" or "unknown".
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from . import gke, prices

SCHEMA_ID = "tpu-multislice/cost/v4"
# Documents whose totals have the current shape (v4 added the wait and productive-hour columns only).
SAME_TOTALS = ("tpu-multislice/cost/v2", "tpu-multislice/cost/v3", SCHEMA_ID)
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Option:
    """One capacity option of a slice: its type (on-demand, spot, flex-start, reservation) and reservation."""

    type: str
    reservation: str | None = None
    wait_hours: float | None = None  # expectedWaitHours: the wait for this capacity here; None: unknown


def capacity_options(slice_: Any) -> list[Option]:
    """A slice's capacity options in order: a list of options, an object holding ``options``, or one capacity."""
    cap = slice_.capacity
    items = cap if isinstance(cap, list | tuple) else getattr(cap, "options", None) or [cap]
    return [Option(getattr(c, "type", c), getattr(c, "reservation", None), getattr(c, "expected_wait_hours", None))
            for c in items]


def stays_up(slice_: Any) -> bool:
    """Whether a slice's pool is a whole slice all month (``Slice.autoscaled``, which infra/slice_pool.py
    sizes by). Autoscaled pools and pools GKE auto-creates scale from zero: they cost only while pods hold
    them (the job rows)."""
    return not slice_.autoscaled and not slice_.node_pool_auto_creation


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _mul(*xs: float | None) -> float | None:
    out = 1.0
    for x in xs:
        if x is None:
            return None
        out *= x
    return out


def per_productive_hour(per_hour: float | None, run_hours: float | None, wait_hours: float | None) -> float | None:
    """Scheduling goodput in the price: an hour of training costs the hourly rate times (run + wait) / run, the
    wait for capacity charged to the run it delays (the team's expectedWaitHours). None when any is unknown."""
    if per_hour is None or not run_hours or wait_hours is None:
        return None
    return per_hour * (run_hours + wait_hours) / run_hours


def total(parts: list[tuple[float | None, list[str]]]) -> dict:
    """A total of ``(usd, keys that make it unknown)`` parts: ``usd`` is None if any part is unknown."""
    unknown = sorted({k for usd_, keys in parts if usd_ is None for k in keys})
    known = round(float(sum(usd_ for usd_, _ in parts if usd_ is not None)), 2)
    return {"usd": None if unknown else known, "knownUsd": known, "unknown": unknown}


def _missing(*prices_: prices.Price) -> list[str]:
    return [p.key for p in prices_ if not p.known]


def compute(spec: Any) -> dict:
    """The cost document of one stack (see the module docstring), JSON-ready."""
    if getattr(spec, "multi_region", False):
        return _compute_regions(spec)
    hours = prices.hours_per_month()
    over = spec.prices
    tpu_over = over.tpu_overrides()
    region = spec.region
    capacity, standing, jobs = [], [], []
    first_parts, last_parts = [], []  # per slice: its first option and its last fallback, all month

    for s in spec.slices:
        shape = s.shape
        options = capacity_options(s)
        for rank, opt in enumerate(options, start=1):
            p = prices.tpu(shape.generation.name, opt.type, region, tpu_over)
            per_hour = _mul(shape.chips, p.usd)
            per_month = _round(_mul(per_hour, hours))
            capacity.append({
                "slice": s.name, "group": s.group, "podType": shape.pod_type, "chips": shape.chips,
                "rank": rank, "capacity": opt.type, "reservation": opt.reservation, "region": region,
                "usdPerHour": _round(per_hour), "usdPerMonth": per_month, "price": p.as_json(),
                "expectedWaitHours": opt.wait_hours,
            })
            if rank == 1:
                first_parts.append((per_month, _missing(p)))
            if rank == len(options):
                last_parts.append((per_month, _missing(p)))

    c = spec.cluster
    mp = prices.machine(c.system_machine_type, region, over.machines)
    standing.append({
        "item": "system node pool", "what": f"{c.system_node_count} x {c.system_machine_type}",
        "usdPerHour": _round(_mul(c.system_node_count, mp.usd)),
        "usdPerMonth": _round(_mul(c.system_node_count, mp.usd, hours)), "price": mp.as_json(),
    })
    standing_parts = [(standing[0]["usdPerMonth"], _missing(mp))]
    for s in spec.slices:
        if not stays_up(s):
            continue
        first = capacity_options(s)[0]
        p = prices.tpu(s.shape.generation.name, first.type, region, tpu_over)
        standing.append({
            "item": f"slice {s.name}", "what": f"{s.shape.pod_type} ({s.shape.chips} chips), {first.type}",
            "usdPerHour": _round(_mul(s.shape.chips, p.usd)), "usdPerMonth": _round(_mul(s.shape.chips, p.usd, hours)),
            "price": p.as_json(),
        })
        standing_parts.append((standing[-1]["usdPerMonth"], _missing(p)))
    notes = []
    st = spec.storage
    if over.bucket_gb is not None:
        sp = prices.storage(st.storage_class, st.location or region, over.storage_gb_month)
        standing.append({
            "item": f"bucket {st.bucket}", "what": f"{over.bucket_gb:g} GB {st.storage_class}",
            "usdPerHour": _round(_mul(over.bucket_gb, sp.usd, 1 / hours)),
            "usdPerMonth": _round(_mul(over.bucket_gb, sp.usd)), "price": sp.as_json(),
        })
        standing_parts.append((standing[-1]["usdPerMonth"], _missing(sp)))
    else:
        notes.append("bucket storage not estimated: set prices.bucketGb (expected GB kept)")

    up = {s.group for s in spec.slices if stays_up(s)}
    job_first, job_last = [], []
    for i, j in enumerate(spec.jobs):
        g = spec.group(j.group)
        options = capacity_options(g.slices[0])
        p = prices.tpu(g.shape.generation.name, options[0].type, region, tpu_over)
        # The last option is what a run costs when no cheaper capacity comes (usually on-demand).
        worst = prices.tpu(g.shape.generation.name, options[-1].type, region, tpu_over)
        chips = (j.slices or 0) * g.shape.chips
        step = spec.step_time(j)  # the job's expectedStepSeconds, else the seed's measured step
        run_hours = None if step is None else j.steps * step[0] / 3600
        no_step = [] if step is not None else [f"jobs[{i}].expectedStepSeconds"]
        jobs.append({
            "job": j.name, "group": g.name, "slices": j.slices, "chips": chips, "steps": j.steps,
            "expectedStepSeconds": None if step is None else step[0],
            "stepFrom": None if step is None else step[1],
            "hours": None if run_hours is None else round(run_hours, 3),
            "capacity": options[0].type, "usd": _round(_mul(chips, p.usd, run_hours)), "price": p.as_json(),
            "fallbackCapacity": options[-1].type, "usdFallback": _round(_mul(chips, worst.usd, run_hours)),
            "fallbackPrice": worst.as_json(),
            # On slice pools that stay up, a run spends standing capacity rather than adding to it.
            "inStanding": g.name in up,
            "waitHours": options[0].wait_hours,
            "usdPerProductiveHour": _round(per_productive_hour(_mul(chips, p.usd), run_hours, options[0].wait_hours)),
        })
        job_first.append((jobs[-1]["usd"], [*no_step, *_missing(p)]))
        job_last.append((jobs[-1]["usdFallback"], [*no_step, *_missing(worst)]))

    missing = sorted({r[f]["key"] for r in [*capacity, *standing, *jobs] for f in ("price", "fallbackPrice")
                      if f in r and r[f]["from"] == "missing"}
                     | {k for parts in (standing_parts, job_first, job_last) for usd_, keys in parts
                        if usd_ is None for k in keys})
    return {
        "schema": SCHEMA_ID, "stack": spec.stack, "currency": prices.table()["currency"], "region": region,
        "hoursPerMonth": hours, "priceTable": {"file": prices.TABLE_FILE, "read": prices.table_date()},
        "capacity": capacity, "standing": standing, "jobs": jobs,
        "totals": {
            "standingPerMonth": total(standing_parts),
            "capacityPerMonth": {"firstChoice": total(first_parts), "lastFallback": total(last_parts)},
            "jobs": {"firstChoice": total(job_first), "lastFallback": total(job_last)},
        },
        "missing": missing, "notes": notes,
    }


def _compute_regions(spec: Any) -> dict:
    """A multi-region stack: each region's rows (standing items and job runs named after its cluster), in dispatch
    order, the manager, and the bucket's cross-region line; totals over them all."""
    order = spec.dispatch_order()
    docs = [(d, compute(d.view)) for d in order]
    capacity, standing, jobs, notes = [], [], [], []
    parts: dict[str, list] = {"standing": [], "first": [], "last": [], "jobFirst": [], "jobLast": []}
    for d, doc in docs:
        c = d.view.cluster.name
        capacity += doc["capacity"]
        standing += [{**r, "item": f"{c} ({d.view.region}): {r['item']}"} for r in doc["standing"]
                     if not r["item"].startswith("bucket ")]
        jobs += [{**r, "job": f"{r['job']} @ {d.view.region}"} for r in doc["jobs"]]
        t = doc["totals"]
        for key, tot in (("standing", t["standingPerMonth"]), ("first", t["capacityPerMonth"]["firstChoice"]),
                         ("last", t["capacityPerMonth"]["lastFallback"])):
            parts[key].append((tot["usd"], tot["unknown"]))
        notes += [n for n in doc["notes"] if n not in notes]
    hours = prices.hours_per_month()
    m, over = spec.manager, spec.prices
    # A Standard manager is regional: its pool's node count is per zone (stackspec.gke.REGIONAL_NODE_ZONES).
    mp = prices.manager(m.autopilot, m.system_machine_type, m.system_node_count * gke.REGIONAL_NODE_ZONES, m.region,
                        over)
    standing.append({"item": f"manager {m.name} ({m.region})", "what": ("Autopilot: Kueue's controller pods"
                                                             if m.autopilot else
                                                             f"{m.system_node_count} x {m.system_machine_type} in "
                                                             f"each of {gke.REGIONAL_NODE_ZONES} zones"),
                     "usdPerHour": _round(mp.usd), "usdPerMonth": _round(_mul(mp.usd, hours)),
                     "price": mp.as_json()})
    parts["standing"].append((standing[-1]["usdPerMonth"], _missing(mp)))
    st = spec.storage
    rp = prices.replication(st.location, bool(st.data_locations))
    written = over.bucket_gb
    across = ", ".join(st.data_locations) or st.location
    standing.append({"item": f"bucket {st.bucket} replication",
                     "what": (f"{written:g} GB written a month, replicated across {across}"
                              if written is not None else "GB written a month unknown (prices.bucketGb)"),
                     "usdPerHour": _round(_mul(written, rp.usd, 1 / hours)),
                     "usdPerMonth": _round(_mul(written, rp.usd)),
                     "price": rp.as_json()})
    parts["standing"].append((standing[-1]["usdPerMonth"], [*_missing(rp), *([] if written is not None else
                                                                             ["prices.bucketGb"])]))
    notes.append("cross-region: " + prices.cross_region_note(st.location, bool(st.data_locations)))
    for r in jobs:
        parts["jobFirst"].append((r["usd"], [] if r["usd"] is not None else [r["price"]["key"]]))
        parts["jobLast"].append((r["usdFallback"], [] if r["usdFallback"] is not None else [r["fallbackPrice"]["key"]]))
    missing = sorted({k for d in docs for k in d[1]["missing"]} | set(_missing(mp, rp)))
    return {
        "schema": SCHEMA_ID, "stack": spec.stack, "currency": prices.table()["currency"], "region": spec.region,
        "hoursPerMonth": hours, "priceTable": {"file": prices.TABLE_FILE, "read": prices.table_date()},
        "capacity": capacity, "standing": standing, "jobs": jobs,
        "totals": {
            "standingPerMonth": total(parts["standing"]),
            "capacityPerMonth": {"firstChoice": total(parts["first"]), "lastFallback": total(parts["last"])},
            "jobs": {"firstChoice": total(parts["jobFirst"]), "lastFallback": total(parts["jobLast"])},
        },
        "missing": missing, "notes": notes,
        "dispatch": [{"rank": n, "region": d.view.region, "cluster": d.view.cluster.name,
                      "usdPerChipHour": d.usd_per_chip_hour, "reason": d.reason} for n, (d, _) in enumerate(docs, 1)],
    }


# --------------------------------------------------------------------------- the document's schema

_NUM = {"type": ["number", "null"]}
_STR = {"type": "string"}
_PRICE = {
    "type": "object", "additionalProperties": False,
    "required": ["usd", "from", "source", "published", "read", "key"],
    "properties": {"usd": _NUM, "from": {"enum": ["table", "spec", "missing"]}, "source": _STR,
                   "published": {"type": ["string", "null"]}, "read": {"type": ["string", "null"]}, "key": _STR},
}
_TOTAL = {
    "type": "object", "additionalProperties": False, "required": ["usd", "knownUsd", "unknown"],
    "properties": {"usd": _NUM, "knownUsd": {"type": "number"}, "unknown": {"type": "array", "items": _STR}},
}
_CHOICES = {"type": "object", "additionalProperties": False, "required": ["firstChoice", "lastFallback"],
            "properties": {"firstChoice": _TOTAL, "lastFallback": _TOTAL}}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "stack", "currency", "region", "hoursPerMonth", "priceTable", "capacity", "standing",
                 "jobs", "totals", "missing", "notes"],
    "properties": {
        "schema": {"const": SCHEMA_ID}, "stack": _STR, "currency": _STR,
        "region": _STR, "hoursPerMonth": {"type": "number"},
        "priceTable": {"type": "object", "required": ["file", "read"], "additionalProperties": False,
                       "properties": {"file": _STR, "read": _STR}},
        "capacity": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["slice", "group", "podType", "chips", "rank", "capacity", "reservation", "region",
                         "usdPerHour", "usdPerMonth", "price", "expectedWaitHours"],
            "properties": {"slice": _STR, "group": _STR, "podType": _STR,
                           "chips": {"type": "integer"}, "rank": {"type": "integer"}, "capacity": _STR,
                           "reservation": {"type": ["string", "null"]}, "region": _STR,
                           "usdPerHour": _NUM, "usdPerMonth": _NUM, "price": _PRICE, "expectedWaitHours": _NUM}}},
        "standing": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["item", "what", "usdPerHour", "usdPerMonth", "price"],
            "properties": {"item": _STR, "what": _STR, "usdPerHour": _NUM, "usdPerMonth": _NUM, "price": _PRICE}}},
        "jobs": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["job", "group", "slices", "chips", "steps", "expectedStepSeconds", "stepFrom", "hours",
                         "capacity", "usd", "price", "fallbackCapacity", "usdFallback", "fallbackPrice",
                         "inStanding", "waitHours", "usdPerProductiveHour"],
            "properties": {"job": _STR, "group": _STR, "slices": {"type": "integer"},
                           "chips": {"type": "integer"}, "steps": {"type": "integer"}, "expectedStepSeconds": _NUM,
                           "stepFrom": {"type": ["string", "null"]}, "hours": _NUM, "capacity": _STR, "usd": _NUM,
                           "price": _PRICE, "fallbackCapacity": _STR, "usdFallback": _NUM, "fallbackPrice": _PRICE,
                           "inStanding": {"type": "boolean"}, "waitHours": _NUM, "usdPerProductiveHour": _NUM}}},
        "totals": {"type": "object", "additionalProperties": False,
                   "required": ["standingPerMonth", "capacityPerMonth", "jobs"],
                   "properties": {"standingPerMonth": _TOTAL, "capacityPerMonth": _CHOICES, "jobs": _CHOICES}},
        "missing": {"type": "array", "items": _STR},
        "notes": {"type": "array", "items": _STR},
        # Multi-region stacks only: the manager's dispatch order and why.
        "dispatch": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["rank", "region", "cluster", "usdPerChipHour", "reason"],
            "properties": {"rank": {"type": "integer"}, "region": _STR, "cluster": _STR, "usdPerChipHour": _NUM,
                           "reason": _STR}}},
    },
}


# --------------------------------------------------------------------------- views


# --------------------------------------------------------------------------- dispatch: regions by price


@dataclass(frozen=True)
class Dispatch:
    """A region's place in the manager's dispatch order and why it is there."""

    view: Any  # the region's view (a StackSpec)
    index: int  # its place in tpu-multislice:regions
    usd_per_chip_hour: float | None  # its slices' first-choice price, weighted by chips; None: unknown
    reason: str


def dispatch_order(spec: Any) -> tuple[Dispatch, ...]:
    """The regions in the order the manager's MultiKueueConfig lists them (the incremental dispatcher nominates
    clusters in that order, Kueue v0.19.2 multikueue_types.go:149-160), and why each is where it is.

    ``cost``: cheapest first by the first-choice price per chip-hour of the region's slices (a job's hourly cost
    there is its chips times that), unknown prices last, ties in the listed order; ``listed``: the file's order."""
    out = []
    for v in spec.region_views():
        usd = chips = 0.0
        unknown = []
        for s in v.slices:
            p = prices.tpu(s.generation, s.preferred.type, v.region, v.prices.tpu_overrides())
            if p.usd is None:
                unknown.append(p.key)
            else:
                usd += p.usd * s.shape.chips
                chips += s.shape.chips
        rate = None if unknown or not chips else usd / chips
        first = sorted({s.preferred.type for s in v.slices})
        why = (f"${rate:.2f}/chip-hour first choice ({', '.join(first)})" if rate is not None
               else f"price unknown (set {unknown[0]})")
        out.append(Dispatch(v, v.site_index, rate, why))
    if spec.dispatch == "cost":
        out.sort(key=lambda d: (d.usd_per_chip_hour is None, d.usd_per_chip_hour or 0.0, d.index))

        def why(d: Dispatch) -> str:
            if d.usd_per_chip_hour is None:
                return d.reason + "; after every priced region"
            tie = [o.view.region for o in out if o is not d and o.usd_per_chip_hour == d.usd_per_chip_hour]
            return d.reason + (f"; ties with {', '.join(tie)}: listed order" if tie else "; cheapest first")

        return tuple(Dispatch(d.view, d.index, d.usd_per_chip_hour, why(d)) for d in out)
    return tuple(Dispatch(d.view, d.index, d.usd_per_chip_hour, d.reason + "; listed order (dispatch: listed)")
                 for d in out)


def usd(x: float | None) -> str:
    return UNKNOWN if x is None else f"${x:,.2f}"


def _rate(x: float | None) -> str:
    return UNKNOWN if x is None else f"${x:,.4f}".rstrip("0").rstrip(".")


def _unknowns(keys: list[str]) -> str:
    noun = "price" if all(k.startswith("prices.") for k in keys) else "input"
    return f"{len(keys)} {noun}{'s' if len(keys) != 1 else ''} unknown"


def total_text(t: dict) -> str:
    """``$X``, ``≥ $X (N prices unknown)`` when some parts are unknown, ``unknown (...)`` when none is known."""
    if not t["unknown"]:
        return usd(t["usd"])
    if not t["knownUsd"]:
        return f"{UNKNOWN} ({_unknowns(t['unknown'])})"
    return f"≥ {usd(t['knownUsd'])} ({_unknowns(t['unknown'])})"


class _Sources:
    """Footnotes: each distinct price source once, numbered in order of first use."""

    def __init__(self) -> None:
        self.notes: dict[tuple, int] = {}

    def cell(self, p: dict) -> str:
        key = (p["from"], p["source"], p["published"], p["read"])
        n = self.notes.setdefault(key, len(self.notes) + 1)
        return f"{p['from']} [{n}]"

    def lines(self) -> list[str]:
        out = []
        for (origin, source, published, read), n in self.notes.items():
            if origin == "table":
                out.append(f"[{n}] {source}, published {published}, read {read}{_age(published, read)}")
            elif origin == "spec":
                out.append(f"[{n}] the stack file: tpu-multislice:{source}")
            else:
                out.append(f"[{n}] unknown: {source}")
        return out


def _age(published: str | None, read: str | None) -> str:
    """' (N months old when read)' when the published figure predates the reading by 3 months or more."""
    try:
        months = (dt.date.fromisoformat(read) - dt.date.fromisoformat(published)).days // 30
    except (TypeError, ValueError):  # an undated copy: the date text says so
        return ""
    return f" ({months} months old when read: check the page)" if months >= 3 else ""


def _slice_row(doc: dict, r: dict) -> str:
    """A capacity row's slice: with its region in a multi-region stack (the same slice names in every region)."""
    return f"{r['slice']} @ {r['region']}" if "dispatch" in doc else r["slice"]


def _hours(x: float | None) -> str:
    return UNKNOWN if x is None else f"{x:g}"


def tables(doc: dict) -> tuple[list[tuple[str, list[str], list[list[str]]]], list[str]]:
    """(title, header, rows) of the three views with their totals, as text cells, and the sources' footnotes."""
    t, src = doc["totals"], _Sources()
    cap = [[_slice_row(doc, r), str(r["rank"]), r["capacity"] + (f" ({r['reservation']})" if r["reservation"] else ""),
            str(r["chips"]), _rate(r["price"]["usd"]), usd(r["usdPerHour"]), usd(r["usdPerMonth"]),
            _hours(r["expectedWaitHours"]), src.cell(r["price"])] for r in doc["capacity"]]
    if cap:
        cap += [["total", "", "each slice's first choice", "", "", "", total_text(t["capacityPerMonth"]["firstChoice"]),
                 "", ""],
                ["total", "", "each slice's last fallback", "", "", "",
                 total_text(t["capacityPerMonth"]["lastFallback"]), "", ""]]
    up = [[r["item"], r["what"], usd(r["usdPerHour"]), usd(r["usdPerMonth"]), src.cell(r["price"])]
          for r in doc["standing"]]
    up.append(["total", "", "", total_text(t["standingPerMonth"]), ""])
    jobs = [[r["job"], str(r["slices"]), str(r["chips"]), str(r["steps"]),
             UNKNOWN if r["expectedStepSeconds"] is None else f"{r['expectedStepSeconds']:g}",
             UNKNOWN if r["hours"] is None else f"{r['hours']:g}", r["capacity"], usd(r["usd"]), src.cell(r["price"]),
             r["fallbackCapacity"], usd(r["usdFallback"]), src.cell(r["fallbackPrice"]),
             "yes" if r["inStanding"] else "no", _hours(r["waitHours"]), usd(r["usdPerProductiveHour"])]
            for r in doc["jobs"]]
    if jobs:
        jobs.append(["total", "", "", "", "", "", "", total_text(t["jobs"]["firstChoice"]), "", "",
                     total_text(t["jobs"]["lastFallback"]), "", "", "", ""])
    views = [
        ("Capacity options (per slice, in the order GKE tries them)",
         ["slice", "#", "capacity", "chips", "$/chip-h", "$/hour", "$/month", "wait h", "price"], cap),
        ("Stays up (per month)", ["item", "what", "$/hour", "$/month", "price"], up),
        ("One run of each job (first choice, and the last fallback when nothing cheaper comes)",
         ["job", "slices", "chips", "steps", "s/step", "hours", "capacity", "cost", "price",
          "last fallback", "cost", "price", "on standing pools", "wait h", "$/productive h"], jobs),
    ]
    return views, src.lines()


def footer(doc: dict) -> list[str]:
    lines = [f"Prices: {doc['priceTable']['file']}, {doc['currency']}, {doc['hoursPerMonth']:g} h/month; "
             f"overrides under tpu-multislice:prices."]
    lines += [f"unknown until set: {m}" for m in doc["missing"]]
    lines += doc["notes"]
    return lines


# --------------------------------------------------------------------------- change against a base


def _v1_totals(doc: dict) -> dict:
    """The totals of a ``cost/v1`` document (the default branch before v2) in the v2 shape."""
    t, missing = doc["totals"], doc.get("missing", [])

    def old(known: float, complete: bool) -> dict:
        return {"usd": known if complete else None, "knownUsd": known, "unknown": [] if complete else missing}

    def rows(values: list[float | None]) -> dict:
        return total([(v, missing or ["(unknown in the base)"]) for v in values])

    last: dict[str, dict] = {}
    for r in doc.get("capacity", []):
        last[r["slice"]] = r  # rows come in rank order
    return {
        "standingPerMonth": old(t["standingUsdPerMonth"], t["standingComplete"]),
        "capacityPerMonth": {"firstChoice": rows([r["usdPerMonth"] for r in doc.get("capacity", []) if r["rank"] == 1]),
                             "lastFallback": rows([r["usdPerMonth"] for r in last.values()])},
        "jobs": {"firstChoice": old(t["jobsUsd"], t["jobsComplete"]),
                 "lastFallback": rows([r.get("usdFallback") for r in doc.get("jobs", [])])},
    }


def _keyed(doc: dict | None) -> dict[tuple[str, str], Any]:
    """Each figure of a document by (view, row): a number or None, a total dict for the totals."""
    if not doc:
        return {}
    t = doc["totals"] if doc.get("schema") in SAME_TOTALS else _v1_totals(doc)
    out: dict[tuple[str, str], Any] = {}
    for r in doc.get("standing", []):
        out[("stays up, per month", r["item"])] = r["usdPerMonth"]
    out[("stays up, per month", "total")] = t["standingPerMonth"]
    for r in doc.get("capacity", []):
        out[("capacity option, per month", f"{_slice_row(doc, r)} #{r['rank']} {r['capacity']}")] = r["usdPerMonth"]
    out[("capacity option, per month", "total, first choice")] = t["capacityPerMonth"]["firstChoice"]
    out[("capacity option, per month", "total, last fallback")] = t["capacityPerMonth"]["lastFallback"]
    for r in doc.get("jobs", []):
        out[("job run", r["job"])] = r["usd"]
    out[("job run", "total, first choice")] = t["jobs"]["firstChoice"]
    out[("job run", "total, last fallback")] = t["jobs"]["lastFallback"]
    return out


def _signed(d: float, old: float | None) -> str:
    pct = f" ({d / old:+.0%})" if old else ""
    return f"{'+' if d > 0 else '-'}${abs(d):,.2f}{pct}"


def _change(old: Any, new: Any, present: tuple[bool, bool]) -> str:
    if not present[0]:
        return "added"
    if not present[1]:
        return "removed"
    if isinstance(old, dict) and isinstance(new, dict):  # totals
        if not old["unknown"] and not new["unknown"]:
            return _change(old["usd"], new["usd"], present)
        d = new["knownUsd"] - old["knownUsd"]
        known = "known part unchanged" if abs(d) < 0.005 else f"{_signed(d, old['knownUsd'])} on the known part"
        return f"{known}; {_unknowns(new['unknown'])}" if new["unknown"] else f"now known; {known}"
    if old is None or new is None:
        return "unchanged" if old == new else "now known" if new is not None else "now unknown"
    d = new - old
    return "unchanged" if abs(d) < 0.005 else _signed(d, old)


def _shown(x: Any) -> str:
    return total_text(x) if isinstance(x, dict) else usd(x)


def changes(base: dict | None, head: dict) -> list[dict]:
    """The rows that changed, and every total: ``{view, row, base, head, change}`` (figures as text)."""
    b, h = _keyed(base), _keyed(head)
    out = []
    for key in [*h, *(k for k in b if k not in h)]:
        change = _change(b.get(key), h.get(key), (key in b, key in h))
        if change != "unchanged" or key[1].startswith("total"):
            out.append({"view": key[0], "row": key[1], "base": _shown(b[key]) if key in b else None,
                        "head": _shown(h[key]) if key in h else None, "change": change})
    return out


def diff_markdown(stack: str, base: dict | None, head: dict, against: str = "the default branch") -> str:
    """The cost change of one stack against a base (changed rows and the totals), as Markdown."""
    lines = [f"### Cost of `{stack}` against {against}", ""]
    if base is None:
        lines += ["The base has no cost for this stack (a new stack): every row is new.", ""]
    lines += ["| view | row | base | this change | change |", "|---|---|---|---|---|"]
    lines += [f"| {c['view']} | {c['row']} | {c['base'] or '—'} | {c['head'] or '—'} | {c['change']} |"
              for c in changes(base, head)]
    lines.append("")
    _, sources = tables(head)
    lines += [f"- {line}" for line in footer(head)]
    lines += [f"- price source: {line.split('] ', 1)[1]}" for line in sources if "] unknown: " not in line]
    return "\n".join(lines)
