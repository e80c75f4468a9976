"""Every fact written once (issue #28 item 3, code review section 3): a regex or a numeric limit defined in two
places drifts (the allowed-locations policy's zone pattern did not know the AI zones; the bootstrap's bucket rule
was looser than the spec's). The source is scanned (ast) for the same literal pattern or limit defined twice."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from conftest import load_crd

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["stackspec", "infra", "workloads", "policies", "slicectl", "drills", "offline", "bootstrap", "benchmarks",
           "__main__.py"]
# Copies the trust engineer's bootstrap split (issue #28 item 2) replaces with stackspec's: each must still be there
# (the list only shrinks), and no other copy may appear. stackspec.limits holds the one of each.
PENDING_IN_BOOTSTRAP: set[tuple[str, str, object]] = set()  # the split imports limits.PROJECT_ID and KEY_ROTATION
# Limits that are equal by nature, not copies of one fact.
SAME_BY_NATURE: set[object] = set()


def _files() -> list[Path]:
    out = []
    for name in SOURCES:
        p = ROOT / name
        out += [p] if p.is_file() else sorted(x for x in p.rglob("*.py") if "venv" not in x.parts)
    return out


def _literal(node: ast.AST, env: dict[str, object] | None = None) -> object | None:
    """A constant expression's value (``7 * 24 * 3600``, ``f"{90 * 86400}s"``, names of the module's constants
    defined above it), else None."""
    env = env or {}
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            value = _literal(v.value if isinstance(v, ast.FormattedValue) else v, env)
            if value is None:
                return None
            parts.append(str(value))
        return "".join(parts)
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.BinOp):
        left, right = _literal(node.left, env), _literal(node.right, env)
        if not (isinstance(left, int | float) and isinstance(right, int | float)):
            return None
        ops = {ast.Mult: lambda a, b: a * b, ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b}
        return ops[type(node.op)](left, right) if type(node.op) in ops else None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None


def _normal(pattern: str) -> str:
    """A pattern as matched whole, its character classes in one order: ``^[a-z][a-z0-9-]{4,28}$`` and
    ``[a-z][-a-z0-9]{4,28}`` used with fullmatch say the same."""
    def ordered(m: re.Match) -> str:
        body = m[2]
        parts = re.findall(r"\\.|.-.|.", body[:-1] if body.endswith("-") else body) + (
            ["-"] if body.endswith("-") else [])
        return m[1] + "".join(sorted(parts)) + "]"

    return re.sub(r"(\[\^?)([^\]]+)\]", ordered, pattern.removeprefix("^").removesuffix("$"))


# Calls that take a pattern: ``re.compile(p)``, ``re.fullmatch(p, s)``, ... and pydantic's ``pattern=`` keyword
# (``Field(pattern=p)``, ``StringConstraints(pattern=p)``, ``constr(pattern=p)``).
RE_CALLS = ("compile", "fullmatch", "match", "search")


def _pattern_argument(node: ast.Call) -> ast.expr | None:
    func = node.func
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "re"
            and func.attr in RE_CALLS and node.args):
        return node.args[0]
    return next((k.value for k in node.keywords if k.arg == "pattern"), None)


def _constants(tree: ast.Module) -> tuple[dict[str, object], dict[str, int]]:
    """The module's top-level constants, in order (``_PID = r"..."``; ``DAY = 24 * 3600``), and the line of each."""
    env: dict[str, object] = {}
    lines: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            value = _literal(node.value, env)
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and value is not None:
                    env[target.id], lines[target.id] = value, node.lineno
    return env, lines


def facts() -> dict[tuple[str, object], list[str]]:
    """(kind, value) -> where: every regex used as a pattern (a literal, or a module constant holding one, as
    ``re.*``'s first argument or pydantic's ``pattern=``), every module-level numeric limit (>= 1000) and duration
    string, each at ``path:line`` (a constant's pattern at the constant's line: one constant used twice is one
    fact)."""
    found: dict[tuple[str, object], list[str]] = defaultdict(list)
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        env, lines = _constants(tree)
        for node in ast.walk(tree):
            argument = _pattern_argument(node) if isinstance(node, ast.Call) else None
            value = None if argument is None else _literal(argument, env)
            if isinstance(value, str):
                line = lines[argument.id] if isinstance(argument, ast.Name) and argument.id in lines else node.lineno
                if f"{rel}:{line}" not in found[("regex", _normal(value))]:
                    found[("regex", _normal(value))].append(f"{rel}:{line}")
        seen: dict[str, object] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                value = None if isinstance(node.value, ast.Name) else _literal(node.value, seen)  # an alias: one fact
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name) and value is not None:
                        seen[target.id] = value
                if (isinstance(value, int | float) and not isinstance(value, bool) and value >= 1000) or (
                        isinstance(value, str) and re.fullmatch(r"\d{4,}s", value)):
                    found[("limit", int(value.removesuffix("s")) if isinstance(value, str) else value)].append(
                        f"{rel}:{node.lineno}")
    return found


def test_no_pattern_or_limit_is_defined_twice():
    pending = {(f, kind, _normal(v) if kind == "regex" else (int(v.removesuffix("s")) if isinstance(v, str) else v))
               for f, kind, v in PENDING_IN_BOOTSTRAP}
    twice, seen_pending = [], set()
    for (kind, value), where in facts().items():
        if value in SAME_BY_NATURE or len(where) < 2:
            continue
        files = [w.rsplit(":", 1)[0] for w in where]
        seen_pending |= {(f, kind, value) for f in files if (f, kind, value) in pending}
        if len([f for f in files if (f, kind, value) not in pending]) > 1:
            twice.append(f"{kind} {value!r}: {', '.join(where)}")
    assert not twice, "defined more than once (define it once in stackspec and import it):\n" + "\n".join(twice)
    assert seen_pending == pending, f"gone from bootstrap/: drop from PENDING_IN_BOOTSTRAP: {pending - seen_pending}"


def test_the_allowed_locations_policy_knows_the_ai_zones():
    """Code review section 3, reproduced: the mandatory allowed-locations policy had its own zone pattern, which
    refused v6e's AI zones (stackspec/data/tpu_zones.json lists us-central1-ai1 and us-south1-ai1b) as regions."""
    from policies.rules.common import Context
    from policies.rules.safety import allowed_locations
    from stackspec import zones

    ai = [z for z in zones.zones("v6e")[0] if "-ai" in z]
    assert ai, "the zone table lists no AI zone any more"
    for zone in ai:
        region = zones.region_of(zone)
        ctx = Context(config={"allowedRegions": [region], "allowedZones": [zone]}, environment="dev")
        props = {"name": "pool", "location": zone}
        assert allowed_locations("gcp:container/nodePool:NodePool", props, ctx) == [], zone
        elsewhere = Context(config={"allowedRegions": [region], "allowedZones": [f"{region}-b"]},
                            environment="dev")
        assert allowed_locations("gcp:container/nodePool:NodePool", props, elsewhere), zone


def test_kueue_version_is_the_vendored_crds():
    """KUEUE_VERSION (the release whose manifest the program applies) is the release whose CRDs vendor/kueue/ vendors:
    bumping one without the other would validate manifests against the wrong schema."""
    from workloads.kueue import KUEUE_VERSION

    readme = (ROOT / "vendor" / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `kueue/`"))
    tags = set(re.findall(r"tag `v(\d+\.\d+\.\d+)`", row)) | set(re.findall(r"Helm chart is `kueue` (\d+\.\d+\.\d+)",
                                                                              row))
    assert tags == {KUEUE_VERSION}, (tags, KUEUE_VERSION)
    for crd in (ROOT / "vendor" / "kueue").glob("*.yaml"):
        doc = load_crd(crd)  # libyaml's loader: the pure-Python one took 3 s on these 1.6 MB
        assert doc["spec"]["group"] == "kueue.x-k8s.io", crd.name
