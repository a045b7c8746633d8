#!/bin/sh
# As the official redis image's entrypoint: without a config file, Redis 7 keeps protected
# mode on and refuses clients from other containers, so turn it off; run as user redis.
set -e
if [ "$1" = "redis-server" ]; then
  shift
  case "${1:-}" in
    ""|-*) set -- redis-server "$@" --protected-mode no ;;
    *) set -- redis-server "$@" ;;
  esac
  if [ "$(id -u)" = 0 ]; then
    chown -R redis:redis /data 2>/dev/null || true
    exec setpriv --reuid=redis --regid=redis --init-groups "$@"
  fi
fi
exec "$@"
