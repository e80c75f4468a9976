"""The bootstrap's configuration: its stack file (``Pulumi.<stack>.yaml`` in bootstrap/) and what it reads of
every stack file (``stacks/Pulumi.<stack>.yaml``), checked, every problem reported at once.

No Pulumi here: ``read_config`` takes anything with Pulumi's ``Config`` getters, so the access model
(``bootstrap.access``) and the escalation check read the same configuration without the SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bootstrap.environments import Environment
from stackspec import limits, names, spec
from stackspec.loader import STACKS_DIR
from workloads import multikueue as mk

NAMESPACE = "tpu-multislice-bootstrap"
# GitHub's names (docs.github.com: a login is 1-39 alphanumerics or single hyphens; a repository name 1-100 of
# letters, digits, '.', '_', '-').
REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
RESOURCE_ID = re.compile(r"^[A-Za-z0-9_-]{1,63}$")
NUMERIC = re.compile(r"^[0-9]{1,20}$")
GITHUB_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
TEAM_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")


class ConfigSource(Protocol):
    """What ``read_config`` needs of a ``pulumi.Config``."""

    def get(self, key: str) -> str | None: ...
    def get_object(self, key: str) -> Any: ...
    def get_bool(self, key: str) -> bool | None: ...


class ConfigError(Exception):
    """Every problem in the bootstrap's stack config, one per line."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Stack:
    """What the bootstrap needs of one ``stacks/Pulumi.<stack>.yaml``."""

    name: str
    project: str
    cluster: str
    region: str = ""  # where the cluster's Secrets key lives (GKE asks for the cluster's location)
    # The node account's project roles (infra.cluster.node_roles: with image streaming, Service Usage Consumer too).
    node_roles: tuple[str, ...] = ()
    ci_project: str | None = None  # the stack file's tpu-multislice:ciProject (its CI emails are built from it)
    # A multi-region stack's region clusters (name, region): each gets its node account and Secrets key too
    # (``cluster`` is then its manager).
    extra_clusters: tuple[tuple[str, str], ...] = ()
    deploy_on_push: bool = False  # tpu-multislice:deploy.onPush: deploy.yml applies it (its own deploy identity)
    cluster_drill: str | None = None  # tpu-multislice:deploy.clusterDrill: drills.yml drills it (ci-drill)
    image: bool = False  # a tpu-multislice:image section: image.yml pushes and signs its worker image
    # A multi-region stack's MultiKueue token job: its Google service account (names.multikueue_account_id of the
    # manager) and that account's (project, role) grants on the workers' projects (workloads/multikueue.iam_grants).
    multikueue_account: str | None = None
    multikueue_grants: tuple[tuple[str, str], ...] = ()

    @property
    def node_account_id(self) -> str:
        return names.node_service_account_id(self.cluster)


@dataclass(frozen=True)
class BootstrapConfig:
    ci_project: str
    repository: str
    repository_id: str
    repository_owner_id: str
    stacks: tuple[Stack, ...]
    reviewer_teams: tuple[str, ...] = ()
    reviewer_users: tuple[str, ...] = ()
    # A stack's own reviewers for its deploy-<stack> and drill-<stack> environments (a team approves its own
    # deploys); the stacks not named here get reviewerTeams / reviewerUsers.
    stack_reviewers: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    state_bucket: str = ""
    bootstrap_state_bucket: str = ""
    state_location: str = ""
    kms_location: str = names.STACK_KEYS_LOCATION
    key_ring: str = names.STACK_KEY_RING
    bootstrap_key_ring: str = "bootstrap"
    adopt_kms: bool = False

    @property
    def owner(self) -> str:
        return self.repository.split("/")[0]

    @property
    def repository_name(self) -> str:
        return self.repository.split("/")[1]

    def stack(self, name: str) -> Stack:
        return next(s for s in self.stacks if s.name == name)

    def reviewers(self, env: Environment) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(teams, users) who approve a run in ``env``."""
        return self.stack_reviewers.get(env.stack or "", (self.reviewer_teams, self.reviewer_users))

    def key_ring_id(self, ring: str) -> str:
        return f"projects/{self.ci_project}/locations/{self.kms_location}/keyRings/{ring}"

    @property
    def bootstrap_key_id(self) -> str:
        return f"{self.key_ring_id(self.bootstrap_key_ring)}/cryptoKeys/state"

    def stack_key_id(self, stack: str) -> str:
        return names.stack_key_id(self.ci_project, stack, self.kms_location, self.key_ring)

    def secrets_provider(self, stack: str) -> str:
        """What ``stacks/Pulumi.<stack>.yaml`` carries as ``secretsprovider``: its own key."""
        return names.stack_secrets_provider(self.ci_project, stack, self.kms_location, self.key_ring)


def read_stacks(stacks_dir: Path | None = None) -> tuple[list[Stack], list[str]]:
    """Every stack file's project and cluster (the facts the stacks own, read, never retyped). A sandbox stack
    (``tpu-multislice:sandbox: true``, docs/sandbox.md) is skipped: it is deployed by hand into its owner's project,
    which the bootstrap neither enables APIs in nor gives CI identities, keys or environments for."""
    # infra.cluster declares Pulumi resources (it imports the SDK): imported here, so reading the access model
    # and its config stays free of Pulumi (tests/test_escalation.py imports them in a bare interpreter).
    from infra.cluster import node_roles

    stacks_dir = stacks_dir or STACKS_DIR
    stacks, problems = [], []
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        try:
            s = spec.load_stack(name, stacks_dir)
        except spec.SpecError as err:
            problems.append(f"stacks/{path.name}: not a valid stack spec (`slicectl preview --stack {name}` "
                            f"lists why): {str(err).splitlines()[0]}")
            continue
        if s.sandbox:
            continue
        streaming = s.image is not None and s.image.streaming
        common = {"name": name, "project": s.project, "node_roles": node_roles(streaming), "ci_project": s.ci_project,
                  "deploy_on_push": s.deploy.on_push, "cluster_drill": s.deploy.cluster_drill,
                  "image": s.image is not None}
        cluster, region = s.home  # a multi-region stack's manager
        extra = tuple((v.cluster.name, v.region) for v in s.region_views()) if s.multi_region else ()
        if s.multi_region:
            manager = mk.manager_of(s)
            grants = mk.iam_grants(manager, s.region_views())
            common |= {"multikueue_account": manager.google_service_account_id,
                       "multikueue_grants": tuple((g.project, g.role) for g in grants)}
        stacks.append(Stack(cluster=cluster, region=region, extra_clusters=extra, **common))
    if not stacks and not problems:
        problems.append(f"{stacks_dir}: no Pulumi.<stack>.yaml but sandbox stacks (the bootstrap serves CI stacks)")
    return stacks, problems


def _names(cfg: ConfigSource, key: str, pattern: re.Pattern, what: str, problems: list[str]) -> tuple[str, ...]:
    try:
        value = cfg.get_object(key) or []
    except Exception:  # noqa: BLE001 (pulumi raises a bare ConfigTypeError on bad JSON)
        value = None
    if not isinstance(value, list):
        problems.append(f"{NAMESPACE}:{key}: a list of {what}")
        return ()
    for v in value:
        if not isinstance(v, str) or not pattern.match(v):
            problems.append(f"{NAMESPACE}:{key}: {v!r} is not {what}")
    return tuple(v for v in value if isinstance(v, str))


def _stack_reviewers(cfg: ConfigSource, stacks: list[Stack], problems: list[str]) -> dict:
    try:
        value = cfg.get_object("stackReviewers") or {}
    except Exception:  # noqa: BLE001 (pulumi raises a bare ConfigTypeError on bad JSON)
        value = None
    key = f"{NAMESPACE}:stackReviewers"
    if not isinstance(value, dict):
        problems.append(f"{key}: a map of stack name to {{teams: [...], users: [...]}}")
        return {}
    out, known = {}, {s.name for s in stacks}
    for stack, entry in value.items():
        if stacks and stack not in known:
            problems.append(f"{key}.{stack}: no stacks/Pulumi.{stack}.yaml; stacks: {', '.join(sorted(known))}")
        if not isinstance(entry, dict) or set(entry) - {"teams", "users"}:
            problems.append(f"{key}.{stack}: {{teams: [team slugs], users: [GitHub logins]}}")
            continue
        teams, users = entry.get("teams") or [], entry.get("users") or []
        for v, pattern, what in [*((t, TEAM_SLUG, "a GitHub team slug") for t in teams),
                                 *((u, GITHUB_LOGIN, "a GitHub login") for u in users)]:
            if not isinstance(v, str) or not pattern.match(v):
                problems.append(f"{key}.{stack}: {v!r} is not {what}")
        if not teams and not users or len(teams) + len(users) > 6:
            problems.append(f"{key}.{stack}: one to six reviewers (GitHub's limit per environment)")
        out[stack] = (tuple(t for t in teams if isinstance(t, str)), tuple(u for u in users if isinstance(u, str)))
    return out


def read_config(cfg: ConfigSource, gcp_cfg: ConfigSource, stacks_dir: Path | None = None) -> BootstrapConfig:
    """The bootstrap's config, checked; every problem reported at once."""
    problems: list[str] = []
    ci_project = cfg.get("ciProject") or ""
    if not limits.PROJECT_ID.fullmatch(ci_project):
        problems.append(f"{NAMESPACE}:ciProject = {ci_project!r}: required, the GCP project ID (6-30 lowercase "
                        "letters, digits, hyphens) of the CI identities, their pool, the state and the keys")
    repository = cfg.get("repository") or ""
    if not REPOSITORY.match(repository):
        problems.append(f"{NAMESPACE}:repository = {repository!r}: the GitHub repository as owner/name")
    ids = {}
    for key in ("repositoryId", "repositoryOwnerId"):
        value = cfg.get(key)
        if value is None or not NUMERIC.match(value):
            problems.append(f"{NAMESPACE}:{key} = {value!r}: required, GitHub's numeric id as a string of digits "
                            "(a deleted and re-created repository of the same name gets nothing)")
        ids[key] = value or ""
    teams = _names(cfg, "reviewerTeams", TEAM_SLUG, "a GitHub team slug", problems)
    users = _names(cfg, "reviewerUsers", GITHUB_LOGIN, "a GitHub login", problems)
    if not teams and not users:
        problems.append(f"{NAMESPACE}:reviewerTeams / reviewerUsers: at least one reviewer for the environments "
                        "(pr-preview, deploy-<stack>, drill-<stack>)")
    elif len(teams) + len(users) > 6:
        problems.append(f"{NAMESPACE}:reviewerTeams + reviewerUsers: at most 6 (GitHub's limit per environment)")
    stacks, stack_problems = read_stacks(stacks_dir)
    problems += stack_problems
    for s in stacks:
        if s.ci_project is not None and s.ci_project != ci_project:
            problems.append(f"stacks/Pulumi.{s.name}.yaml: tpu-multislice:ciProject = {s.ci_project!r}, but the "
                            f"bootstrap's ciProject is {ci_project!r}: the stack's image pusher and drill user "
                            "would name accounts that do not exist")
        for account in (names.preview_account_id(s.name), names.drill_account_id(s.name),
                        names.image_account_id(s.name)):
            if why := limits.SERVICE_ACCOUNT_ID.check(account):
                problems.append(f"stacks/Pulumi.{s.name}.yaml: the stack's CI account {account!r}: {why}")
        if s.project == ci_project:
            problems.append(f"{NAMESPACE}:ciProject = {ci_project!r}: the {s.name} stack deploys into it "
                            f"(stacks/Pulumi.{s.name}.yaml gcp:project); the CI project holds no stack")
    stack_reviewers = _stack_reviewers(cfg, stacks, problems)
    state_bucket = cfg.get("stateBucket") or f"{ci_project}-pulumi-state"
    boot_bucket = cfg.get("bootstrapStateBucket") or f"{ci_project}-bootstrap-state"
    for key, bucket in (("stateBucket", state_bucket), ("bootstrapStateBucket", boot_bucket)):
        if why := limits.bucket_name(bucket):
            problems.append(f"{NAMESPACE}:{key} = {bucket!r}: {why}")
    if state_bucket == boot_bucket:
        problems.append(f"{NAMESPACE}:stateBucket = bootstrapStateBucket = {state_bucket!r}: the stacks' state "
                        "and the bootstrap's are separate buckets")
    state_location = cfg.get("stateLocation") or gcp_cfg.get("region") or ""
    if not state_location:
        problems.append(f"{NAMESPACE}:stateLocation: set it (or gcp:region) to the state buckets' location")
    defaults = (("kmsLocation", names.STACK_KEYS_LOCATION), ("keyRing", names.STACK_KEY_RING),
                ("bootstrapKeyRing", "bootstrap"))
    rings = {k: cfg.get(k) or d for k, d in defaults}
    for key, value in rings.items():
        if not RESOURCE_ID.match(value):
            problems.append(f"{NAMESPACE}:{key} = {value!r}: letters, digits, '-' and '_' only (at most 63)")
    if rings["keyRing"] == rings["bootstrapKeyRing"]:
        problems.append(f"{NAMESPACE}:keyRing = bootstrapKeyRing = {rings['keyRing']!r}: separate key rings")
    try:
        adopt = bool(cfg.get_bool("adoptKms"))
    except Exception:  # noqa: BLE001
        adopt = False
        problems.append(f"{NAMESPACE}:adoptKms: true or false")
    if problems:
        raise ConfigError(problems)
    return BootstrapConfig(
        ci_project=ci_project,
        repository=repository,
        repository_id=ids["repositoryId"],
        repository_owner_id=ids["repositoryOwnerId"],
        stacks=tuple(stacks),
        reviewer_teams=teams,
        reviewer_users=users,
        stack_reviewers=stack_reviewers,
        state_bucket=state_bucket,
        bootstrap_state_bucket=boot_bucket,
        state_location=state_location,
        kms_location=rings["kmsLocation"],
        key_ring=rings["keyRing"],
        bootstrap_key_ring=rings["bootstrapKeyRing"],
        adopt_kms=adopt,
    )

