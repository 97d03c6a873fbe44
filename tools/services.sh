#!/usr/bin/env bash
# Starts the PostgreSQL and Redis that `make test` (with DATABASE_URL/REDIS_URL) and `.ci/run` use, on 127.0.0.1:5432
# and 127.0.0.1:6379, installing them from Debian's packages when missing. A server already answering on its port is
# left alone. PostgreSQL gets a throwaway cluster of its own (trust auth on loopback only), so nothing depends on how
# the distribution configured its default cluster.
set -euo pipefail

PGPORT="${PGPORT:-5432}"
REDIS_PORT="${REDIS_PORT:-6379}"
PGDATA_DIR="${PGDATA_DIR:-/tmp/gpu-portal-postgres}"
REDIS_DIR="${REDIS_DIR:-/tmp/gpu-portal-redis}"

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pg_bin() {
  local bindir
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$bindir" ] && [ -x "$bindir/postgres" ] && echo "$bindir"
}

need_apt=()
pg_bin >/dev/null || need_apt+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d keeps the packages' own scripts from starting their default servers on our ports.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi

if ! listening "$PGPORT"; then
  bindir=$(pg_bin)
  run_as=()
  # postgres refuses to run as root.
  [ "$(id -u)" = 0 ] && run_as=(runuser -u postgres --)
  if [ ! -s "$PGDATA_DIR/PG_VERSION" ]; then
    rm -rf "$PGDATA_DIR" && mkdir -p "$PGDATA_DIR"
    [ "$(id -u)" = 0 ] && chown postgres: "$PGDATA_DIR"
    "${run_as[@]}" "$bindir/initdb" -D "$PGDATA_DIR" -U postgres --auth=trust --encoding=UTF8 --no-locale >/dev/null
  fi
  # Tests create and drop their databases; durability is not wanted here.
  "${run_as[@]}" "$bindir/pg_ctl" -D "$PGDATA_DIR" -l "$PGDATA_DIR/server.log" -w -t 60 start \
    -o "-h 127.0.0.1 -p $PGPORT -k /tmp -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" >/dev/null
  echo "PostgreSQL started on 127.0.0.1:$PGPORT (data in $PGDATA_DIR)"
fi

if ! listening "$REDIS_PORT"; then
  mkdir -p "$REDIS_DIR"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$REDIS_DIR" --save '' --appendonly no \
    --daemonize yes --logfile "$REDIS_DIR/redis.log" --pidfile "$REDIS_DIR/redis.pid"
  for _ in $(seq 50); do listening "$REDIS_PORT" && break; sleep 0.1; done
  echo "Redis started on 127.0.0.1:$REDIS_PORT"
fi
