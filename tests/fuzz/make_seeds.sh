#!/usr/bin/env bash
# Regenerates the committed seed corpora (tests/fuzz/corpus/): builds
# fuzz_seeds in build-fuzz/ (configured as run.sh does), which writes every seed
# with the product's own writers, then adds the ingest seeds that need a
# compressor or tar (gzip, zstd, tar from Debian). Review the diff before
# committing: request ids and enrolment secrets are random on each run.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/edgeloom-ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
[[ -f build-fuzz/build.ninja ]] ||
  nice -n 19 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DLOOM_FUZZ=ON >/dev/null
nice -n 19 ninja -C build-fuzz -j2 fuzz_seeds >/dev/null
out=tests/fuzz/corpus
ASAN_OPTIONS=detect_leaks=0 build-fuzz/fuzz/fuzz_seeds "$out" "$PWD"

# Ingest: byte 0 picks the file name in ingest.fuzz.cpp's table
# (6 f.tar, 7 f.txt.gz, 8 f.jsonl.zst, 10 f.tar.gz), the rest is the file.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'Hello from a gzip stream.\nSecond line.\n' | gzip -9n >"$tmp/t.gz"
printf '{"text":"zstd record one"}\n{"text":"two"}\n' | zstd -q -19 >"$tmp/j.zst"
mkdir -p "$tmp/tree/docs"
printf 'a text member\n' >"$tmp/tree/docs/a.txt"
printf '{"text":"a jsonl member"}\n' >"$tmp/tree/docs/b.jsonl"
tar -b 1 --format=ustar --owner=0 --group=0 --mtime=@0 -C "$tmp/tree" -cf "$tmp/a.tar" docs
gzip -9n <"$tmp/a.tar" >"$tmp/a.tar.gz"
{ printf '\x06'; cat "$tmp/a.tar"; } >"$out/fuzz_ingest/tar"
{ printf '\x07'; cat "$tmp/t.gz"; } >"$out/fuzz_ingest/text_gz"
{ printf '\x08'; cat "$tmp/j.zst"; } >"$out/fuzz_ingest/jsonl_zst"
{ printf '\x0a'; cat "$tmp/a.tar.gz"; } >"$out/fuzz_ingest/tar_gz"
echo "seeds written under $out"
