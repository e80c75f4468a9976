"""The CrossGuard policy pack: ``pulumi preview --policy-pack policies``.

Building ``PolicyPack`` starts the analyzer's gRPC server and blocks, so it is built
here and nowhere else; nothing imports this module (tests run it with the class patched).
"""

# Pulumi runs this file from policies/ in the project's environment (PulumiPolicy.yaml: virtualenv ../.venv,
# made by `uv sync --locked`, every package checked against uv.lock's hashes), where the project is installed:
# the rules import the policies package and the shared slice model (stackspec/) as installed packages.
from pulumi_policy import EnforcementLevel, PolicyPack

from policies.pack import PACK_NAME, crossguard_policies

PolicyPack(
    name=PACK_NAME,
    description="Multislice TPU on GKE with Ray: slice shapes that work, and safe defaults.",
    enforcement_level=EnforcementLevel.ADVISORY,  # each rule sets its own level
    policies=crossguard_policies(),
)
