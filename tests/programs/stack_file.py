"""A Pulumi program that only reads its stack spec as the project's program does (``stackspec.from_pulumi``) and
exports what came from the stack file itself, not from Pulumi's config: the secrets provider
(tests/test_spec.py renders it with offline.engine.render from a copy in another --stacks-dir)."""

import pulumi

from stackspec import spec as stack_spec

spec = stack_spec.from_pulumi()
pulumi.export("secretsprovider", spec.secrets_provider)
