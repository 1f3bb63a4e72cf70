# zkhive images. Two targets from one file:
#   cpu            - slim Python image for the CPU roles: synthesis workers, the CPU prover,
#                    Flower, the client. `docker build --target cpu -t zkhive:cpu .`
#   gpu            - CUDA devel image with PyCUDA built in, for GPU prover workers.
#                    `docker build --target gpu -t zkhive:gpu .`
# Always pass --target: a plain `docker build` would build the last stage (gpu).
# Both run as the unprivileged user `zkhive` (uid 10001) and use the exec form, so SIGTERM from
# `docker stop` reaches the worker itself and starts Celery's warm shutdown (no shell in between).
#
# ZKHIVE_CACHE_DIR (/opt/zkhive/cache, owned by the zkhive user) holds the host libraries
# (arith/host.cpp, gpu/native: C++ from arith/include and gpu/kernels), cached R1CS matrices, cubins and the device-memory
# ledger. The host libraries every role loads are compiled at build time; g++ stays in the images
# for any other built on first use (keyed by a digest of their sources).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# devel, not runtime: PyCUDA compiles the .cu kernels with nvcc when a worker first loads them
ARG CUDA_IMAGE=nvidia/cuda:12.6.3-devel-ubuntu24.04

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README* ./
COPY arith arith
COPY synthesis synthesis
COPY gpu gpu
COPY cluster cluster
RUN python -m venv /opt/zkhive/venv \
 && /opt/zkhive/venv/bin/pip install --no-cache-dir .
ENV ZKHIVE_CACHE_DIR=/opt/zkhive/cache
# the host libraries every role loads, compiled here: otherwise each container compiles them on
# first use into its own layer (a first job took 2 minutes in the compose test on the loaded
# 2-core machine): field, the two a proof calls (gpu/native for_prover: the compact
# assignment's planes, the curve code), the Poseidon permutation (sealing, synthesis),
# fixed-base multiplication (`zkhive keys setup`)
RUN /opt/zkhive/venv/bin/python -c "from arith import native; from gpu.native import for_prover; from synthesis.bellpepper import neptune; from gpu.groth16 import fixed_base;\
    native.lib(); for_prover(); neptune._lib(); fixed_base._host()"

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS cpu
# g++ and libgomp: host libraries (OpenMP) not prebuilt above compile on first use
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 --user-group zkhive \
 && mkdir -p /var/lib/zkhive && chown zkhive:zkhive /var/lib/zkhive
COPY --from=build --chown=zkhive:zkhive /opt/zkhive /opt/zkhive
ENV PATH=/opt/zkhive/venv/bin:$PATH \
    ZKHIVE_CACHE_DIR=/opt/zkhive/cache \
    PYTHONUNBUFFERED=1
USER zkhive
WORKDIR /var/lib/zkhive
ENTRYPOINT ["zkhive"]
CMD ["--help"]

# ---------------------------------------------------------------------------------------------
FROM ${CUDA_IMAGE} AS gpu
# Ubuntu 24.04's Python is 3.12 (zkhive needs >= 3.11); python3-dev and g++ build PyCUDA and the
# host library; nvcc (from the devel image) stays for PyCUDA's run-time kernel compilation.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev g++ libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 --user-group zkhive \
 && mkdir -p /var/lib/zkhive && chown zkhive:zkhive /var/lib/zkhive
WORKDIR /src
COPY pyproject.toml README* ./
COPY arith arith
COPY synthesis synthesis
COPY gpu gpu
COPY cluster cluster
# PyCUDA links against libcuda; at build time only the driver stub exists (the real driver is
# mounted by the NVIDIA container runtime when the container starts).
ENV ZKHIVE_CACHE_DIR=/opt/zkhive/cache
RUN python3 -m venv /opt/zkhive/venv \
 && LIBRARY_PATH=/usr/local/cuda/lib64/stubs /opt/zkhive/venv/bin/pip install --no-cache-dir ".[gpu]" \
 && /opt/zkhive/venv/bin/python -c "from arith import native; from gpu.native import for_prover; from synthesis.bellpepper import neptune; from gpu.groth16 import fixed_base; native.lib(); for_prover(); neptune._lib(); fixed_base._host()" \
 && chown -R zkhive:zkhive /opt/zkhive/cache \
 && rm -rf /src
ENV PATH=/opt/zkhive/venv/bin:$PATH \
    PYTHONUNBUFFERED=1
USER zkhive
WORKDIR /var/lib/zkhive
ENTRYPOINT ["zkhive"]
CMD ["--help"]
