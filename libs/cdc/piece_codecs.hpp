// The two ways a pack in transit is sealed at rest (wire::bulk_piece_codec,
// libs/wire/bulk_pieces.hpp), so no dataset bytes lie in the clear while a
// pack crosses the link (issue 32 item 3):
//   ephemeral_pieces  the server's scratch copy of a pack it is sending: a key
//                     that lives only in the server process (the copy never
//                     outlives it), no key file.
//   kek_pieces        the puller's partial pack in .loom-sync/incoming, kept
//                     across an interrupted pull and resumed by the next
//                     process: each piece sealed as an at-rest object (its own
//                     data key, wrapped by the deployment's current KEK), its
//                     index sealed inside, so a moved record fails.
#pragma once

#include "libs/atrest/ephemeral.hpp"
#include "libs/atrest/kek_store.hpp"
#include "libs/wire/bulk_pieces.hpp"

#include <memory>
#include <string>

namespace loom::cdc {

class ephemeral_pieces final : public wire::bulk_piece_codec {
 public:
  explicit ephemeral_pieces(std::string label) : key_(std::move(label)) {}
  std::size_t overhead() const override { return atrest::ephemeral_key::overhead; }
  status seal(std::string_view plain, std::uint64_t index, std::string& out) const override;
  status open(std::string_view sealed, std::uint64_t index, const std::string& what, std::string& out) const override;

 private:
  atrest::ephemeral_key key_;
};

class kek_pieces final : public wire::bulk_piece_codec {
 public:
  explicit kek_pieces(std::shared_ptr<atrest::kek_store> keys) : keys_(std::move(keys)) {}
  std::size_t overhead() const override;
  status seal(std::string_view plain, std::uint64_t index, std::string& out) const override;
  status open(std::string_view sealed, std::uint64_t index, const std::string& what, std::string& out) const override;

 private:
  std::shared_ptr<atrest::kek_store> keys_;
};

}  // namespace loom::cdc
