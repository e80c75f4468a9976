"""The CrossGuard policy pack: ``pulumi preview --policy-pack policies``.

Building ``PolicyPack`` starts the analyzer's gRPC server and blocks, so it is built
here and nowhere else; nothing imports this module (tests run it with the class patched).
"""

import os
import sys

# Pulumi runs this file from policies/ in the pack's own virtualenv (requirements.txt),
# where this repository is not installed. The rules import the shared slice model
# (stackspec/: the TPU facts and the spec model) and the policies package from the working tree, so
# the repository root goes on sys.path before those imports.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policies.pack import PACK_NAME, crossguard_policies  # noqa: E402

PolicyPack(
    name=PACK_NAME,
    description="Multislice TPU on GKE with Ray: slice shapes that work, and safe defaults.",
    enforcement_level=EnforcementLevel.ADVISORY,  # each rule sets its own level
    policies=crossguard_policies(),
)
