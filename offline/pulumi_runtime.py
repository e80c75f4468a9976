"""Every place the offline engine touches the Pulumi runtime, in one small adapter.

The engine uses only Pulumi's public runtime API (``reset_options``, ``set_mocks``,
``set_all_config``, ``test``, ``get_root_resource``, the ``rpc`` helpers) plus two things
that are public but not documented as stable: subclassing ``MockMonitor`` to see each
``RegisterResource`` request, and the fields of that gRPC request. They live here, and
``tests/test_engine_adapter.py`` checks each of them against the installed Pulumi, so an
upgrade that moves one fails there, by name, rather than as a wrong rendering.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.runtime
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

# Fields of ``pulumirpc.RegisterResourceRequest`` the engine reads.
REQUEST_FIELDS = ("type", "name", "parent", "custom", "provider", "object", "protect", "retainOnDelete",
                  "dependencies", "ignoreChanges")


@dataclass(frozen=True)
class Registration:
    """One ``RegisterResource`` request, as plain values."""

    urn: str
    type: str
    name: str
    parent: str | None  # parent URN as sent (the stack's URN for its direct children)
    custom: bool
    inputs: dict[str, Any]  # deserialized: secrets wrapped, unknowns as ``rpc.UNKNOWN``
    provider: str | None  # provider reference ``urn::id`` as sent
    protect: bool
    retain_on_delete: bool
    dependencies: tuple[str, ...] = ()  # URNs this resource waits for (depends_on and its inputs' resources)
    ignore_changes: tuple[str, ...] = ()


class RecordingMonitor(MockMonitor):
    """The stock mock monitor, calling ``on_register`` with each resource it registers."""

    def __init__(self, mocks: pulumi.runtime.Mocks, on_register: Callable[[Registration], None]):
        super().__init__(mocks)
        self._on_register = on_register

    def RegisterResource(self, request):  # noqa: N802 (the gRPC method name)
        response = super().RegisterResource(request)
        self._on_register(
            Registration(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                custom=bool(request.custom),
                inputs=rpc.deserialize_properties(request.object),
                provider=request.provider or None,
                protect=request.HasField("protect") and request.protect,
                retain_on_delete=request.HasField("retainOnDelete") and request.retainOnDelete,
                dependencies=tuple(request.dependencies),
                ignore_changes=tuple(request.ignoreChanges),
            )
        )
        return response


def start(
    mocks: pulumi.runtime.Mocks, monitor: MockMonitor, project: str, stack: str, config: dict[str, str]
) -> None:
    """A fresh deployment under mocks: new settings, a new root stack, ``config`` as the stack's config."""
    _ensure_event_loop()
    pulumi.runtime.reset_options(project=project, stack=stack, preview=True)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=True, monitor=monitor)
    pulumi.runtime.set_all_config(dict(config))


def _ensure_event_loop() -> None:
    """A current event loop for the futures the runtime makes outside one (the root stack's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12 warns when it has to make one
        try:
            asyncio.get_event_loop()
        except RuntimeError:  # no loop and no implicit one (later Pythons)
            asyncio.set_event_loop(asyncio.new_event_loop())


def run(program: Callable[[], None]) -> dict[str, Any]:
    """Run ``program``, wait for every registration, and return the stack's exports (known values).

    Exceptions from the program (``pulumi.RunError`` included) propagate after the
    outstanding RPCs are drained, as under ``pulumi up``.
    """
    exports: dict[str, Any] = {}

    def body() -> pulumi.Output:
        program()
        root = pulumi.runtime.get_root_resource()
        # Resolved by ``test`` before it returns; unknown exports leave ``exports`` empty.
        return pulumi.Output.from_input(dict(root.outputs)).apply(lambda v: exports.update(v or {}))

    pulumi.runtime.test(body)()
    return exports


def is_secret(value: Any) -> bool:
    return rpc.is_rpc_secret(value)


def unwrap_secret(value: Any) -> Any:
    return rpc.unwrap_rpc_secret(value)


def is_unknown(value: Any) -> bool:
    """An unknown as ``deserialize_properties`` hands it back (the sentinel string, or ``Unknown`` if kept)."""
    return (isinstance(value, str) and value == rpc.UNKNOWN) or isinstance(value, pulumi.output.Unknown)
