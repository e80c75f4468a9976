"""The threat tables (docs/threat-model.md), generated from the computation."""

from __future__ import annotations

from .finding import Finding
from .gcp import CI_ACCOUNT, FORBIDDEN, SIGN, Reaches
from .pool import Environments, minted_by


def _service(perm: str) -> str:
    return perm.split(".")[0]


def threat_tables(reach: Reaches, envs: Environments, findings: list[Finding] = ()) -> str:
    """Markdown: per CI identity, who can become it and what it reaches; per Kubernetes subject, its verbs; and
    every path the design accepts, with its reason."""
    lines = ["| identity | who can become it | reaches | writes (by service) | refused paths |",
             "|---|---|---|---|---|"]
    for member, r in sorted(reach.items()):
        m = CI_ACCOUNT.match(member)
        if not m or not (r.grants or r.principals):
            continue  # not a CI account (or one only a stack's RBAC names, for a stack not drilled)
        who = []
        for p in r.principals:
            minted = minted_by(p)
            if minted:
                file, ref, env = minted
                gate = "reviewed" if envs.reviewed.get(env or "") else "no reviewer"
                who.append(f"`{file}` on {ref} in `{env}` ({gate})")
        scopes = sorted({f"{k} `{res}`" for _, res, k, _ in r.grants})
        writes: dict[str, int] = {}
        for p, res, _ in sorted(r.writes()):
            # Per object the condition admits (CEL, evaluated): a state object's write is named as such.
            kind = (reach.objects.get(res) or (None, None))[1]
            key = _service(p) + (f" ({kind} objects)" if kind else "")
            writes[key] = writes.get(key, 0) + 1
        held = set(r.permissions)
        accepted = sorted({f.what.split(" (")[0].split(":")[0] for f in findings
                           if f.accepted and f.identity == m.group(1)})
        refused = ("no project IAM, role, key, pool or attestor administration; no token creation"
                   if not any(FORBIDDEN.match(p) and p != SIGN for p in held) else "SEE FINDINGS")
        if accepted:
            refused += "; accepted (below): " + ", ".join(accepted)
        lines.append(f"| `{m.group(1)}` | {'; '.join(who) or 'nobody'} | {len(held)} permissions on "
                     f"{', '.join(scopes)} | {', '.join(f'{k} {v}' for k, v in sorted(writes.items())) or 'none'} "
                     f"| {refused} |")
    k8s = ["", "| Kubernetes subject | namespace | writes | source |", "|---|---|---|---|"]
    for member, r in sorted(reach.items()):
        for source, tuples in (("RBAC", r.rbac), ("GKE IAM (every cluster of the project)", r.gke)):
            by_ns: dict[str, set[str]] = {}
            for ns, res, verb, names in tuples:
                if verb not in ("get", "list", "watch") and res != "tokenreviews":  # a TokenReview writes nothing
                    by_ns.setdefault(ns, set()).add(f"{verb} {res}" + (f" ({names})" if names else ""))
            for ns, verbs in sorted(by_ns.items()):
                shown = sorted(verbs)
                text = ", ".join(shown[:12]) + (f" and {len(shown) - 12} more" if len(shown) > 12 else "")
                raw, _, cluster = ns.partition("@")
                where = ("cluster-wide" if raw == "*" else f"`{raw}`") + (f" of `{cluster}`" if cluster else "")
                k8s.append(f"| `{member.removeprefix('serviceAccount:')}` | {where} | {text} | {source} |")
    acc = ["", "Paths the design accepts (reported by the check, refused for any other identity):", "",
           "| identity | paths | why accepted |", "|---|---|---|"]
    grouped: dict[tuple[str, str], list[str]] = {}
    for f in sorted({f for f in findings if f.accepted}, key=str):
        grouped.setdefault((f.identity, f.accepted), []).append(f.what.replace("|", "/"))
    for (identity, why), whats in sorted(grouped.items()):
        acc.append(f"| `{identity}` | {'; '.join(whats)} | {why} |")
    return "\n".join(lines + k8s + (acc if grouped else [])) + "\n"
