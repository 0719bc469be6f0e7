#!/usr/bin/env bash
# postgres_local.sh - a throwaway PostgreSQL server on 127.0.0.1, for the Optuna study on a real database
# (tests/test_search_postgres.py) and for trying hydra.sweeper.storage=postgresql+psycopg2://... on one machine.
#
#   bash scripts/postgres_local.sh [start|stop|status]      (default: start; as root it installs Debian's
#                                                          postgresql package when initdb is missing)
#
# Idempotent: makes the cluster only if absent, starts the server only if it is not running (pid file), then
# waits until it answers or WAIT_TIMEOUT seconds pass. Everything (data, socket, log, password) lives under $PG_BASE.
# initdb and postgres refuse to run as root: as root the server runs as the `postgres` user (Debian's package makes
# it), or `nobody`.
# The study's URL, with a password made for this cluster, is in $PG_BASE/url (mode 600) and in $PG_BASE/env.sh:
#   . $PG_BASE/env.sh    # export GRPO_SWEEP_POSTGRES_URL=postgresql+psycopg2://optuna:...@127.0.0.1:PORT/optuna
#
# Env knobs:
#   PG_BASE       (default ${TMPDIR:-/tmp}/grpo-sweep-postgres)
#   PG_PORT       TCP port on 127.0.0.1 (default 5433, beside a system server's 5432)
#   WAIT_TIMEOUT  seconds to wait for the server (default 60)
set -euo pipefail

BASE=${PG_BASE:-${TMPDIR:-/tmp}/grpo-sweep-postgres}
PORT=${PG_PORT:-5433}
WAIT_TIMEOUT=${WAIT_TIMEOUT:-60}
ACTION=${1:-start}
log() { printf '[postgres_local %s] %s\n' "$(date +%T)" "$*" >&2; }

# Debian's binaries live in /usr/lib/postgresql/<version>/bin, off PATH
pg_bin() {
  local dir
  if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return 0; fi
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && { echo "$dir"; return 0; }
  return 1
}

install_packages() {
  pg_bin >/dev/null && return 0
  [ "$(id -u)" = 0 ] || { log "initdb not found; install Debian's postgresql package"; exit 1; }
  local created_policy=0
  log "installing: postgresql"
  # keep the package's postinst from starting the system cluster (no systemd here anyway)
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; created_policy=1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  [ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  return 0
}

# who runs the server: this user, or (as root, which initdb refuses) postgres / nobody
server_user() {
  if [ "$(id -u)" != 0 ]; then id -un; elif id postgres >/dev/null 2>&1; then echo postgres; else echo nobody; fi
}

as_server() {
  local user; user=$(server_user)
  if [ "$user" = "$(id -un)" ]; then "$@"; else runuser -u "$user" -- "$@"; fi
}

alive() { [ -s "$BASE/data/postmaster.pid" ] && kill -0 "$(head -1 "$BASE/data/postmaster.pid")" 2>/dev/null; }

psql_admin() { as_server "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$BASE/run" -p "$PORT" -U postgres -d postgres "$@"; }

do_start() {
  local t0 i password url
  t0=$(date +%s.%N)
  install_packages
  BIN=$(pg_bin)
  mkdir -p "$BASE"/{run,log}
  if [ ! -s "$BASE/password" ]; then
    (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$BASE/password")
  fi
  password=$(cat "$BASE/password")
  chown -R "$(server_user)" "$BASE/run" "$BASE/log"
  if [ ! -s "$BASE/data/PG_VERSION" ]; then
    mkdir -p "$BASE/data"
    chown "$(server_user)" "$BASE/data"
    chmod 700 "$BASE/data"
    # local socket: trust (the admin, here); TCP: password (scram), as a study's workers connect
    as_server "$BIN/initdb" -D "$BASE/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
        -E UTF8 > "$BASE/log/initdb.log" 2>&1 || { tail -20 "$BASE/log/initdb.log" >&2; exit 1; }
  fi
  if ! alive; then
    # a study's workers each hold a pool of connections: room for 32 of them and the sweeper
    as_server "$BIN/pg_ctl" -D "$BASE/data" -l "$BASE/log/postgres.log" -w -t "$WAIT_TIMEOUT" \
        -o "-p $PORT -k $BASE/run -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start \
        >/dev/null || { tail -20 "$BASE/log/postgres.log" >&2; exit 1; }
  fi
  for i in $(seq 1 $((WAIT_TIMEOUT * 5))); do psql_admin -c 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
  psql_admin -c 'select 1' >/dev/null || { log "postgres did not answer"; tail -20 "$BASE/log/postgres.log" >&2; exit 1; }
  psql_admin <<EOF
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'optuna') THEN CREATE ROLE optuna LOGIN; END IF;
END \$\$;
ALTER ROLE optuna PASSWORD '$password';
EOF
  psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = 'optuna'" | grep -q 1 || psql_admin -c "CREATE DATABASE optuna OWNER optuna"
  url="postgresql+psycopg2://optuna:$password@127.0.0.1:$PORT/optuna"
  (umask 077; echo "$url" > "$BASE/url"; echo "export GRPO_SWEEP_POSTGRES_URL=$url" > "$BASE/env.sh")
  log "ready in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")s on 127.0.0.1:$PORT; its URL: . $BASE/env.sh"
}

do_stop() {
  if alive; then
    BIN=$(pg_bin)
    as_server "$BIN/pg_ctl" -D "$BASE/data" -m fast -w stop >/dev/null && log "stopped"
  fi
}

do_status() {
  if alive; then echo "postgres: running ($(head -1 "$BASE/data/postmaster.pid")) on 127.0.0.1:$PORT"; else echo "postgres: stopped"; return 1; fi
}

case "$ACTION" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
