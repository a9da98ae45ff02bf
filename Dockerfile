# syntax=docker/dockerfile:1
# bgcut's two images, from one file: `docker build --target inference -t bgcut-inference .` and
# `docker build --target api -t bgcut-api .` (compose.yaml builds both). Each final image holds a
# production install of the packed package (npm pack), as a user's app installs it, runs as the
# unprivileged `node` user, and drains on SIGTERM. NOT built on the machines this project is
# developed on (no container runtime there): scripts/check-package.mjs runs the same steps
# without one in CI; see docs/deployment.md.
ARG NODE_IMAGE=node:20-bookworm-slim

# 1. Build and pack, with dev dependencies (TypeScript).
FROM ${NODE_IMAGE} AS build
WORKDIR /src
# onnxruntime-node would download CUDA libraries at install: CPU images need none.
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY proto ./proto
COPY src ./src
COPY examples ./examples
COPY bench ./bench
COPY test/helpers ./test/helpers
RUN npm run build && mkdir /pkg && npm pack --pack-destination /pkg && mv /pkg/bgcut-*.tgz /pkg/bgcut.tgz

# 2. The inference server: the package's production dependencies and the prepared model.
FROM ${NODE_IMAGE} AS inference-install
WORKDIR /app
ENV ONNXRUNTIME_NODE_INSTALL=skip BGCUT_CACHE_DIR=/models
COPY --from=build /pkg/bgcut.tgz /tmp/bgcut.tgz
RUN echo '{"name":"bgcut-inference","private":true}' > package.json \
 && npm install --omit=dev --no-audit --no-fund /tmp/bgcut.tgz \
 && rm /tmp/bgcut.tgz \
 && mkdir -m 700 /models && chown node:node /models
# Prepared by the user that will read it: the cache must be private to it.
USER node
RUN node_modules/.bin/bgcut-inference-server prepare

FROM ${NODE_IMAGE} AS inference
ENV NODE_ENV=production BGCUT_CACHE_DIR=/models PATH=/app/node_modules/.bin:$PATH
WORKDIR /app
COPY --from=inference-install /app /app
COPY --from=inference-install --chown=node:node /models /models
USER node
EXPOSE 50051 50052 9464
# grpc.health.v1 on the plaintext health port: SERVING once the model is loaded and warm.
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
  CMD ["bgcut-inference-server", "health", "--address", "127.0.0.1:50052"]
# SIGTERM: health NOT_SERVING, new calls refused, calls in flight finish (30 s at most), exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["bgcut-inference-server"]
CMD ["--host=0.0.0.0", "--port=50051", "--health-port=50052", "--metrics-port=9464"]

# 3. The API: deploy/api-app (Express + bgcut/express + the dashboard), production dependencies.
FROM ${NODE_IMAGE} AS api-install
WORKDIR /app
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY deploy/api-app/package.json ./
COPY --from=build /pkg/bgcut.tgz /tmp/bgcut.tgz
RUN npm install --omit=dev --no-audit --no-fund /tmp/bgcut.tgz && rm /tmp/bgcut.tgz
COPY deploy/api-app/server.mjs ./

FROM ${NODE_IMAGE} AS api
ENV NODE_ENV=production PORT=3000 PATH=/app/node_modules/.bin:$PATH
# glibc malloc tuned as bgcut-launch (npm start) sets it: the lowest API peak RSS under bursts of
# large uploads measured (docs/benchmarks.md, "Memory: the allocator"). Set here directly, as the
# image starts the app without the launcher.
ENV MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=262144
WORKDIR /app
COPY --from=api-install /app /app
USER node
EXPOSE 3000
# 200 once the inference tier answered and its model fits this API's profile.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:3000/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM: new requests 503 + Retry-After, requests in progress finish, exit 0.
STOPSIGNAL SIGTERM
# The V8 flags bgcut-launch adds (src/runtime/v8-heap.ts): far fewer full garbage collections per
# image (docs/benchmarks-history.md, "The V8 heap"), and a small young generation in every
# thread, so dead image Buffers go at the next young collection. Command-line flags: Node refuses
# the first in NODE_OPTIONS.
CMD ["node", "--initial-old-space-size=128", "--max-semi-space-size=2", "server.mjs"]
