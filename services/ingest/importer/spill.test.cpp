// The pass-1 spill: what goes in comes back in order, sealed or plain; a
// sealed spill holds none of its documents' bytes in the clear, and one cut
// short is refused.
#include "services/ingest/importer/spill.hpp"

#include "libs/atrest/kek_store.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <vector>

using namespace loom;
using namespace loom::ingest;

namespace {

struct doc {
  spill_meta meta;
  std::vector<std::uint32_t> tokens;
  std::string json;
};

std::vector<doc> sample() {
  std::vector<doc> out;
  for (std::uint64_t i = 0; i < 300; ++i) {
    doc d;
    d.meta = {i % 3, i, i * 2, 100 + i, i % 2 ? doc_kind::sft : doc_kind::text};
    for (std::uint32_t k = 0; k < 50 + i % 97; ++k) d.tokens.push_back((k * 7919 + static_cast<std::uint32_t>(i)) % 50257);
    if (i % 2) d.json = R"({"prompt":"secret prompt number )" + std::to_string(i) + R"(","response":"confidential answer"})";
    out.push_back(std::move(d));
  }
  return out;
}

void round_trip(const std::string& path, std::shared_ptr<atrest::kek_store> keys) {
  const auto docs = sample();
  auto w = spill_writer::create(path, shards::dtype::uint16, keys);
  REQUIRE(w.ok());
  for (const auto& d : docs) REQUIRE(w->write(d.meta, d.tokens, d.json).ok());
  REQUIRE(w->finish().ok());
  auto r = spill_reader::open(path, shards::dtype::uint16, keys.get());
  REQUIRE(r.ok());
  spilled_doc got;
  for (const auto& d : docs) {
    auto more = r->next(got);
    REQUIRE(more.ok());
    REQUIRE(*more);
    CHECK(got.meta.record == d.meta.record);
    CHECK(got.meta.kind == d.meta.kind);
    CHECK(got.tokens == d.tokens);
    CHECK(got.record_json == d.json);
  }
  auto end = r->next(got);
  REQUIRE(end.ok());
  CHECK(!*end);
}

}  // namespace

TEST_CASE("a sealed spill round-trips its documents and shows none of their bytes on disk") {
  files::temp_dir dir("spill");
  auto keys = atrest::kek_store::open(dir.path() + "/keys", {}, std::chrono::system_clock::now());
  REQUIRE(keys.ok());
  std::shared_ptr<atrest::kek_store> shared = std::move(*keys);
  round_trip(dir.path() + "/sealed.spill", shared);
  auto raw = files::read_file(dir.path() + "/sealed.spill");
  REQUIRE(raw.ok());
  CHECK(raw->find("secret prompt") == std::string::npos);
  CHECK(raw->find("confidential") == std::string::npos);
  round_trip(dir.path() + "/plain.spill", nullptr);
  auto plain = files::read_file(dir.path() + "/plain.spill");
  REQUIRE(plain.ok());
  CHECK(plain->find("secret prompt") != std::string::npos);  // what sealing hides
  // Cut short: refused, never a short document.
  std::filesystem::resize_file(dir.path() + "/sealed.spill", raw->size() - 40);
  auto r = spill_reader::open(dir.path() + "/sealed.spill", shards::dtype::uint16, shared.get());
  bool refused = !r.ok();
  spilled_doc d;
  for (int i = 0; !refused && i < 1000; ++i) {
    auto more = r->next(d);
    if (!more) {
      refused = true;
      CHECK(more.err().message.find("fails authentication") != std::string::npos);
    } else if (!*more) {
      break;
    }
  }
  CHECK(refused);
}
