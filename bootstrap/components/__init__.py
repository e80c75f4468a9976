"""The bootstrap's Pulumi components (pulumi/examples style: ``pkg:module:Type``, ``(name, args, opts)``,
children parented to the component, ``register_outputs`` last), one per file."""

from bootstrap.components.federation import GitHubFederation, GitHubFederationArgs
from bootstrap.components.github import GitHubRepository, GitHubRepositoryArgs
from bootstrap.components.identity import CiIdentity, CiIdentityArgs
from bootstrap.components.stack_project import StackProject, StackProjectArgs
from bootstrap.components.state import StateBackend, StateBackendArgs

__all__ = ["CiIdentity", "CiIdentityArgs", "GitHubFederation", "GitHubFederationArgs", "GitHubRepository",
           "GitHubRepositoryArgs", "StackProject", "StackProjectArgs", "StateBackend", "StateBackendArgs"]
