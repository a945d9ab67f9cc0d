# syntax=docker/dockerfile:1
# The placement-webhook image: one image for `placement-webhook serve`,
# `reconcile` and `extender`, and for `python -m certs in-cluster`.
#   docker build -t placement-webhook:0.1.0 .
#   make image      # the same file with buildah, on a base made from Debian packages
#
# Runs as a numeric non-root user (so runAsNonRoot can check it) with a
# read-only root filesystem: bytecode is compiled at build time, and the
# only runtime write is gunicorn's heartbeat file in /tmp (an emptyDir in
# the Deployments). Pin the base images by digest in your own builds.
#
# Two stages: the first makes the virtualenv (pip and its caches stay
# there), the last copies only the virtualenv onto a clean base.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Dependencies first (read from pyproject.toml), so a code change reuses this layer.
COPY pyproject.toml README.md ./
RUN python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
    && pip install --only-binary=:all: -r requirements.txt
COPY webhook ./webhook
COPY certs ./certs
# The installer itself is not needed at run time: pip and setuptools leave the
# virtualenv, and so do the test suites that wheels ship inside their packages.
RUN pip install --no-deps --no-compile . \
    && python3 -m pip uninstall --yes --quiet pip setuptools \
    && find /opt/venv/lib -depth -type d -name tests -path '*/numpy/*' -exec rm -rf {} + \
    && python3 -m compileall -q -j 0 /opt/venv/lib

FROM ${PYTHON_IMAGE}
# Same base as the build stage: the venv's interpreter links to its python.
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /tmp
EXPOSE 8443
ENTRYPOINT ["placement-webhook"]
CMD ["serve"]
