"""``slicectl preview``: the offline engine's plan, slice table, resources and manifests."""

from __future__ import annotations

import argparse
import errno
import gc
import io
import json
import os
import re
import stat
import sys
import time
from pathlib import Path

import msgspec
import yaml

from offline import engine
from policies import offline as policy_rules
from policies import report as policies
from slicectl.exits import Exit, UsageError
from slicectl.tables import cost_markdown, cost_text, indent, md_table, text_table
from stackspec import checkpoints, cost, names
from stackspec import quota as tpu_quota
from stackspec.loader import key_path
from stackspec.spec import StackSpec


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("preview", help="render a stack offline: plan, slices, resources.json, manifests")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--out", help="output directory (default: build/<stack>)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument(
        "--format",
        choices=("text", "markdown"),
        default="text",
        help="markdown for a CI job summary (plan, slices, Mermaid diagram)",
    )
    p.add_argument("--policy-config", type=Path, default=None,
                   help="policy pack config JSON (as for pulumi --policy-pack-config)")
    return p


def read_policy_config(path: Path | None) -> dict | None:
    """The policy pack config file (as for ``pulumi --policy-pack-config``), checked against the pack."""
    if path is None:
        return None
    try:
        text = path.read_text()
    except OSError as e:
        raise UsageError(f"--policy-config {path}: {e.strerror or e}") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--policy-config {path}:{e.lineno}: not JSON ({e.msg})") from None
    problems = policy_rules.config_problems(config)
    if problems:
        raise UsageError(f"--policy-config {path}: " + "; ".join(problems))
    return config


def run(args: argparse.Namespace) -> int:
    out = Path(args.out or f"build/{args.stack}")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a directory")
    policy_config = read_policy_config(args.policy_config)  # before the render: fail fast
    # A preview renders once: the cyclic collector stays off through the render (the engine turns it back on
    # only if it found it on), and what the render left (most of the heap at scale, the SDK's futures and
    # outputs, much of it garbage once the program has run) is frozen before it is turned back on, so neither
    # a collection later nor the one at exit walks it: at 1,024 slices, a second.
    collecting = gc.isenabled()
    gc.disable()
    try:
        started = time.perf_counter()
        rendering = engine.render(args.stack, stacks_dir=args.stacks_dir)
        elapsed = time.perf_counter() - started
        gc.freeze()
    finally:
        if collecting:
            gc.enable()
    costs = cost.compute(rendering.spec)  # once: cost.json and the view both show it
    write(rendering, out, costs)
    # The policy pack's rules on the same rendering; a mandatory violation fails the preview. What `pulumi up`
    # would refuse, the program's warnings and the violations print first, before the long plan.
    violations = policy_rules.evaluate(rendering, policy_config)
    _write_own(out / policies.POLICY_FILE, policies.policy_json(violations))
    print(markdown(rendering, violations, costs) if args.format == "markdown" else plain(rendering, violations, costs))
    failed = any(v.mandatory for v in violations)
    print(
        f"\nwrote {out}/resources.json, {out}/outputs.json, {out}/cost.json, {out}/{policies.POLICY_FILE} and "
        # Counted, not rebuilt: ``rendering.manifests`` converts every object again (the plan listed them already).
        f"{sum(map(engine.is_kubernetes_object, rendering.resources))} manifest(s) under {out}/manifests/<cluster>/ "
        f"({elapsed:.1f} s)",
        file=sys.stderr,
    )
    return Exit.POLICY_VIOLATION if failed else Exit.OK


# --------------------------------------------------------------------------- files


def manifest_filename(i: int, doc: dict) -> str:
    meta = doc.get("metadata", {})
    return f"{i:02d}-{doc['kind'].lower()}-{meta.get('name', 'unnamed')}.yaml"


def json_text(value: object, sort_keys: bool = True) -> str:
    """``json.dumps(value, indent=2, sort_keys=sort_keys, ensure_ascii=False)`` and a newline, written by
    msgspec's encoder: the standard library indents in pure Python, a third of a second for the 11 MB of
    resources at 1,024 slices, where msgspec takes a tenth of that. The same text, but for floats with an
    exponent (``1e-05`` is written ``0.00001``), which read back as the same numbers."""
    encoded = msgspec.json.encode(value, order="sorted" if sort_keys else None)
    return msgspec.json.format(encoded, indent=2).decode() + "\n"


def yaml_text(doc: dict) -> str:
    """One manifest as YAML, by libyaml's emitter (PyYAML's C binding): the pure-Python one took most of the write
    (0.05 s of prod's 0.07). Its line folding of long strings differs from the pure-Python emitter's; the
    documents read back the same (``tests/test_preview_write.py``).

    The text of ``yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=False)``: the events that
    libyaml's serializer would make of the representer's nodes are handed to its emitter directly (:func:`_emit`).
    The serializer builds no node here and calls back into Python's resolver twice per scalar and once per
    collection to learn whether a tag may be left implicit (two thirds of prod's 2 MB of manifests are Kueue's
    CRDs: 66,000 such calls); :func:`_plain_ok` answers that from the resolver's own table.
    ``tests/test_preview_write.py`` compares the two on every manifest. A document holding one dict or list twice
    (which the representer writes as an anchor and an alias) takes ``yaml.dump`` itself."""
    stream = io.StringIO()
    dumper = yaml.CSafeDumper(stream, default_flow_style=False, sort_keys=False, allow_unicode=False)
    try:
        try:
            emit = dumper.emit
            emit(yaml.StreamStartEvent())
            emit(yaml.DocumentStartEvent(explicit=False))
            _emit(doc, dumper, emit, set())
            emit(yaml.DocumentEndEvent(explicit=False))
            emit(yaml.StreamEndEvent())
        except _Shared:
            return yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=False)
        return stream.getvalue()
    finally:
        dumper.dispose()


_STR, _MAP, _SEQ, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "map", "seq", "int", "bool", "null"))
# The serializer's answer for an ``int``/``bool``/``null`` node of the representer's canonical text: plain, tag
# implicit (the resolver reads it back as that tag); quoted, explicit (a quoted scalar resolves to ``str``).
_TYPED = (True, False)
_RESOLVERS = yaml.CSafeDumper.yaml_implicit_resolvers  # first character -> [(tag, pattern)]; None: any character


class _Shared(Exception):
    """A dict or list met twice in one document."""


# A string's scalar event, made once per process: the event depends on the string alone (the resolver's table is
# CSafeDumper's, and the preview adds no resolver), the emitter only reads it, and most of a preview's strings
# recur (prod's 2 MB of manifests: 28,900 string scalars, 2,100 distinct: ``type``, ``object``, ``description``).
_STR_EVENTS: dict[str, yaml.ScalarEvent] = {}
# The other events are the same every time: made once.
_MAP_START, _MAP_END = yaml.MappingStartEvent(None, _MAP, True, flow_style=False), yaml.MappingEndEvent()
_SEQ_START, _SEQ_END = yaml.SequenceStartEvent(None, _SEQ, True, flow_style=False), yaml.SequenceEndEvent()
_TRUE, _FALSE = (yaml.ScalarEvent(None, _BOOL, _TYPED, text) for text in ("true", "false"))
_NONE = yaml.ScalarEvent(None, _NULL, _TYPED, "null")


def _plain_ok(value: str, dumper: yaml.CSafeDumper) -> bool:
    """Whether a plain ``value`` reads back as a string (the serializer's ``resolve(ScalarNode, value, (True,
    False)) == str``): only a string whose first character starts one of the resolver's implicit patterns (a
    digit, ``~``, ``y``/``n``/``t``/``f``/``o``, ...), or the empty string, needs the resolver itself."""
    if None in _RESOLVERS or not value or value[0] in _RESOLVERS:
        return dumper.resolve(yaml.ScalarNode, value, (True, False)) == _STR
    return True


def _emit(value: object, dumper: yaml.CSafeDumper, emit, seen: set[int]) -> None:
    """The events libyaml's serializer emits for the node ``SafeRepresenter`` makes of ``value`` with
    ``default_flow_style=False`` (``_yaml.pyx`` ``CEmitter._serialize_node``): block collections with implicit
    tags, plain scalar style, each scalar's (plain, quoted) implicit flags as the resolver gives them; a float
    through the representer itself; any other type (tuples, sets, objects) raises :class:`_Shared`, for
    ``yaml.dump`` to write the whole document."""
    kind = type(value)
    if kind is str:
        event = _STR_EVENTS.get(value)
        if event is None:
            event = _STR_EVENTS[value] = yaml.ScalarEvent(None, _STR, (_plain_ok(value, dumper), True), value)
        emit(event)
    elif kind is dict or kind is list:
        if id(value) in seen:
            raise _Shared
        seen.add(id(value))
        if kind is dict:
            emit(_MAP_START)
            for k, v in value.items():
                _emit(k, dumper, emit, seen)
                _emit(v, dumper, emit, seen)
            emit(_MAP_END)
        else:
            emit(_SEQ_START)
            for v in value:
                _emit(v, dumper, emit, seen)
            emit(_SEQ_END)
    elif kind is bool:
        emit(_TRUE if value else _FALSE)
    elif kind is int:
        emit(yaml.ScalarEvent(None, _INT, _TYPED, str(value)))
    elif value is None:
        emit(_NONE)
    elif kind is float:
        node = dumper.represent_data(value)  # SafeRepresenter's own text (.inf, .nan, 1.0e-05)
        implicit = (dumper.resolve(yaml.ScalarNode, node.value, (True, False)) == node.tag,
                    dumper.resolve(yaml.ScalarNode, node.value, (False, True)) == node.tag)
        emit(yaml.ScalarEvent(None, node.tag, implicit, node.value, style=node.style))
    else:
        raise _Shared


def write(rendering: engine.Rendering, out: Path, costs: dict | None = None) -> None:
    """The preview's files under ``out``; ``costs``: ``cost.compute`` of the rendering's spec, if already made."""
    out.mkdir(parents=True, exist_ok=True)
    _write_own(out / "resources.json", json_text([r.to_json() for r in rendering.resources]))
    _write_own(out / "outputs.json", json_text(rendering.outputs, sort_keys=False))
    costs = costs if costs is not None else cost.compute(rendering.spec)
    _write_own(out / "cost.json", json_text(costs, sort_keys=False))
    mdir = out / "manifests"
    _own_folder(mdir)  # a link here would take the writes and the sweep below out of the folder
    written = set()
    # One folder per cluster the objects are applied to (a multi-region stack: the manager and each region).
    for cluster, docs in manifests_by_cluster(rendering).items():
        _own_folder(mdir / cluster)
        for i, doc in enumerate(docs, start=1):
            path = mdir / cluster / manifest_filename(i, doc)
            _write_own(path, yaml_text(doc))
            written.add(path)
    # Suspended shared jobs: what they would submit, for review; not applied.
    hdir = mdir / "held"
    for i, doc in enumerate(rendering.held, start=1):
        _own_folder(hdir)
        path = hdir / manifest_filename(i, doc)
        _write_own(path, yaml_text(doc))
        written.add(path)
    # The last preview's files that this one did not write again, flat or per cluster (each one rewritten is
    # overwritten in place, not removed first: a hundred file removals fewer per preview).
    # A linked folder's files are not swept: the preview makes no link, so what is behind one is not its own.
    for old in [*mdir.glob("*.yaml"), *(f for d in mdir.iterdir() if d.is_dir() and not d.is_symlink()
                                        for f in d.glob("*.yaml"))]:
        if old not in written:
            old.unlink()


def _own_folder(path: Path) -> None:
    """``path`` as a folder of the preview's own: a symlink there (to a folder elsewhere) is replaced, not written
    through."""
    if path.is_symlink():
        path.unlink()
    path.mkdir(exist_ok=True)


def _write_own(path: Path, text: str) -> None:
    """``text`` as ``path``'s, a file of the preview's own, overwriting a file in place; never written through a
    symlink there (its target is not the preview's: the preview's files are rewritten, never their links' targets),
    and a FIFO, socket or device there is removed first (reading or writing one would block or leave the folder).
    Every file of the preview's goes through this: the manifests, ``resources.json``, ``outputs.json``,
    ``cost.json`` and the policy report.

    A file that already holds the text is left as it is: reading and comparing costs a few milliseconds for all of
    prod's 2 MB, where truncating and rewriting a file makes ext4 flush it on close (its ``auto_da_alloc``), a
    second of wall time on a busy disk for a preview that changed nothing; the file's time stays that of its last
    change. The read and the write open the path with ``O_NOFOLLOW``: a link put there after the check is neither
    read (compared with a file outside the folder) nor written through; a link found at the open is removed and
    the open tried again, and one that keeps coming back is an error naming the file."""
    data = text.encode("utf-8")
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        path.unlink()
    elif mode is not None and _holds(path, data):
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(3):
        try:
            fd = os.open(path, flags, 0o666)
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            path.unlink()  # the link, not its target
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return
    raise OSError(errno.ELOOP, "a symbolic link keeps reappearing at a file of the preview's; not written", str(path))


def _holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` is, not through a link, a regular file holding ``data``."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False  # a link (ELOOP), gone, or unreadable: written anew
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        return stat.S_ISREG(info.st_mode) and info.st_size == len(data) and f.read() == data


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX; Windows makes no symlink in a checkout without privilege


def manifests_by_cluster(rendering: engine.Rendering) -> dict[str, list[dict]]:
    """The Kubernetes objects in apply order, by the cluster whose provider applies them (``names.k8s_provider``:
    ``<cluster>-k8s``); an object through no explicit provider under ``default``."""
    suffix = names.k8s_provider("")
    out: dict[str, list[dict]] = {}
    for r in rendering.resources:
        if engine.is_kubernetes_object(r):
            provider = (r.provider_urn or "").rsplit("::", 1)[-1]
            cluster = provider.removesuffix(suffix) if provider.endswith(suffix) else "default"
            out.setdefault(cluster, []).append(engine.kubernetes_manifest(r))
    return {c: sorted(docs, key=engine.manifest_order) for c, docs in sorted(out.items())}


# --------------------------------------------------------------------------- views


def capacity_label(option) -> str:
    """One capacity option as the views show it: ``reservation (v6e-res)``, ``flex-start (7d)``."""
    if option.reservation:
        return f"{option.type} ({option.reservation_path})"
    if option.max_run_duration:
        d = option.max_run_duration
        span = f"{d // 86400}d" if d % 86400 == 0 else f"{d // 3600}h" if d % 3600 == 0 else f"{d}s"
        return f"{option.type} ({span}{', queued' if option.queued_provisioning else ''})"
    return option.type


def fallback_order(options) -> str:
    """A slice's capacity options in the order GKE tries them (its ComputeClass priorities)."""
    return " -> ".join(capacity_label(o) for o in options)


def slice_rows(spec: StackSpec) -> list[list[str]]:
    rows = []
    for s in spec.slices:
        cap = fallback_order(s.capacity)
        rows.append(
            [
                s.name,
                s.group,
                s.shape.pod_type,
                s.shape.topology,
                str(s.shape.hosts),
                str(s.shape.chips),
                s.shape.machine_type.name,
                cap,
            ]
        )
    return rows


SLICE_HEADER = ["slice", "worker group", "pod type", "topology", "hosts", "chips", "machine type", "capacity"]


def _tree(rendering: engine.Rendering) -> list[tuple[int, engine.Resource]]:
    """Resources in component order: each top-level resource, then its children, depth-first."""
    out: list[tuple[int, engine.Resource]] = []
    children: dict[str, list[engine.Resource]] = {}
    for r in rendering.resources:
        if r.parent is not None:
            children.setdefault(r.parent, []).append(r)

    def walk(r: engine.Resource, depth: int) -> None:
        out.append((depth, r))
        for c in sorted(children.get(r.urn, ()), key=lambda c: (c.custom, c.type, c.name)):
            walk(c, depth + 1)

    for r in sorted((r for r in rendering.resources if r.parent is None), key=lambda r: (r.custom, r.type, r.name)):
        walk(r, 0)
    return out


_KEY = re.compile(r"^((?:gcp|tpu-multislice):[\w.\[\]-]+)")


def _placed(rendering: engine.Rendering, message: str) -> str:
    """A program message that starts with a stack-file key, with the file and line first."""
    doc = rendering.document
    m = _KEY.match(message)
    line = doc.line(key_path(m.group(1))) if doc is not None and m else None
    return f"{doc.source}:{line}: {message}" if line else message


def problem_lines(rendering: engine.Rendering) -> list[str]:
    """The program's warnings (the day-0 image phase, the unverified paths the stack opts in to)."""
    lines = []
    if rendering.warnings:
        lines += [f"Warnings ({len(rendering.warnings)}):"]
        lines += [f"  warning: {_placed(rendering, w)}" for w in rendering.warnings]
    return lines


def plain(rendering: engine.Rendering, violations: list | None = None, costs: dict | None = None) -> str:
    spec = rendering.spec
    custom = [r for r in rendering.resources if r.custom]
    lines = [
        f"Stack {spec.stack} ({spec.environment}) in {spec.project} / {where(spec)}: "
        f"{len(custom)} resources in {len(rendering.resources) - len(custom)} components",
        "",
    ]
    if problems := problem_lines(rendering):
        lines += [*problems, ""]
    if unchecked := tpu_quota.warnings(spec):  # no quota section: what nothing checked, before the long plan
        lines += [f"  warning: {w}" for w in unchecked] + [""]
    if violations is not None:
        lines += [policies.text(violations), ""]
    lines += [
        "Plan (# component, + resource; children indented under their parent):",
    ]
    for depth, r in _tree(rendering):
        marker = "+" if r.custom else "#"
        lines.append(f"  {'    ' * depth}{marker} {r.type}  {r.name}")
    if spec.multi_region:
        lines += ["", "Dispatch order (the manager's MultiKueueConfig; a queued job goes to the first region that "
                  "admits it):"]
        lines += [f"  {n}. {d.view.region} ({d.view.zone}, cluster {d.view.cluster.name}): {d.reason}"
                  for n, d in enumerate(spec.dispatch_order(), start=1)]
    for v in _views_in_order(spec):
        if spec.multi_region:
            lines += ["", f"Region {v.region} ({v.zone}, cluster {v.cluster.name}):"]
        lines += ["", "Slices:", indent(text_table(SLICE_HEADER, slice_rows(v)))]
        groups = [
            [
                g.name,
                g.shape.pod_type,
                str(g.replicas),
                str(g.shape.hosts),
                str(g.shape.chips_per_host),
                str(g.shape.workers(g.replicas)),
            ]
            for g in v.groups
        ]
        lines += [
            "",
            "Ray worker groups:",
            indent(text_table(["group", "pod type", "replicas", "numOfHosts", "google.com/tpu", "workers"], groups)),
        ]
    placed = _jobs(spec)
    if placed:
        jobs = [
            [
                j.name,
                j.mode,
                j.group,
                j.cluster,
                str(j.slices) if not j.elastic else f"{j.min_slices}..{j.slices}",
                j.runs,
                str(j.steps),
                *([where_] if spec.multi_region else []),
            ]
            for _, j, where_ in placed
        ]
        header = ["job", "mode", "group", "cluster", "slices", "runs", "steps",
                  *(["runs in"] if spec.multi_region else [])]
        lines += ["", "Jobs:", indent(text_table(header, jobs))]
        lines += ["", "Runs and checkpoints (run name, period and where it came from, storage at the run's end):"]
        lines += ["  " + line for line in checkpoint_lines(spec)]
    lines += ["", "Manifests:"]
    lines += [
        f"  {d['apiVersion']} {d['kind']} {d['metadata'].get('namespace', '')}/{d['metadata'].get('name')}"
        for d in rendering.manifests
    ]
    if rendering.held:
        lines += ["", "Held (suspended jobs: rendered under manifests/held/, not applied):"]
        lines += [f"  {d['apiVersion']} {d['kind']} {d['metadata'].get('namespace', '')}/{d['metadata']['name']}"
                  for d in rendering.held]
    lines += ["", "Outputs:"] + [f"  {k}: {v}" for k, v in rendering.outputs.items()]
    lines += ["", "TPU quota (chips each quota type must allow, per region; docs/quota.md):",
              indent(text_table(tpu_quota.HEADER, tpu_quota.rows(spec)))]
    lines += ["", "Cost:", indent(cost_text(costs if costs is not None else cost.compute(spec)))]
    return "\n".join(lines)


def where(spec: StackSpec) -> str:
    if spec.multi_region:
        return (f"manager {spec.manager.name} ({spec.manager.region}) and "
                + ", ".join(f"{v.cluster.name} ({v.zone})" for v in _views_in_order(spec)))
    return spec.cluster.location


def _views_in_order(spec: StackSpec) -> list[StackSpec]:
    return [d.view for d in spec.dispatch_order()] if spec.multi_region else [spec]


def _jobs(spec: StackSpec) -> list[tuple[StackSpec, object, str]]:
    """(view, job as resolved there, where it runs) for each job: a multi-region stack's queued jobs as the first
    region in dispatch order resolves them, "manager -> r1, r2" (the regions that can run them, in order)."""
    if not spec.multi_region:
        return [(spec, j, spec.cluster.location) for j in spec.jobs]
    out, placements = [], spec.placements()
    for j in spec.jobs:
        if j.name in placements and placements[j.name]:
            vs = placements[j.name]
            out.append((vs[0], vs[0].job(j.name), "manager -> " + ", ".join(v.region for v in vs)))
        else:
            v = next((v for v in spec.region_views() if v.region == j.region), None)
            if v is not None:
                out.append((v, v.job(j.name), f"{v.region} only (created there)"))
    return out


def multitier_lines(spec: StackSpec, job) -> list[str]:
    """The local tier's period where the stack opts in to multi-tier checkpointing (unverified)."""
    from workloads import multitier

    if not multitier.enabled(spec):
        return []
    local = multitier.local_period(spec, job)
    return [f"  local tier (multi-tier checkpointing, UNVERIFIED) every {local.period} steps: {local.how}"]


def checkpoint_lines(spec: StackSpec) -> list[str]:
    """Each job's run name, checkpoint period with the numbers it came from, and storage estimate;
    a warning where a run's checkpoints exceed ``storage.checkpointBudgetGb``. The run name does not depend on
    the region, so a run resumes from the shared bucket wherever it lands."""
    budget = spec.storage.checkpoint_budget_gb
    lines = []
    for view, j, _ in _jobs(spec):
        plan, store = j.checkpoint_plan, j.checkpoint_storage
        lines += [f"{j.name}: run {j.run_name}",
                  f"  checkpoint every {plan.period} steps: {plan.how}",
                  *multitier_lines(view, j),
                  f"  storage: {store.describe()}" if store else
                  ("  storage: unknown (set trainer.checkpointGb: one checkpoint's size)" if j.trainer else
                   f"  storage: unknown (no parameter count for {j.model} in stackspec/checkpoints.py)")]
        if store and budget and store.total_bytes > budget * 1e9:
            lines.append(f"  WARNING: {checkpoints.gb(store.total_bytes)} of checkpoints exceeds "
                         f"storage.checkpointBudgetGb {budget:g} GB: raise checkpointPeriod or set "
                         "maxtext.max_num_checkpoints_to_keep")
    return lines


# Mermaid refuses a diagram longer than its maxTextSize, "The maximum allowed size of the users text diagram",
# default 50000 (https://mermaid.js.org/config/schema-docs/config-properties-maxtextsize.html). Up to HOST_BOXES
# hosts a slice draws its hosts; past it, one box per group of identical slices (16 x v6e-256 was 57 KB).
MERMAID_MAX_TEXT = 50_000
HOST_BOXES = 64


def _names(items: list[str]) -> str:
    """A list of names, the first and last of a long one: ``v6e-16-0 … v6e-16-255 (256)``."""
    return ", ".join(items) if len(items) <= 4 else f"{items[0]} … {items[-1]} ({len(items)})"


def mermaid(spec: StackSpec) -> str:
    """Slices, the DCN networks that join them and each group's capacity fallback order: each slice with its hosts
    for a small stack, one box per group of identical slices (same worker group, shape and machine) for a large one,
    so the diagram stays under Mermaid's size limit and readable at 256 slices."""
    lines = ["flowchart LR"]
    for i, net in enumerate(spec.networks):
        lines.append(f'  net{i}(["{net.network}<br/>{net.subnet} {net.cidr}<br/>MTU {spec.mtu}"])')
    # Each worker group's ComputeClass: its capacity options, numbered in the order GKE tries them.
    for gi, g in enumerate(spec.groups):
        order = "<br/>".join(f"{n}. {capacity_label(c)}" for n, c in enumerate(g.capacity, start=1))
        lines.append(f'  cc{gi}{{{{"ComputeClass {g.compute_class}<br/>{order}"}}}}')
    group_index = {g.name: i for i, g in enumerate(spec.groups)}
    if sum(s.shape.hosts for s in spec.slices) > HOST_BOXES:
        boxes: dict[tuple, list] = {}
        for s in spec.slices:
            boxes.setdefault((s.group, s.shape.pod_type, s.shape.topology, s.shape.machine_type.name), []).append(s)
        for bi, ((group, pod_type, topology, machine), slices) in enumerate(boxes.items()):
            sh = slices[0].shape
            lines.append(f'  g{bi}["group {group}: {len(slices)} x {pod_type} {topology}<br/>'
                         f'slices {_names([s.name for s in slices])}<br/>each {sh.hosts} hosts x {machine}, '
                         f'{sh.chips_per_host} chips per host<br/>{len(slices) * sh.chips} chips"]')
            lines += [f"  g{bi} --- net{i}" for i in range(len(spec.networks))]
            lines.append(f"  cc{group_index[group]} -. fallback order .-> g{bi}")
        return "\n".join(lines)
    for si, s in enumerate(spec.slices):
        pools = ", ".join(p for _, p in s.pools) or "auto-created"
        lines.append(f'  subgraph s{si}["{s.name}: {s.shape.pod_type} {s.shape.topology}<br/>pools {pools}"]')
        for h in range(s.shape.hosts):
            lines.append(
                f'    s{si}h{h}["host {h}<br/>{s.shape.machine_type.name}<br/>{s.shape.chips_per_host} chips"]'
            )
        lines.append("  end")
        for i in range(len(spec.networks)):
            lines.append(f"  s{si} --- net{i}")
        lines.append(f"  cc{group_index[s.group]} -. fallback order .-> s{si}")
    return "\n".join(lines)


def regions_mermaid(spec: StackSpec) -> str:
    """The manager, its queues and each region in dispatch order: cluster, zone, worker groups and their queue."""
    m = spec.manager
    lines = ["flowchart LR",
             f'  mgr[["manager {m.name}<br/>{m.region}{" Autopilot" if m.autopilot else ""}<br/>'
             f'Kueue MultiKueue, LocalQueue {names.local_queue(spec.ray.cluster_name)}"]]']
    for n, d in enumerate(spec.dispatch_order(), start=1):
        v = d.view
        groups = "<br/>".join(f"{g.name}: {g.replicas} x {g.shape.pod_type}" for g in v.groups)
        lines.append(f'  r{d.index}["{n}. {v.region} / {v.zone}<br/>cluster {v.cluster.name}<br/>{groups}<br/>'
                     f'ClusterQueue {names.cluster_queue(v.ray.cluster_name)}"]')
        price = "unknown price" if d.usd_per_chip_hour is None else f"${d.usd_per_chip_hour:.2f}/chip-h"
        lines.append(f"  mgr -- \"{n}: {price}\" --> r{d.index}")
    lines.append(f'  ckpt[("bucket {spec.storage.bucket}<br/>{spec.storage.location} '
                 f'{" + ".join(spec.storage.data_locations)}")]')
    lines += [f"  r{d.index} -.- ckpt" for d in spec.dispatch_order()]
    return "\n".join(lines)


def markdown(rendering: engine.Rendering, violations: list | None = None, costs: dict | None = None) -> str:
    spec = rendering.spec
    plan_rows = [
        [("&nbsp;" * 4 * d) + ("" if r.custom else "**") + r.name + ("" if r.custom else "**"), f"`{r.type}`"]
        for d, r in _tree(rendering)
    ]
    first = []
    if rendering.warnings:
        first += ["> [!WARNING]\n> **Warnings** (" + str(len(rendering.warnings)) + "):\n"
                  + "\n".join(f"> - {_placed(rendering, w)}" for w in rendering.warnings)]
    if unchecked := tpu_quota.warnings(spec):
        first += ["> [!WARNING]\n> **TPU quota not declared**:\n" + "\n".join(f"> - {w}" for w in unchecked)]
    if violations is not None:
        first += [policies.markdown(violations)]
    if spec.multi_region:
        title = f"## `{spec.stack}` stack ({spec.environment}): {where(spec)}"
        regional = ["### Regions and dispatch order", "```mermaid\n" + regions_mermaid(spec) + "\n```",
                    "\n".join(f"{n}. **{d.view.region}** ({d.view.zone}, `{d.view.cluster.name}`): {d.reason}"
                              for n, d in enumerate(spec.dispatch_order(), start=1))]
        for v in _views_in_order(spec):
            regional += [f"### Region {v.region}: `{v.cluster.name}` in {v.zone}",
                         md_table(SLICE_HEADER, slice_rows(v)),
                         "```mermaid\n" + mermaid(v) + "\n```"]
    else:
        title = f"## `{spec.stack}` stack ({spec.environment}): {spec.cluster.name} in {spec.cluster.location}"
        regional = ["### Slices", md_table(SLICE_HEADER, slice_rows(spec)),
                    "### Topology", "```mermaid\n" + mermaid(spec) + "\n```"]
    parts = [
        title,
        *first,
        *regional,
        "### Cost",
        cost_markdown(costs if costs is not None else cost.compute(spec)),
        "### TPU quota (chips each quota type must allow, per region; docs/quota.md)",
        md_table(tpu_quota.HEADER, tpu_quota.rows(spec)),
        "### Runs and checkpoints",
        "```\n" + "\n".join(checkpoint_lines(spec)) + "\n```" if spec.jobs else "(no jobs)",
        "### Plan",
        md_table(["resource", "type"], plan_rows),
        "### Manifests",
        "\n".join(f"- `{d['kind']}` {d['metadata'].get('name')}" for d in rendering.manifests) or "(none)",
    ]
    if rendering.held:
        parts += ["### Held (suspended, not applied)",
                  "\n".join(f"- `{d['kind']}` {d['metadata']['name']}" for d in rendering.held)]
    return "\n\n".join(parts)
