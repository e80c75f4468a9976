"""Read the replace-on (``ForceNew``) and cloud-owned (``Computed``) attributes of every GCP resource type the
program renders from terraform-provider-google's Go source, at one commit, into ``offline/data/provider_schema.json``
(read by ``offline/lifecycle.py``).

Run: ``uv run python offline/tools/gen_forcenew.py --git-dir <terraform-provider-google clone>/.git [--commit REF]
[--vendor-to vendor/terraform-provider-google]``, or ``--source-dir vendor/terraform-provider-google``
in place of ``--git-dir``: the files read, vendored at the commit (``--vendor-to`` writes them, unmodified, with the
provider's MPL-2.0 LICENSE and a ``VENDORED.md`` naming the repository, commit and each file's sha256), so the
output is regenerated without a clone or the network. Both are read by the same parser.

pulumi-gcp bridges the Terraform provider: a Pulumi update replaces a resource where the provider's diff says
``RequiresNew``, which comes from the schema's ``ForceNew`` (terraform-plugin-sdk v2 ``helper/schema/schema.go``:
a primitive, a map, or a list or set of primitives replaces on any change of its value, the element schema taking
the list's ``ForceNew``; a list or set of blocks only when the number of blocks changes, its fields by their own
``ForceNew``). Pulumi's package schema does not carry ``ForceNew``, hence the Go source.

The source is read, not run: a small reader of Go composite literals (``map[string]*schema.Schema{...}``,
``&schema.Schema{...}``, ``&schema.Resource{Schema: ...}``), following a field given by a function
(``"node_config": schemaNodeConfig()``), a package variable (alone or in a ``var ( ... )`` group), or
``tpgresource.MergeSchemas(...)``, in the same package or another of the provider's. What it cannot follow (a field
or an ``Elem``) is listed under ``unresolved`` in the output, never dropped silently. ForceNew decided in
``CustomizeDiff`` functions (``customdiff.ForceNewIfChange``, ``d.ForceNew(...)``) is listed under ``conditional``
with its line: it depends on values, so the lifecycle simulation does not apply it.

Pulumi names a Terraform attribute in camelCase (``node_config.max_run_duration`` -> ``nodeConfig.maxRunDuration``)
and flattens a ``MaxItems: 1`` block into an object; a path here runs through lists without index.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "offline" / "data" / "provider_schema.json"
# The files read, vendored (``--vendor-to``), and what names their source there.
VENDORED = ROOT / "vendor" / "terraform-provider-google"
MANIFEST = "VENDORED.md"
REPOSITORY = "https://github.com/hashicorp/terraform-provider-google"

# Pulumi type token -> (Terraform resource, [(file, symbol)]): the symbol is the ``func ...() *schema.Resource``
# whose ``Schema`` is read, or a ``var ... = map[string]*schema.Schema`` merged in (IAM members: the parent's
# schema and the IAM member base, as ``tpgiamresource.ResourceIamMember`` merges them).
IAM_MEMBER = ("google/tpgiamresource/resource_iam_member.go", "IamMemberBaseSchema")
# Authoritative IAM policies: the parent's schema and the policy base (``tpgiamresource.ResourceIamPolicy``).
IAM_POLICY = ("google/tpgiamresource/resource_iam_policy.go", "IamPolicyBaseSchema")
RESOURCES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "gcp:artifactregistry/repository:Repository": ("google_artifact_registry_repository", [
        ("google/services/artifactregistry/resource_artifact_registry_repository.go",
         "ResourceArtifactRegistryRepository")]),
    "gcp:artifactregistry/repositoryIamPolicy:RepositoryIamPolicy": ("google_artifact_registry_repository_iam_policy", [
        ("google/services/artifactregistry/iam_artifact_registry_repository.go", "ArtifactRegistryRepositoryIamSchema"),
        IAM_POLICY]),
    "gcp:binaryauthorization/policy:Policy": ("google_binary_authorization_policy", [
        ("google/services/binaryauthorization/resource_binary_authorization_policy.go",
         "ResourceBinaryAuthorizationPolicy")]),
    "gcp:compute/firewall:Firewall": ("google_compute_firewall", [
        ("google/services/compute/resource_compute_firewall.go", "ResourceComputeFirewall")]),
    "gcp:compute/network:Network": ("google_compute_network", [
        ("google/services/compute/resource_compute_network.go", "ResourceComputeNetwork")]),
    "gcp:compute/router:Router": ("google_compute_router", [
        ("google/services/compute/resource_compute_router.go", "ResourceComputeRouter")]),
    "gcp:compute/routerNat:RouterNat": ("google_compute_router_nat", [
        ("google/services/compute/resource_compute_router_nat.go", "ResourceComputeRouterNat")]),
    "gcp:compute/subnetwork:Subnetwork": ("google_compute_subnetwork", [
        ("google/services/compute/resource_compute_subnetwork.go", "ResourceComputeSubnetwork")]),
    "gcp:container/cluster:Cluster": ("google_container_cluster", [
        ("google/services/container/resource_container_cluster.go", "ResourceContainerCluster")]),
    "gcp:container/nodePool:NodePool": ("google_container_node_pool", [
        ("google/services/container/resource_container_node_pool.go", "ResourceContainerNodePool")]),
    "gcp:logging/metric:Metric": ("google_logging_metric", [
        ("google/services/logging/resource_logging_metric.go", "ResourceLoggingMetric")]),
    "gcp:monitoring/alertPolicy:AlertPolicy": ("google_monitoring_alert_policy", [
        ("google/services/monitoring/resource_monitoring_alert_policy.go", "ResourceMonitoringAlertPolicy")]),
    "gcp:monitoring/dashboard:Dashboard": ("google_monitoring_dashboard", [
        ("google/services/monitoring/resource_monitoring_dashboard.go", "ResourceMonitoringDashboard")]),
    "gcp:monitoring/notificationChannel:NotificationChannel": ("google_monitoring_notification_channel", [
        ("google/services/monitoring/resource_monitoring_notification_channel.go",
         "ResourceMonitoringNotificationChannel")]),
    "gcp:projects/service:Service": ("google_project_service", [
        ("google/services/resourcemanager/resource_google_project_service.go", "ResourceGoogleProjectService")]),
    "gcp:pubsub/topic:Topic": ("google_pubsub_topic", [
        ("google/services/pubsub/resource_pubsub_topic.go", "ResourcePubsubTopic")]),
    "gcp:serviceaccount/iAMMember:IAMMember": ("google_service_account_iam_member", [
        ("google/services/resourcemanager/iam_service_account.go", "IamServiceAccountSchema"), IAM_MEMBER]),
    "gcp:storage/bucket:Bucket": ("google_storage_bucket", [
        ("google/services/storage/resource_storage_bucket.go", "ResourceStorageBucket")]),
    "gcp:storage/bucketIAMPolicy:BucketIAMPolicy": ("google_storage_bucket_iam_policy", [
        ("google/services/storage/iam_storage_bucket.go", "StorageBucketIamSchema"), IAM_POLICY]),
}

# --------------------------------------------------------------------------- reading Go literals

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>`[^`]*`)
  | (?P<str>"(?:\\.|[^"\\\n])*")
  | (?P<rune>'(?:\\.|[^'\\\n])+')
  | (?P<open>[{(\[])
  | (?P<close>[})\]])
  | (?P<comma>,)
  | (?P<assign>:=)
  | (?P<colon>:)
  | (?P<word>[A-Za-z0-9_.&*]+)
  | (?P<other>.)
""", re.S | re.X)


@dataclass
class Tok:
    kind: str
    text: str
    line: int
    file: str = ""


@dataclass
class Group:
    """A bracketed group: its opening bracket and its comma-separated elements (each a list of parts)."""

    open: str
    elements: list[list[Any]]
    line: int


def tokenize(source: str, file: str = "") -> list[Tok]:
    out, line = [], 1
    for m in _TOKEN.finditer(source):
        kind, text = m.lastgroup, m.group()
        if kind not in ("ws", "comment"):
            out.append(Tok(kind, text, line, file))
        line += text.count("\n")
    return out


def parse(tokens: list[Tok]) -> list[Any]:
    """The file as parts: tokens, with every bracketed group nested (:class:`Group`)."""
    stack: list[tuple[Group, list[Any]]] = []
    top: list[Any] = []
    current = top
    for t in tokens:
        if t.kind == "open":
            group = Group(t.text, [], t.line)
            current.append(group)
            stack.append((group, current))
            current = []
        elif t.kind == "close":
            group, parent = stack.pop()
            if current:
                group.elements.append(current)
            current = parent
        elif t.kind == "comma" and stack:
            stack[-1][0].elements.append(current)
            current = []
        else:
            current.append(t)
    return top


def _word(part: Any, text: str | None = None) -> bool:
    return isinstance(part, Tok) and part.kind == "word" and (text is None or part.text == text)


def _split_key(element: list[Any]) -> tuple[list[Any], list[Any]] | None:
    for i, part in enumerate(element):
        if isinstance(part, Tok) and part.kind == "colon":
            return element[:i], element[i + 1:]
    return None


def entries(group: Group) -> list[tuple[list[Any], list[Any]]]:
    """A composite literal's ``key: value`` entries."""
    return [kv for kv in (_split_key(e) for e in group.elements) if kv is not None]


class Package:
    """A Go package of the provider: its top-level ``func`` and ``var`` definitions, parsed."""

    def __init__(self, files: dict[str, str]):
        self.funcs: dict[str, tuple[str, Group]] = {}
        self.vars: dict[str, tuple[str, list[Any]]] = {}
        for path, source in files.items():
            parts = parse(tokenize(source, path))
            for i, part in enumerate(parts):
                if _word(part, "func") and i + 2 < len(parts) and _word(parts[i + 1]) \
                        and isinstance(parts[i + 2], Group):
                    body = next((p for p in parts[i + 3:i + 12] if isinstance(p, Group) and p.open == "{"), None)
                    if body is not None:
                        self.funcs[parts[i + 1].text] = (path, body)
                elif _word(part, "var") and i + 2 < len(parts) and _word(parts[i + 1]) \
                        and isinstance(parts[i + 2], Tok) and parts[i + 2].text == "=":
                    self.vars[parts[i + 1].text] = (path, _var_expr(parts[i + 3:]))
                elif _word(part, "var") and i + 1 < len(parts) and isinstance(parts[i + 1], Group) \
                        and parts[i + 1].open == "(":
                    # A ``var ( NAME = expr ... )`` group (resource_container_cluster.go's
                    # masterAuthorizedNetworksConfig): each ``NAME =`` at its top level starts a definition.
                    for element in parts[i + 1].elements:
                        for k, p in enumerate(element[:-1]):
                            nxt = element[k + 1]
                            if _word(p) and isinstance(nxt, Tok) and nxt.text == "=":
                                self.vars[p.text] = (path, _var_expr(element[k + 2:]))


def _var_expr(parts: list[Any]) -> list[Any]:
    """A ``var``'s expression: up to its composite literal (``{...}``) or its call's arguments."""
    expr = []
    for p in parts:
        expr.append(p)
        if isinstance(p, Group) and p.open in "{(":
            break
    return expr


class GitSource:
    """The provider's files at one commit of a clone (its git directory)."""

    def __init__(self, git_dir: str, commit: str):
        self.git_dir = git_dir
        self.commit = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", f"{commit}^{{commit}}"], check=True,
                                     capture_output=True, text=True).stdout.strip()

    def read(self, path: str) -> bytes:
        return subprocess.run(["git", "--git-dir", self.git_dir, "show", f"{self.commit}:{path}"], check=True,
                              capture_output=True).stdout

    def listing(self, directory: str) -> list[str]:
        try:
            return subprocess.run(["git", "--git-dir", self.git_dir, "ls-tree", "--name-only",
                                   f"{self.commit}:{directory}"], check=True, capture_output=True,
                                  text=True).stdout.split()
        except subprocess.CalledProcessError as e:
            raise FileNotFoundError(directory) from e


class TreeSource:
    """The provider's files as vendored into a directory (``vendor/terraform-provider-google``): the same
    relative paths, and a ``VENDORED.md`` naming the commit they were copied from."""

    def __init__(self, root: Path):
        self.root = Path(root)
        manifest = (self.root / MANIFEST).read_text()
        source = re.search(r"^Source: (\S+)$", manifest, re.M)
        commit = re.search(r"^Commit: ([0-9a-f]{40})$", manifest, re.M)
        if source is None or source.group(1) != REPOSITORY or commit is None:
            sys.exit(f"{self.root / MANIFEST}: no 'Source: {REPOSITORY}' and 'Commit: <sha>' lines")
        self.commit = commit.group(1)

    def read(self, path: str) -> bytes:
        return (self.root / path).read_bytes()

    def listing(self, directory: str) -> list[str]:
        if not (self.root / directory).is_dir():
            raise FileNotFoundError(directory)
        return sorted(p.name for p in (self.root / directory).iterdir() if p.is_file())


@dataclass
class Reader:
    """Reads the provider's files from a source (a clone at one commit, or the vendored tree)."""

    source: GitSource | TreeSource
    sources: dict[str, str] = field(default_factory=dict)
    packages: dict[str, Package] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)
    # The files a followed definition (a function, a package variable) was found in.
    used: set[str] = field(default_factory=set)

    def show(self, path: str) -> str:
        if path not in self.sources:
            self.sources[path] = self.source.read(path).decode()
        return self.sources[path]

    def package(self, directory: str) -> Package:
        """A directory's Go files (its tests aside); :class:`FileNotFoundError` if there is no such directory."""
        if directory not in self.packages:
            names = [n for n in self.source.listing(directory) if n.endswith(".go") and not n.endswith("_test.go")]
            self.packages[directory] = Package({f"{directory}/{n}": self.show(f"{directory}/{n}") for n in names})
        return self.packages[directory]

    def package_named(self, name: str, here: str) -> tuple[str, Package] | None:
        for directory in (f"google/{name}", f"google/services/{name}"):
            try:
                return directory, self.package(directory)
            except FileNotFoundError:
                continue
        return None

    # -- resolving expressions to schema maps, schemas and resources

    def resolve(self, expr: list[Any], directory: str) -> tuple[str, Any, str]:
        """(kind, value, directory it was found in): kind ``map`` ({name: (expr, line, dir)}), ``schema``
        ({field: expr}), ``resource`` (a map), or ``unresolved``."""
        groups = [p for p in expr if isinstance(p, Group)]
        words = [p.text for p in expr if _word(p)]
        if groups and groups[-1].open == "{" and (len(groups) == 1 or groups[-2].open == "["
                                                   or groups[-2].open == "("):
            literal = groups[-1]
            head = " ".join(words)
            if "schema.Resource" in head:
                for key, value in entries(literal):
                    if _word(key[0], "Schema"):
                        kind, found, where = self.resolve(value, directory)
                        return ("resource", found, where) if kind == "map" else (kind, found, where)
                return "unresolved", f"schema.Resource without Schema at line {literal.line}", directory
            if head.startswith("map"):
                out = {}
                for key, value in entries(literal):
                    if isinstance(key[0], Tok) and key[0].kind == "str":
                        out[key[0].text.strip('"')] = (value, f"{key[0].file}:{key[0].line}", directory)
                return "map", out, directory
            return "schema", {k[0].text: v for k, v in entries(literal) if _word(k[0])}, directory
        if len(expr) >= 2 and _word(expr[0]) and isinstance(expr[1], Group) and expr[1].open == "(":
            name = expr[0].text
            if name.endswith("MergeSchemas"):
                merged: dict[str, Any] = {}
                for arg in expr[1].elements:
                    kind, value, _ = self.resolve(arg, directory)
                    if kind == "map":
                        merged.update(value)
                    else:
                        self.unresolved.append(f"{directory}: MergeSchemas argument {_text(arg)[:60]}")
                return "map", merged, directory
            return self._definition(name, directory, call=True)
        if len(expr) == 1 and _word(expr[0]):
            return self._definition(expr[0].text, directory, call=False)
        return "unresolved", _text(expr)[:80], directory

    def _definition(self, name: str, directory: str, call: bool) -> tuple[str, Any, str]:
        package_name, _, symbol = name.lstrip("&*").rpartition(".")
        where = directory
        if package_name:
            found = self.package_named(package_name, directory)
            if found is None:
                return "unresolved", name, directory
            where, package = found
        else:
            package = self.package(directory)
        if call and symbol in package.funcs:
            path, body = package.funcs[symbol]
            self.used.add(path)
            parts = [p for e in body.elements for p in e]
            for i, part in enumerate(parts):
                if _word(part, "return"):
                    expr = []
                    for p in parts[i + 1:]:
                        expr.append(p)
                        if isinstance(p, Group) and p.open == "{":
                            break
                    return self.resolve(expr, where)
            return "unresolved", f"{name}(): no return", where
        if not call and symbol in package.vars:
            path, expr = package.vars[symbol]
            self.used.add(path)
            return self.resolve(expr, where)
        return "unresolved", name, where


def _text(expr: list[Any]) -> str:
    out = []
    for p in expr:
        out.append(p.text if isinstance(p, Tok) else p.open + "...")
    return " ".join(out)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _true(fields: dict[str, Any], key: str) -> bool:
    value = fields.get(key)
    return bool(value) and _word(value[0], "true")


def walk(reader: Reader, schema_map: dict[str, Any], tf: str, pulumi: str, out: dict[str, list]) -> None:
    for name, (expr, line, directory) in sorted(schema_map.items()):
        kind, fields, where = reader.resolve(expr, directory)
        tf_path, pulumi_path = f"{tf}{name}", f"{pulumi}{camel(name)}"
        if kind != "schema":
            reader.unresolved.append(f"{tf_path} ({line}): {fields}")
            continue
        type_ = " ".join(p.text for p in fields.get("Type", []) if isinstance(p, Tok))
        elem_kind, elem, elem_dir = (reader.resolve(fields["Elem"], where) if "Elem" in fields
                                     else ("none", None, where))
        if elem_kind == "unresolved":  # its sub-fields cannot be read: listed, never dropped
            reader.unresolved.append(f"{tf_path}.Elem ({line}): {elem}")
        block = elem_kind in ("resource", "map")
        entry = {"path": pulumi_path, "terraform": tf_path, "line": line}
        if _true(fields, "ForceNew"):
            # A list or set of blocks: replaced when blocks are added or removed; anything else: on any change.
            many = type_.endswith(("TypeList", "TypeSet")) and block
            out["forceNew"].append({**entry, "on": "count" if many else "value"})
        if _true(fields, "Computed") and not _true(fields, "Required"):
            out["computed"].append(entry)
        if block and isinstance(elem, dict):
            walk(reader, elem, f"{tf_path}.", f"{pulumi_path}.", out)


_CONDITIONAL = re.compile(r'(ForceNewIfChange|ForceNewIf|\.ForceNew)\(\s*"([a-z0-9_.]+)"')


def conditional(reader: Reader, path: str) -> list[dict[str, str]]:
    source = reader.show(path)
    return [{"terraform": m.group(2), "how": m.group(1).lstrip("."),
             "line": f"{path}:{source.count(chr(10), 0, m.start()) + 1}"} for m in _CONDITIONAL.finditer(source)]


def generate(git_dir: str | None = None, commit: str = "HEAD", source_dir: Path | None = None) -> dict[str, Any]:
    """The schema tables, read from a clone (``git_dir`` at ``commit``) or from a vendored tree (``source_dir``,
    at the commit its ``VENDORED.md`` names): the same reading either way."""
    if (git_dir is None) == (source_dir is None):
        raise ValueError("give one of git_dir and source_dir")
    reader = Reader(GitSource(git_dir, commit) if git_dir is not None else TreeSource(source_dir))
    resources = {}
    for token, (tf_name, roots) in RESOURCES.items():
        out: dict[str, list] = {"forceNew": [], "computed": []}
        schema_map: dict[str, Any] = {}
        for path, symbol in roots:
            directory = path.rsplit("/", 1)[0]
            reader.show(path)
            package = reader.package(directory)
            kind, value, _ = reader._definition(symbol, directory, call=symbol in package.funcs)
            if kind not in ("resource", "map"):
                sys.exit(f"{token}: {path} {symbol} is not a schema ({kind}: {value})")
            schema_map.update(value)
        walk(reader, schema_map, "", "", out)
        resources[token] = {"terraform": tf_name, "files": [p for p, _ in roots],
                            "forceNew": out["forceNew"], "computed": out["computed"],
                            "conditional": [c for p, _ in roots for c in conditional(reader, p)]}
    body = {"resources": resources, "unresolved": sorted(set(reader.unresolved))}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    # The files the tables are read from: each resource's own, and those a followed definition was found in (the
    # rest of a package is parsed only to look definitions up). These are the files vendored.
    read = {p for _, roots in RESOURCES.values() for p, _ in roots} | reader.used
    return {
        "source": REPOSITORY, "commit": reader.source.commit,
        "generator": "offline/tools/gen_forcenew.py",
        "files": {p: hashlib.sha256(reader.show(p).encode()).hexdigest() for p in sorted(read)},
        "sha256": digest, **body,
    }


def vendor(git_dir: str, data: dict[str, Any], to: Path) -> None:
    """Copy the files ``data`` was read from, byte for byte, and the provider's LICENSE (MPL-2.0: a copy goes with
    the files) from the clone into ``to``, replacing what was vendored there, with a ``VENDORED.md`` naming the
    repository, the commit and each file's sha256."""
    source = GitSource(git_dir, data["commit"])
    if to.exists() and any(to.iterdir()) and not (to / MANIFEST).exists():
        sys.exit(f"{to}: not empty and no {MANIFEST}: not a vendored tree, left alone")
    if to.exists():
        for old in sorted(to.rglob("*"), reverse=True):
            old.rmdir() if old.is_dir() else old.unlink()
    sums = {}
    for path in ["LICENSE", *data["files"]]:
        content = source.read(path)
        if path in data["files"] and hashlib.sha256(content).hexdigest() != data["files"][path]:
            sys.exit(f"{path}: not the file read at {data['commit']}")
        (to / path).parent.mkdir(parents=True, exist_ok=True)
        (to / path).write_bytes(content)
        sums[path] = hashlib.sha256(content).hexdigest()
    listing = "\n".join(f"{digest}  {path}" for path, digest in sums.items())
    (to / MANIFEST).write_text(f"""# terraform-provider-google, vendored

The Go source files `offline/tools/gen_forcenew.py` reads to write `offline/data/provider_schema.json`, so that
`tests/test_provider_schema.py` regenerates that file from them without a clone or the network.

Source: {REPOSITORY}
Commit: {data["commit"]}
License: MPL-2.0

The files are unmodified copies from that commit, at their paths in that repository. They are covered by the
Mozilla Public License, v. 2.0: its text is in `LICENSE` (the repository's own, from the same commit), each file
keeps its notice, and the complete source of the provider is in the repository at the commit above. Only the files
the tables are read from are here: each resource's own, and those holding a function or variable the generator
follows from them (in the same package or another).

Written by `uv run python offline/tools/gen_forcenew.py --git-dir <clone>/.git --commit <sha> --vendor-to
vendor/terraform-provider-google`; read back with `--source-dir vendor/terraform-provider-google`.
Do not edit them: each file's sha256 below equals the one `provider_schema.json` records under `files`
(checked by the tests; `sha256sum -c` in this directory with the lines below also checks them).

```
{listing}
```
""")


def check_against_clone(git_dir: str, schema: Path = OUT) -> list[str]:
    """What differs between the recorded tables and vendored files and a clone at the recorded commit (the
    maintainers' check before re-vendoring; the tests regenerate from the vendored tree, which needs no clone)."""
    recorded = json.loads(schema.read_text())
    fresh = generate(git_dir, recorded["commit"])
    out = [f"{schema.name}: {key} differs from the clone's" for key in fresh if fresh[key] != recorded.get(key)]
    source = GitSource(git_dir, recorded["commit"])
    out += [f"{VENDORED.name}/{path}: not the clone's bytes" for path in ["LICENSE", *recorded["files"]]
            if not (VENDORED / path).is_file() or (VENDORED / path).read_bytes() != source.read(path)]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--git-dir", help="a clone of terraform-provider-google (its .git directory)")
    where.add_argument("--source-dir", type=Path,
                       help=f"a vendored tree of its files, with a {MANIFEST} naming the commit (e.g. {VENDORED})")
    p.add_argument("--commit", default="HEAD", help="with --git-dir: the commit or tag to read (default: HEAD)")
    p.add_argument("--vendor-to", type=Path, default=None,
                   help=f"with --git-dir: also copy the files read, and the LICENSE, into this tree (e.g. {VENDORED})")
    p.add_argument("--pulumi-gcp", default=None, help="the pulumi-gcp version this is read for (recorded)")
    p.add_argument("--note", default="", help="why this commit (recorded)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--check", action="store_true",
                   help=f"with --git-dir: write nothing; exit 1 unless {OUT.name} and the vendored files are what the "
                        "clone gives at the recorded commit")
    args = p.parse_args()
    if args.check:
        if args.git_dir is None:
            p.error("--check goes with --git-dir (the vendored tree is checked by the tests)")
        problems = check_against_clone(args.git_dir, args.out)
        print("\n".join(problems) or f"{args.out.name} and {VENDORED.name}/ are the clone's at its commit")
        sys.exit(1 if problems else 0)
    if args.source_dir is not None and (args.commit != "HEAD" or args.vendor_to is not None):
        p.error("--commit and --vendor-to go with --git-dir (a vendored tree is at the commit it names)")
    data = generate(args.git_dir, args.commit, source_dir=args.source_dir)
    if args.vendor_to is not None:
        vendor(args.git_dir, data, args.vendor_to)
    data = {"pulumiGcp": args.pulumi_gcp, "note": args.note, **data}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    counts = {t.split(":")[-1]: len(r["forceNew"]) for t, r in data["resources"].items()}
    print(f"wrote {args.out}: commit {data['commit'][:12]}, ForceNew per resource {counts}, "
          f"{len(data['unresolved'])} unresolved")


if __name__ == "__main__":
    main()
