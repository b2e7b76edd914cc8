#include "libs/cdc/piece_codecs.hpp"

#include "libs/atrest/sealed.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/wire/bulk_types.hpp"

namespace loom::cdc {
namespace {

constexpr std::size_t index_bytes = 8;

void put64(char* p, std::uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v & 0xff);
}
std::uint64_t get64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

status ephemeral_pieces::seal(std::string_view plain, std::uint64_t index, std::string& out) const {
  key_.seal_into(plain, index, out);
  return {};
}

status ephemeral_pieces::open(std::string_view sealed, std::uint64_t index, const std::string& what,
                              std::string& out) const {
  return key_.open_one(sealed, index, what, out);
}

// One sealed object per piece, of one chunk (a piece is at most 64 MiB, the
// largest chunk): its header, the index and the piece, one tag.
std::size_t kek_pieces::overhead() const { return atrest::sealed_header_size + index_bytes + atrest::sealed_tag_size; }

status kek_pieces::seal(std::string_view plain, std::uint64_t index, std::string& out) const {
  if (plain.size() + index_bytes > wire::max_chunk_bytes)
    return make_error(errc::invalid_argument, "a piece over 64 MiB less 8 bytes cannot be sealed in one chunk");
  std::string framed(index_bytes + plain.size(), '\0');
  put64(framed.data(), index);
  std::copy(plain.begin(), plain.end(), framed.begin() + index_bytes);
  return atrest::seal_into(framed, *keys_, loom::wall_now(), out, wire::max_chunk_bytes);
}

status kek_pieces::open(std::string_view sealed, std::uint64_t index, const std::string& what, std::string& out) const {
  std::string framed;
  if (auto s = atrest::unseal_into(sealed, *keys_, what + " piece " + std::to_string(index), framed); !s.ok()) return s;
  if (framed.size() < index_bytes || get64(framed.data()) != index)
    return make_error(errc::corruption, what + ": piece " + std::to_string(index) +
                                            " was sealed as another piece (moved or repeated)");
  out.assign(framed, index_bytes, std::string::npos);
  return {};
}

}  // namespace loom::cdc
