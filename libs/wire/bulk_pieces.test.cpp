// Sealed-pieces files and the bulk transfer over them: the layout's sizes,
// a writer/reader round trip, damage named by file and piece, and a sender
// and receiver that keep their files sealed (resuming across receivers).
// The codec here is a test double (XOR and a checksum bound to the index);
// the AES-GCM codecs are tested in libs/cdc/piece_codecs.test.cpp.
#include "libs/wire/bulk_pieces.hpp"
#include "libs/wire/bulk_receiver.hpp"
#include "libs/wire/bulk_sender.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <filesystem>
#include <random>

using namespace loom;
using namespace loom::wire;
namespace fs = std::filesystem;

namespace {

// "Seals" by XOR with a byte and appends 8 bytes of SHA-256(index || plain).
class xor_codec final : public bulk_piece_codec {
 public:
  std::size_t overhead() const override { return 8; }
  status seal(std::string_view plain, std::uint64_t index, std::string& out) const override {
    out.assign(plain);
    for (auto& c : out) c = static_cast<char>(c ^ 0x5a);
    out.append(tag(plain, index));
    return {};
  }
  status open(std::string_view sealed, std::uint64_t index, const std::string& what, std::string& out) const override {
    if (sealed.size() < 8) return make_error(errc::corruption, what + ": short record");
    out.assign(sealed.substr(0, sealed.size() - 8));
    for (auto& c : out) c = static_cast<char>(c ^ 0x5a);
    if (tag(out, index) != sealed.substr(sealed.size() - 8))
      return make_error(errc::corruption, what + ": record " + std::to_string(index) + " does not authenticate");
    return {};
  }

 private:
  static std::string tag(std::string_view plain, std::uint64_t index) {
    auto d = crypto::sha256(std::to_string(index) + "|" + std::string(plain));
    return std::string(reinterpret_cast<const char*>(d.data()), 8);
  }
};

std::string random_text(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

std::string slurp(const std::string& path) {
  auto r = files::read_file(path);
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  return *r;
}

result<std::string> read_back(const std::string& path, const bulk_piece_codec& codec) {
  std::string all;
  auto s = read_pieces(path, codec, [&](std::string_view p) -> status {
    all.append(p);
    return {};
  });
  if (!s.ok()) return s.err();
  return all;
}

status write_pieces(const std::string& path, std::string_view plain, std::uint32_t piece, const bulk_piece_codec& c) {
  auto w = pieces_writer::create(path, piece, c);
  if (!w.ok()) return w.err();
  for (std::size_t at = 0; at < plain.size(); at += 7)  // appended in odd amounts
    if (auto s = w->append(plain.substr(at, 7)); !s.ok()) return s;
  auto n = w->finish();
  if (!n.ok()) return n.err();
  if (*n != plain.size()) return make_error(errc::internal, "finish counted " + std::to_string(*n));
  return {};
}

}  // namespace

TEST_CASE("a sealed-pieces layout maps every plaintext size to one file size and back") {
  const pieces_layout l{16, 8};
  CHECK(l.file_bytes(0) == 16);
  CHECK(l.file_bytes(1) == 16 + 1 + 8);
  CHECK(l.file_bytes(16) == 16 + 16 + 8);
  CHECK(l.file_bytes(17) == 16 + 17 + 16);
  for (std::uint64_t n = 0; n < 200; ++n) CHECK(l.plain_bytes(l.file_bytes(n)) == n);
  CHECK_FALSE(l.plain_bytes(15).has_value());           // shorter than the header
  CHECK_FALSE(l.plain_bytes(16 + 24 + 8).has_value());  // a last record with no plaintext
  CHECK_FALSE(l.plain_bytes(16 + 3).has_value());       // a record cut inside its overhead
}

TEST_CASE("pieces written sealed read back whole at every size, and no plaintext lies in the file") {
  files::temp_dir dir("loom-pieces");
  const xor_codec codec;
  for (std::size_t n : {0, 1, 15, 16, 17, 100, 16 * 5}) {
    const std::string plain = random_text(n, static_cast<unsigned>(n));
    const std::string path = dir.path() + "/p" + std::to_string(n);
    REQUIRE(write_pieces(path, plain, 16, codec).ok());
    CHECK(fs::file_size(path) == pieces_layout{16, 8}.file_bytes(n));
    auto size = pieces_plain_size(path);
    REQUIRE(size.ok());
    CHECK(*size == n);
    auto back = read_back(path, codec);
    REQUIRE_MESSAGE(back.ok(), back.err().to_string());
    CHECK(*back == plain);
    if (n >= 15) CHECK(slurp(path).find(plain.substr(0, 15)) == std::string::npos);
  }
}

TEST_CASE("a damaged, swapped, cut or foreign sealed-pieces file is refused naming the file and the piece") {
  files::temp_dir dir("loom-pieces");
  const xor_codec codec;
  const std::string plain = random_text(64, 3), path = dir.path() + "/pack";
  const pieces_layout l{16, 8};
  auto fresh = [&] { REQUIRE(write_pieces(path, plain, 16, codec).ok()); };

  fresh();
  std::string bytes = slurp(path);
  bytes[l.offset(2) + 3] ^= 1;
  REQUIRE(files::write_atomic(path, bytes).ok());
  auto r = read_back(path, codec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::corruption);
  CHECK(r.err().message.find(path) != std::string::npos);
  CHECK(r.err().message.find("record 2") != std::string::npos);

  fresh();  // records 0 and 1 swapped: each is bound to its index
  bytes = slurp(path);
  std::string swapped = bytes;
  std::memcpy(swapped.data() + l.offset(0), bytes.data() + l.offset(1), 24);
  std::memcpy(swapped.data() + l.offset(1), bytes.data() + l.offset(0), 24);
  REQUIRE(files::write_atomic(path, swapped).ok());
  CHECK(read_back(path, codec).err().message.find("record 0") != std::string::npos);

  fresh();  // cut to a size no plaintext has
  bytes = slurp(path);
  REQUIRE(files::write_atomic(path, bytes.substr(0, bytes.size() - 20)).ok());
  r = read_back(path, codec);
  CHECK(r.code() == errc::corruption);
  CHECK(r.err().message.find("cut short or grown") != std::string::npos);
  // cut to a size a shorter plaintext would have: the last record fails instead
  REQUIRE(files::write_atomic(path, bytes.substr(0, bytes.size() - 30)).ok());
  r = read_back(path, codec);
  CHECK(r.code() == errc::corruption);
  CHECK(r.err().message.find("record 2") != std::string::npos);

  REQUIRE(files::write_atomic(path, plain).ok());  // a plain file
  CHECK(read_back(path, codec).err().message.find("not a sealed-pieces file") != std::string::npos);
}

TEST_CASE("a bulk transfer between sealed files: the receiver's partial and object stay sealed and resume in a new receiver") {
  files::temp_dir dir("loom-pieces");
  auto codec = std::make_shared<xor_codec>();
  const std::string plain = random_text(100, 9), src = dir.path() + "/src", dest = dir.path() + "/dest";
  REQUIRE(write_pieces(src, plain, 16, *codec).ok());
  auto tx = bulk_sender::open(src, "pack-1", 16, "t1", codec.get());
  REQUIRE_MESSAGE(tx.ok(), tx.err().to_string());
  CHECK(tx->offer().total_bytes == 100);
  CHECK(tx->offer().chunk_count == 7);
  CHECK(tx->offer().sha256 == crypto::sha256(plain));
  CHECK(bulk_sender::open(src, "pack-1", 32, "t1", codec.get()).code() == errc::invalid_argument);  // piece size differs

  {
    bulk_receiver rx(dest, codec);
    auto need = rx.on_offer(tx->offer());
    REQUIRE(need.ok());
    CHECK(need->missing.size() == 7);
    for (std::uint32_t i : {0u, 1u, 2u}) {
      auto c = tx->chunk(i);
      REQUIRE(c.ok());
      CHECK(c->data == plain.substr(i * 16, 16));
      CHECK(rx.on_chunk(c->header, c->data).ok);
    }
    CHECK(slurp(dest + "/pack-1.part").find(plain.substr(0, 12)) == std::string::npos);
  }
  {
    bulk_receiver plain_rx(dest);  // a receiver without the codec does not resume a sealed partial...
    auto need = plain_rx.on_offer(tx->offer());
    REQUIRE(need.ok());
    CHECK(need->missing.size() == 7);
  }
  // ...so seal the first three again, then a new sealed receiver resumes.
  {
    bulk_receiver rx(dest, codec);
    REQUIRE(rx.on_offer(tx->offer()).ok());
    for (std::uint32_t i : {0u, 1u, 2u}) {
      auto c = tx->chunk(i);
      CHECK(rx.on_chunk(c->header, c->data).ok);
    }
  }
  bulk_receiver rx(dest, codec);
  auto need = rx.on_offer(tx->offer());
  REQUIRE(need.ok());
  CHECK(need->missing == std::vector<std::uint32_t>{3, 4, 5, 6});
  bulk_ack last;
  for (auto i : need->missing) {
    auto c = tx->chunk(i);
    last = rx.on_chunk(c->header, c->data);
    CHECK(last.ok);
  }
  CHECK(last.complete);
  auto back = read_back(dest + "/pack-1", *codec);
  REQUIRE(back.ok());
  CHECK(*back == plain);
  CHECK(slurp(dest + "/pack-1").find(plain.substr(0, 12)) == std::string::npos);
  // Offered again, the finished sealed object is recognised as complete.
  bulk_receiver again(dest, codec);
  auto done = again.on_offer(tx->offer());
  REQUIRE(done.ok());
  CHECK(done->complete);
}

TEST_CASE("a sealed partial damaged on disk is discarded at the end, not resumed forever") {
  files::temp_dir dir("loom-pieces");
  auto codec = std::make_shared<xor_codec>();
  const std::string plain = random_text(48, 4), src = dir.path() + "/src", dest = dir.path() + "/dest";
  REQUIRE(write_pieces(src, plain, 16, *codec).ok());
  auto tx = bulk_sender::open(src, "p", 16, "t1", codec.get());
  REQUIRE(tx.ok());
  bulk_receiver rx(dest, codec);
  REQUIRE(rx.on_offer(tx->offer()).ok());
  for (std::uint32_t i : {0u, 1u}) {
    auto c = tx->chunk(i);
    REQUIRE(rx.on_chunk(c->header, c->data).ok);
  }
  {  // flip a byte of record 0 behind the receiver's back
    std::string bytes = slurp(dest + "/p.part");
    bytes[pieces_layout{16, 8}.offset(0)] ^= 1;
    auto fd = ::open((dest + "/p.part").c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(files::pwrite_all(fd, bytes, 0, "p.part").ok());
    ::close(fd);
  }
  auto c = tx->chunk(2);
  auto last = rx.on_chunk(c->header, c->data);
  CHECK_FALSE(last.ok);
  CHECK(last.fatal);
  CHECK(last.code == errc::corruption);
  CHECK(last.reason.find("partial discarded") != std::string::npos);
  CHECK(last.reason.find("record 0") != std::string::npos);
  CHECK_FALSE(fs::exists(dest + "/p.part"));
  CHECK_FALSE(fs::exists(dest + "/p.part.state"));
}
