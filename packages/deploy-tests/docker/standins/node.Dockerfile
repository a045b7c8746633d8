# Stand-in for node:<pinned major>-slim (test fixture): Debian bookworm, the official Node binary,
# npm, and user node (uid/gid 1000) as in the official image.
FROM duet-standin/debian:bookworm
# Node 26's binary links libatomic (the official slim image has it; minbase does not).
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libatomic1 >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
# This machine's CA bundle: registry traffic here passes a TLS-inspecting proxy.
COPY ca-bundle.pem /usr/local/share/duet-standin/ca-bundle.pem
ENV NODE_EXTRA_CA_CERTS=/usr/local/share/duet-standin/ca-bundle.pem
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd --gid 1000 node \
 && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
CMD ["node"]
