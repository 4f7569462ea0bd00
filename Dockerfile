# The gateway (uvicorn + uvloop + httptools): one process by default, on the embedded SQLite
# store. With GATEWAY_STORE_URL=redis://... wallets, idempotency and limits are shared, so run
# several containers behind a load balancer and, in each, one serving process per core it gets:
#   docker run ... -e GATEWAY_STORE_URL=redis://redis:6379/0 gateway gateway serve --processes 4
# (or -e GATEWAY_PROCESSES=4; docs/deploy.md). `gateway serve` stays the main process and
# supervises them: SIGTERM drains them all. Configuration comes from the environment and a
# routing file: mount your own over /app/config/gateway.toml (or set GATEWAY_CONFIG). No secret
# is baked in: provider keys come from the environment variables the routing file names
# (api_key_env).

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY providers ./providers
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    GATEWAY_HOST=0.0.0.0 GATEWAY_PORT=8080 GATEWAY_PROCESSES=1 \
    GATEWAY_CONFIG=/app/config/gateway.toml GATEWAY_DATA_DIR=/data
WORKDIR /app
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels /wheels/generation_gateway-*.whl \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home gateway \
    && mkdir -p /data \
    && chown 10001 /data
COPY config ./config
USER 10001
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import os,sys,urllib.request as u; sys.exit(0 if u.urlopen('http://127.0.0.1:%s/v1/health' % os.environ.get('GATEWAY_PORT', '8080'), timeout=2).status == 200 else 1)"]
CMD ["gateway", "serve"]
