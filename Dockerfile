# One gateway process (uvicorn + uvloop + httptools). Run several behind a load balancer with
# GATEWAY_STORE_URL=redis://... so that wallets, idempotency and limits are shared.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    GATEWAY_HOST=0.0.0.0 GATEWAY_PORT=8080 \
    GATEWAY_CONFIG=/app/config/gateway.toml GATEWAY_DATA_DIR=/data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY providers ./providers
COPY config ./config
RUN pip install --no-cache-dir . && useradd --system --uid 10001 gateway \
    && mkdir -p /data && chown gateway /data

USER gateway
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=2s CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/v1/health').status == 200 else 1)"
CMD ["gateway", "serve"]
