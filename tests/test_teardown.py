"""docs/teardown.md against the rendered stacks: what ``pulumi destroy`` refuses (protect, GKE's deletion
protection), what it leaves (retainOnDelete, APIs enabled with disable_on_destroy off), and its order (reverse
dependencies: Pulumi deletes what names a resource before it).

Pulumi's resource options: protect, "it will be an error to do a Pulumi deployment which tries to delete a protected
resource" (https://www.pulumi.com/docs/iac/concepts/resources/options/protect/); retainOnDelete, "the resource will
not be deleted from the backing cloud provider, but will be removed from the Pulumi state"
(https://www.pulumi.com/docs/iac/concepts/resources/options/retainondelete/).
"""

from __future__ import annotations

import re

import pytest
from conftest import DOCS, ROOT, rendered

from offline import engine

PAGE = (DOCS / "teardown.md").read_text()
SANDBOX_DIR = ROOT / "tests" / "fixtures" / "sandbox"
# The page's names for the protected resources -> the provider's types.
KINDS = {"GKE cluster": "gcp:container/cluster:Cluster", "checkpoint bucket": "gcp:storage/bucket:Bucket",
         "image repository": "gcp:artifactregistry/repository:Repository"}


@pytest.fixture(scope="module")
def sandbox() -> engine.Rendering:
    return engine.render("sbx", stacks_dir=SANDBOX_DIR)


def _section(title: str) -> str:
    return PAGE.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _rows(section: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| ---")][1:]


def test_nothing_in_a_sandbox_is_protected_and_destroy_leaves_only_the_apis(sandbox):
    held = [r.name for r in sandbox.resources if r.protect or r.retain_on_delete]
    assert held == []
    (cluster,) = sandbox.by_type("gcp:container/cluster:Cluster")
    assert not cluster.inputs.get("deletionProtection")
    (bucket,) = sandbox.by_type("gcp:storage/bucket:Bucket")
    assert bucket.inputs["forceDestroy"] is True
    assert bucket.inputs["softDeletePolicy"]["retentionDurationSeconds"] == 604800  # the page's 7 days
    # What destroy leaves: the APIs it turned on (disable_on_destroy off); the page names each.
    left = {r.inputs["service"].removesuffix(".googleapis.com") for r in sandbox.by_type("gcp:projects/service:Service")
            if r.inputs.get("disableOnDestroy") is False}
    (row,) = [r for r in _rows(_section("A sandbox stack")) if r[0].startswith("the project's APIs")]
    assert set(re.findall(r"`([a-z]+)`", row[0])) == left
    assert not sandbox.by_type("gcp:kms/cryptoKey:CryptoKey")  # no key whose name a re-deploy could not reuse


def _ancestors(r: engine.Rendering, urn: str) -> set[str]:
    """Every URN ``urn`` waits for: its dependencies, its parent and its provider, transitively."""
    by = {x.urn: x for x in r.resources}
    seen, todo = set(), [urn]
    while todo:
        x = by.get(todo.pop())
        if x is None:
            continue
        for d in (*x.dependencies, x.parent, x.provider_urn):
            if d and d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def test_destroy_goes_kubernetes_objects_pools_cluster_then_what_it_named(sandbox):
    """Reverse dependencies: every Kubernetes object waits for the cluster (through its provider), every pool for
    the cluster, the cluster for the node account and its role: destroy removes them in the opposite order."""
    (cluster,) = sandbox.by_type("gcp:container/cluster:Cluster")
    for x in sandbox.resources:
        if x.custom and x.type.startswith("kubernetes:") and not x.type.startswith("pulumi:providers"):
            assert cluster.urn in _ancestors(sandbox, x.urn), x.name
    for pool in sandbox.by_type("gcp:container/nodePool:NodePool"):
        assert cluster.urn in _ancestors(sandbox, pool.urn), pool.name
    before = _ancestors(sandbox, cluster.urn)
    for t in ("gcp:serviceaccount/account:Account", "gcp:projects/iAMMember:IAMMember"):
        assert sandbox.by_type(t) and all(x.urn in before for x in sandbox.by_type(t)), t


@pytest.mark.parametrize("stack", ["prod", "multi"])
def test_a_prod_stacks_protected_resources_are_the_pages_table(stack):
    r = rendered(stack)
    table = {KINDS[row[0].split(" (")[0]]: row for row in _rows(_section("A CI stack (dev or prod)"))}
    held = [x for x in r.resources if x.protect or x.retain_on_delete or x.inputs.get("deletionProtection")]
    assert held and {x.type for x in held} <= set(table), {x.type for x in held}
    for x in held:
        row = table[x.type]
        assert (row[1] == "yes") == x.protect and (row[2] == "yes") == x.retain_on_delete, (x.name, row)
        assert ("deletion_protection: true" in row[3]) == bool(x.inputs.get("deletionProtection")), x.name
        assert ("forceDestroy: false" in row[3]) == (x.inputs.get("forceDestroy") is False), x.name


def test_a_dev_ci_stack_destroys_as_a_sandbox_does():
    r = rendered("dev")
    assert [x.name for x in r.resources if x.protect or x.retain_on_delete] == []


def test_the_bootstraps_state_and_keys_are_protected_and_retained():
    from slicectl import bootstrap_preview as bp

    boot = bp.render(bp.flat_config(bp.EXAMPLE))
    kept = [x for x in boot.resources if x.type in ("gcp:kms/keyRing:KeyRing", "gcp:kms/cryptoKey:CryptoKey",
                                                    "gcp:storage/bucket:Bucket")]
    assert kept and all(x.protect and x.retain_on_delete for x in kept), [x.name for x in kept
                                                                          if not (x.protect and x.retain_on_delete)]
