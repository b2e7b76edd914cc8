#!/bin/sh
# Throwaway PostgreSQL 15 cluster for tests and benchmarks (STACK.md §3, §12.14).
# Usage: pg_throwaway.sh start|stop PORT [durable]
#   start: a fresh cluster in /tmp/loom-pg-PORT listening on $PG_LISTEN:PORT
#          ($PG_LISTEN default 127.0.0.1; the multi-host tests give a host's LAN address)
#          (trust auth, user postgres). Default: fsync=off etc. (tests: fast,
#          and a crash only loses a throwaway cluster). "durable": fsync=on,
#          synchronous_commit=on, full_page_writes=on (benchmarks of durable commits).
#   stop:  stops it and removes the directory.
# Works as root (CI: initdb/postgres refuse root, so they run as the 'postgres'
# account via runuser) and as a normal user. The directory lives under /tmp, not
# in the build tree: 'postgres' must be able to traverse every parent directory.
set -eu
cd /   # runuser keeps the cwd; avoid "could not change directory" noise
cmd=${1:?usage: pg_throwaway.sh start|stop PORT [durable]}
port=${2:?usage: pg_throwaway.sh start|stop PORT [durable]}
mode=${3:-fast}
listen=${PG_LISTEN:-127.0.0.1}
dir=${TMPDIR:-/tmp}/loom-pg-$port
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
if [ "$(id -u)" = 0 ]; then
  as() { runuser -u postgres -- "$@"; }
else
  as() { "$@"; }
fi
case "$mode" in
  durable) opts="-c fsync=on -c synchronous_commit=on -c full_page_writes=on" ;;
  fast) opts="-c fsync=off -c synchronous_commit=off -c full_page_writes=off" ;;
  *) echo "pg_throwaway.sh: mode must be 'durable' or absent, not '$mode'" >&2; exit 2 ;;
esac
case "$cmd" in
start)
  if [ ! -x "$PGBIN/initdb" ]; then
    echo "pg_throwaway.sh: $PGBIN/initdb not found; install postgresql-15 (scripts/setup)" >&2
    exit 1
  fi
  # A cluster left behind by an interrupted run: stop it before wiping its files.
  if [ -f "$dir/data/postmaster.pid" ]; then as "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$dir"; mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
  as "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  # Another host on the same subnet (the multi-host tests' LAN) connects over TCP too.
  if [ "$listen" != 127.0.0.1 ]; then echo "host all all samenet trust" >> "$dir/data/pg_hba.conf"; fi
  # -k: unix socket in $dir; TCP on $listen only (loopback by default). max_connections: parallel
  # ctest jobs each open a few connections (default 100 is enough; stated for clarity).
  if ! as "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
       -o "-k $dir -p $port -c listen_addresses=$listen -c max_connections=100 $opts" start >/dev/null; then
    cat "$dir/server.log" >&2; exit 1
  fi
  echo "pg_throwaway.sh: cluster on $listen:$port ($mode) in $dir"
  ;;
stop)
  # fast (disconnects clients); on a loaded machine its checkpoint may lag:
  # after 20 s, immediate (this cluster is thrown away anyway).
  if [ -d "$dir/data" ]; then
    as "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 20 stop >/dev/null 2>&1 ||
      as "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w -t 20 stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
  ;;
*) echo "usage: $0 start|stop PORT [durable]" >&2; exit 2 ;;
esac
