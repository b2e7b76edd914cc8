#!/bin/sh
# One-shot init container: creates keys and the first admin token in the
# shared data volume (idempotent) and writes endpoints.json with the compose
# service names, so every container finds its peers.
set -eu
loom keys init --data-dir "$LOOM_HOME"
cat > "$LOOM_HOME/endpoints.json" <<JSON
{
  "version": 1,
  "zone": "${LOOM_ZONE:-local}",
  "watcher_pid": 0,
  "services": {
    "audit":      {"rpc": "tcp://audit:7000",      "pull": "tcp://audit:7001", "metrics": "audit:9100", "pid": 0},
    "scheduler":  {"rpc": "tcp://scheduler:7000",  "metrics": "scheduler:9100",  "pid": 0, "data": "tcp://scheduler:7002"},
    "ingest":     {"rpc": "tcp://ingest:7000",     "metrics": "ingest:9100",     "pid": 0},
    "trainer":    {"rpc": "tcp://trainer:7000",    "metrics": "trainer:9100",    "pid": 0},
    "aggregator": {"rpc": "tcp://aggregator:7000", "metrics": "aggregator:9100", "pid": 0},
    "console":    {"rpc": "tcp://console:7000",    "metrics": "console:9100",    "pid": 0, "data": "tcp://console:8443"}
  }
}
JSON
