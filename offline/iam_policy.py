"""The provider's getIAMPolicy data source, offline: the same policy JSON the real one computes.

terraform-provider-google e03b7622, google/services/resourcemanager/data_source_google_iam_policy.go
(``dataSourceGoogleIamPolicyRead``): binding blocks of one role (and condition) are merged, members are a set,
bindings are sorted by role (then condition), members sorted, and the ``cloudresourcemanager.Policy`` is marshalled
by Go's encoding/json: compact, fields in struct order (``auditConfigs`` and ``condition`` omitted when empty,
``bindings`` entries as ``condition``, ``members``, ``role``), no ``etag``/``version`` (omitempty). Its id is
``tpgresource.Hashcode`` of that text (crc32 IEEE, non-negative). The resource that sets the policy answers an
``etag`` besides (the API's, base64).
"""

from __future__ import annotations

import json
import zlib
from typing import Any


def _go_json(value: Any) -> str:
    # Go's encoder escapes <, > and & as \u003c, \u003e, \u0026 (HTMLEscape on by default); json.dumps does not.
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _condition_key(c: dict | None) -> tuple:
    return () if not c else (c.get("expression", ""), c.get("title", ""), c.get("description", ""))


def get_iam_policy(args: dict) -> dict:
    """The data source's outputs for the invoke's arguments (``bindings``: ``role``, ``members``, ``condition``)."""
    merged: dict[tuple, dict] = {}
    for b in args.get("bindings") or []:
        key = (b["role"], _condition_key(b.get("condition")))
        entry = merged.setdefault(key, {"role": b["role"], "members": set(), "condition": b.get("condition")})
        entry["members"] |= set(b.get("members") or [])
    bindings = []
    for (role, _), e in sorted(merged.items(), key=lambda kv: (kv[0][0], kv[0][1] != (), kv[0][1])):
        out: dict[str, Any] = {}
        if e["condition"]:
            out["condition"] = {k: e["condition"][k] for k in ("description", "expression", "title")
                                if e["condition"].get(k)}
        out["members"] = sorted(e["members"])
        out["role"] = role
        bindings.append(out)
    text = _go_json({"bindings": bindings})
    return {"id": str(zlib.crc32(text.encode())), "policyData": text,
            "bindings": list(args.get("bindings") or []), "auditConfigs": list(args.get("auditConfigs") or [])}
