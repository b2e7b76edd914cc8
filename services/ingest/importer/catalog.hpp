// The ingest catalogue in the state store (libs/store): which datasets exist,
// their shards and where those are placed, and the rejects of each dataset's
// latest import. Tables come as store migrations of owner "ingest" (run
// store::migrate(db, ingest_migrations()) at start-up); a catalog records a
// finished import in one transaction and answers queries. Times are passed in
// (unix ns), so the class has no clock. A catalog uses its database from one
// thread at a time (store::database's rule).
#pragma once

#include "libs/status/status.hpp"
#include "services/ingest/importer/importer.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::store {
class database;
struct migration;
}  // namespace loom::store

namespace loom::ingest {

// v1: datasets, dataset_shards, import_rejects. v2: datasets.rejects (the
// true count), datasets.damage and verified_unix_ns (`loom data verify`).
// v3: a dataset belongs to a tenant and names are per tenant: every table
// keyed by (tenant, name); rows from before belong to tenant `default`.
// Never edit a released migration: append a new version.
std::span<const store::migration> ingest_migrations();

struct dataset_row {
  std::string tenant;  // whose it is: the tenant of the token that imported (or pulled) it
  std::string name;    // unique within its tenant
  std::int64_t version = 0;  // 1 for the first import, +1 for each re-import
  std::string import_id;
  std::int64_t documents = 0, tokens = 0, shards = 0, bytes = 0;  // bytes: of the shard files
  std::string state;  // "ready" once published (importing, failed, deleted: for the service)
  std::int64_t created_ns = 0, updated_ns = 0;
  std::string report_path;
  std::int64_t rejects = 0;    // every reject of the import (only the first max_rejects are rows)
  std::string damage;          // what the last full verify of this version found ("" = none)
  std::int64_t verified_ns = 0;  // when (0 = never verified)
};

struct shard_row {
  std::string dataset, name, sha256, node;
  std::int64_t bytes = 0, tokens = 0, docs = 0;
};

struct reject_row {
  std::string dataset, import_id;
  std::int64_t seq = 0;
  std::string stage, file;
  std::int64_t line = 0;
  std::string rule, detail;
};

class catalog {
 public:
  // REQUIRES: ingest_migrations() applied to `db`; db outlives the catalog.
  explicit catalog(store::database& db) : db_(db) {}

  // Every call names the tenant whose dataset it reads or writes: a name
  // means nothing without it.
  //
  // One transaction: the datasets row of (tenant, s.dataset) (inserted, or
  // version + 1, damage and verify time cleared), the shard rows (replaced),
  // and the rejects (the dataset's older ones replaced by the first
  // max_rejects lines of <s.dir>/rejects.jsonl, streamed from the file). The
  // row's rejects count is s.rejects (all of them), at least the rows stored.
  status record_import(const std::string& tenant, const import_summary& s, std::int64_t now_ns,
                       std::uint64_t max_rejects = 100'000);
  // What a full verify of version `import_id` found ("" = intact), at `now_ns`;
  // not_found when the dataset has moved on to another version meanwhile.
  status record_verify(const std::string& tenant, const std::string& dataset, const std::string& import_id,
                       const std::string& damage, std::int64_t now_ns);

  // A dataset placed anew (`loom data place`): in one transaction, checks the
  // dataset is still version `import_id` (not_found otherwise: re-imported
  // meanwhile), sets each shard row's node from `m`, then runs `publish`
  // (writing manifest.json), whose error rolls the rows back.
  status record_placement(const std::string& tenant, const std::string& dataset, const std::string& import_id,
                          const shards::manifest& m, std::int64_t now_ns, const std::function<status()>& publish);

  // `tenant`'s datasets by name ("" = every tenant's, by tenant then name); at
  // most `limit` rows (0 = all).
  result<std::vector<dataset_row>> datasets(const std::string& tenant, std::size_t limit = 0);
  result<std::optional<dataset_row>> dataset(const std::string& tenant, const std::string& name);
  // In manifest order.
  result<std::vector<shard_row>> shards(const std::string& tenant, const std::string& dataset);
  // The latest import's rejects in seq order: `offset` skipped, then at most
  // `limit` (0 = all), in SQL (only the page is loaded).
  result<std::vector<reject_row>> rejects(const std::string& tenant, const std::string& dataset, std::size_t limit,
                                          std::uint64_t offset = 0);
  // How many reject rows the catalogue holds for the dataset (COUNT).
  result<std::uint64_t> stored_rejects(const std::string& tenant, const std::string& dataset);

 private:
  store::database& db_;
};

}  // namespace loom::ingest
