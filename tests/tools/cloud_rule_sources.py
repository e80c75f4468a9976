"""Record the repository lines the cloud rules quote (``stackspec/rules/catalogue.py``), for the offline test.

Each quote that cites ``owner/name@<commit>:<path>:<line>[-<line>]`` is read from a git mirror of that repository
at that commit, its lines are written to ``tests/reference/cloud-rule-sources.json``, and the script fails when the
path or the lines do not exist or the quote is not in them (whitespace aside). ``tests/test_cloud_rules.py`` then
checks every quote against that file without a network.

    uv run python tests/tools/cloud_rule_sources.py MIRRORS

MIRRORS holds one bare clone per repository, named ``<owner>+<name>/repo``
(``git clone --bare https://github.com/<owner>/<name> MIRRORS/<owner>+<name>/repo``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stackspec.rules import catalogue as cloud_rules  # noqa: E402

OUT = ROOT / "tests" / "reference" / "cloud-rule-sources.json"
REPO_REF = re.compile(r"(?P<repo>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{40}):(?P<path>[^:]+):(?P<a>\d+)(?:-(?P<b>\d+))?")


def norm(text: str) -> str:
    return " ".join(text.split())


def main(mirrors: Path) -> int:
    entries, errors = {}, []
    for rule in cloud_rules.RULES:
        for q in rule.quotes:
            m = REPO_REF.fullmatch(q.where)
            if not m:
                continue
            git = mirrors / m["repo"].replace("/", "+") / "repo"
            try:
                blob = subprocess.run(["git", f"--git-dir={git}", "show", f"{m['commit']}:{m['path']}"],
                                      check=True, capture_output=True, text=True).stdout
            except subprocess.CalledProcessError as e:
                errors.append(f"{rule.id}: {q.where}: {e.stderr.strip()}")
                continue
            a, b = int(m["a"]), int(m["b"] or m["a"])
            lines = blob.splitlines()[a - 1:b]
            if len(lines) != b - a + 1:
                errors.append(f"{rule.id}: {q.where}: the file has {len(blob.splitlines())} lines")
                continue
            text = "\n".join(lines)
            if norm(q.text) not in norm(text):
                found = [i + 1 for i, line in enumerate(blob.splitlines()) if norm(q.text)[:40] in norm(line)]
                errors.append(f"{rule.id}: {q.where}: quote not in those lines (first words found at {found})")
                continue
            entries[q.where] = {"repo": m["repo"], "commit": m["commit"], "path": m["path"],
                                "lines": f"{a}-{b}", "text": text}
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    OUT.write_text(json.dumps([entries[k] for k in sorted(entries)], indent=1, ensure_ascii=False) + "\n")
    print(f"{len(entries)} quoted line ranges written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
