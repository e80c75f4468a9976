"""An attestation made by image.yml's own signing step verifies against the attestor the bootstrap renders.

Nothing here is the project's code checking itself:
- the signing step is image.yml's ``run:`` script, run by bash with the step's ``env:`` (the matrix target
  the workflow's ``stacks`` job computes with the real CLI), and a stand-in ``gcloud`` that does what
  ``gcloud beta container binauthz attestations sign-and-create`` does, and refuses what it refuses (Google Cloud SDK,
  googlecloudsdk/api_lib/container/binauthz/kms.py ``GetKeyUri``: the key version's SelfLink after
  ``https:``, i.e. ``//cloudkms.googleapis.com/v1/`` + its resource name, is the signature's publicKeyId;
  the payload is Red Hat's "simple signing" JSON naming the artifact's digest,
  https://cloud.google.com/binary-authorization/docs/making-attestations), signing with a real EC P-256 key;
- the attestor is the bootstrap program's, rendered under mocks whose key version data source answers as the
  provider does (id ``//cloudkms.googleapis.com/v1/<key>/cryptoKeyVersions/<n>``, slicectl/bootstrap_preview.py
  ``KMS_VERSION_ID``, quoted from terraform-provider-google) with that key's public half;
- the verification is Binary Authorization's rule (cloud rule binauthz-kms-key-id): a signature counts when
  an attestor public key has the id the signature names, and that key verifies it.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from test_bootstrap import BootstrapMocks, example_config, render
from test_workflows import load, run_stacks_job, steps, uses

ROOT = Path(__file__).resolve().parents[1]
DIGEST = "sha256:" + "ab" * 32

# The stand-in gcloud: sign-and-create as the SDK does it (see the module docstring), with the key in $SIGNING_KEY.
# What it refuses, the real SDK refuses too (Google Cloud SDK 578.0.0, as mirrored in
# google-cloud-sdk-unofficial/google-cloud-sdk@4643fc9c):
# - the GA track: lib/surface/container/binauthz/attestations/sign_and_create.py:38 is
#   `@base.ReleaseTracks(base.ReleaseTrack.BETA, base.ReleaseTrack.ALPHA)` (create.py:37 is the only GA command
#   beside list), so `gcloud container binauthz attestations sign-and-create` exits 2, "Invalid choice";
# - a track whose component is not installed ($GCLOUD_COMPONENTS: what setup-gcloud's install_components gave);
# - a project where the account may not create occurrences: Run() takes the occurrence's project from
#   `properties.VALUES.core.project.Get(required=True)` (:170-173; --project, else CLOUDSDK_CORE_PROJECT, which
#   google-github-actions/auth exports) and passes it to CreateAttestationOccurrence(project_ref=...) (:247-248);
#   the API answers PERMISSION_DENIED where the caller lacks containeranalysis.occurrences.create
#   ($OCCURRENCE_PROJECTS: the projects where the rendering grants it to the signer).
GCLOUD = r'''#!{python}
import base64, json, os, sys
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
argv = sys.argv[1:]
track = argv[0] if argv[:1] in (["alpha"], ["beta"]) else None
command = argv[1:5] if track else argv[:4]
if command != ["container", "binauthz", "attestations", "sign-and-create"]:
    sys.exit(f"stand-in gcloud: only [alpha|beta] container binauthz attestations sign-and-create: {{argv}}")
if track is None:
    print("ERROR: (gcloud.container.binauthz.attestations) Invalid choice: 'sign-and-create'.", file=sys.stderr)
    sys.exit(2)
if track not in os.environ.get("GCLOUD_COMPONENTS", "").split(","):
    print("ERROR: (gcloud) You do not currently have this command group installed.  Using it requires the "
          f"installation of components: [{{track}}]", file=sys.stderr)
    sys.exit(1)
args = dict(a.split("=", 1) for a in argv if a.startswith("--"))
project = args.get("--project") or os.environ.get("CLOUDSDK_CORE_PROJECT")
if not project:
    print("ERROR: (gcloud.beta.container.binauthz.attestations.sign-and-create) The required property [project] "
          "is not currently set.", file=sys.stderr)
    sys.exit(1)
if project not in json.loads(os.environ["OCCURRENCE_PROJECTS"]):
    print(f"ERROR: (gcloud.beta.container.binauthz.attestations.sign-and-create) PERMISSION_DENIED: Permission "
          f"'containeranalysis.occurrences.create' denied on resource 'projects/{{project}}'", file=sys.stderr)
    sys.exit(1)
url, keyversion = args["--artifact-url"], args["--keyversion"]
assert keyversion.startswith("projects/"), keyversion  # a full resource name (no --keyversion-* flags)
repository, digest = url.split("@", 1)
payload = json.dumps({{"critical": {{"identity": {{"docker-reference": repository}},
                                  "image": {{"docker-manifest-digest": digest}},
                                  "type": "Google cloud binauthz container signature"}}}}).encode()
key = serialization.load_pem_private_key(open(os.environ["SIGNING_KEY"], "rb").read(), None)
signature = key.sign(payload, ec.ECDSA(hashes.SHA256()))
self_link = "https://cloudkms.googleapis.com/v1/" + keyversion  # resources.REGISTRY ... SelfLink()
json.dump({{"project": project, "attestor": args["--attestor"], "publicKeyId": self_link.split(":", 1)[1],
           "signature": base64.b64encode(signature).decode(), "serializedPayload": base64.b64encode(payload).decode()}},
          open(os.environ["ATTESTATION_OUT"], "w"))
'''


def signer_context(boot) -> dict[str, str]:
    """What the cloud side gives the signing step, from the rendering: the core/project google-github-actions/auth
    exports (auth@7c6bc770 src/main.ts:220, CLOUDSDK_CORE_PROJECT; src/utils.ts:77 computeProjectID, the
    project in the account's email) and the projects where the image signer may create occurrences."""
    roles = {f"projects/{r.inputs['project']}/roles/{r.inputs['roleId']}": r.inputs.get("permissions", [])
             for r in boot.of("gcp:projects/iAMCustomRole:IAMCustomRole")}
    signer = [r.inputs for r in boot.of("gcp:projects/iAMMember:IAMMember")
              if r.inputs["member"].startswith("serviceAccount:ci-image")]
    projects = sorted({g["project"] for g in signer
                       if "containeranalysis.occurrences.create" in roles.get(g["role"], [])})
    emails = {g["member"].removeprefix("serviceAccount:") for g in signer}
    (home,) = {e.split("@", 1)[1].split(".", 1)[0] for e in emails}
    return {"CLOUDSDK_CORE_PROJECT": home, "OCCURRENCE_PROJECTS": json.dumps(projects)}


def sign_with_image_yml(target: dict, tmp_path: Path, key_pem: bytes, context: dict[str, str],
                        run: str | None = None, components: str | None = None) -> subprocess.CompletedProcess:
    """Run image.yml's signing step (or `run`, a variant of it) for one matrix target, with the components its
    setup-gcloud step installs (or `components`)."""
    job = load("image.yml")["jobs"]["build"]
    (step,) = [s for s in steps(job) if "sign-and-create" in s.get("run", "")]
    (setup,) = uses(job, "google-github-actions/setup-gcloud")
    installed = setup.get("with", {}).get("install_components", "") if components is None else components
    env = {}
    for k, v in step["env"].items():
        m = re.fullmatch(r"\$\{\{ matrix\.target\.(\w+) \}\}", v)
        env[k] = target[m.group(1)] if m else {"${{ steps.push.outputs.digest }}": DIGEST}[v]
    bin_dir = tmp_path / "gcloud-bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "gcloud").write_text(GCLOUD.format(python=sys.executable))
    (bin_dir / "gcloud").chmod(0o755)
    (tmp_path / "key.pem").write_bytes(key_pem)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", run or step["run"]], cwd=tmp_path, text=True,
                          capture_output=True,
                          env={**env, **context, "PATH": f"{bin_dir}:/usr/bin:/bin",
                               "GCLOUD_COMPONENTS": ",".join(c.strip() for c in installed.split(",")),
                               "SIGNING_KEY": str(tmp_path / "key.pem"),
                               "ATTESTATION_OUT": str(tmp_path / "attestation.json"),
                               "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "GITHUB_SHA": "0" * 40})


def attestation_of(result: subprocess.CompletedProcess, tmp_path: Path) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads((tmp_path / "attestation.json").read_text())


def verifies(attestation: dict, attestor: dict) -> bool:
    """Binary Authorization's check of one signature against one attestor's PKIX keys."""
    keys = attestor["attestationAuthorityNote"]["publicKeys"]
    payload = base64.b64decode(attestation["serializedPayload"])
    for k in keys:
        if k["id"] != attestation["publicKeyId"]:
            continue
        public = serialization.load_pem_public_key(k["pkixPublicKey"]["publicKeyPem"].encode())
        try:
            public.verify(base64.b64decode(attestation["signature"]), payload, ec.ECDSA(hashes.SHA256()))
            return True
        except InvalidSignature:
            return False
    return False


@pytest.fixture(scope="module")
def signing_key():
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


@pytest.fixture(scope="module")
def boot(signing_key):
    return render(example_config(), BootstrapMocks(pem=signing_key[1]))


@pytest.fixture(scope="module")
def context(boot):
    return signer_context(boot)


def test_an_attestation_made_by_image_yml_verifies_against_the_rendered_attestor(boot, signing_key, context, tmp_path):
    targets = run_stacks_job("image.yml", tmp_path)["image"]
    assert targets
    attestors = {f"projects/{r.inputs['project']}/attestors/{r.inputs['name']}": r.inputs
                 for r in boot.of("gcp:binaryauthorization/attestor:Attestor")}
    for i, target in enumerate(targets):
        attestation = attestation_of(sign_with_image_yml(target, tmp_path / f"t{i}", signing_key[0], context),
                                     tmp_path / f"t{i}")
        attestor = attestors[attestation["attestor"]]  # the attestor the workflow names is the rendered one
        assert verifies(attestation, attestor), (attestation["publicKeyId"],
                                                 [k["id"] for k in attestor["attestationAuthorityNote"]["publicKeys"]])
        payload = json.loads(base64.b64decode(attestation["serializedPayload"]))
        assert payload["critical"]["image"]["docker-manifest-digest"] == DIGEST
        assert payload["critical"]["identity"]["docker-reference"] == target["image"]
        # The occurrence lands in the stack's project, beside the attestor's note, not in core/project (CI's).
        assert attestation["project"] == attestor["project"] != context["CLOUDSDK_CORE_PROJECT"]
        note = attestor["attestationAuthorityNote"]["noteReference"]
        assert not note.startswith("projects/") or note.split("/")[1] == attestation["project"], note


def test_a_double_prefixed_key_id_would_verify_nothing(boot, signing_key, context, tmp_path):
    """The defect this guards against: the data source's id prefixed once more names no key gcloud signs with."""
    (target, *_) = run_stacks_job("image.yml", tmp_path)["image"]
    attestation = attestation_of(sign_with_image_yml(target, tmp_path / "t", signing_key[0], context), tmp_path / "t")
    attestor = {f"projects/{r.inputs['project']}/attestors/{r.inputs['name']}": r.inputs
                for r in boot.of("gcp:binaryauthorization/attestor:Attestor")}[attestation["attestor"]]
    doubled = json.loads(json.dumps(attestor))
    for k in doubled["attestationAuthorityNote"]["publicKeys"]:
        k["id"] = "//cloudkms.googleapis.com/v1/" + k["id"]
    assert verifies(attestation, attestor) and not verifies(attestation, doubled)


def test_image_yml_signs_with_the_beta_command_in_the_stack_project():
    """REVIEW-trust.md D1: the step names the beta track and the attestor's project, and setup-gcloud installs the
    beta component (the stand-in tests above run the step; this names what they rely on)."""
    job = load("image.yml")["jobs"]["build"]
    run = _step_run()
    assert re.search(r"gcloud beta container binauthz attestations sign-and-create --project=\"\$project\"", run)
    # The project is the stack's registry's, and the attestor must be of it (tests/test_image.py refuses the rest).
    assert 'project="$(printf \'%s\' "$REGISTRY" | cut -d/ -f2)"' in run and '"projects/$project/attestors/"*' in run
    (setup,) = uses(job, "google-github-actions/setup-gcloud")
    assert "beta" in [c.strip() for c in setup["with"]["install_components"].split(",")]
    (sign,) = [s for s in steps(job) if "sign-and-create" in s.get("run", "")]
    assert steps(job).index(setup) < steps(job).index(sign)


def _step_run() -> str:
    (step,) = [s for s in steps(load("image.yml")["jobs"]["build"]) if "sign-and-create" in s.get("run", "")]
    return step["run"]


@pytest.mark.parametrize(("edit", "components", "message"), [
    # The GA form the step used to run: GA gcloud has only `create` and `list`.
    (("gcloud beta container", "gcloud container"), None, "Invalid choice: 'sign-and-create'"),
    # The beta track without setup-gcloud's `beta` component.
    (None, "", "requires the installation of components: [beta]"),
    # Without --project the occurrence goes to core/project: the CI project, where the signer creates nothing.
    ((' --project="$project"', ""), None, "PERMISSION_DENIED"),
    # Another project than the attestor's.
    (('--project="$project"', '--project="my-tpu-ci"'), None, "PERMISSION_DENIED"),
])
def test_the_stand_in_refuses_what_the_sdk_refuses(boot, signing_key, context, tmp_path, edit, components, message):
    """Each way the step could go wrong fails the step, as the real SDK and API would: the stand-in is not a
    rubber stamp of whatever the workflow runs."""
    (target, *_) = run_stacks_job("image.yml", tmp_path)["image"]
    run = _step_run()
    if edit:
        assert edit[0] in run, edit
        run = run.replace(edit[0], edit[1])
    result = sign_with_image_yml(target, tmp_path / "t", signing_key[0], context, run=run, components=components)
    assert result.returncode != 0 and message in result.stderr, result.stderr
    assert not (tmp_path / "t" / "attestation.json").exists()


def test_the_step_refuses_an_attestor_that_names_no_project(signing_key, context, tmp_path):
    (target, *_) = run_stacks_job("image.yml", tmp_path)["image"]
    result = sign_with_image_yml({**target, "attestor": "my-attestor"}, tmp_path / "t", signing_key[0], context)
    assert result.returncode == 1 and "the attestor my-attestor is not of the registry's project" in result.stdout
