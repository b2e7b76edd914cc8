// Fuzz-style checks of the sync protocol's decoders (protocol.hpp): random
// bytes and every truncation of valid frames, from a fixed seed and bounded
// (~1 s). Each answer must be an error — never a value, never a crash.
#include "libs/cdc/protocol.hpp"

#include "libs/cdc/test_data.hpp"

#include "loom/v1/sync.pb.h"

#include <google/protobuf/stubs/logging.h>

#include <doctest/doctest.h>

#include <functional>
#include <random>

using namespace loom;
using namespace loom::cdc;

namespace {

constexpr std::uint64_t seed = 0x5eed'cdc0;
constexpr int random_inputs = 4000;

using decoder = std::function<bool(std::string_view)>;  // true = a value came back

// Every decoder, by name. decode_chunks is asked for two paths.
std::vector<std::pair<std::string, decoder>> decoders() {
  static const std::vector<std::string> paths{"docs/a.txt", "empty"};
  return {
      {"ManifestRequest", [](std::string_view b) { return decode_manifest_request(b).ok(); }},
      {"ChunksRequest", [](std::string_view b) { return decode_chunks_request(b).ok(); }},
      {"PackRequest", [](std::string_view b) { return decode_pack_request(b).ok(); }},
      {"Manifest", [](std::string_view b) { return decode_manifest(b, "fuzz").ok(); }},
      {"Chunks", [](std::string_view b) { return decode_chunks(b, paths, "fuzz").ok(); }},
      {"PackDone", [](std::string_view b) { return decode_pack_done(b).ok(); }},
  };
}

std::string hex(std::string_view b) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b.substr(0, 64)) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// Two files, one in several chunks, and the valid frames of every message about them.
struct frames {
  manifest m;
  std::vector<std::pair<std::string, std::string>> by_decoder;  // decoder name -> a valid frame

  frames() {
    const std::string data = test::pseudo_random(300000, 9);
    file_entry a{"docs/a.txt", data.size(), {}, 0, chunk_data(data), {}};
    a.chunk_count = a.chunks.size();
    a.root = file_root(a.chunks);
    m.files = {a, file_entry{"empty", 0, file_root({}), 0, {}, {}}};
    m.root = dataset_root(m.files);
    std::vector<crypto::digest> ids;
    for (const auto& c : a.chunks) ids.push_back(c.sha256);
    wire::transfer_stats bulk;
    bulk.chunks_sent = 3;
    bulk.bytes_sent = 300000;
    bulk.complete = true;
    by_decoder = {
        {"ManifestRequest", encode(manifest_request{"wiki-en"})},
        {"ChunksRequest", encode(chunks_request{"wiki-en", m.root, {"docs/a.txt", "empty"}})},
        {"PackRequest", encode(pack_request{"wiki-en", pack_name(ids), ids})},
        {"Manifest", encode_summary(m)},
        {"Chunks", encode_chunks({&m.files[0], &m.files[1]})},
        {"PackDone", encode({}, pack_done{"pack-x", bulk})},
    };
  }
};

}  // namespace

TEST_CASE("random bytes fed to every sync decoder only ever come back as errors") {
  google::protobuf::LogSilencer quiet;  // invalid UTF-8 in a string field is logged by the parser
  std::mt19937_64 rng(seed);
  std::size_t tried = 0, statuses_ok = 0;
  for (int i = 0; i < random_inputs; ++i) {
    // Mostly short (where a parse can get far), some up to 4 KiB.
    const std::size_t n = i % 4 == 0 ? rng() % 4096 : rng() % 48;
    std::string b(n, '\0');
    for (auto& c : b) c = static_cast<char>(rng());
    for (const auto& [name, decode] : decoders()) {
      ++tried;
      INFO(name << " accepted random bytes " << hex(b));
      CHECK_FALSE(decode(b));
    }
    // A Status frame is tiny and mostly optional fields: random bytes may
    // well be a valid one. It may only say OK when the bytes really do.
    if (decode_status(b).ok()) {
      ++statuses_ok;
      v1::Status s;
      CHECK(s.ParseFromString(b));
      CHECK(s.code() == v1::OK);
    }
  }
  CHECK(tried == 6u * random_inputs);
  MESSAGE(tried << " random frames refused; " << statuses_ok << " of " << random_inputs
                << " were well-formed OK statuses");
}

TEST_CASE("every truncation of a valid sync frame is refused by its decoder") {
  google::protobuf::LogSilencer quiet;
  const frames f;
  const auto all = decoders();
  for (const auto& [name, frame] : f.by_decoder) {
    const decoder* decode = nullptr;
    for (const auto& [n, d] : all)
      if (n == name) decode = &d;
    REQUIRE(decode);
    INFO(name << ", " << frame.size() << " bytes");
    REQUIRE((*decode)(frame));  // whole: a value
    std::size_t accepted = 0;
    for (std::size_t len = 0; len < frame.size(); ++len)
      if ((*decode)(std::string_view(frame).substr(0, len))) {
        ++accepted;
        INFO("accepted the first " << len << " bytes");
        CHECK(false);
      }
    CHECK(accepted == 0);
  }
  // Failed replies and error frames: a cut one is refused too, or still
  // carries an error (never OK). The empty frame is OK's own encoding.
  const error e = make_error(errc::not_found, "no dataset \"wiki-en\"");
  for (std::string_view type : {manifest_reply_type, chunks_reply_type, pack_done_type}) {
    const std::string frame = encode_failure(type, e);
    for (std::size_t len = 0; len <= frame.size(); ++len) {
      const std::string_view cut = std::string_view(frame).substr(0, len);
      const errc want = len == frame.size() ? errc::not_found : errc::invalid_argument;
      INFO(type << " cut to " << len << " of " << frame.size() << " bytes");
      if (type == manifest_reply_type) CHECK(decode_manifest(cut, "t").code() == want);
      if (type == chunks_reply_type) CHECK(decode_chunks(cut, {"a"}, "t").code() == want);
      if (type == pack_done_type) CHECK(decode_pack_done(cut).code() == want);
    }
  }
  const std::string status = encode_status(e);
  for (std::size_t len = 1; len < status.size(); ++len) {
    INFO("status cut to " << len << " bytes");
    CHECK_FALSE(decode_status(std::string_view(status).substr(0, len)).ok());
  }
}
