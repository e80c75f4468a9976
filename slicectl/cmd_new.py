"""``slicectl new``: a team's stack file, with everything its set-up needs.

    slicectl new STACK --project P --region R (--zone Z | --regions R1:Z1,R2:Z2) --slice-shape v6e-32 --slices 4
                 [--capacity spot,on-demand] [--ci-project C] [--environment prod|dev]
                 [--gke-version V] [--oncall EMAIL] [--stacks-dir DIR]
                 [--node-cidr C] [--pod-cidr C] [--service-cidr C] [--sandbox]

``--regions``: a multi-region stack (a manager cluster in ``--region``, a cluster of ``--slices`` slices per
region); ``--*-cidr``: the ranges the spec asks to enlarge (its error names the flag); ``--sandbox``: a dev stack
deployed by hand without the CI bootstrap (docs/sandbox.md). The file carries the prices the table knows with their
sources, a commented placeholder for each it lacks, the TPU quota the slices need (commented, docs/quota.md) and,
for prod, a maintenance window.

Writes ``stacks/Pulumi.<STACK>.yaml``: the project, region and zone (checked against the TPU zone table),
``--slices`` slices of the shape (a Cloud TPU accelerator type of the slice table, e.g. v6e-32 is 4x8),
each with the capacity options in order (a Spot or fallback pool scales from zero, which needs the
``unverified.draScaleFromZero`` opt-in: the file says so), the cluster, networks, bucket and Ray names
derived from the stack's name and checked against their limits, a multislice and an elastic job sized
for the shape, the worker image section (digest pending), monitoring, ``deploy.onPush: false``, and the
``secretsprovider`` naming the Cloud KMS key the bootstrap makes for the stack. Defaults that are a
repository's choice (the CI project, the GKE version) come from the stack files already there.

The file is loaded through the spec model before it is written: every problem is one line, exit 2; an
existing stack, a bad zone or region, a shape not in the slice table are refused the same way.
It prints the administrator's next steps (README "Adding a team's stack").
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from slicectl import new_parts
from slicectl.argtypes import integer
from slicectl.exits import Exit
from stackspec import limits, loader, names, tpu, zones
from stackspec import regions as places
from stackspec import spec as stack_spec
from stackspec.model import DEFAULT_RAY_IMAGE

STACK_NAME = re.compile(r"[a-z][a-z0-9-]*[a-z0-9]")
PROJECT_ID, REGION = limits.PROJECT_ID, limits.REGION
# The DCN: two secondary networks at MTU 8896, as GKE's multislice tutorial (the seed) and prod have them.
DCN_SUBNETS = ("10.50.0.0/16", "10.60.0.0/16")
POD_CIDR, SERVICE_CIDR = "10.100.0.0/14", "10.104.0.0/20"  # away from the DCN subnets, as prod's
ELASTIC_CAPACITY = {"spot", "flex-start"}  # preemptible: only an elastic job runs there


@dataclass(frozen=True)
class NewStack:
    """What ``slicectl new`` was asked for (checked by :func:`problems`)."""

    stack: str
    project: str
    region: str
    zone: str
    slice_shape: str  # a Cloud TPU accelerator type, e.g. v6e-32
    slices: int
    capacity: tuple[str, ...]
    ci_project: str
    gke_version: str
    environment: str = "prod"
    oncall: str = "tpu-oncall@example.com"
    # The ranges (--node-cidr, --pod-cidr, --service-cidr): widen them when the spec asks to enlarge them.
    node_cidr: str | None = None  # unset: the model's default primary subnet
    pod_cidr: str = POD_CIDR
    service_cidr: str = SERVICE_CIDR
    # --regions: several regions (region:zone each), a manager cluster and a cluster per region (README "Regions").
    regions: tuple[tuple[str, str], ...] = ()

    @property
    def cluster(self) -> str:
        return f"{self.stack}-tpu"

    @property
    def ray_cluster(self) -> str:
        return f"{self.stack}-ray"

    @property
    def bucket(self) -> str:
        return f"{self.project}-maxtext-checkpoints"

    @property
    def secrets_provider(self) -> str:
        """The stack's own key, as the bootstrap makes it (one per stack, named after it)."""
        return names.stack_secrets_provider(self.ci_project, self.stack)


def shapes(accelerator: str) -> list[tpu.SliceShape]:
    """The slice table's shapes of a Cloud TPU accelerator type (``v6e-32``: 4x8), default machine first."""
    return [s for s in tpu.table() if s.pod_type == accelerator]


def problems(n: NewStack, stacks_dir: Path) -> list[str]:
    """Everything wrong with the request, one line each (the spec model then checks the file itself)."""
    out = []
    if not STACK_NAME.fullmatch(n.stack):
        out.append(f"stack {n.stack!r}: lowercase letters, digits and '-', starting with a letter")
    else:
        account = names.deploy_account_id(n.stack)
        if msg := limits.SERVICE_ACCOUNT_ID.check(account):
            out.append(f"stack {n.stack!r}: its deploy identity {account} (bootstrap/): {msg}")
    path = stacks_dir / f"Pulumi.{n.stack}.yaml"
    if path.exists():
        out.append(f"{_shown(path)}: the stack {n.stack!r} exists already; pick another name")
    for flag, value in (("--project", n.project), ("--ci-project", n.ci_project)):
        if not PROJECT_ID.fullmatch(value):
            out.append(f"{flag} {value!r}: a GCP project ID (6-30 lowercase letters, digits and '-')")
    if n.project == n.ci_project:
        out.append(f"--ci-project {n.ci_project!r}: the CI project holds no stack (bootstrap/); name another")
    region_ok = bool(REGION.fullmatch(n.region))
    if not region_ok:
        out.append(f"--region {n.region!r}: a GCP region, e.g. europe-west4")
    found = shapes(n.slice_shape)
    if not found:
        offered = sorted({s.pod_type for s in tpu.table()}, key=lambda t: (t.split("-")[0], int(t.split("-")[1])))
        out.append(f"--slice-shape {n.slice_shape!r}: not in the slice table (stackspec/tpu.py); allowed: "
                   f"{', '.join(offered)}")
    generation = found[0].generation.name if found else n.slice_shape.split("-")[0]
    for region, zone in n.regions:
        if not REGION.fullmatch(region) or not zone.startswith(region + "-"):
            out.append(f"--regions {region}:{zone}: a region and one of its zones, e.g. us-east5:us-east5-b")
        elif found and (msg := zones.zone_error(zone, generation)):
            out.append(f"--regions {region}:{zone}: {msg}")
    if len({r for r, _ in n.regions}) != len(n.regions):
        out.append("--regions: each region once")
    if n.regions:
        pass  # the manager's region is --region; its --zone is unused (the manager is regional)
    elif region_ok and not n.zone.startswith(n.region + "-"):
        out.append(f"--zone {n.zone!r}: not a zone of {n.region} ({zones.suggestion(n.region, generation)})")
    elif found and (msg := zones.zone_error(n.zone, generation)):
        out.append(f"--zone {n.zone!r}: {msg}")
    for c in n.capacity:
        if c not in ("spot", "on-demand", "flex-start"):
            out.append(f"--capacity {c!r}: allowed spot, on-demand, flex-start (a reservation needs its name: "
                       "add it to the file by hand, README \"Capacity\")")
    if len(set(n.capacity)) != len(n.capacity) or not n.capacity:
        out.append(f"--capacity {','.join(n.capacity)!r}: each option once, in the order GKE should try them")
    if n.environment not in stack_spec.ENVIRONMENTS:
        out.append(f"--environment {n.environment!r}: allowed {', '.join(stack_spec.ENVIRONMENTS)}")
    return out


def _capacity(c: str) -> str:
    return "{type: flex-start, maxRunDuration: 24h}" if c == "flex-start" else f"{{type: {c}}}"


def command(n: NewStack) -> str:
    """The command that writes this file (the header names it)."""
    where = (f"--regions {','.join(f'{r}:{z}' for r, z in n.regions)}" if n.regions else f"--zone {n.zone}")
    ranges = "".join(f" --{flag} {v}" for flag, v, default in (("node-cidr", n.node_cidr, None),
                                                                ("pod-cidr", n.pod_cidr, POD_CIDR),
                                                                ("service-cidr", n.service_cidr, SERVICE_CIDR))
                     if v != default)
    return (f"slicectl new {n.stack} --project {n.project} --region {n.region} {where} --slice-shape "
            f"{n.slice_shape} --slices {n.slices} --capacity {','.join(n.capacity)}{ranges}")


def render(n: NewStack) -> str:
    """The stack file's text (no checks: :func:`problems` and the spec model do those)."""
    if n.regions:
        return render_regions(n)
    (shape, *_) = shapes(n.slice_shape)
    autoscaled = len(n.capacity) > 1 or n.capacity[0] != "on-demand"
    # Jobs on preemptible capacity must be elastic (the spec's rule): no multislice job then.
    preemptible = bool(ELASTIC_CAPACITY & set(n.capacity))
    tensor = min(4, shape.chips)
    ici = f"{{fsdp: {shape.chips // tensor}, tensor: {tensor}}}" if tensor > 1 else "{fsdp: 1}"
    prod = n.environment == "prod"
    lines = [
        f"# The {n.stack} stack: {n.slices}x {n.slice_shape} ({shape.topology}, {shape.machine_type.name}) "
        f"in {n.zone}, written by",
        *(f"#   {part}" for part in command(n).split(" --slice-shape ", 1)[:1]),
        f"#     --slice-shape {command(n).split(' --slice-shape ', 1)[1]}",
        "# Next steps: README \"Adding a team's stack\".",
        "config:",
        f"  gcp:project: {n.project}",
        f"  gcp:region: {n.region}",
        f"  gcp:zone: {n.zone}                 # {new_parts.zone_note(n.zone, shape.generation.name)}",
        "  # The bootstrap's CI project (bootstrap/): CI identities, their federation and the state keys.",
        f"  tpu-multislice:ciProject: {n.ci_project}",
        f"  tpu-multislice:environment: {n.environment}",
        "  tpu-multislice:cluster:",
        f"    name: {n.cluster}",
        f'    version: "{n.gke_version}"',
        f"    systemMachineType: {new_parts.system_machine(n.zone)}",
        "    systemNodeCount: 3",
        *(["    deletionProtection: true"] if prod else []),
        "    # Pinned away from the DCN subnets below (GKE would pick these without seeing them).",
        f"    podCidr: {n.pod_cidr}",
        f"    serviceCidr: {n.service_cidr}",
        *(new_parts.maintenance("    ") if prod else []),
        "  tpu-multislice:network:",
        "    mtu: 8896",
        *([] if n.node_cidr is None else ["    primary:", f"      cidr: {n.node_cidr}   # the nodes' subnet"]),
        # Multi-host slices talk over two extra node networks (the DCN); single-host slices take none.
        *([] if shape.hosts == 1 else [
            "    secondary:                         # <cluster>-net-1 and -net-2: the data-center network between "
            "slices",
            *[line for i, cidr in enumerate(DCN_SUBNETS, 1)
              for line in (f"      - subnet: {n.stack}-dcn-{i}", f"        cidr: {cidr}")]]),
        "  tpu-multislice:slices:",
    ]
    for i in range(n.slices):
        lines += [f"    - name: {n.slice_shape}-{i}",
                  f"      generation: {shape.generation.name}",
                  f"      topology: {shape.topology}",
                  f"      machineType: {shape.machine_type.name}"]
        if i == 0 and autoscaled:
            lines.append("      # Tried in this order; every option but a fixed on-demand pool scales from zero.")
        lines.append(f"      capacity: [{', '.join(_capacity(c) for c in n.capacity)}]")
    if autoscaled:
        lines += [
            "  # Spot, flex-start and fallback pools scale from zero while the workers claim DRANET devices: GKE",
            "  # documents no autoscaler support for that (README \"Cloud rules\", ca-dra-scale-from-zero), so the",
            "  # stack opts in and the preview lists it as unverified. Only on-demand (fixed pools) needs no opt-in.",
            "  tpu-multislice:unverified:",
            "    draScaleFromZero: true",
        ]
    lines += new_parts.price_lines(shape.generation.name, n.capacity, [n.region])
    lines += new_parts.quota_lines(shape.generation.name, n.capacity, [n.region], n.slices * shape.chips)
    lines += _rest(n, shape, preemptible, ici)
    return "\n".join(lines) + "\n"


def _bucket_place(n: NewStack) -> list[str]:
    """A multi-region stack names its bucket's place (ForceNew: never derived from the regions): the best place that
    holds every region (stackspec.regions.bucket_places), written so that a region added later is checked against it."""
    if not n.regions:
        return []
    found = places.bucket_places([r for r, _ in n.regions])
    if not found:
        return ["    # No single bucket place holds these regions (https://cloud.google.com/storage/docs/locations):",
                "    # name one with location (and dataLocations) before the first `pulumi up`."]
    p = found[0]
    out = [f"    # The {p.kind} holding every region; a bucket's place cannot change once it exists.",
           f"    location: {p.location}"]
    if p.data_locations:
        out.append(f"    dataLocations: [{', '.join(p.data_locations)}]")
    return out


def _rest(n: NewStack, shape: tpu.SliceShape, preemptible: bool, ici: str,
          regions: list[str] | None = None) -> list[str]:
    """Storage, Ray, the image, monitoring, the jobs, GitOps and the secrets provider (every form of the file);
    ``regions``: a multi-region stack's, where its elastic jobs stay (:func:`_elastic_jobs`)."""
    place = _bucket_place(n)
    return [
        "  tpu-multislice:storage:",
        f"    bucket: {n.bucket}",
        *place,
        "    namespace: maxtext",
        "    serviceAccount: maxtext-ksa",
        "  tpu-multislice:ray:",
        f"    clusterName: {n.ray_cluster}",
        f"    image: {DEFAULT_RAY_IMAGE}",
        "  # The workers' prebuilt image (Dockerfile), pushed by .github/workflows/image.yml into this repository,",
        "  # which the stack's first `pulumi up` creates. Set digest to the workflow's output (a pull request);",
        "  # until then the workers run ray.image and install MaxText at start (the preview warns).",
        "  tpu-multislice:image:",
        "    repository: tpu-multislice",
        "    name: ray-maxtext",
        "    streaming: true",
        "  tpu-multislice:monitoring:",
        "    notificationChannels:",
        f"      - name: {n.stack}-oncall",
        "        type: email",
        f"        address: {n.oncall}" + ("   # set to your on-call address" if n.oncall.endswith("@example.com")
                                          else ""),
        "  # Queued by Kueue, one whole job at a time, by priority: each brings its own RayCluster.",
        "  tpu-multislice:jobs:",
        *([] if preemptible else [
            "    - name: llama3-8b-multislice",
            "      mode: multislice",
            "      cluster: dedicated",
            "      priority: production",
            f"      slices: {n.slices}",
            "      model: llama3-8b",
            "      steps: 100",
            "      perDeviceBatchSize: 4",
            "      maxTargetLength: 4096",
            f"      ici: {ici}",
            "      maxtext: {dataset_type: synthetic}",
        ]),
        *_elastic_jobs(n, preemptible, ici, regions or [None]),
        "  # GitOps: off until the stack is bootstrapped and deployed once (README \"Adding a team's stack\").",
        "  # onPush: true makes deploy.yml apply it on every push to main (environment deploy-<stack>);",
        "  # clusterDrill: llama3-8b-elastic adds it to drills.yml's weekly cluster drill (drill-<stack>).",
        "  tpu-multislice:deploy:",
        "    onPush: false",
        "# The stack's own Cloud KMS key, made by bootstrap/ in the CI project. `pulumi stack init",
        "# --secrets-provider <this>` adds `encryptedkey:` below (the stack's data key, encrypted by that key;",
        "# it opens nothing without it): commit it.",
        f"secretsprovider: {n.secrets_provider}",
    ]


_PERIOD_NOTE = (
    "      # Steps between checkpoints until a run measures its step: then set expectedStepSeconds (MaxText logs",
    "      # it) with checkpointSaveSeconds and expectedPreemptionIntervalMinutes, and Young/Daly's rule sets it.",
)


def _elastic_jobs(n: NewStack, preemptible: bool, ici: str, regions: list[str | None]) -> list[str]:
    """The elastic job, one per region of a multi-region stack on preemptible capacity (an elastic job stays in
    one region, so a single one would leave the other regions' slices idle); else in the first region only."""
    out: list[str] = []
    for k, region in enumerate(regions if preemptible else regions[:1]):
        name = "llama3-8b-elastic" if k == 0 else f"llama3-8b-elastic-{k + 1}"
        out += [
            f"    - name: {name}",
            "      mode: elastic",
            "      cluster: dedicated",
            f"      priority: {'production' if preemptible else 'drill'}",
            *([f"      region: {region}   # elastic jobs stay in one region (MultiKueue does not dispatch them)"]
              if region else []),
            "      minSlices: 1",
            f"      maxSlices: {n.slices}",
            "      maxFailures: 3",
            "      model: llama3-8b",
            "      steps: 100",
            "      perDeviceBatchSize: 4",
            "      maxTargetLength: 4096",
            f"      ici: {ici}",
            *_PERIOD_NOTE,
            "      checkpointPeriod: 20",
            "      maxtext: {dataset_type: synthetic}",
        ]
    return out


def render_regions(n: NewStack) -> str:
    """A multi-region stack (README "Regions"): a manager cluster in ``--region`` holding the queues (Autopilot), and
    a cluster per ``--regions`` entry with ``--slices`` slices each; queued jobs go to the cheapest region that
    admits them, the elastic job stays in the first region; one bucket every region reads."""
    (shape, *_) = shapes(n.slice_shape)
    preemptible = bool(ELASTIC_CAPACITY & set(n.capacity))
    tensor = min(4, shape.chips)
    ici = f"{{fsdp: {shape.chips // tensor}, tensor: {tensor}}}" if tensor > 1 else "{fsdp: 1}"
    prod = n.environment == "prod"
    m = new_parts.MANAGER_CIDRS
    where = ", ".join(f"{r} ({z})" for r, z in n.regions)
    lines = [
        f"# The {n.stack} stack: {n.slices}x {n.slice_shape} ({shape.topology}, {shape.machine_type.name}) in each of "
        f"{where}, written by",
        *(f"#   {part}" for part in command(n).split(" --slice-shape ", 1)[:1]),
        f"#     --slice-shape {command(n).split(' --slice-shape ', 1)[1]}",
        "# Next steps: README \"Adding a team's stack\"; several regions: README \"Regions\".",
        "config:",
        f"  gcp:project: {n.project}",
        f"  gcp:region: {n.region}                 # the manager's region",
        "  # The bootstrap's CI project (bootstrap/): CI identities, their federation and the state keys.",
        f"  tpu-multislice:ciProject: {n.ci_project}",
        f"  tpu-multislice:environment: {n.environment}",
        "  # No TPUs: Kueue with MultiKueue, the queues and the RayJobs it hands to the regions (Autopilot).",
        "  tpu-multislice:manager:",
        f"    name: {n.stack}-manager",
        f'    version: "{n.gke_version}"',
        "    # Every cluster's ranges are disjoint from every other's.",
        f"    cidr: {m['node']}",
        f"    podCidr: {m['pod']}",
        f"    serviceCidr: {m['service']}",
        *(new_parts.maintenance("    ") if prod else []),
        "  # cost: the cheapest first choice per chip-hour first (ties keep this order); listed: this order.",
        "  tpu-multislice:dispatch: cost",
        "  tpu-multislice:regions:",
    ]
    options = ", ".join(_capacity(c) for c in n.capacity)
    for i, (region, zone) in enumerate(n.regions):
        c, cluster = new_parts.region_cidrs(i), new_parts.cluster_name(n.stack, region)
        lines += [
            f"    - region: {region}",
            f"      zone: {zone}                 # {new_parts.zone_note(zone, shape.generation.name)}",
            "      cluster:",
            f"        name: {cluster}",
            f'        version: "{n.gke_version}"',
            f"        systemMachineType: {new_parts.system_machine(zone)}",
            "        systemNodeCount: 3",
            *(["        deletionProtection: true"] if prod else []),
            f"        podCidr: {c['pod']}",
            f"        serviceCidr: {c['service']}",
            *(new_parts.maintenance("        ") if prod else []),
            "      network:",
            f"        primary: {{cidr: {c['node']}}}",
            *([] if shape.hosts == 1 else [
                "        secondary:",
                f"          - {{subnet: {cluster}-dcn-1, cidr: {c['dcn1']}}}",
                f"          - {{subnet: {cluster}-dcn-2, cidr: {c['dcn2']}}}"]),
            "      slices:",
            *[f"        - {{name: {n.slice_shape}-{k}, generation: {shape.generation.name}, "
              f"topology: {shape.topology}, machineType: {shape.machine_type.name}, capacity: [{options}]}}"
              for k in range(n.slices)],
        ]
    if len(n.capacity) > 1 or n.capacity[0] != "on-demand":
        lines += ["  # Spot, flex-start and fallback pools scale from zero while the workers claim DRANET devices",
                  "  # (README \"Cloud rules\", ca-dra-scale-from-zero): the stack opts in, the preview lists it.",
                  "  tpu-multislice:unverified:",
                  "    draScaleFromZero: true"]
    lines += new_parts.price_lines(shape.generation.name, n.capacity, [r for r, _ in n.regions])
    lines += new_parts.quota_lines(shape.generation.name, n.capacity, [r for r, _ in n.regions],
                                   n.slices * shape.chips)
    lines += _rest(n, shape, preemptible, ici, regions=[r for r, _ in n.regions])
    return "\n".join(lines) + "\n"


def next_steps(n: NewStack, path: Path, stacks_dir: Path | None = None) -> str:
    """What to run next, as commands that work when pasted: with the ``--stacks-dir`` the file went to."""
    where = f" --stacks-dir {stacks_dir}" if stacks_dir is not None else ""
    moved = ("" if stacks_dir is None else f"\n     (Pulumi reads stack files from stacks/, Pulumi.yaml's "
             f"stackConfigDir: move {path.name} there first)")
    return f"""wrote {path}
next (README "Adding a team's stack"):
  1. uv run slicectl lint --stack {n.stack}{where} && uv run slicectl preview --stack {n.stack}{where} \\
       && uv run slicectl cost --stack {n.stack}{where}
  2. open a pull request with the file; an administrator, on its branch:{moved}
       cd bootstrap && pulumi up   # {n.stack}'s key, node account, project roles (reviewers: stackReviewers)
       cd .. && pulumi login gs://<stateBucket>
       pulumi stack init {n.stack} --secrets-provider="{n.secrets_provider}"
     and commits the encryptedkey line `pulumi stack init` adds to {path.name}
  3. deploy it through CI (`up` on a bootstrap stack runs in CI only, day 0 included: docs/ci-trust.md): set
     tpu-multislice:deploy.onPush: true, have the administrator re-run the bootstrap for its deploy-{n.stack}
     environment and identity, and merge; deploy.yml previews, deploy-{n.stack}'s reviewer approves the plan
  4. image.yml pushes the worker image to {n.stack}'s registry: set tpu-multislice:image.digest to its output (a PR)"""


# The spec keys a flag of this command sets: a problem there names the flag that changes it.
FLAGS = {"cluster.podCidr": "--pod-cidr", "cluster.serviceCidr": "--service-cidr",
         "network.primary.cidr": "--node-cidr", "network.primary": "--node-cidr"}


def _flag_for(key: str) -> str:
    flag = FLAGS.get(key.removeprefix(f"{stack_spec.PROJECT}:"))
    return f" (set it with {flag})" if flag else ""


def _shown(path: Path) -> Path:
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


def existing(stacks_dir: Path) -> list[stack_spec.StackSpec]:
    """The stack files already there that load (their CI project and GKE version are the defaults)."""
    out = []
    for p in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        try:
            out.append(stack_spec.load_stack(p.name.removeprefix("Pulumi.").removesuffix(".yaml"), stacks_dir))
        except (stack_spec.SpecError, stack_spec.StackFileError):
            continue
    return out


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("new", help="write a team's stack file (stacks/Pulumi.<stack>.yaml) and print the next steps")
    p.add_argument("stack", help="the stack's name (lowercase, digits, '-'; at most 20 characters)")
    p.add_argument("--project", required=True, help="the stack's GCP project")
    p.add_argument("--region", required=True, help="its region, e.g. europe-west4")
    p.add_argument("--zone", help="a zone of the region that offers the slice's TPU generation (not with --regions)")
    p.add_argument("--regions", default=None,
                   help="several regions, region:zone comma-separated (us-east5:us-east5-b,us-east1:us-east1-d): a "
                        "manager cluster in --region and a cluster of --slices slices in each (README \"Regions\")")
    p.add_argument("--node-cidr", default=None, help="the nodes' subnet (network.primary.cidr), to enlarge it")
    p.add_argument("--pod-cidr", default=POD_CIDR, help=f"the pods' range (cluster.podCidr), default {POD_CIDR}")
    p.add_argument("--service-cidr", default=SERVICE_CIDR,
                   help=f"the services' range (cluster.serviceCidr), default {SERVICE_CIDR}")
    p.add_argument("--slice-shape", required=True, help="a Cloud TPU accelerator type, e.g. v6e-32 (4x8)")
    p.add_argument("--slices", type=integer(1), required=True, help="how many slices")
    p.add_argument("--capacity", default=None,
                   help="capacity options in order, comma-separated (spot, on-demand, flex-start); default on-demand "
                        "(--sandbox: spot, whose quota a new project has and which costs least)")
    p.add_argument("--ci-project", help="the bootstrap's CI project (default: the one the stack files name)")
    p.add_argument("--environment", default=None, help="prod (default) or dev (--sandbox: dev)")
    p.add_argument("--gke-version",
                   help="the cluster's GKE version (default: the newest minor the stack files run, e.g. 1.35)")
    p.add_argument("--oncall", default="tpu-oncall@example.com", help="the alerts' email address")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--sandbox", action="store_true",
                   help="a dev stack deployed by hand without the CI bootstrap: no CI project, image or KMS key "
                        "(docs/sandbox.md)")
    return p


def run(args: argparse.Namespace) -> int:
    stacks_dir = args.stacks_dir or loader.STACKS_DIR
    others = existing(stacks_dir) if stacks_dir.is_dir() else []
    errors = [] if stacks_dir.is_dir() else [f"--stacks-dir {stacks_dir}: not a directory"]
    ci_project = args.ci_project
    args.environment = args.environment or ("dev" if args.sandbox else "prod")
    # A sandbox defaults to Spot: a new project's on-demand v6e quota is 0 and its preemptible quota 64 chips
    # (stackspec/quota.py DEFAULT_CHIPS), and Spot is the cheapest whole slice (docs/cost.md).
    args.capacity = args.capacity or ("spot" if args.sandbox else "on-demand")
    if args.sandbox:
        if args.environment == "prod":
            errors.append("--environment prod: a sandbox stack is dev (docs/sandbox.md)")
        if args.regions is not None:
            errors.append("--regions: a sandbox stack is single-region (its MultiKueue identities are the CI "
                          "bootstrap's; docs/sandbox.md)")
        ci_project = new_parts.NO_CI  # rendered, then removed (new_parts.sandboxed): the stack names none
    elif ci_project is None:
        named = sorted({s.ci_project for s in others})
        if len(named) == 1:
            ci_project = named[0]
        else:
            errors.append("--ci-project: required (the stack files name " + (", ".join(named) or "none") + ")")
    gke_version = args.gke_version
    if gke_version is None:
        versions = sorted({v.cluster.version for s in others for v in (s.region_views() if s.multi_region else [s])},
                          key=stack_spec.gke_version_key)
        if versions:
            # The newest minor only: an exact patch fails to create once it leaves the channel (cloud rule
            # gke-node-version-with-auto-upgrade); GKE picks the minor's newest patch.
            gke_version = ".".join(versions[-1].split(".")[:2])
        else:
            errors.append("--gke-version: required (no stack file to take it from), e.g. 1.35")
    regions = tuple(tuple(x.strip().split(":", 1)) if ":" in x else (x.strip(), "")
                    for x in (args.regions or "").split(",") if x.strip())
    if args.regions is None and not args.zone:
        errors.append("--zone: required (or --regions for several regions)")
    if args.regions is not None and (args.zone or args.node_cidr or args.pod_cidr != POD_CIDR
                                     or args.service_cidr != SERVICE_CIDR):
        errors.append("--regions: the regions' zones and ranges come from it (region:zone); drop --zone and the "
                      "--*-cidr flags, edit the file's regions[].cluster and network instead")
    if args.regions is not None and len(regions) < 2:
        errors.append(f"--regions {args.regions!r}: at least two region:zone entries, comma-separated")
    request = NewStack(stack=args.stack, project=args.project, region=args.region, zone=args.zone or "",
                       node_cidr=args.node_cidr, pod_cidr=args.pod_cidr, service_cidr=args.service_cidr,
                       regions=regions,
                       slice_shape=args.slice_shape, slices=args.slices,
                       capacity=tuple(c.strip() for c in args.capacity.split(",") if c.strip()),
                       ci_project=ci_project or "", gke_version=gke_version or "", environment=args.environment,
                       oncall=args.oncall)
    if not errors:
        errors = problems(request, stacks_dir)
    if errors:
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        return Exit.USAGE
    text = render(request)
    if args.sandbox:
        text = new_parts.sandboxed(text)
    # The file through the spec model before it is written: a name past its limit, a job the shape cannot hold.
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / f"Pulumi.{request.stack}.yaml").write_text(text)
        try:
            stack_spec.load_stack(request.stack, Path(tmp))
        except stack_spec.SpecError as e:
            for problem in e.problems:
                print(f"error: {problem.render()}{_flag_for(problem.key)}", file=sys.stderr)
            print(f"{len(e.problems)} problem(s): nothing was written", file=sys.stderr)
            return Exit.USAGE
    path = stacks_dir / f"Pulumi.{request.stack}.yaml"
    path.write_text(text)
    if args.sandbox:
        print(new_parts.sandbox_steps(request.stack, _shown(path),
                                      new_parts.sandbox_figures(stack_spec.load_stack(request.stack, stacks_dir)),
                                      args.stacks_dir))
    else:
        print(next_steps(request, _shown(path), _shown(args.stacks_dir) if args.stacks_dir is not None else None))
    return Exit.OK
