// Fuzzes the audit archive reader (libs/auditchain/archive.hpp, read_archive)
// and the walk `loom audit verify --archive DIR` makes over it
// (store_io.hpp, verify_store): archive files sit in a directory outside the
// database, kept for years, copied to cold storage and back, so every byte of
// them is outside input. The input is one archive file. When it reads, the
// store's audit_archives lists it as the audit service would have (its
// header's seqs and hashes, the file's SHA-256) and verify_store walks it
// from seq 1, hashing every row, as the CLI does — so a crafted file meets the
// verifier too, not only the parser. SQLite on tmpfs, opened once; the list
// is rewritten per input. Checks: what reads is what the header promises
// (rows counted, gapless from first_seq to last_seq, the SHA-256 of the
// bytes); a file that reads and is listed as itself never turns the walk into
// an archive fault naming it missing or altered; the report is whole.
#include "libs/auditchain/archive.hpp"
#include "libs/auditchain/checkpoint.hpp"
#include "libs/auditchain/store_io.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/store/database.hpp"
#include "tests/fuzz/fuzz_file.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;
using namespace loom;
using namespace loom::auditchain;

namespace {
void require(bool ok) {
  if (!ok) std::abort();  // a broken promise: libFuzzer saves the input
}
template <class R>
void must(const R& r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "fuzz_audit_archive: %s: %s\n", what, r.err().to_string().c_str());
    std::abort();  // the fixture, not a finding
  }
}

// The archive list as the audit service's v4 migration makes it
// (services/audit/schema.cpp, v4_archive_table; its sources table is not read here).
constexpr const char* archives_ddl = R"sql(CREATE TABLE audit_archives (
  first_seq BIGINT NOT NULL PRIMARY KEY,
  last_seq BIGINT NOT NULL,
  rows BIGINT NOT NULL,
  prev_hash BYTEA NOT NULL,
  last_hash BYTEA NOT NULL,
  oldest_ns BIGINT NOT NULL,
  newest_ns BIGINT NOT NULL,
  created_ns BIGINT NOT NULL,
  file TEXT NOT NULL,
  sha256 TEXT NOT NULL
))sql";

struct fixture {
  fs::path archive_dir;
  std::unique_ptr<store::database> db;
  fixture() {
    const auto& scratch = fuzz::scratch_dir("audit_archive");
    archive_dir = scratch / "archive";
    fs::create_directories(archive_dir);
    auto opened = store::database::open((scratch / "audit.db").string());
    must(opened, "open the store");
    db = std::move(*opened);
    must(db->with_transaction([](store::transaction& tx) -> status {
      if (auto st = tx.exec_script(schema_sql(store::backend::sqlite)); !st) return st;
      return tx.exec_script(archives_ddl);
    }),
         "create the audit tables");
  }
};
fixture& fx() {
  static fixture f;
  return f;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& f = fx();
  const std::string name = archive_file_name(1, 1, 1);
  const auto path = fuzz::write_file(f.archive_dir, name, data, size);
  auto a = read_archive(path);
  if (!a) {
    require(a.code() == errc::corruption);
    return 0;
  }
  const auto& h = a->header;
  require(!a->rows.empty() && a->rows.size() == h.rows && a->rows.back().seq == h.last_seq);
  for (std::size_t i = 0; i < a->rows.size(); ++i) require(a->rows[i].seq == h.first_seq + i);
  require(h.file == name &&
          h.sha256 == crypto::sha256_hex(std::string_view(reinterpret_cast<const char*>(data), size)));
  anchor_keys none;
  for (const auto& c : a->checkpoints) require(!none.verify(c).ok());  // no key is trusted

  // The store lists the file as the one archived for its seqs.
  archive_entry e = h;
  e.file = name;
  must(f.db->with_transaction([&](store::transaction& tx) -> status {
    if (auto n = tx.exec("DELETE FROM audit_archives"); !n) return n.err();
    return insert_archive_entry(tx, e);
  }),
       "list the archive");
  verify_options o;
  o.archive_dir = f.archive_dir.string();
  auto rep = verify_store(*f.db, o);
  if (!rep) {
    // The store's columns are signed: seqs past 2^63 do not read back.
    require(rep.code() == errc::corruption || rep.code() == errc::invalid_argument);
    return 0;
  }
  if (rep->kind == fault::archive) require(rep->reason.find("is missing") == std::string::npos &&
                                           rep->reason.find("is not the file archived") == std::string::npos);
  require(rep->ok() == (rep->kind == fault::none) && (rep->ok() || !rep->reason.empty()));
  (void)rep->summary();
  return 0;
}
