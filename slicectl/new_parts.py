"""Parts of the stack file ``slicectl new`` writes that go beyond one region's cluster: the zone's note from the zone
table, the prices it knows (with their sources) and placeholders for the rest, the prod maintenance window, and the
multi-region form (``--regions``: a manager and a cluster per region, README "Regions").

Pure text: ``cmd_new`` loads the file through the spec model before writing it.
"""

from __future__ import annotations

from stackspec import machine_regions, prices, zones
from stackspec import quota as tpu_quota

# prod's window (the shipped stacks'): weekends 02:00-10:00 UTC, 16 h a week, GKE needs 48 h in any 32 days.
PROD_WINDOW = '{start: "2026-01-03T02:00:00Z", end: "2026-01-03T10:00:00Z", recurrence: "FREQ=WEEKLY;BYDAY=SA,SU"}'


def zone_note(zone: str, generation: str) -> str:
    """What the zone table says of ``zone`` for ``generation`` (a comment): offered, or not listed (the table is
    incomplete for that generation, so nothing here checked it)."""
    listed, complete = zones.zones(generation)
    if zone in listed:
        return f"offers {generation} ({zones.TABLE_FILE})"
    if not complete:
        return (f"not in {zones.TABLE_FILE} for {generation} (its {generation} list is incomplete): check "
                f"{zones.table()['source']}")
    return f"no {generation} here ({zones.TABLE_FILE})"  # refused before the file is written


def system_machine(zone: str) -> str:
    """The system pool's machine type for ``zone`` and why (a ``systemMachineType: ...  # ...`` value): the seed's
    n1-standard-16 where its region offers it, else N2 (:func:`stackspec.machine_regions.system_default`)."""
    name = machine_regions.system_default(zone)
    if name == machine_regions.SEED_SYSTEM:
        return f"{name}  # the Ray head and system pods: the seed's, offered here ({machine_regions.TABLE_FILE})"
    return (f"{name}  # the Ray head and system pods: not the seed's {machine_regions.SEED_SYSTEM}, no N1 machine "
            f"in this region ({machine_regions.TABLE_FILE})")


def maintenance(indent: str) -> list[str]:
    """The prod maintenance window: GKE upgrades and repairs inside it, not in the middle of a run."""
    return [f"{indent}# GKE upgrades and repairs only in this window (prod); hold them off a run with an exclusion,",
            f"{indent}#   exclusions: [{{name: <run>, start: <time>, end: <time>}}]",
            f"{indent}maintenance:",
            f"{indent}  window: {PROD_WINDOW}"]


def _source(p: prices.Price) -> str:
    return f"{p.source}, published {p.published}, read {p.read}"


def price_lines(generation: str, capacities: tuple[str, ...], regions: list[str]) -> list[str]:
    """The prices: what the table knows for the stack's capacity, regions and system machine, each with its source
    (comments: the table gives the figure), then the ``tpu-multislice:prices`` section commented out with a
    placeholder for each price the table lacks, so each "unknown" of the cost table has its line to fill in (uncomment
    it with the figure from the bill, the pricing page or a negotiated rate). Nothing is guessed."""
    known, missing = [], {}
    for region in regions:
        for c in capacities:
            p = prices.tpu(generation, c, region)
            if p.known:
                known.append(f"{generation} {c} in {region}: ${p.usd:g} per chip-hour ({_source(p)})")
            else:
                missing.setdefault(generation, {})[p.key.rsplit(".", 1)[1]] = f"USD per chip-hour, {c} in {region}"
        machine = machine_regions.system_default(region)  # the one system_machine() writes
        m = prices.machine(machine, region)
        if m.known:
            known.append(f"{machine} in {region}: ${m.usd:g} per hour ({_source(m)})")
        else:
            missing.setdefault("machines", {})[machine] = f"USD per hour in {region}"
    lines = ["  # Prices slicectl cost uses, from stackspec/data/prices.json (each with its page and dates):"]
    lines += [f"  #   {k}" for k in known] or ["  #   none for this stack"]
    lines += ["  # Unknown until set (the cost table says which): uncomment with your figure.",
              "  # tpu-multislice:prices:"]
    for group, keys in missing.items():
        lines.append(f"  #   {group}: {{" + ", ".join(f"{k}: <{why}>" for k, why in keys.items()) + "}")
    lines.append("  #   bucketGb: <GB of checkpoints kept: the bucket's monthly line>")
    return lines


def region_cidrs(i: int) -> dict[str, str]:
    """Region ``i``'s ranges, disjoint from every other region's and the manager's (as the multi stack's)."""
    return {"node": f"10.0.{32 * i}.0/20", "pod": f"10.{100 + 20 * i}.0.0/14", "service": f"10.104.{16 * i}.0/20",
            "dcn1": f"10.{50 + i}.0.0/16", "dcn2": f"10.{60 + i}.0.0/16"}


MANAGER_CIDRS = {"node": "10.0.16.0/20", "pod": "10.112.0.0/16", "service": "10.113.0.0/20"}


def cluster_name(stack: str, region: str) -> str:
    """A region's cluster: ``<stack>-<region without its dashes' first part>``, e.g. acme-east5 for us-east5."""
    return f"{stack}-{region.split('-', 1)[1].replace('-', '')}"


def quota_lines(generation: str, capacities: tuple[str, ...], regions: list[str], chips: int) -> list[str]:
    """The TPU quota these slices need per region (each quota type its capacity options draw on), as the commented
    ``tpu-multislice:quota`` section to fill in with the project's own figures (docs/quota.md); lint then checks it."""
    types = dict.fromkeys(tpu_quota.QUOTA_TYPE[c] for c in capacities if tpu_quota.QUOTA_TYPE[c] != "reserved")
    need = ", ".join(f"{t}: {chips}" for t in types)
    return ["  # The TPU quota these slices need (chips; docs/quota.md): set to the project's granted quota and",
            "  # uncomment, and lint checks the slices against it.",
            "  # tpu-multislice:quota:",
            *[f"  #   - {{region: {r}, generation: {generation}, {need}}}" for r in regions]]


# --sandbox: the file is rendered as any stack's (with this stand-in CI project), then what needs the CI bootstrap is
# taken out: the CI project, the prebuilt image section, the stack's KMS key (stackspec/rules/sandbox.py says why).
NO_CI = "sandbox-no-ci-project"


def sandboxed(text: str) -> str:
    """A rendered stack file as a sandbox stack (docs/sandbox.md)."""
    out, skip = [], False
    for line in text.splitlines():
        if skip:  # the image section's keys
            if line.startswith("    "):
                continue
            skip = False
        if "tpu-multislice:ciProject:" in line or line.startswith("  # The bootstrap's CI project"):
            continue
        if line.startswith("  # The workers' prebuilt image") or line.startswith("  # which the stack's first") \
                or line.startswith("  # until then the workers run ray.image"):
            continue
        if line == "  tpu-multislice:image:":
            skip = True
            continue
        if line.startswith(("# The stack's own Cloud KMS key", "# --secrets-provider <this>", "# it opens nothing",
                            "secretsprovider:")):
            continue
        if line.startswith("#     --slice-shape "):
            line += " --sandbox"
        if line.startswith("# Next steps: README"):  # a CI stack's; a sandbox is deployed by hand
            line = "# Next steps: docs/sandbox.md (deploy by hand), docs/teardown.md (destroy)."
        if line.startswith("  tpu-multislice:environment:"):
            out += ["  tpu-multislice:environment: dev",
                    "  # Deployed by hand, without the CI bootstrap: no CI project, prebuilt image or KMS key, and no",
                    "  # workflow acts on it (docs/sandbox.md).",
                    "  tpu-multislice:sandbox: true"]
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def sandbox_figures(spec) -> list[str]:
    """What a sandbox needs before ``pulumi up``: one quota line per region, generation and quota type (with GCP's
    default where a source states it), and the monthly cost of what stays up."""
    from stackspec import cost, quota

    lines = []
    for n in quota.needs(spec):
        default = quota.DEFAULT_CHIPS.get((n.quota_type, n.generation))
        known = "" if default is None else f"; a new project's default is {default}" + (
            ": request an increase first" if default < n.chips else "")
        lines.append(f"quota: {n.chips} {n.generation} chips of {quota.LABEL[n.quota_type]} quota in {n.region} "
                     f"({', '.join(n.slices)}){known} ({quota.DOC})")
    doc = cost.compute(spec)
    # A price the cited catalogue lacks (v6e Spot: docs/cost.md) is never guessed: the line names the keys to set.
    missing = f"; set {', '.join(f'tpu-multislice:{m}' for m in doc['missing'])} for a figure" if doc["missing"] else ""
    lines.append(f"cost: {cost.total_text(doc['totals']['standingPerMonth'])} a month while it is up (system pool "
                 f"and slices; `slicectl cost --stack {spec.stack}` itemises it{missing}); `pulumi destroy` stops it "
                 "(docs/teardown.md)")
    return lines


def sandbox_steps(stack: str, path, figures: list[str] = (), stacks_dir=None) -> str:
    at = f" --stacks-dir {stacks_dir}" if stacks_dir else ""
    shown = "".join(f"\n  {line}" for line in figures)
    return f"""wrote {path} (a sandbox stack: docs/sandbox.md){shown}
next:
  1. uv run slicectl lint --stack {stack}{at} && uv run slicectl preview --stack {stack}{at}
  2. with your own credentials, in a project of your own (no bootstrap, no CI; the stack makes its own APIs and
     node account):
       pulumi login --local          # or any state backend you own
       pulumi stack init {stack} --secrets-provider passphrase
       pulumi up --stack {stack} --policy-pack policies
  3. pulumi destroy --stack {stack} when done (docs/teardown.md: nothing is protected in a sandbox)"""
