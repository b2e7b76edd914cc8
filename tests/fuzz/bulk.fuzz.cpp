// Fuzzes the bulk-transfer receiver (libs/wire/bulk_transport.hpp,
// serve_bulk_message -> bulk_receiver): the ingest and trainer services feed
// it the frames a peer sends over its DEALER -- offers, chunk headers and raw
// chunk bytes -- and it writes files from them, so a bad frame must never
// crash it or write outside its directory.
//
// Input: a sequence of messages, each
//   kind (1 byte: 0 offer, 1 chunk, else raw) | n1 (u16 LE) | frame 1 | [chunk: n2 (u32 LE) | frame 2]
// an offer is [BulkOffer type][frame 1], a chunk [BulkChunk type][frame 1][frame 2],
// raw is [frame 1 as the type][frame 2 when present]. One fresh receiver per input.
#include "libs/wire/bulk_transport.hpp"
#include "tests/fuzz/fuzz_file.hpp"
#include "tests/fuzz/quiet_protobuf.hpp"

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

using namespace loom::wire;

namespace {

struct reader {
  const std::uint8_t* p;
  std::size_t n;
  std::uint64_t le(int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes && n > 0; ++i, ++p, --n) v |= std::uint64_t{*p} << (8 * i);
    return v;
  }
  std::string_view take(std::uint64_t len) {
    std::size_t k = len < n ? static_cast<std::size_t>(len) : n;
    std::string_view s(reinterpret_cast<const char*>(p), k);
    p += k;
    n -= k;
    return s;
  }
};

zmq::message_t frame(std::string_view s) { return zmq::message_t(s.data(), s.size()); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& dir = loom::fuzz::scratch_dir("bulk");
  loom::fuzz::clear_dir(dir);
  bulk_receiver rx(dir.string());
  reader in{data, size};
  std::vector<std::string> reply;
  for (int messages = 0; in.n > 0 && messages < 64; ++messages) {
    auto kind = in.le(1);
    auto f1 = in.take(in.le(2));
    std::vector<zmq::message_t> frames;
    if (kind == 0) {
      frames.push_back(frame(bulk_offer_type));
      frames.push_back(frame(f1));
    } else if (kind == 1) {
      auto f2 = in.take(in.le(4));
      frames.push_back(frame(bulk_chunk_type));
      frames.push_back(frame(f1));
      frames.push_back(frame(f2));
    } else {
      frames.push_back(frame(f1));
      if (kind & 1) frames.push_back(frame(in.take(in.le(2))));
    }
    serve_bulk_message(rx, frames, reply);
    if (reply.size() != 2) std::abort();  // the contract: always [type][message]
  }
  // Whatever was sent, nothing may appear outside the receiver's directory:
  // every entry in it is a plain file directly inside.
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (!e.is_regular_file()) std::abort();
  return 0;
}
