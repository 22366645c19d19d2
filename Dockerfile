# syntax=docker/dockerfile:1
# warmpool's images (README "Deployment"). One CPU image for every role — api, dispatcher,
# scaler, CPU workers — and a GPU image for workers with ONNX Runtime's CUDA execution provider:
#
#   docker build --target runtime     -t warmpool:0.1.0 .
#   docker build --target runtime-gpu -t warmpool:0.1.0-gpu .
#   docker run warmpool:0.1.0 api            (or: dispatcher, scaler, worker --model M)
#   docker run --gpus all -e EXECUTION_PROVIDERS=cuda,cpu warmpool:0.1.0-gpu worker --model M
#
# Bases are pinned to exact versions (add an @sha256 digest where your registry policy asks).
ARG NODE_VERSION=20.20.2
ARG CUDA_BASE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04

# Production dependencies from the lockfile. .npmrc comes first: it sets
# onnxruntime-node-install=skip, so `npm ci` downloads nothing beyond the registry (the CPU
# binaries are inside the package).
FROM node:${NODE_VERSION}-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# The same, plus ONNX Runtime's CUDA 12 provider libraries, fetched by onnxruntime-node's own
# installer (the environment variable overrides .npmrc's skip). Needs network at build time.
FROM deps AS deps-gpu
RUN ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node

# The compiled JavaScript (`npm run build`: esbuild, a dev dependency, so in a stage of its own;
# the runtime images get dist/ and never the dev dependencies). Tests stay out: .dockerignore.
# `--check` fails the image build if dist/ is not what the sources say.
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY bin ./bin
COPY api ./api
COPY infra ./infra
COPY worker ./worker
COPY scripts ./scripts
RUN npm run build && node scripts/build.mjs --check

# The application: dist/ and the sources it was built from, byte for byte and with their times
# (bin/warmpool.mjs checks dist/ against them at every start, and code finds its assets, such
# as the dashboard's, beside its source file).
FROM scratch AS app
WORKDIR /app
COPY --from=build /app/package.json /app/tsconfig.json ./
COPY --from=build /app/bin ./bin
COPY --from=build /app/api ./api
COPY --from=build /app/infra ./infra
COPY --from=build /app/worker ./worker
COPY --from=build /app/scripts ./scripts
COPY --from=build /app/dist ./dist
COPY deploy/docker/healthcheck.mjs ./deploy/docker/healthcheck.mjs

FROM node:${NODE_VERSION}-bookworm-slim AS node

# CPU image: every role.
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    MODEL_CACHE_DIR=/var/cache/warmpool/models \
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=app /app ./
RUN printf '#!/bin/sh\nexec node /app/bin/warmpool.mjs "$@"\n' > /usr/local/bin/warmpool \
 && chmod 755 /usr/local/bin/warmpool \
 && install -d -o node -g node /var/cache/warmpool /var/cache/warmpool/models
# uid 1000, the official image's unprivileged user: it owns nothing but the model cache.
USER node
EXPOSE 8080 9090
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD ["node", "/app/deploy/docker/healthcheck.mjs"]
ENTRYPOINT ["node", "/app/bin/warmpool.mjs"]
CMD ["api"]

# GPU image: workers on NVIDIA GPUs (CUDA 12 + cuDNN 9 from the base; run with --gpus all, or
# the NVIDIA device plugin on Kubernetes). Node comes from the same official image as above.
FROM ${CUDA_BASE} AS runtime-gpu
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 1000 --create-home --shell /usr/sbin/nologin node
COPY --from=node /usr/local/bin/node /usr/local/bin/node
ENV NODE_ENV=production \
    EXECUTION_PROVIDERS=cuda,cpu \
    MODEL_CACHE_DIR=/var/cache/warmpool/models \
    WORKER_HEALTH_PORT=9090 \
    WARMPOOL_HEALTH_URL=http://127.0.0.1:9090/live \
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true
WORKDIR /app
COPY --from=deps-gpu /app/node_modules ./node_modules
COPY --from=app /app ./
RUN printf '#!/bin/sh\nexec node /app/bin/warmpool.mjs "$@"\n' > /usr/local/bin/warmpool \
 && chmod 755 /usr/local/bin/warmpool \
 && install -d -o node -g node /var/cache/warmpool /var/cache/warmpool/models
USER node
EXPOSE 9090
HEALTHCHECK --interval=15s --timeout=5s --start-period=300s --retries=3 CMD ["node", "/app/deploy/docker/healthcheck.mjs"]
ENTRYPOINT ["node", "/app/bin/warmpool.mjs"]
CMD ["--help"]
