"""The bootstrap: the CI identities, their federation, the state and keys, and the repository's settings.

``config`` (its stack file and the stacks it serves), ``access`` (the access model as data, no Pulumi),
``escalation`` (each identity's effective reach, computed from a rendering), ``components`` (the Pulumi
components) and ``__main__`` (the program ``pulumi up`` runs from this directory). Installed with the
project (pyproject's ``packages.find``), so nothing here edits the import path.
"""
