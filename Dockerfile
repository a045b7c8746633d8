# duet relay server image.
#   docker build -t duet-relay:local .
#   docker run --rm -p 127.0.0.1:8080:8080 -e REDIS_URL=redis://redis:6379 duet-relay:local
# Without REDIS_URL / REDIS_CLUSTER_NODES the server keeps rooms in process memory
# (one replica only). Every setting is an environment variable: see docs/configuration.md.
# No "# syntax=" line: BuildKit would fetch a frontend image; the built-in one has RUN --mount.

# Node 26 (LTS), the relay's pinned runtime: the same major as the root devDependency `node`
# that `pnpm start`, the tests and every figure run on (docs/runtime.md).
ARG NODE_IMAGE=node:26-slim

# ---- build: install the whole workspace exactly as the lockfile says, compile, then
# install the server's production dependencies alone, from the same lockfile, offline.
FROM ${NODE_IMAGE} AS build
ENV PNPM_HOME=/pnpm \
    PATH=/pnpm:$PATH \
    CI=true
RUN npm install -g pnpm@10.34.9 >/dev/null && pnpm --version
WORKDIR /src
# The lockfile alone decides what is downloaded; this layer is reused until it changes.
COPY pnpm-lock.yaml pnpm-workspace.yaml .npmrc ./
RUN --mount=type=cache,id=duet-pnpm-store,target=/pnpm/store \
    pnpm config set store-dir /pnpm/store && pnpm fetch >/dev/null
COPY . .
RUN --mount=type=cache,id=duet-pnpm-store,target=/pnpm/store \
    pnpm install --frozen-lockfile --offline --ignore-scripts >/dev/null \
 && pnpm --filter "@duet/server..." run build
# Production tree: every node_modules removed, then the server and its workspace packages
# installed again with --prod (same lockfile, same versions the tests ran), copied to /out
# in the same layout so pnpm's symlinks still resolve.
RUN --mount=type=cache,id=duet-pnpm-store,target=/pnpm/store \
    find . -name node_modules -type d -prune -exec rm -rf {} + \
 && pnpm install --frozen-lockfile --offline --ignore-scripts --prod --filter "@duet/server..." >/dev/null \
 && mkdir -p /out/packages \
 && cp -a node_modules package.json /out/ \
 && for p in protocol server; do \
      mkdir -p /out/packages/$p && cp -a packages/$p/package.json packages/$p/dist /out/packages/$p/ \
      && if [ -d packages/$p/node_modules ]; then cp -a packages/$p/node_modules /out/packages/$p/; fi; \
    done \
 && find /out -name '*.map' -delete \
 && find /out/packages -name '*.d.ts' -delete

# ---- runtime: Node and the production files, nothing else: no pnpm, no sources, no compilers.
FROM ${NODE_IMAGE} AS runtime
# /metrics is served on its own listener (METRICS_PORT, 9464), reachable by a Prometheus in
# another container or pod; publish only PORT to the load balancer.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    METRICS_HOST=0.0.0.0
WORKDIR /app
# The official node image has user "node" as uid/gid 1000. Numeric so Kubernetes'
# runAsNonRoot can verify it; root owns the files, the process only reads them.
COPY --from=build /out/ ./
USER 1000:1000
EXPOSE 8080 9464
# Liveness only (/healthz): no curl or wget in the image, Node's fetch does it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz',{signal:AbortSignal.timeout(2500)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The server drains on SIGTERM (SHUTDOWN_DRAIN_SECONDS, default 10) and then exits.
STOPSIGNAL SIGTERM
CMD ["node", "packages/server/dist/main.js"]
