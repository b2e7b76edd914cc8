#include "libs/auditchain/envelope.hpp"

#include <doctest/doctest.h>

using namespace loom::auditchain;
using loom::errc;

namespace {
const std::string key(32, '\x5a');
envelope_header header() {
  envelope_header h;
  h.kek_version = 3;
  h.day = 19800;
  h.nonce = random_nonce();
  return h;
}
}  // namespace

TEST_CASE("a sealed payload opens with its key and context and carries its header") {
  row_context ctx{.seq = 12, .source = "scheduler@a", .source_seq = 4, .request_id = "req-1"};
  auto h = header();
  std::string sealed = seal_with_key(key, h, "secret detail", context_bytes(ctx));
  CHECK(sealed.size() == header_size + 13 + tag_size);
  CHECK(sealed.find("secret detail") == std::string::npos);
  auto back = parse_header(sealed);
  REQUIRE(back.ok());
  CHECK(back->version == 1);
  CHECK(back->kek_version == 3);
  CHECK(back->day == 19800);
  CHECK(back->nonce == h.nonce);
  auto pt = open_with_key(key, sealed, context_bytes(ctx));
  REQUIRE(pt.ok());
  CHECK(*pt == "secret detail");
  auto empty = open_with_key(key, seal_with_key(key, h, "", context_bytes(ctx)), context_bytes(ctx));
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("every single flipped bit of header, nonce, ciphertext or tag fails authentication") {
  row_context ctx{.seq = 99, .source = "ingest@b", .source_seq = 7, .request_id = "req-99"};
  const std::string aad = context_bytes(ctx);
  const std::string sealed = seal_with_key(key, header(), "forty bytes of audit payload detail ....", aad);
  REQUIRE(sealed.size() == 21 + 40 + 16);
  std::size_t refused = 0;
  for (std::size_t bit = 0; bit < sealed.size() * 8; ++bit) {
    std::string t = sealed;
    t[bit / 8] = static_cast<char>(t[bit / 8] ^ (1 << (bit % 8)));
    auto r = open_with_key(key, t, aad);
    refused += !r.ok() && r.code() == errc::corruption;
  }
  CHECK(refused == sealed.size() * 8);
  // Cut short anywhere: refused too.
  for (std::size_t n = 0; n < sealed.size(); ++n) CHECK_FALSE(open_with_key(key, sealed.substr(0, n), aad).ok());
}

TEST_CASE("a ciphertext moved to another row fails to open") {
  row_context ctx{.seq = 5, .source = "trainer@c", .source_seq = 50, .request_id = "req-5"};
  const std::string sealed = seal_with_key(key, header(), "payload", context_bytes(ctx));
  CHECK(open_with_key(key, sealed, context_bytes(ctx)).ok());
  row_context other = ctx;
  other.seq = 6;
  CHECK(open_with_key(key, sealed, context_bytes(other)).code() == errc::corruption);
  other = ctx;
  other.source = "trainer@d";
  CHECK(open_with_key(key, sealed, context_bytes(other)).code() == errc::corruption);
  other = ctx;
  other.source_seq = 51;
  CHECK(open_with_key(key, sealed, context_bytes(other)).code() == errc::corruption);
  other = ctx;
  other.request_id = "req-6";
  auto r = open_with_key(key, sealed, context_bytes(other));
  CHECK(r.code() == errc::corruption);
  CHECK(r.err().message.find("authentication failed") != std::string::npos);
  CHECK(open_with_key(std::string(32, '\x5b'), sealed, context_bytes(ctx)).code() == errc::corruption);
}
