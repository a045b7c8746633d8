# Stand-in for node:24-slim (test fixture): Debian bookworm, the official Node 24 binary,
# npm, and user node (uid/gid 1000) as in the official image.
FROM duet-standin/debian:bookworm
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
