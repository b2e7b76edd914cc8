// `loom data sync --from A --to B --dataset D`: B's ingest pulls dataset D
// from A's ingest (libs/cdc: only the chunks B lacks travel). A and B are the
// data dirs of two deployments on this machine; each side is called with its
// own admin token (--from-token / --to-token, else <dir>/admin.token).
//
//   B/keys/curve/ingest.pub ──copy──▶ A/keys/peers/peer-ingest-<key>.pub   (A now admits B's ingest)
//   SyncInfo ──▶ B's ingest (is B there, does its token work?)
//   SyncInfo{D, B's key} ──▶ A's ingest (re-reads its trusted keys; B's key may
//       now read D of A's token's tenant) ──▶ {endpoint, A's ingest key, tenant}
//   PullDataset{D, endpoint, key, tenant} ──▶ B's ingest (into B's token's tenant;
//       refused, replacing nothing, unless every shard matches manifest.json)
//       ──▶ task ──follow_task──▶ exit 0 | 1
// Datasets are per tenant: D is A's token's tenant's (or --tenant T's, for
// admins), and lands in B's token's tenant (or T).
//
// Exit codes: 0 synced, 1 the pull failed (e.g. A has no dataset D),
// 2 usage, 3 a token was refused, 4 a side is not running.
#include "client/cli.hpp"
#include "client/typed_call.hpp"

#include "libs/files/files.hpp"
#include "libs/wire/curve.hpp"
#include "loom/v1/ingest.pb.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>

namespace loom::cli {

int follow_task(context& c, loom::v1::TaskInfo t);  // data_import.cpp

namespace {

namespace fs = std::filesystem;

// A context for one side: its data dir and its own token (never $LOOM_TOKEN,
// which cannot be both sides' token).
result<std::unique_ptr<context>> side(const context& c, const std::string& dir, const char* token_option) {
  args a = c.a;
  a.options["data-dir"] = files::resolve_data_dir(dir);
  a.options.erase("token");
  auto ctx = std::make_unique<context>(std::move(a));
  if (auto given = c.a.get(token_option)) {
    ctx->a.options["token"] = *given;
  } else {
    auto t = read_token_file(ctx->paths.admin_token());
    if (!t && t.code() == errc::not_found)
      return make_error(errc::unauthenticated, "no token for " + ctx->paths.root + ": pass --" + token_option +
                                                   " or run `loom up` there to create " + ctx->paths.admin_token());
    if (!t) return t.err();
    ctx->a.options["token"] = *t;
  }
  return ctx;
}

// Makes `from` trust `key` (the pulling ingest's public key): a no-op when a
// key file of `from` already holds it, else keys/peers/peer-ingest-<8 key
// characters>.pub. Returns the file that holds the key.
result<std::string> trust_peer(const layout::paths& from, const std::string& key) {
  for (const auto& dir : {from.curve_dir(), from.peers_dir()}) {
    auto known = wire::load_allow_list(dir);
    if (!known) {
      if (known.code() == errc::not_found) continue;
      return known.err();
    }
    if (auto it = known->find(key); it != known->end()) return dir + "/" + it->second + ".pub";
  }
  std::string stem = "peer-ingest-";
  for (char ch : key.substr(0, 8)) stem += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  std::string path = from.peers_dir() + "/" + stem + ".pub";
  for (int n = 2; fs::exists(path); ++n)  // another key with the same first characters
    path = from.peers_dir() + "/" + stem + "-" + std::to_string(n) + ".pub";
  if (auto st = files::make_dirs(from.peers_dir(), 0700); !st) return st.err();
  if (auto st = files::write_atomic(path, key + "\n", 0644); !st) return st.err();
  return path;
}

}  // namespace

int cmd_data_sync(context& c) {
  auto from_dir = c.a.get("from"), to_dir = c.a.get("to"), dataset = c.a.get("dataset");
  if (!from_dir || !to_dir || !dataset) return usage(command_help(*c.a.command));
  auto a = side(c, *from_dir, "from-token");
  if (!a) return fail(c, a.err());
  auto b = side(c, *to_dir, "to-token");
  if (!b) return fail(c, b.err());
  context& ca = **a;
  context& cb = **b;
  std::error_code ec;
  if (fs::equivalent(ca.paths.root, cb.paths.root, ec))
    return usage("loom data sync: --from and --to name the same data dir (" + printable(ca.paths.root) + ")\n" +
                 usage_line(*c.a.command));

  auto b_key = wire::load_public_key(cb.paths.curve_dir(), "ingest");
  if (!b_key) return fail(c, make_error(b_key.code(), "--to " + cb.paths.root + " has no ingest key: " + b_key.err().message));
  auto trusted = trust_peer(ca.paths, *b_key);
  if (!trusted) return fail(c, make_error(trusted.code(), "cannot trust B's ingest key in " + ca.paths.root + ": " +
                                                              trusted.err().message));

  // B first: nothing is granted at A for a pull B cannot make.
  if (auto up = typed_call<loom::v1::SyncInfoReply>(cb, "ingest", loom::v1::SyncInfoRequest{}, 1); !up)
    return fail(c, make_error(up.code(), "--to " + cb.paths.root + ": " + up.err().message));
  const std::string tenant = c.a.get_or("tenant", "");
  loom::v1::SyncInfoRequest grant;  // B's ingest may read D of A's tenant
  grant.set_dataset(*dataset);
  grant.set_peer_public_key(*b_key);
  grant.set_for_tenant(tenant);
  auto info = typed_call<loom::v1::SyncInfoReply>(ca, "ingest", grant, 1);
  if (!info) return fail(c, make_error(info.code(), "--from " + ca.paths.root + ": " + info.err().message));
  loom::v1::PullDatasetRequest req;
  req.set_dataset(*dataset);
  req.set_endpoint(info->endpoint());
  req.set_public_key(info->public_key());
  req.set_source_tenant(info->tenant());
  req.set_for_tenant(tenant);
  auto pulled = typed_call<loom::v1::PullDatasetReply>(cb, "ingest", req, 1);
  if (!pulled) return fail(c, make_error(pulled.code(), "--to " + cb.paths.root + ": " + pulled.err().message));
  if (!c.json)
    std::printf("pulling %s from %s (%s) into %s (task %s); %s trusts %s\n", printable(*dataset).c_str(),
                printable(ca.paths.root).c_str(), printable(info->endpoint()).c_str(), printable(cb.paths.root).c_str(),
                printable(pulled->task().id()).c_str(), printable(ca.paths.root).c_str(), printable(*trusted).c_str());

  const int rc = follow_task(cb, pulled->task());
  if (rc != ok_exit || c.json) return rc;
  loom::v1::GetTaskRequest q;
  q.set_id(pulled->task().id());
  if (auto t = typed_call<loom::v1::GetTaskReply>(cb, "ingest", q, 1))
    std::printf("synced %s: %llu bytes received, %llu files changed, %.2f s\n", printable(*dataset).c_str(),
                static_cast<unsigned long long>(t->task().bytes_sent()),
                static_cast<unsigned long long>(t->task().files()), t->task().elapsed_s());
  return rc;
}

}  // namespace loom::cli
