#!/bin/sh
# Throwaway PostgreSQL 15 cluster for tests and benchmarks (STACK.md §3, §12.14).
# Usage: pg_throwaway.sh start|restart|stop PORT [durable|tls]
#   start: a fresh cluster in /tmp/loom-pg-PORT listening on $PG_LISTEN:PORT
#          ($PG_LISTEN default 127.0.0.1; the multi-host tests give a host's LAN address)
#          (trust auth, user postgres). Default: fsync=off etc. (tests: fast,
#          and a crash only loses a throwaway cluster). "durable": fsync=on,
#          synchronous_commit=on, full_page_writes=on (benchmarks of durable commits).
#          "tls": TLS only, 1.3 minimum (fast otherwise), under a throwaway CA made here:
#          $dir/tls/ca.crt signs the server's certificate (127.0.0.1, ::1, localhost);
#          $dir/tls/other-ca.crt is a second CA that signs nothing (wrong-CA tests).
#          pg_hba refuses every connection without TLS.
#   restart: starts that cluster again with the options it was started with,
#          keeping its data (after a crash: the chaos harness kills -9 it).
#   stop:  stops it and removes the directory.
# Works as root (CI: initdb/postgres refuse root, so they run as the 'postgres'
# account via runuser) and as a normal user. The directory lives under /tmp, not
# in the build tree: 'postgres' must be able to traverse every parent directory.
set -eu
cd /   # runuser keeps the cwd; avoid "could not change directory" noise
cmd=${1:?usage: pg_throwaway.sh start|stop PORT [durable|tls]}
port=${2:?usage: pg_throwaway.sh start|stop PORT [durable|tls]}
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
  fast|tls) opts="-c fsync=off -c synchronous_commit=off -c full_page_writes=off" ;;
  *) echo "pg_throwaway.sh: mode must be 'durable', 'tls' or absent, not '$mode'" >&2; exit 2 ;;
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
  if [ "$mode" = tls ]; then
    tls="$dir/tls"; mkdir -p "$tls"
    ssl() { openssl "$@" >>"$dir/openssl.log" 2>&1 || { cat "$dir/openssl.log" >&2; exit 1; }; }
    for ca in ca other-ca; do
      ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=EdgeLoom throwaway $ca $port" -keyout "$tls/$ca.key" -out "$tls/$ca.crt"
    done
    ssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$tls/server.key" -out "$tls/server.csr"
    printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n' > "$tls/san.ext"
    ssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial -days 2 \
      -extfile "$tls/san.ext" -out "$tls/server.crt"
    chmod 0644 "$tls"/*.crt; chmod 0600 "$tls"/*.key
    if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$tls"; fi
    chmod 0755 "$tls"
    # Unix socket as before; over TCP, TLS or nothing.
    printf 'local all all trust\nhostnossl all all all reject\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n' \
      > "$dir/data/pg_hba.conf"
    opts="$opts -c ssl=on -c ssl_cert_file=$tls/server.crt -c ssl_key_file=$tls/server.key -c ssl_min_protocol_version=TLSv1.3"
  fi
  # -k: unix socket in $dir; TCP on $listen only (loopback by default). max_connections: parallel
  # ctest jobs each open a few connections (default 100 is enough; stated for clarity).
  echo "-k $dir -p $port -c listen_addresses=$listen -c max_connections=100 $opts" > "$dir/start.opts"
  if ! as "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -o "$(cat "$dir/start.opts")" start >/dev/null; then
    cat "$dir/server.log" >&2; exit 1
  fi
  echo "pg_throwaway.sh: cluster on $listen:$port ($mode) in $dir"
  ;;
restart)
  [ -f "$dir/start.opts" ] || { echo "pg_throwaway.sh: no cluster in $dir to restart" >&2; exit 1; }
  if ! as "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/start.opts")" start >/dev/null; then
    tail -n 20 "$dir/server.log" >&2; exit 1
  fi
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
*) echo "usage: $0 start|restart|stop PORT [durable|tls]" >&2; exit 2 ;;
esac
