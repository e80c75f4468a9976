"""Authoritative IAM on what the stack owns: one policy resource per bucket or repository.

The additive ``*IAMMember`` grants left any other member in place: a grant made by a compromised deploy (or by hand)
was never removed, and no diff showed it (security review S9). An ``*IAMPolicy`` resource sets the whole policy, so
the next ``pulumi up`` removes any member the program does not declare, and a refresh shows one as drift. Its policy
data comes from the provider's ``getIAMPolicy`` data source (terraform-provider-google e03b7622,
google/services/resourcemanager/data_source_google_iam_policy.go ``dataSourceGoogleIamPolicyRead``: bindings of one
role merged, sorted by role, members sorted, marshalled as the API's Policy JSON).

One resource per bucket or repository, never two: "gcp.storage.BucketIAMPolicy cannot be used in conjunction with
gcp.storage.BucketIAMBinding and gcp.storage.BucketIAMMember or they will fight over what your policy should be"
(pulumi-gcp BucketIAMPolicy docs; the same note stands on RepositoryIamPolicy). A multi-region stack's regions
therefore hand their members to the one policy of the shared bucket and of the stack's one repository.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

# What Cloud Storage puts in a new bucket's policy, its convenience values for the project's basic roles:
# roles/storage.legacyBucketOwner for projectEditor:<p> and projectOwner:<p>, roles/storage.legacyBucketReader for
# projectViewer:<p> (what a new uniform-access bucket's getIamPolicy answers; Terraform configurations that move a
# bucket to google_storage_bucket_iam_policy declare exactly these two bindings to keep them. No Google page quoting
# them was at hand offline: check `gcloud storage buckets get-iam-policy` on a new bucket before relying on more).
# Kept, on purpose: they name only holders of a basic role on the project, which no CI identity can grant (no CI
# identity holds project IAM), so a compromised deploy cannot hide a member behind them; and they are what the
# bucket has had since its creation, so the first apply of the policy removes only members the program does not
# declare. legacyBucketOwner includes storage.buckets.setIamPolicy (bootstrap/data/iam_roles.json): a project
# editor can change the bucket's policy between deploys, which the next `up` undoes and the stack's iam-changed
# alert reports.
LEGACY_BUCKET_OWNER = "roles/storage.legacyBucketOwner"
LEGACY_BUCKET_READER = "roles/storage.legacyBucketReader"


@dataclass(frozen=True)
class PolicyBinding:
    role: str
    members: Sequence[pulumi.Input[str]]


def bucket_convenience_bindings(project: str) -> list[PolicyBinding]:
    return [PolicyBinding(LEGACY_BUCKET_OWNER, [f"projectEditor:{project}", f"projectOwner:{project}"]),
            PolicyBinding(LEGACY_BUCKET_READER, [f"projectViewer:{project}"])]


def policy_data(bindings: Sequence[PolicyBinding], opts: pulumi.InvokeOutputOptions | None = None
                ) -> pulumi.Output[str]:
    """The policy JSON of ``bindings`` (the provider's data source: merged, sorted, as the API stores it)."""
    return gcp.organizations.get_iam_policy_output(
        bindings=[gcp.organizations.GetIAMPolicyBindingArgs(role=b.role, members=list(b.members))
                  for b in bindings if b.members],
        opts=opts,
    ).policy_data
