"""Every input gets an answer, never a traceback: broken stack files, flags and files through the CLI.

Each case runs ``slicectl preview`` in-process on a stack file written to a temporary
directory and checks the exit code (``slicectl/exits.py``), that every error line names the
file (and line, where the file has one) first, and that nothing was rendered.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FIXTURE_STACKS

from slicectl import cli
from slicectl.exits import Exit
from stackspec import spec as stack_spec

ROOT = Path(__file__).resolve().parents[1]
PROD = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
_TOPOLOGY_LINE = PROD.splitlines().index("      topology: 4x4") + 1  # the first slice's
NS = stack_spec.PROJECT


def run(tmp_path: Path, text: str, capsys, *extra: str) -> tuple[int, str]:
    (tmp_path / "Pulumi.case.yaml").write_text(text)
    out = tmp_path / "out"
    code = cli.main(["preview", "--stack", "case", "--stacks-dir", str(tmp_path), "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code != Exit.OK:
        assert not (out / "resources.json").exists(), "a failed preview rendered resources"
    return code, err


def edited(fn) -> str:
    doc = yaml.safe_load(PROD)
    fn(doc["config"])
    return yaml.safe_dump(doc, sort_keys=False)


SPEC_CASES: dict[str, tuple[str, list[str]]] = {
    "yaml syntax error": (PROD.replace("  gcp:region: us-east5\n", "  gcp:region: [us-east5\n"),
                          ["not valid YAML"]),
    "empty file": ("", ["the stack file is empty"]),
    # Numbers that pass every bound as written and overflow the arithmetic after them.
    "infinite batch": (PROD.replace("      perDeviceBatchSize: 4\n", "      perDeviceBatchSize: .inf\n", 1),
                       ["perDeviceBatchSize", "finite"]),
    "astronomical memory": (PROD.replace("    clusterName: maxtext-tpu-cluster\n",
                                         "    clusterName: maxtext-tpu-cluster\n    headMemory: 1e400\n"),
                            ["ray.headMemory = \"1e400\": larger than any machine can allocate"]),
    "one subnet name twice": (PROD.replace("      - subnet: tpu-subnet-2", "      - subnet: tpu-subnet-1"),
                              ["each secondary network needs its own subnet name"]),
    "only a comment": ("# nothing yet\n", ["the stack file is empty"]),
    "not a mapping": ("- a\n- b\n", ["a stack file is a mapping"]),
    "config is a list": ("config:\n  - a\n", ["config = [\"a\"]: must be a mapping"]),
    "missing gcp:region": (PROD.replace("  gcp:region: us-east5\n", ""), ["gcp:region = (missing): required"]),
    "missing gcp:zone": (PROD.replace("  gcp:zone: us-east5-b", "  # no zone"), ["gcp:zone = (missing): required"]),
    "duplicate key": (PROD.replace("      topology: 4x4\n", "      topology: 4x4\n      topology: 2x4\n", 1),
                      [f":{_TOPOLOGY_LINE + 1}: tpu-multislice:slices[0].topology = \"2x4\": duplicate key "
                       f"(first set on line {_TOPOLOGY_LINE})"]),
    "no environment": (PROD.replace("  tpu-multislice:environment: prod\n", ""),
                       [f"{NS}:environment = (missing): required; allowed: dev, prod"]),
    "unknown stack-file key": ("secretprovider: x\n" + PROD, ["secretprovider = \"x\": unknown stack-file key"]),
    "section not an object": (edited(lambda c: c.update({f"{NS}:cluster": "maxtext"})),
                              [f"{NS}:cluster = \"maxtext\""]),
    "cluster name too long": (edited(lambda c: c[f"{NS}:cluster"].update(name="m" * 41)),
                              ["a GKE cluster name has 1-40 characters, this has 41"]),
    "node pool name too long": (edited(lambda c: c[f"{NS}:slices"][0].update(name="v6e-" + "x" * 40)),
                                ["a GKE node pool name has 1-40 characters"]),
    "ray job name too long": (edited(lambda c: c[f"{NS}:jobs"][0].update(name="j" * 48)),
                              ["a RayJob name has 1-47 characters"]),
    "port out of range": (edited(lambda c: c.setdefault(f"{NS}:ray", {}).update(megascalePort=70000)),
                          ["must be at most 65535"]),
    "port on a Ray port": (edited(lambda c: c[f"{NS}:ray"].update(metricsExportPort=6379)),
                           [f"{NS}:ray.metricsExportPort = 6379: port 6379 is Ray's gcs-server port"]),
    "memory not a quantity": (edited(lambda c: c[f"{NS}:ray"].update(workerMemory="200 gigabytes")),
                              ["not a Kubernetes quantity"]),
    "head larger than its node": (edited(lambda c: c[f"{NS}:ray"].update(headCpu="16")),
                                  ["the Ray head runs on the system pool: 16 CPU asked"]),
    "worker larger than its TPU host": (edited(lambda c: c[f"{NS}:ray"].update(workerMemory="800Gi")),
                                        ["runs alone on its TPU host", "800.0Gi memory asked"]),
    "public subnet": (edited(lambda c: c[f"{NS}:network"]["secondary"][0].update(cidr="8.8.0.0/16")),
                      ["must lie in a private range"]),
    "subnet too small for the hosts": (
        edited(lambda c: c[f"{NS}:network"]["secondary"][0].update(cidr="10.50.0.0/29")),
        ["4 usable addresses, the slices have 8 hosts"]),
    "pod range too small for the nodes": (edited(lambda c: c[f"{NS}:cluster"].update(podCidr="10.100.0.0/22")),
                                          ["holds 4 node(s) at a /24 per node"]),
    "zone outside the region": (PROD.replace("gcp:zone: us-east5-b", "gcp:zone: us-west1-b"),
                                ["must be a zone of gcp:region us-east5"]),
    "machine type not allowed": (edited(lambda c: c[f"{NS}:cluster"].update(systemMachineType="n1-standard-7")),
                                 ["allowed: n1-standard-4"]),
    "misspelt key": (edited(lambda c: c[f"{NS}:storage"].update(serviceAcount="x")),
                     ["unknown key (did you mean serviceAccount?)"]),
    "passphrase in prod": ("encryptionsalt: v1:abc\n" + PROD, ["Cloud KMS, not a passphrase"]),
    # Cloud KMS key paths as the provider parses them (kms_utils.go cryptoKeyRelativeLinkRegex).
    "KMS key without a location": (PROD.replace("gcpkms://projects/my-tpu-ci/locations/global/keyRings/",
                                                "gcpkms://projects/my-tpu-ci/keyRings/"),
                                   ["secretsprovider", "not a Cloud KMS key"]),
    "KMS key ring with a dot": (PROD.replace("/keyRings/pulumi/", "/keyRings/pulumi.state/"),
                                ["not a Cloud KMS key"]),
    "reservation name in capitals": (
        edited(lambda c: [s.update(capacity=[{"type": "reservation", "reservation": "V6E_Res"}]) for s in
                          c[f"{NS}:slices"]]),
        [f"{NS}:slices[0].capacity[0].reservation = \"V6E_Res\": not a Compute Engine reservation name"]),
    "image reference with a space": (edited(lambda c: c[f"{NS}:ray"].update(image="rayproject/ray 2.60")),
                                     [f"{NS}:ray.image", "not an image reference"]),
    "image location not a region": (edited(lambda c: c[f"{NS}:image"].update(location="usa")),
                                    [f"{NS}:image.location = \"usa\": not an Artifact Registry location"]),
    "flex-start where GKE offers none for v6e": (
        edited(lambda c: [s.update(capacity=[{"type": "flex-start"}, {"type": "on-demand"}]) for s in
                          c[f"{NS}:slices"]] and None or c.update({"gcp:zone": "us-east5-c"})),
        ["GKE offers flex-start for TPU v6e only in asia-northeast1-b, us-east5-a, us-east5-b"]),
}


@pytest.mark.parametrize("case", list(SPEC_CASES))
def test_invalid_stack_files_exit_3_with_one_line_per_problem(case, tmp_path, capsys):
    text, expected = SPEC_CASES[case]
    code, err = run(tmp_path, text, capsys)
    assert code == Exit.INVALID_SPEC, err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert lines, err
    for line in lines:
        assert line.startswith(f"error: {tmp_path}/Pulumi.case.yaml"), line
    for fragment in expected:
        assert fragment in err, err


def test_all_problems_at_once(tmp_path, capsys):
    def many(c):
        c[f"{NS}:cluster"]["name"] = "m" * 41
        c[f"{NS}:storage"]["bucket"] = "google-checkpoints"
        c[f"{NS}:ray"]["megascalePort"] = 0
        c[f"{NS}:slices"][0]["topology"] = "4x5"

    code, err = run(tmp_path, edited(many), capsys)
    assert code == Exit.INVALID_SPEC
    for key in ("cluster.name", "storage.bucket", "ray.megascalePort", "slices[0].topology"):
        assert f"{NS}:{key}" in err


def test_usage_and_file_errors_exit_2(tmp_path, capsys):
    (tmp_path / "Pulumi.prod.yaml").write_text(PROD)
    base = ["preview", "--stack", "prod", "--stacks-dir", str(tmp_path)]
    cases = {
        "out is a file": (["--out", str(tmp_path / "Pulumi.prod.yaml")], "is a file"),
        "missing policy config": (["--policy-config", str(tmp_path / "nope.json")], "No such file"),
        "policy config not JSON": (["--policy-config", str(_write(tmp_path / "p.json", "{oops"))], "not JSON"),
        "unknown rule": (["--policy-config", str(_write(tmp_path / "q.json", json.dumps({"tpu-topolgy-valid":
                                                                                          "advisory"})))],
                         "did you mean tpu-topology-valid?"),
        "bad level": (["--policy-config", str(_write(tmp_path / "r.json", json.dumps({"all": "loud"})))],
                      "enforcementLevel 'loud'"),
        "unknown setting": (["--policy-config", str(_write(tmp_path / "s.json", json.dumps(
            {"allowed-locations": {"allowedRegion": ["x"]}})))], "unknown setting(s) ['allowedRegion']"),
    }
    for name, (extra, expected) in cases.items():
        code = cli.main([*base, "--out", str(tmp_path / "out"), *extra] if "--out" not in extra else
                        [*base, *extra])
        err = capsys.readouterr().err
        assert code == Exit.USAGE, (name, err)
        assert expected in err and "Traceback" not in err, (name, err)
    assert cli.main(["preview", "--stack", "nope", "--stacks-dir", str(tmp_path)]) == Exit.USAGE
    assert "no such stack file; stacks here: prod" in capsys.readouterr().err
    assert cli.main(["preview"]) == Exit.USAGE  # argparse: --stack is required
    assert cli.main(["train", "--stack", "prod"]) == Exit.USAGE  # train runs --local only
    assert cli.main(["train", "--local", "--stack", "prod", "--job", "nope"]) == Exit.USAGE
    assert "no job named 'nope'" in capsys.readouterr().err


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# A value of every kind in every place: the spec answers each with a SpecError, never another exception.
WEIRD: list[Any] = [None, -1, 0, "", "x" * 300, 1.5, True, [], {}, [1, "a"], {"a": {"b": 1}}, "10.0.0.0/33"]


def _leaves(obj: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _leaves(v, (*path, k))] + ([path] if path else [])
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _leaves(v, (*path, i))] + [path]
    return [path]


def test_no_value_anywhere_raises_anything_but_a_spec_error():
    doc = yaml.safe_load(PROD)["config"]
    tried = 0
    for path in _leaves(doc):
        for value in WEIRD:
            config = copy.deepcopy(doc)
            cur = config
            for p in path[:-1]:
                cur = cur[p]
            cur[path[-1]] = value
            try:
                stack_spec.load("prod", stack_spec.flat_config(config))
            except stack_spec.SpecError as e:
                assert e.problems and all(p.key and p.message for p in e.problems)
            tried += 1
    assert tried > 500


@pytest.mark.parametrize("location", ["us", "europe", "asia", "us-east5"])
def test_artifact_registry_multi_regions_are_accepted(location):
    """Artifact Registry takes a region or one of its multi-regions (``asia``, ``europe``, ``us``) as a repository's
    location (terraform-provider-google artifact_registry_repository docs); the spec used to refuse the latter."""
    from offline import engine

    cfg = dict(engine.stack_config("prod"))
    image = json.loads(cfg[f"{NS}:image"])
    image["location"] = location
    cfg[f"{NS}:image"] = json.dumps(image)
    spec = stack_spec.load("prod", cfg)
    assert spec.image.location == location


def test_a_stacks_dir_that_is_not_there_checks_nothing_and_says_so(tmp_path, capsys):
    """Issue 27: ``stacks --stacks-dir <typo>`` printed empty lists and exit 0: the workflows would act on none."""
    for command in (["stacks"], ["stacks", "--format", "github"], ["lint"]):
        assert cli.main([*command, "--stacks-dir", str(tmp_path / "nonexistent")]) == Exit.USAGE, command
        captured = capsys.readouterr()
        (line,) = captured.err.strip().splitlines()
        assert line == f"error: {tmp_path / 'nonexistent'}: no such stacks directory", command
        assert captured.out == "" and "Traceback" not in captured.err
