"""Each identity's effective reach, COMPUTED from a rendering, and every path to more refused.

Input: what the programs declare (the bootstrap's and each stack's registrations, as ``(type, inputs)``), the
stacks' Kubernetes manifests, the predefined IAM roles' permission lists (``bootstrap/data/iam_roles.json``,
vendored from iann0036/iam-dataset with its commit and each file's sha256) and the Kubernetes roles a manifest may
bind without defining (``bootstrap/data/kubernetes_roles.json``). Nothing here reads the access model's tables: the
check sees what a ``pulumi up`` would send GCP, GitHub and the clusters.

Computed per identity (a service account, a federated principal, a Kubernetes subject; CI or not):
- its own permissions, as (permission, resource) pairs: every IAM binding's role (IAMMember, IAMBinding and
  IAMPolicy's policy data alike; predefined roles from the vendored list, custom ones from the rendered
  ``IAMCustomRole``) on the binding's resource (``gcp``);
- its Kubernetes verbs, per namespace or cluster-wide, from the rendered RBAC and from GKE IAM's ``container.*``
  permissions, which authorize in every cluster of the project (``kubernetes``);
- the identities it can become: actAs, token creation, keys or setIamPolicy on an account (on a project: every
  account in it); pods or tokens in a namespace (its Kubernetes service accounts, and so their workload identity
  principals); and, transitively, whatever those can become (``check.closure``).

Conditions are parsed as CEL and evaluated (``conditions``): a conditional state-bucket grant counts on exactly the
representative objects (every stack's state, history, backups, locks: ``stacks.state_objects``) it admits. Services
that run code as an account (``gcp.RUNS_CODE``: Cloud Build, Deployment Manager, Functions, Run, Compute and SSH
metadata, Dataproc, Composer, HMAC keys ...) are edges to the project's accounts; a Secret read is an edge to the
identities whose tokens it holds, a ConfigMap write to the pods that mount it. The published catalogues (Rhino
Security Labs' GCP methods, Kubernetes' RBAC good practices) are the tests' oracle
(tests/test_escalation_catalogues.py).

Refused (``check`` returns one finding each; a finding marked ``accepted`` is a path the design keeps, with its
reason, for one identity pattern behind a reviewed environment):
- any access grant the parser cannot read, any Kubernetes role binding to a role nothing defines (fail closed);
- project IAM, role, key, pool, attestor or note administration by any identity (``gcp.FORBIDDEN``); Binary
  Authorization policy writes by anyone but a reviewed deployer;
- ``setIamPolicy`` on anything but what a deploy identity's stack owns (``check.ALLOWED_SET_IAM``);
- becoming an account the rendering does not create, or any identity whose closed reach has a project or a
  sensitive permission the holder does not have;
- a federated GitHub principal holding anything but workload identity use of one CI account; a principal that
  is not one workflow file on main (or one pull request workflow) in one declared environment; writes behind an
  environment without a reviewer; an attribute condition that is not a plain conjunction holding the
  repository's immutable ids and ``workflow_ref == job_workflow_ref`` (``pool``);
- Kubernetes authority: ``escalate``/``bind``/``impersonate``/``*``, writes on ``*``, pod-making kinds outside the
  subject's own namespace, Secrets reads or token minting beyond named objects, ``nodes/proxy``, admission writes.
"""

from .check import ACCEPTED, ALLOWED_SET_IAM, Finding, check, closure, compute
from .gcp import (
                  ACT_AS,
                  BECOME,
                  CI_ACCOUNT,
                  FORBIDDEN,
                  ROLES_FILE,
                  SIGN,
                  Binding,
                  Reach,
                  Reaches,
                  bindings,
                  gke_principal,
                  is_read,
                  load_roles,
)
from .kubernetes import K8S_ROLES_FILE, WORKLOADS, cluster_id, load_builtin_roles, qualify
from .pool import Environments, condition_problems, minted_by
from .stacks import cross_stack, foreign_policy_members, stack_scopes, state_objects
from .tables import threat_tables

__all__ = ["ACCEPTED", "ACT_AS", "ALLOWED_SET_IAM", "BECOME", "Binding", "CI_ACCOUNT", "Environments", "FORBIDDEN",
           "cluster_id", "qualify",
           "Finding", "K8S_ROLES_FILE", "ROLES_FILE", "Reach", "Reaches", "SIGN", "WORKLOADS", "bindings", "check",
           "closure", "compute", "condition_problems", "cross_stack", "foreign_policy_members", "gke_principal",
           "is_read", "load_builtin_roles", "load_roles", "minted_by", "stack_scopes", "state_objects",
           "threat_tables"]
