"""The spec's field types (each carries the limit of the system it is deployed to) and the section base."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from .. import limits, names, tpu, zones
from ..gke import gke_version_key

NS = names.PROJECT
ENVIRONMENTS = ("dev", "prod")


def _ns(key: str) -> str:
    return f"{NS}:{key}"


def _check(fn):
    """An AfterValidator from a ``value -> message | None`` check."""

    def run(value):
        if (msg := fn(value)) is not None:
            raise ValueError(msg)
        return value

    return AfterValidator(run)


def _name(rule: limits.NameRule):
    return _check(rule.check)


def _to_str(value: Any) -> Any:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


ClusterName = Annotated[str, _name(limits.GKE_CLUSTER)]
NodePoolName = Annotated[str, _name(limits.GKE_NODE_POOL)]
NetworkName = Annotated[str, _name(limits.COMPUTE_NETWORK)]
SubnetName = Annotated[str, _name(limits.COMPUTE_SUBNETWORK)]
Namespace = Annotated[str, _name(limits.K8S_NAMESPACE)]
KsaName = Annotated[str, _name(limits.K8S_SERVICE_ACCOUNT)]
RayClusterName = Annotated[str, _name(limits.RAY_CLUSTER)]
RayJobName = Annotated[str, _name(limits.RAY_JOB)]
GroupName = Annotated[str, _name(limits.RAY_WORKER_GROUP)]
RunName = Annotated[str, _name(limits.RUN_NAME)]
BucketName = Annotated[str, _check(limits.bucket_name)]
SubnetCidr = Annotated[str, _check(lambda v: limits.private_cidr(v, limits.SUBNET_PREFIX))]
ClusterCidr = Annotated[str, _check(limits.private_cidr)]
Quantity = Annotated[str, BeforeValidator(_to_str), _check(limits.quantity_error)]
Port = Annotated[int, Field(ge=1, le=65535)]
def _version_text(value: Any) -> Any:
    """A version as written, never a number: YAML reads an unquoted 1.40 as the float 1.4 (YAML 1.1/1.2 float
    resolution), so the text the author meant is gone by the time the model sees it."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError(f"a version is text: quote it as written, e.g. \"1.35\" (YAML reads an unquoted 1.40 as the "
                         f"number 1.4; this reads as {value})")
    return value


GkeVersion = Annotated[str, BeforeValidator(_version_text), _check(lambda v: None if gke_version_key(v) else
                                    "must be a GKE minor such as 1.35 (GKE picks the channel's newest 1.35 patch at "
                                    "creation), 1.35.2, or an exact version like 1.35.2-gke.1842000")]
ProjectId = Annotated[str, _check(limits.project_id_error)]
Region = Annotated[str, _check(lambda v: None if limits.REGION.fullmatch(v) else
                                "not a GCP region, e.g. us-east5")]
Zone = Annotated[str, _check(lambda v: None if zones.ZONE.fullmatch(v) else
                              "not a GCE zone: <region>-<a to f> (or an AI zone such as us-central1-ai1), "
                              "e.g. us-east5-b")]
MeshAxis = Literal[tpu.MESH_AXES]
MeshDegree = Annotated[int, _check(lambda v: None if v >= 1 or v == -1 else "must be a positive integer or -1 "
                                                                             "(auto)")]
MaxTextValue = Annotated[str, BeforeValidator(lambda v: str(v).lower() if isinstance(v, bool) else _to_str(v))]


class Section(BaseModel):
    """A section of the stack spec: camelCase keys, unknown keys refused, frozen once checked."""

    # No inf/nan anywhere: YAML's .inf would pass every bound and overflow the arithmetic after it.
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True,
                              coerce_numbers_to_str=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _not_resolved(cls, data: Any) -> Any:
        # A field the resolve step sets (stackspec.defaults) is not a stack-file key.
        if isinstance(data, Mapping):
            for name, f in cls.model_fields.items():
                if f.exclude and (name in data or to_camel(name) in data):
                    raise at(to_camel(name), "not a stack-file key: the spec works it out (stackspec.defaults)")
                key = f.alias or name
                value = data.get(key, data.get(name))
                if _is_bool(f.annotation) and value is not None and not isinstance(value, bool):
                    # Strict: pydantic's lax mode reads 'yes', 'on', 1 as true, and a switch such as deploy.onPush
                    # must mean what it says (YAML 1.2 has only true and false).
                    raise at(key, f"must be true or false, not {value!r}")
        return data


def _is_bool(annotation: Any) -> bool:
    return annotation is bool or (typing.get_origin(annotation) in (types.UnionType, typing.Union)
                                  and set(typing.get_args(annotation)) == {bool, type(None)})


def resolved(default: Any = None) -> Any:
    """A field the resolve step (:mod:`stackspec.defaults`) sets, never the stack file: refused there, and left out of
    dumps, of the editor schema (annotate it ``SkipJsonSchema``) and of the keys a message lists as allowed."""
    return Field(default, exclude=True, repr=False)


def at(key: str, message: str) -> ValueError:
    """A section rule's error on one of its keys (the loader appends ``key`` to the location)."""
    return ValueError(f"@{key}: {message}")
