"""The state backend: the bootstrap's own state bucket and key, the stacks' state bucket and one key per stack."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from bootstrap.access import KEY_ROTATION
from bootstrap.config import BootstrapConfig


def _keep(parent: pulumi.Resource) -> dict:
    # Losing a state bucket or a key loses track of every deployed resource: protected, kept on delete.
    return {"parent": parent, "protect": True, "retain_on_delete": True}


def _state_bucket(name: str, bucket: str, c: BootstrapConfig, parent: pulumi.Resource) -> gcp.storage.Bucket:
    return gcp.storage.Bucket(
        name,
        gcp.storage.BucketArgs(
            name=bucket,
            project=c.ci_project,
            location=c.state_location,
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            force_destroy=False,
        ),
        opts=pulumi.ResourceOptions(**_keep(parent)),
    )


@dataclass(frozen=True)
class StateBackendArgs:
    config: BootstrapConfig


class StateBackend(pulumi.ComponentResource):
    """Two state buckets and two key rings in the CI project: the bootstrap's (no CI identity may
    touch them) and the stacks' (one bucket, one key per stack: a stack's secrets open with its key)."""

    bootstrap_bucket: gcp.storage.Bucket
    bootstrap_key: gcp.kms.CryptoKey
    bucket: gcp.storage.Bucket
    keys: dict[str, gcp.kms.CryptoKey]

    def __init__(self, name: str, args: StateBackendArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:StateBackend", name, None, opts)
        c = args.config
        keep = _keep(self)
        self.bootstrap_bucket = _state_bucket(f"{name}-bootstrap-state", c.bootstrap_state_bucket, c, self)
        # Adopted on the first run: the bootstrap's own state needs its key before it exists.
        adopt = c.adopt_kms
        boot_ring = gcp.kms.KeyRing(
            f"{name}-bootstrap-keyring",
            gcp.kms.KeyRingArgs(name=c.bootstrap_key_ring, location=c.kms_location, project=c.ci_project),
            opts=pulumi.ResourceOptions(**keep, import_=c.key_ring_id(c.bootstrap_key_ring) if adopt else None),
        )
        self.bootstrap_key = gcp.kms.CryptoKey(
            f"{name}-bootstrap-key",
            gcp.kms.CryptoKeyArgs(name="state", key_ring=boot_ring.id, purpose="ENCRYPT_DECRYPT",
                                  rotation_period=KEY_ROTATION),
            opts=pulumi.ResourceOptions(**keep, import_=c.bootstrap_key_id if adopt else None),
        )
        # The stacks' state: one bucket (Pulumi logs in to one backend URL; the workflows preview
        # every stack from it) whose writes IAM conditions split per stack, and one key per stack.
        self.bucket = _state_bucket(f"{name}-state", c.state_bucket, c, self)
        ring = gcp.kms.KeyRing(
            f"{name}-keyring",
            gcp.kms.KeyRingArgs(name=c.key_ring, location=c.kms_location, project=c.ci_project),
            opts=pulumi.ResourceOptions(**keep),
        )
        self.keys = {
            s.name: gcp.kms.CryptoKey(
                f"{name}-key-{s.name}",
                gcp.kms.CryptoKeyArgs(name=s.name, key_ring=ring.id, purpose="ENCRYPT_DECRYPT",
                                      rotation_period=KEY_ROTATION),
                opts=pulumi.ResourceOptions(**keep),
            )
            for s in c.stacks
        }
        self.register_outputs({"bucket": self.bucket.name, "bootstrapBucket": self.bootstrap_bucket.name})

