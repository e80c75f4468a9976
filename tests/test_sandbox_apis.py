"""A sandbox deploys into a fresh project, where the APIs it uses are off: every Google Cloud resource it declares
waits (through its dependencies, as Pulumi orders creates) for the ``gcp.projects.Service`` that turns on the API
its provider calls. A resource of a provider module this table does not know fails the test until its API is named.

Which API a pulumi-gcp module calls is the Terraform provider's (pulumi-gcp bridges it): each service package's
``BaseUrl`` (hashicorp/terraform-provider-google@e03b7622 google/services/<package>/product.go), and
``google_service_account``, though in package ``resourcemanager``, is served by the IAM API
(google/services/resourcemanager/resource_google_service_account.go: ``config.NewIamClient``; iambeta/product.go
``https://iam.googleapis.com/v1/``).
"""

from __future__ import annotations

import pytest
from conftest import ROOT

from offline import engine

API_OF = {
    "compute": "compute.googleapis.com",  # compute/product.go: https://compute.googleapis.com/compute/v1/
    "container": "container.googleapis.com",  # container/product.go: https://container.googleapis.com/v1/
    "storage": "storage.googleapis.com",  # storage/product.go: https://storage.googleapis.com/storage/v1/
    "projects": "cloudresourcemanager.googleapis.com",  # resourcemanager/product.go (project IAM members)
    "serviceaccount": "iam.googleapis.com",  # resource_google_service_account.go: NewIamClient
    "pubsub": "pubsub.googleapis.com",  # pubsub/product.go
    "binaryauthorization": "binaryauthorization.googleapis.com",  # binaryauthorization/product.go
    "logging": "logging.googleapis.com",  # logging/product.go: https://logging.googleapis.com/v2/
    "monitoring": "monitoring.googleapis.com",  # monitoring/product.go
}
SERVICE = "gcp:projects/service:Service"


@pytest.fixture(scope="module")
def sandbox() -> engine.Rendering:
    return engine.render("sbx", stacks_dir=ROOT / "tests" / "fixtures" / "sandbox")


def _waits_for(r: engine.Rendering, resource: engine.Resource) -> set[str]:
    """Every URN ``resource`` waits for before Pulumi creates it: its dependencies, theirs, and so on."""
    by_urn = {x.urn: x for x in r.resources}
    seen: set[str] = set()
    todo = list(resource.dependencies)
    while todo:
        urn = todo.pop()
        if urn not in seen:
            seen.add(urn)
            todo += by_urn[urn].dependencies if urn in by_urn else []
    return seen


def test_every_google_cloud_resource_of_a_sandbox_waits_for_its_api(sandbox):
    services = {x.urn: x.inputs["service"] for x in sandbox.by_type(SERVICE)}
    assert set(API_OF.values()) <= set(services.values())
    problems = []
    for x in sandbox.resources:
        if not x.custom or not x.type.startswith("gcp:") or x.type == SERVICE:
            continue
        module = x.type.split(":")[1].split("/")[0]
        api = API_OF.get(module)
        if api is None:
            problems.append(f"{x.type} {x.name}: which API serves pulumi-gcp module {module}? (add it to API_OF)")
        elif api not in {services[u] for u in _waits_for(sandbox, x) if u in services}:
            problems.append(f"{x.type} {x.name}: created without waiting for {api}")
    assert not problems, problems


def test_the_sandbox_leaves_its_apis_on_at_destroy(sandbox):
    """``disable_on_destroy: false`` on each: destroying the sandbox must not turn off an API something else in the
    project uses (docs/teardown.md)."""
    assert all(x.inputs.get("disableOnDestroy") is False for x in sandbox.by_type(SERVICE))
