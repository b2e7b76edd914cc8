#include "services/ingest/importer/import_options.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::ingest;

TEST_CASE("dataset names are 1..64 of [A-Za-z0-9._-] and never start with a dot") {
  for (const char* good : {"wiki", "wiki-en_2024.v1", "A", "0", "a..b", "x-"}) CHECK_MESSAGE(validate_dataset_name(good).ok(), good);
  for (const std::string& bad :
       std::vector<std::string>{"", ".staging", ".", "..", "a/b", "a b", "tab\t", "caf\xc3\xa9", std::string(65, 'x')}) {
    auto st = validate_dataset_name(bad);
    CHECK_MESSAGE(st.code() == errc::invalid_argument, bad);
    if (!st) CHECK(st.err().message.find("[A-Za-z0-9._-]") != std::string::npos);
  }
  CHECK(validate_dataset_name(std::string(64, 'x')).ok());
}

TEST_CASE("byte sizes take binary and decimal units and refuse anything else") {
  CHECK(*parse_byte_size("512MiB") == 512ull << 20);
  CHECK(*parse_byte_size("1GiB") == 1ull << 30);
  CHECK(*parse_byte_size("64M") == 64ull << 20);
  CHECK(*parse_byte_size("64m") == 64ull << 20);
  CHECK(*parse_byte_size("2GB") == 2'000'000'000ull);
  CHECK(*parse_byte_size("1000") == 1000);
  CHECK(*parse_byte_size("7b") == 7);
  for (const char* bad : {"", "MiB", "12 MiB", "1.5GiB", "12XB", "-1", "99999999999999999999", "20000000000TiB"})
    CHECK_MESSAGE(parse_byte_size(bad).code() == errc::invalid_argument, bad);
}

TEST_CASE("the memory budget is shared: half to dedup, an eighth per shard, a sixty-fourth per document") {
  import_options o;
  o.memory_budget = 64ull << 20;
  budget_plan p = plan_budget(o);
  CHECK(p.dedup_bytes == 32ull << 20);
  CHECK(p.shard_target_bytes == 8ull << 20);
  CHECK(p.max_document_bytes == 1ull << 20);
  o.memory_budget = 1ull << 30;  // the default: the reader's and writer's own limits apply
  p = plan_budget(o);
  CHECK(p.dedup_bytes == 512ull << 20);
  CHECK(p.shard_target_bytes == 16ull << 20);
  CHECK(p.max_document_bytes == 16ull << 20);
}

TEST_CASE("options are validated before any work: budget, nodes, profile, shard size") {
  import_options o;
  o.source = "/in";
  o.dataset = "d";
  o.datasets_root = "/root";
  CHECK(validate(o).ok());
  auto with = [&](auto change) {
    import_options x = o;
    change(x);
    return validate(x).code();
  };
  CHECK(with([](import_options& x) { x.memory_budget = 1 << 20; }) == errc::invalid_argument);
  CHECK(with([](import_options& x) { x.nodes = {}; }) == errc::invalid_argument);
  CHECK(with([](import_options& x) { x.nodes = {"a", "a"}; }) == errc::invalid_argument);
  CHECK(with([](import_options& x) { x.profile = "fancy"; }) == errc::invalid_argument);
  CHECK(with([](import_options& x) { x.shard_target_bytes = 100; }) == errc::invalid_argument);
  CHECK(with([](import_options& x) { x.datasets_root = ""; }) == errc::invalid_argument);
  CHECK(with([](import_options& x) { x.dataset = ".x"; }) == errc::invalid_argument);
}
