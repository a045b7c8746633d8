# syntax=docker/dockerfile:1
# duet relay server image.
#   docker build -t duet-relay:0.1.0 .
#   docker run --rm -p 127.0.0.1:8080:8080 -e REDIS_URL=redis://redis:6379 duet-relay:0.1.0
# Without REDIS_URL / REDIS_CLUSTER_NODES the server keeps rooms in process memory
# (one replica only). Every setting is an environment variable: see infra/README.md.

ARG NODE_IMAGE=node:20-slim

# ---- build: install the whole workspace from the lockfile, compile, then cut a
# production-only copy of @duet/server with its workspace dependencies.
FROM ${NODE_IMAGE} AS build
ENV PNPM_HOME=/pnpm \
    PATH=/pnpm:$PATH \
    CI=true
RUN npm install -g pnpm@10.34.9 && pnpm --version
WORKDIR /src
# The lockfile alone decides what is downloaded; this layer is reused until it changes.
COPY pnpm-lock.yaml pnpm-workspace.yaml .npmrc ./
RUN --mount=type=cache,id=pnpm-store,target=/pnpm/store \
    pnpm config set store-dir /pnpm/store && pnpm fetch
COPY . .
RUN --mount=type=cache,id=pnpm-store,target=/pnpm/store \
    pnpm config set store-dir /pnpm/store \
 && pnpm install --frozen-lockfile --offline \
 && pnpm --filter "@duet/server..." run build \
 && pnpm --filter @duet/server deploy --prod --legacy --offline /out \
 && rm -rf /out/src /out/test /out/tsconfig*.json /out/jest.config.*

# ---- runtime: Node and the deployed files, nothing else. No pnpm, no compilers.
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080
WORKDIR /app
# node:20-slim ships user "node" as uid/gid 1000. Numeric so Kubernetes' runAsNonRoot can verify it.
COPY --from=build --chown=1000:1000 /out/package.json ./package.json
COPY --from=build --chown=1000:1000 /out/node_modules ./node_modules
COPY --from=build --chown=1000:1000 /out/dist ./dist
USER 1000:1000
EXPOSE 8080
# Liveness only (/healthz): no curl or wget in the image, Node's fetch does it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz',{signal:AbortSignal.timeout(2500)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The server drains on SIGTERM (SHUTDOWN_DRAIN_SECONDS, default 10) and then exits.
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
