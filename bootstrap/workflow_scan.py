"""What the repository's workflows run, computed from the checkout on call: the paths a credentialed job executes
(``executed_paths``), the code-owned paths branch protection requires a review for (``trust_paths`` and the
generated ``.github/CODEOWNERS``), and the actions the repository allows (``allowed_actions``).

Nothing is read at import: the bootstrap program and the escalation check import the access model outside a
checkout too (an installed wheel has no ``.github/``); these functions read the tree only when asked.
"""

from __future__ import annotations

import re
from pathlib import Path

from bootstrap.config import BootstrapConfig
from bootstrap.environments import REQUIRED_CHECKS

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS_DIR = REPO_ROOT / ".github" / "workflows"
# Paths whose change can widen what CI or the stacks may do, whatever the workflows run: the bootstrap program
# (run by an operator) and the stack programs' own code. A code owner (the reviewer teams) approves each.
BASE_TRUST_PATHS = ("/.github/", "/bootstrap/", "/stackspec/", "/infra/", "/workloads/", "/policies/", "/Dockerfile",
                    "/pyproject.toml", "/uv.lock", "/stacks/")
# Job permissions that make a job credentialed: it can mint a cloud token, or write to the pull request.
CREDENTIAL_SCOPES = ("id-token", "pull-requests")


def _load_workflows(workflows: Path) -> dict[str, dict]:
    import yaml

    files = sorted([*workflows.glob("*.yml"), *workflows.glob("*.yaml")])
    return {p.name: yaml.safe_load(p.read_text()) for p in files}


def _top_level(name: str, root: Path) -> str | None:
    """The repository path a top-level import name resolves to (a package directory or a module), if any."""
    if (root / name / "__init__.py").exists():
        return f"/{name}/"
    if (root / f"{name}.py").exists():
        return f"/{name}.py"
    return None


def _import_closure(paths: set[str], root: Path) -> set[str]:
    """The repository paths `paths` import, transitively: a package is taken whole (its modules import each other
    and load submodules by name, e.g. slicectl's cmd_* modules)."""
    import ast

    done: set[str] = set()
    todo = list(paths)
    while todo:
        path = todo.pop()
        if path in done:
            continue
        done.add(path)
        target = root / path.strip("/")
        files = sorted(target.rglob("*.py")) if path.endswith("/") else [target] if target.suffix == ".py" else []
        for f in files:
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                         else [])
                for n in names:
                    found = _top_level(n.split(".")[0], root)
                    if found and found not in done:
                        todo.append(found)
    return done


def executed_paths(workflows: Path = WORKFLOWS_DIR, root: Path = REPO_ROOT) -> tuple[str, ...]:
    """What the credentialed jobs of the workflows execute (and what main's required checks run), as CODEOWNERS
    paths, computed from the workflows:

    - every job with a credential (CREDENTIAL_SCOPES): `.github/` (its workflow, scripts and pins); `uv sync`: the
      project's pyproject.toml and uv.lock; `uv run ... <script>`: pyproject's console script's package;
      `python[3] <file>`: that file; `pulumi <command>` (a run step or pulumi/actions): Pulumi.yaml, its program
      (`main`, else __main__.py) and its stackConfigDir; `--policy-pack <dir>` (or policyPacks): that pack;
      `docker build`: the Dockerfile, .dockerignore and what .dockerignore admits; each file's repository imports,
      transitively; any other repository file a step's command names (a digest or pin file it reads);
    - the required checks of pr.yml (REQUIRED_CHECKS) that run pytest: pyproject's testpaths (the checks that
      guard all of the above)."""
    import tomllib

    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    scripts = pyproject.get("project", {}).get("scripts", {})
    code: set[str] = set()
    found: set[str] = set()
    for name, wf in _load_workflows(workflows).items():
        for job_name, job in wf.get("jobs", {}).items():
            steps = job.get("steps", [])
            runs = "\n".join(s.get("run", "") for s in steps)
            if name == "pr.yml" and job_name in REQUIRED_CHECKS and re.search(r"\bpytest\b", runs):
                for t in pyproject.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("testpaths", []):
                    found.add(f"/{t.strip('/')}/")
            if not any(job.get("permissions", {}).get(k) == "write" for k in CREDENTIAL_SCOPES):
                continue
            found.add("/.github/")
            actions = [s.get("with", {}) for s in steps if s.get("uses", "").split("@")[0] == "pulumi/actions"]
            if re.search(r"\buv sync\b", runs):
                found |= {"/pyproject.toml", "/uv.lock"}
            for script in re.findall(r"\buv run(?: --\S+)* (\S+)", runs):
                if script in scripts:
                    code.add(f"/{scripts[script].split(':')[0].split('.')[0]}/")
            for file in re.findall(r"\bpython3? (?:-\S+ )*([\w./-]+\.py)\b", runs):
                code.add(f"/{file}")
            if re.search(r"^\s*pulumi (?!login\b)[a-z]", runs, re.M) or any("command" in a for a in actions):
                import yaml

                project = yaml.safe_load((root / "Pulumi.yaml").read_text())
                found.add("/Pulumi.yaml")
                main = project.get("main", ".")
                code.add(f"/{main.strip('/')}/" if (root / main).is_dir() and main not in (".", "./") else
                         "/__main__.py" if main in (".", "./") else f"/{main}")
                if project.get("stackConfigDir"):
                    found.add(f"/{project['stackConfigDir'].strip('/')}/")
            packs = re.findall(r"--policy-pack (\S+)", runs) + [a["policyPacks"] for a in actions if "policyPacks" in a]
            code |= {f"/{p.strip('/')}/" for p in packs}
            # A repository file a step names (base-image.digest, read by image.yml's build): its content steers a
            # credentialed job as much as code does.
            found |= {f"/{t}" for t in re.findall(r"(?<![\w./$-])[\w][\w.-]*(?:/[\w.-]+)*", runs)
                      if (root / t).is_file()}
            if re.search(r"\bdocker build\b", runs):
                found |= {"/Dockerfile", "/.dockerignore"}
                ignore = (root / ".dockerignore").read_text().splitlines() if (root / ".dockerignore").exists() else []
                code |= {f"/{line[1:]}" for line in ignore if line.startswith("!")}
    return tuple(sorted(found | _import_closure(code, root)))


def trust_paths(workflows: Path = WORKFLOWS_DIR, root: Path = REPO_ROOT) -> tuple[str, ...]:
    """BASE_TRUST_PATHS, then every executed path none of them covers."""
    extra = [p for p in executed_paths(workflows, root) if not any(p.startswith(t) for t in BASE_TRUST_PATHS)]
    return (*BASE_TRUST_PATHS, *extra)



def allowed_actions(workflows: Path = WORKFLOWS_DIR) -> tuple[str, ...]:
    """Every action the workflows use, as `owner/name@<sha>`: the repository allows these and nothing else
    (GitHub's allowed-actions patterns; SHA pinning required too)."""
    found = set()
    for path in sorted([*workflows.glob("*.yml"), *workflows.glob("*.yaml")]):
        for line in path.read_text().splitlines():
            m = re.match(r"^\s*(?:-\s+)?uses:\s*([\w.-]+/[\w./-]+)@([0-9a-f]{40})\b", line)
            if m:
                found.add(f"{m.group(1)}@{m.group(2)}")
    return tuple(sorted(found))


def codeowners(c: BootstrapConfig, workflows: Path = WORKFLOWS_DIR, root: Path = REPO_ROOT) -> str:
    """.github/CODEOWNERS: the reviewer teams and users own every path of ``trust_paths`` (BASE_TRUST_PATHS and
    what the credentialed jobs execute, executed_paths)."""
    owners = " ".join([*(f"@{c.owner}/{t}" for t in c.reviewer_teams), *(f"@{u}" for u in c.reviewer_users)])
    return ("# Generated from the bootstrap's reviewers (bootstrap/workflow_scan.py codeowners;\n"
            "# tests/test_bootstrap.py checks it). Branch protection requires a code owner's review for these paths.\n"
            + "".join(f"{p} {owners}\n" for p in trust_paths(workflows, root)))
