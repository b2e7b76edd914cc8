// Fuzzes the request/reply envelope codec (libs/wire/envelope.hpp): every
// service's ROUTER hands each frame a peer sends to decode_request, and every
// client hands each reply frame to decode_reply, before anything else looks at
// it, so these bytes come straight from the network. Besides "no crash, no UB"
// it checks that whatever decodes re-encodes to something that decodes equal.
#include "libs/wire/envelope.hpp"
#include "tests/fuzz/quiet_protobuf.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace loom::wire;

namespace {
void require(bool ok) {
  if (!ok) std::abort();  // a broken round trip: libFuzzer saves the input
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string seen;
  if (auto req = decode_request(data, size, &seen); req.ok()) {
    require(seen == req->request_id);
    auto again = decode_request(encode(*req).data(), encode(*req).size());
    require(again.ok() && again->request_id == req->request_id && again->type == req->type &&
            again->body == req->body && again->token == req->token && again->attempt == req->attempt &&
            again->sent_unix_ns == req->sent_unix_ns);
  }
  if (auto rep = decode_reply(data, size); rep.ok()) {
    auto bytes = encode(*rep);
    auto again = decode_reply(bytes.data(), bytes.size());
    // An unknown status code decodes as internal + details["code"]; that
    // re-encodes as a known code, so compare everything but those two.
    require(again.ok() && again->request_id == rep->request_id && again->type == rep->type &&
            again->body == rep->body && again->message == rep->message);
  }
  return 0;
}
