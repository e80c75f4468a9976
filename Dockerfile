# syntax=docker/dockerfile:1
# The Ray TPU workers' image: the pinned Ray TPU image (the prod stack's ray.image) with MaxText
# and the trainer installed at build time, so a worker (and every restart of one) starts without
# downloading or installing anything. Built and pushed by .github/workflows/image.yml to the
# Artifact Registry repository the stack creates (infra/registry.py); the stack's image.digest
# names the result. tests/test_image.py checks the facts below against the ones the workers use.

# The base: the prod stack's tpu-multislice:ray.image (jax[tpu] and libtpu preinstalled).
ARG RAY_IMAGE=rayproject/ray:2.60.0-py312-tpu
# Its digest pins the base byte for byte. It is written once, in base-image.digest (beside this file), which
# image.yml reads and passes as --build-arg; the workflow refuses to build while that file holds no
# sha256:<64 hex digits>, and without the build-arg the reference `<image>@` is invalid and `docker build` stops
# (fail closed both ways: the signed image never rests on a tag).
ARG RAY_IMAGE_DIGEST
FROM ${RAY_IMAGE}@${RAY_IMAGE_DIGEST}

# MaxText and its whole tree as uv.lock resolves them (the worker-image group: WORKER_PACKAGES of
# workloads/trainer/maxtext_trainer.py), every file checked against the lock's sha256 (pip's hash-checking mode;
# image-requirements.txt is `uv export --only-group worker-image`, tests/test_image.py compares it with the lock).
# Every package installs from a wheel but the ones named in --no-binary, which ship no wheel for this platform:
# their sdist is hashed too, and it builds with the base image's own setuptools (--no-build-isolation: pip would
# otherwise fetch an unhashed build backend). tests/test_image.py fails if that list grows.
COPY workloads/trainer/image-requirements.txt /tmp/image-requirements.txt

# Into the image's own Python (the one Ray runs), not a venv: Ray's workers import from it.
RUN pip install --no-cache-dir --require-hashes --no-deps --only-binary :all: --no-binary promise --no-build-isolation \
        -r /tmp/image-requirements.txt \
    && rm /tmp/image-requirements.txt \
    && python -c "import MaxText, jax, ray; print('maxtext ok, jax', jax.__version__, 'ray', ray.__version__)"

# The trainer script and its modules, as the RayJob's ConfigMap carries them (the driver runs the mounted copy, whose
# digest, over the script and its modules, rides on the RayJob; this one makes the image self-contained for smoke tests).
COPY --chown=ray:users workloads/trainer/maxtext_trainer.py workloads/trainer/elastic_verdict.py \
     workloads/trainer/lease_holder.py workloads/trainer/maxtext_imports.py workloads/trainer/progress_lines.py \
     workloads/trainer/restart_precompile.py workloads/trainer/shipped_files.py workloads/trainer/warm_spares.py \
     workloads/trainer/worker_loop.py \
     /home/ray/image-trainer/
RUN python /home/ray/image-trainer/maxtext_trainer.py --help > /dev/null

LABEL org.opencontainers.image.source="https://github.com/my-org/tpu-multislice" \
      org.opencontainers.image.description="Ray TPU worker with MaxText 0.2.1 and the tpu-multislice trainer"
