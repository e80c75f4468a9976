"""The bootstrap program (bootstrap/__main__.py) rendered offline, and what it would create per stack.

The real program runs under Pulumi's mocks (the offline engine's adapter, ``offline.pulumi_runtime``) on a bootstrap
stack file (``bootstrap/Pulumi.<stack>.yaml``) and the stack files it serves: nothing is contacted. The mocks answer
only what GCP and GitHub would (shaped as the providers return them): a service account's email, a key ring's and a
key's ids, a KMS key version's id and public key (terraform-provider-google
google/services/kms/data_source_google_kms_crypto_key_version.go: ``//cloudkms.googleapis.com/v1/<key>/
cryptoKeyVersions/<n>``), a GitHub team's or user's id. The bootstrap tests render under these same mocks
(``tests/test_bootstrap.py``, with a real key's public half where they check signatures), and
tests/test_bootstrap_preview.py holds this rendering equal to theirs.

:func:`summary` groups the rendering by stack: the APIs it enables in the stack's project, the identities (the node
account, the CI accounts acting on the stack) with every role each is granted and where, the Cloud KMS keys, the
custom roles, the attestor and the GitHub environments.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOT = ROOT / "bootstrap"
EXAMPLE = BOOT / "Pulumi.example.yaml"
NAMESPACE = "tpu-multislice-bootstrap"
OFFLINE_NUMBER = "OFFLINE-PROJECT-NUMBER"
OFFLINE_PEM = "-----BEGIN PUBLIC KEY-----\nOFFLINE\n-----END PUBLIC KEY-----\n"
# terraform-provider-google google/services/kms/data_source_google_kms_crypto_key_version.go (at e03b7622), the
# data source's id: d.SetId(fmt.Sprintf("//cloudkms.googleapis.com/v1/%s/cryptoKeyVersions/%d", d.Get("crypto_key"),
# d.Get("version"))); crypto_key is the key's id as given: {{key_ring}}/cryptoKeys/{{name}}
# (resource_kms_crypto_key.go).
KMS_VERSION_ID = "//cloudkms.googleapis.com/v1/%s/cryptoKeyVersions/%d"


class Mocks(pulumi.runtime.Mocks):
    """GCP's and GitHub's answers to the bootstrap program; ``pem`` is the public key the KMS key version returns
    (a test checking signatures passes a real key's), ``project_number`` the number in the pool's resource names."""

    def __init__(self, pem: str = OFFLINE_PEM, project_number: str = OFFLINE_NUMBER):
        super().__init__()
        self.pem, self.project_number = pem, project_number

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state, i = dict(args.inputs), args.inputs
        rid = f"{args.name}-offline-id"
        pools = f"projects/{self.project_number}/locations/global/workloadIdentityPools"
        if args.typ == "gcp:serviceaccount/account:Account":
            state["email"] = f"{i['accountId']}@{i['project']}.iam.gserviceaccount.com"
            state["name"] = f"projects/{i['project']}/serviceAccounts/{state['email']}"
        elif args.typ == "gcp:iam/workloadIdentityPool:WorkloadIdentityPool":
            state["name"] = f"{pools}/{i['workloadIdentityPoolId']}"
        elif args.typ == "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider":
            state["name"] = f"{pools}/{i['workloadIdentityPoolId']}/providers/{i['workloadIdentityPoolProviderId']}"
        elif args.typ == "gcp:projects/iAMCustomRole:IAMCustomRole":
            state["name"] = f"projects/{i['project']}/roles/{i['roleId']}"
        elif args.typ == "gcp:kms/keyRing:KeyRing":
            rid = f"projects/{i['project']}/locations/{i['location']}/keyRings/{i['name']}"
        elif args.typ == "gcp:kms/cryptoKey:CryptoKey":
            rid = f"{i['keyRing']}/cryptoKeys/{i['name']}"
        elif args.typ in ("gcp:containeranalysis/note:Note", "gcp:binaryauthorization/attestor:Attestor"):
            state["name"] = i["name"]
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs):
        a = args.args
        # GitHub's ids of a team (by slug) and a user (by login): stand-ins derived from the name.
        if args.token == "github:index/getTeam:getTeam":
            return {"id": str(1000 + len(a["slug"])), "slug": a["slug"]}
        if args.token == "github:index/getUser:getUser":
            return {"id": str(2000 + len(a["username"])), "login": a["username"]}
        # A Cloud KMS key version and its public half (what the attestor is given), shaped as the data source
        # returns them: its id is KMS_VERSION_ID (the provider's format string), its name the version's resource name.
        if args.token == "gcp:kms/getKMSCryptoKeyVersion:getKMSCryptoKeyVersion":
            from bootstrap.access import IMAGE_SIGNING_ALGORITHM

            key, version = a["cryptoKey"], int(a["version"])
            return {"id": KMS_VERSION_ID % (key, version), "cryptoKey": key,
                    "version": version, "name": f"{key}/cryptoKeyVersions/{version}",
                    "algorithm": IMAGE_SIGNING_ALGORITHM, "state": "ENABLED", "protectionLevel": "SOFTWARE",
                    "publicKeys": [{"algorithm": IMAGE_SIGNING_ALGORITHM, "pem": self.pem}]}
        return {}


def flat_config(path: Path) -> dict[str, str]:
    """A bootstrap stack file as the flat config map Pulumi hands the program."""
    doc = yaml.safe_load(path.read_text()) or {}
    flat = {}
    for key, value in (doc.get("config") or {}).items():
        key = key if ":" in key else f"{NAMESPACE}:{key}"
        flat[key] = value if isinstance(value, str) else json.dumps(value)
    return flat


@dataclass
class Rendered:
    resources: list  # offline.pulumi_runtime.Registration, the Stack left out
    exports: dict
    config: Any  # bootstrap.config.BootstrapConfig


class _Source:
    """A flat config map with pulumi.Config's getters (bootstrap.config.ConfigSource), for one namespace."""

    def __init__(self, flat: dict[str, str], namespace: str):
        self.flat, self.ns = flat, namespace

    def get(self, key: str) -> str | None:
        return self.flat.get(f"{self.ns}:{key}")

    def get_object(self, key: str) -> Any:
        v = self.get(key)
        return None if v is None else json.loads(v)

    def get_bool(self, key: str) -> bool | None:
        v = self.get(key)
        if v is None:
            return None
        if v not in ("true", "false"):
            raise ValueError(v)
        return v == "true"


def render(config: dict[str, str], stacks_dir: Path | None = None) -> Rendered:
    """The bootstrap program on ``config`` serving ``stacks_dir`` (default: stacks/). Raises
    bootstrap.config.ConfigError with every problem of the config."""
    import bootstrap.config as bcfg
    from offline import pulumi_runtime

    saved = bcfg.STACKS_DIR
    if stacks_dir is not None:
        bcfg.STACKS_DIR = stacks_dir
    try:
        checked = bcfg.read_config(_Source(config, NAMESPACE), _Source(config, "gcp"))  # problems before any render
        recorded: list = []
        pulumi_runtime.start(Mocks(), pulumi_runtime.RecordingMonitor(Mocks(), recorded.append),
                             project="tpu-multislice-bootstrap", stack="preview", config=config)
        path, cwd = list(sys.path), os.getcwd()
        try:
            os.chdir(BOOT)
            exports = pulumi_runtime.run(lambda: runpy.run_path(str(BOOT / "__main__.py"), run_name="__main__"))
        finally:
            os.chdir(cwd)
            sys.path[:] = path
    finally:
        bcfg.STACKS_DIR = saved
    return Rendered([r for r in recorded if r.type != "pulumi:pulumi:Stack"], exports, checked)


def _email(i: dict) -> str:
    return f"{i['accountId']}@{i['project']}.iam.gserviceaccount.com"


def _grant(i: dict) -> str:
    """``role on <where>``, with its IAM condition's title when it has one."""
    cond = i.get("condition") or {}
    return f"{i['role']} on {_where(i)}" + (f" (if {cond['title']})" if cond.get("title") else "")


def _where(i: dict) -> str:
    """Where an IAM member resource grants its role."""
    for key, what in (("project", "project"), ("bucket", "bucket"), ("cryptoKeyId", "key"),
                      ("serviceAccountId", "account"), ("attestor", "attestor"), ("note", "note"),
                      ("repository", "repository")):
        if i.get(key):
            return f"{what} {str(i[key]).rsplit('/', 1)[-1]}"
    return "?"


def summary(r: Rendered) -> dict:
    """Per stack: APIs, identities with their roles, keys, custom roles, attestors, environments (module docstring)."""
    from bootstrap import access

    config = r.config
    by_urn = {x.urn: x for x in r.resources}
    children: dict[str, list] = {}
    for x in r.resources:
        if x.parent:
            children.setdefault(x.parent, []).append(x)

    def component(type_: str, name: str):
        return next((x for x in r.resources if x.type == type_ and x.name == name), None)

    def identity(comp) -> dict | None:
        kids = children.get(comp.urn, [])
        account = next((k for k in kids if k.type == "gcp:serviceaccount/account:Account"), None)
        if account is None:
            return None
        # Every grant it holds; its own workload identity binding (who may act as it) is not one.
        roles = [_grant(k.inputs) for k in kids
                 if "role" in k.inputs and "member" in k.type.lower()
                 and k.type != "gcp:serviceaccount/iAMMember:IAMMember"]
        return {"email": _email(account.inputs), "roles": sorted(roles)}

    out: dict[str, Any] = {}
    identities = access.identities(config)
    for s in config.stacks:
        entry: dict[str, Any] = {"project": s.project, "apis": [], "identities": [], "keys": [], "customRoles": [],
                                 "attestors": [], "environments": []}
        entry["apis"] = sorted(x.inputs["service"] for x in r.resources
                               if x.type == "gcp:projects/service:Service" and x.inputs["project"] == s.project)
        proj = component("tpu-multislice:bootstrap:StackProject", s.name)
        for k in children.get(proj.urn, []) if proj else []:
            if k.type == "gcp:serviceaccount/account:Account":
                roles = [_grant(m.inputs) for m in children.get(proj.urn, [])
                         if m.type == "gcp:projects/iAMMember:IAMMember"
                         and m.inputs.get("member") == f"serviceAccount:{_email(k.inputs)}"]
                entry["identities"].append({"email": _email(k.inputs), "what": k.inputs.get("displayName", ""),
                                            "roles": sorted(roles)})
            elif k.type == "gcp:kms/cryptoKey:CryptoKey":
                entry["keys"].append(f"{k.inputs['keyRing']}/cryptoKeys/{k.inputs['name']} ({k.inputs['purpose']})")
            elif k.type == "gcp:projects/iAMCustomRole:IAMCustomRole":
                entry["customRoles"].append(f"projects/{k.inputs['project']}/roles/{k.inputs['roleId']}")
            elif k.type == "gcp:binaryauthorization/attestor:Attestor":
                entry["attestors"].append(f"projects/{k.inputs['project']}/attestors/{k.inputs['name']}")
            elif k.type == "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember":
                entry["keys"].append(f"  GKE's service agent holds {k.inputs['role']} on "
                                     f"{str(k.inputs['cryptoKeyId']).rsplit('/', 1)[-1]}")
        state_key = next((x for x in r.resources if x.type == "gcp:kms/cryptoKey:CryptoKey"
                          and x.inputs.get("name") == s.name and by_urn.get(x.parent or "", None) is not None
                          and by_urn[x.parent].type == "tpu-multislice:bootstrap:StateBackend"), None)
        if state_key is not None:
            entry["keys"].append(f"{config.stack_key_id(s.name)} (the stack's Pulumi secrets, in the CI project)")
        for ident in identities:
            if ident.stack != s.name:
                continue
            comp = component("tpu-multislice:bootstrap:CiIdentity", ident.key)
            got = identity(comp) if comp else None
            if got:
                got["what"] = ident.description
                got["environments"] = list(ident.environments)
                entry["identities"].append(got)
            entry["environments"] += [e for e in ident.environments if e not in entry["environments"]]
        entry["environments"] += sorted(
            x.inputs["environment"] for x in r.resources
            if x.type == "github:index/repositoryEnvironment:RepositoryEnvironment"
            and x.inputs["environment"].endswith(f"-{s.name}") and x.inputs["environment"] not in entry["environments"])
        out[s.name] = entry
    return {"ciProject": config.ci_project, "resources": len(r.resources), "stacks": out}


# What a sandbox makes that a CI stack's bootstrap would (bootstrap/access.py MOVED_TO_BOOTSTRAP), and the predefined
# role that allows it (https://cloud.google.com/iam/docs/roles-permissions): create and delete the node account,
# grant it its project role (the project's IAM policy), and run node pools as it (GKE checks actAs on the account).
SANDBOX_OWN = {
    "gcp:serviceaccount/account:Account": "roles/iam.serviceAccountAdmin",
    "gcp:projects/iAMMember:IAMMember": "roles/resourcemanager.projectIamAdmin",
}
ACT_AS = "roles/iam.serviceAccountUser"  # on the node account; a sandbox's user grants it on the project


def sandbox_roles(resource_types: set[str]) -> list[dict]:
    """The roles your own identity needs in a sandbox's project to ``pulumi up`` and ``destroy`` it, each with the
    resource types it is for: a CI deploy identity's role per type (bootstrap/access.py MANAGED_BY), a custom role
    there replaced by the predefined role it narrows (a sandbox has no bootstrap to make custom roles), and the
    bootstrap's own steps (SANDBOX_OWN, ACT_AS). A type neither table knows raises: name its role first."""
    from bootstrap.access import CUSTOM, CUSTOM_ROLES, MANAGED_BY

    need: dict[str, list[str]] = {}
    for t in sorted(resource_types):
        if t in SANDBOX_OWN:
            role = SANDBOX_OWN[t]
        elif t in MANAGED_BY:
            role = MANAGED_BY[t]
            role = CUSTOM_ROLES[role.removeprefix(CUSTOM)].replaces if role.startswith(CUSTOM) else role
        else:
            raise KeyError(f"{t}: no role known to manage it (bootstrap/access.py MANAGED_BY)")
        need.setdefault(role, []).append(t)
    if "gcp:container/nodePool:NodePool" in resource_types or "gcp:container/cluster:Cluster" in resource_types:
        need.setdefault(ACT_AS, []).append("the node service account (actAs)")
    return [{"role": r, "for": need[r]} for r in sorted(need)]
