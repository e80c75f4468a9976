"""An attestation made by image.yml's own signing step verifies against the attestor the bootstrap renders.

Nothing here is the project's code checking itself:
- the signing step is image.yml's ``run:`` script, run by bash with the step's ``env:`` (the matrix target
  the workflow's ``stacks`` job computes with the real CLI), and a stand-in ``gcloud`` that does what
  ``gcloud container binauthz attestations sign-and-create`` does (Google Cloud SDK,
  googlecloudsdk/api_lib/container/binauthz/kms.py ``GetKeyUri``: the key version's SelfLink after
  ``https:``, i.e. ``//cloudkms.googleapis.com/v1/`` + its resource name, is the signature's publicKeyId;
  the payload is Red Hat's "simple signing" JSON naming the artifact's digest,
  https://cloud.google.com/binary-authorization/docs/making-attestations), signing with a real EC P-256 key;
- the attestor is the bootstrap program's, rendered under mocks whose key version data source answers as the
  provider does (id ``//cloudkms.googleapis.com/v1/<key>/cryptoKeyVersions/<n>``, tests/test_bootstrap.py
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
from test_workflows import load, run_stacks_job, steps

ROOT = Path(__file__).resolve().parents[1]
DIGEST = "sha256:" + "ab" * 32

# The stand-in gcloud: sign-and-create as the SDK does it (see the module docstring), with the key in $SIGNING_KEY.
GCLOUD = r'''#!{python}
import base64, json, os, sys
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
args = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
assert sys.argv[1:5] == ["container", "binauthz", "attestations", "sign-and-create"], sys.argv
url, keyversion = args["--artifact-url"], args["--keyversion"]
assert keyversion.startswith("projects/"), keyversion  # a full resource name (no --keyversion-* flags)
repository, digest = url.split("@", 1)
payload = json.dumps({{"critical": {{"identity": {{"docker-reference": repository}},
                                  "image": {{"docker-manifest-digest": digest}},
                                  "type": "Google cloud binauthz container signature"}}}}).encode()
key = serialization.load_pem_private_key(open(os.environ["SIGNING_KEY"], "rb").read(), None)
signature = key.sign(payload, ec.ECDSA(hashes.SHA256()))
self_link = "https://cloudkms.googleapis.com/v1/" + keyversion  # resources.REGISTRY ... SelfLink()
json.dump({{"attestor": args["--attestor"], "publicKeyId": self_link.split(":", 1)[1],
           "signature": base64.b64encode(signature).decode(), "serializedPayload": base64.b64encode(payload).decode()}},
          open(os.environ["ATTESTATION_OUT"], "w"))
'''


def sign_with_image_yml(target: dict, tmp_path: Path, key_pem: bytes) -> dict:
    """Run image.yml's signing step for one matrix target; the attestation the stand-in gcloud made."""
    job = load("image.yml")["jobs"]["build"]
    (step,) = [s for s in steps(job) if "sign-and-create" in s.get("run", "")]
    env = {}
    for k, v in step["env"].items():
        m = re.fullmatch(r"\$\{\{ matrix\.target\.(\w+) \}\}", v)
        env[k] = target[m.group(1)] if m else {"${{ steps.push.outputs.digest }}": DIGEST}[v]
    bin_dir = tmp_path / "gcloud-bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "gcloud").write_text(GCLOUD.format(python=sys.executable))
    (bin_dir / "gcloud").chmod(0o755)
    (tmp_path / "key.pem").write_bytes(key_pem)
    out = tmp_path / "attestation.json"
    subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], check=True, cwd=tmp_path,
                   env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin", "SIGNING_KEY": str(tmp_path / "key.pem"),
                        "ATTESTATION_OUT": str(out), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
                        "GITHUB_SHA": "0" * 40})
    return json.loads(out.read_text())


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


def test_an_attestation_made_by_image_yml_verifies_against_the_rendered_attestor(boot, signing_key, tmp_path):
    targets = run_stacks_job("image.yml", tmp_path)["image"]
    assert targets
    attestors = {f"projects/{r.inputs['project']}/attestors/{r.inputs['name']}": r.inputs
                 for r in boot.of("gcp:binaryauthorization/attestor:Attestor")}
    for i, target in enumerate(targets):
        attestation = sign_with_image_yml(target, tmp_path / f"t{i}", signing_key[0])
        attestor = attestors[attestation["attestor"]]  # the attestor the workflow names is the rendered one
        assert verifies(attestation, attestor), (attestation["publicKeyId"],
                                                 [k["id"] for k in attestor["attestationAuthorityNote"]["publicKeys"]])
        payload = json.loads(base64.b64decode(attestation["serializedPayload"]))
        assert payload["critical"]["image"]["docker-manifest-digest"] == DIGEST
        assert payload["critical"]["identity"]["docker-reference"] == target["image"]


def test_a_double_prefixed_key_id_would_verify_nothing(boot, signing_key, tmp_path):
    """The defect this guards against: the data source's id prefixed once more names no key gcloud signs with."""
    (target, *_) = run_stacks_job("image.yml", tmp_path)["image"]
    attestation = sign_with_image_yml(target, tmp_path / "t", signing_key[0])
    attestor = {f"projects/{r.inputs['project']}/attestors/{r.inputs['name']}": r.inputs
                for r in boot.of("gcp:binaryauthorization/attestor:Attestor")}[attestation["attestor"]]
    doubled = json.loads(json.dumps(attestor))
    for k in doubled["attestationAuthorityNote"]["publicKeys"]:
        k["id"] = "//cloudkms.googleapis.com/v1/" + k["id"]
    assert verifies(attestation, attestor) and not verifies(attestation, doubled)
