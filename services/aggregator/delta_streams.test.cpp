#include "services/aggregator/delta_streams.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>

using namespace loom;
using namespace loom::aggregator;

namespace {
using tp = delta_streams::time_point;
const std::string sha(32, 'h');

loom::v1::DeltaChunk piece(std::uint64_t offset, std::uint64_t total = 10, std::uint64_t round = 3) {
  loom::v1::DeltaChunk c;
  c.set_job("j");
  c.set_site("north");
  c.set_round(round);
  c.set_fragment(1);
  c.set_offset(offset);
  c.set_total_bytes(total);
  c.set_payload_sha256(sha);
  return c;
}
loom::v1::DeltaHeader header(std::uint64_t offset, std::uint64_t total = 10, std::uint64_t round = 3) {
  loom::v1::DeltaHeader h;
  h.set_job("j");
  h.set_site("north");
  h.set_round(round);
  h.set_fragment(1);
  h.set_payload_bytes(total);
  h.set_payload_sha256(sha);
  h.set_payload_offset(offset);
  return h;
}
}  // namespace

TEST_CASE("a streamed delta's pieces in order, a retried piece and the header's last piece make the whole payload") {
  delta_streams s;
  tp now{};
  CHECK(*s.chunk("k", piece(0), "abcd", 100, now) == 4);
  CHECK(*s.chunk("k", piece(0), "abcd", 100, now) == 4);  // a retry: acknowledged, not appended
  CHECK(*s.chunk("k", piece(4), "efg", 100, now) == 7);
  CHECK(s.staged_bytes() == 7);
  auto whole = s.complete("k", header(7), "hij");
  REQUIRE(whole.ok());
  CHECK(*whole == "abcdefghij");
  CHECK(s.staged_bytes() == 0);
  CHECK(s.complete("k", header(7), "hij").code() == errc::conflict);  // forgotten once complete
}

TEST_CASE("pieces out of order, past the payload, too large for the fragment or of another key are refused, naming why") {
  delta_streams s;
  tp now{};
  auto gap = s.chunk("k", piece(4), "efg", 100, now);  // no piece 0 held
  CHECK(gap.code() == errc::conflict);
  CHECK(gap.err().message.find("send it again from offset 0") != std::string::npos);
  REQUIRE(s.chunk("k", piece(0), "abcd", 100, now).ok());
  auto skip = s.chunk("k", piece(6), "gh", 100, now);
  CHECK(skip.code() == errc::conflict);
  CHECK(skip.err().message.find("send from offset 4") != std::string::npos);
  CHECK(s.chunk("k", piece(8), "xyz", 100, now).code() == errc::invalid_argument);  // past the total
  auto big = s.chunk("k", piece(0, 1000), "a", 100, now);
  CHECK(big.code() == errc::invalid_argument);
  CHECK(big.err().message.find("at most 100") != std::string::npos);
  // Another key cannot complete (or even see) k's upload.
  CHECK(s.complete("intruder", header(4), "efghij").code() == errc::conflict);
  // The header must match the pieces: another round, or bytes missing.
  CHECK(s.complete("k", header(4, 10, 4), "efghij").code() == errc::conflict);
  auto short_one = s.complete("k", header(4), "efg");
  CHECK(short_one.code() == errc::conflict);
  CHECK(short_one.err().message.find("do not make its 10 bytes") != std::string::npos);
}

TEST_CASE("a new delta's first piece replaces the upload before it, and an idle upload expires") {
  delta_streams s("", std::chrono::seconds(60));
  tp now{};
  REQUIRE(s.chunk("k", piece(0), "abcd", 100, now).ok());
  CHECK(*s.chunk("k", piece(0, 10, 4), "ABCD", 100, now) == 4);  // round 4 replaces round 3
  CHECK(s.complete("k", header(4, 10, 3), "efghij").code() == errc::conflict);
  CHECK(*s.complete("k", header(4, 10, 4), "EFGHIJ") == "ABCDEFGHIJ");
  REQUIRE(s.chunk("k", piece(0), "abcd", 100, now).ok());
  s.expire(now + std::chrono::seconds(30));
  CHECK(s.staged_bytes() == 4);
  s.expire(now + std::chrono::seconds(61));
  CHECK(s.staged_bytes() == 0);
}

TEST_CASE("a pull's later slices come from the payload kept for its key and fragment, never another's") {
  delta_streams s;
  global_update_header h;
  h.version = 5;
  auto payload = std::make_shared<const std::string>("0123456789");
  s.keep_pull("k", "j", 2, h, payload);
  auto k = s.kept_pull("k", "j", 2);
  REQUIRE(k.ok());
  CHECK(*k->payload == "0123456789");
  CHECK(k->header.version == 5);
  CHECK(s.kept_pull("k", "j", 1).code() == errc::conflict);
  CHECK(s.kept_pull("other", "j", 2).code() == errc::conflict);
}

TEST_CASE("with a spool, pieces wait in a file, not in memory, and the file goes when the upload completes, is replaced or expires") {
  files::temp_dir dir;
  const std::string spool = dir.path() + "/.incoming";
  namespace fs = std::filesystem;
  auto count = [&] {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(spool)) n += e.is_regular_file() ? 1 : 0;
    return n;
  };
  REQUIRE(files::make_dirs(spool).ok());
  REQUIRE(files::write_atomic(spool + "/upload-7.part", "left by a process before", 0600).ok());
  delta_streams s(spool, std::chrono::seconds(60));
  CHECK(count() == 0);  // a previous process's uploads ended with it
  tp now{};
  CHECK(*s.chunk("k", piece(0), "abcd", 100, now) == 4);
  CHECK(*s.chunk("k", piece(0), "abcd", 100, now) == 4);  // a retry: acknowledged, not appended
  CHECK(*s.chunk("k", piece(4), "efg", 100, now) == 7);
  CHECK(s.staged_bytes() == 7);
  CHECK(s.staged_in_memory() == 0);
  CHECK(count() == 1);
  auto skip = s.chunk("k", piece(9), "j", 100, now);
  CHECK(skip.code() == errc::conflict);
  auto whole = s.complete("k", header(7), "hij");
  REQUIRE_MESSAGE(whole.ok(), whole.err().to_string());
  CHECK(*whole == "abcdefghij");
  CHECK(count() == 0);
  CHECK(s.staged_bytes() == 0);

  REQUIRE(s.chunk("k", piece(0), "abcd", 100, now).ok());
  REQUIRE(s.chunk("k", piece(0, 10, 4), "ABCD", 100, now).ok());  // the next round's delta replaces it
  CHECK(count() == 1);
  CHECK(s.staged_bytes() == 4);
  REQUIRE(s.chunk("other", piece(0), "wxyz", 100, now).ok());
  CHECK(count() == 2);
  s.expire(now + std::chrono::seconds(61));
  CHECK(count() == 0);
  CHECK(s.staged_bytes() == 0);
}

TEST_CASE("spooled pieces are sealed under a key that dies with the process, and an altered spool file is named") {
  files::temp_dir dir;
  const std::string spool = dir.path() + "/.incoming";
  namespace fs = std::filesystem;
  auto only_file = [&] {
    std::string f;
    for (const auto& e : fs::directory_iterator(spool)) f = e.path().string();
    return f;
  };
  tp now{};
  {
    delta_streams s(spool, std::chrono::seconds(60));
    REQUIRE(s.chunk("k", piece(0), "abcd", 100, now).ok());
    REQUIRE(s.chunk("k", piece(4), "efg", 100, now).ok());
    auto on_disk = files::read_file(only_file());
    REQUIRE(on_disk.ok());
    CHECK(on_disk->size() == 7 + 2 * atrest::ephemeral_key::overhead);
    CHECK(on_disk->find("abcd") == std::string::npos);
    CHECK(on_disk->find("efg") == std::string::npos);
    auto whole = s.complete("k", header(7), "hij");
    REQUIRE(whole.ok());
    CHECK(*whole == "abcdefghij");
  }
  delta_streams s(spool, std::chrono::seconds(60));
  REQUIRE(s.chunk("k", piece(0), "abcd", 100, now).ok());
  REQUIRE(s.chunk("k", piece(4), "efg", 100, now).ok());
  const std::string file = only_file();
  auto bytes = files::read_file(file);
  REQUIRE(bytes.ok());
  (*bytes)[20] ^= 1;
  REQUIRE(files::write_atomic(file, *bytes, 0600).ok());
  auto whole = s.complete("k", header(7), "hij");
  REQUIRE_FALSE(whole.ok());
  CHECK(whole.code() == errc::unavailable);
  CHECK(whole.err().message.find(file) != std::string::npos);
  CHECK(whole.err().message.find("does not authenticate") != std::string::npos);
  CHECK(whole.err().message.find("send it again from offset 0") != std::string::npos);
}
