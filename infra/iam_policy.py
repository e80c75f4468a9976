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

# A new bucket's policy also holds Cloud Storage's convenience values for the project's basic roles
# (roles/storage.legacyBucketOwner for projectOwner:<p> and projectEditor:<p>, legacyBucketReader for
# projectViewer:<p>).
# The authoritative policy drops them, on purpose: legacyBucketOwner includes storage.buckets.setIamPolicy
# (bootstrap/data/iam_roles.json), which would let a project editor, who holds no IAM administration elsewhere,
# rewrite the checkpoint bucket's IAM between deploys (the escalation check refuses it); the project's owners keep
# theirs through roles/owner at the project. So the first apply also removes those three values.


@dataclass(frozen=True)
class PolicyBinding:
    role: str
    members: Sequence[pulumi.Input[str]]


def policy_data(bindings: Sequence[PolicyBinding], opts: pulumi.InvokeOutputOptions | None = None
                ) -> pulumi.Output[str]:
    """The policy JSON of ``bindings`` (the provider's data source: merged, sorted, as the API stores it)."""
    return gcp.organizations.get_iam_policy_output(
        bindings=[gcp.organizations.GetIAMPolicyBindingArgs(role=b.role, members=list(b.members))
                  for b in bindings if b.members],
        opts=opts,
    ).policy_data
