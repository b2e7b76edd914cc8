// Sealed objects: a file's bytes encrypted at rest with AES-256-GCM under
// their own random data key, wrapped by the current KEK (kek_store.hpp), in
// chunks, so a reader verifies every byte and names where a change is.
// Format v1 (integers big-endian):
//   header, 92 bytes:
//     0  8 B  magic "LOOMSEAL"
//     8  u32  format version (1)
//    12  u32  KEK version that wraps the data key
//    16  u32  chunk size C (plaintext bytes per chunk, 4 KiB..64 MiB)
//    20  u32  reserved (0)
//    24  8 B  nonce prefix (random per object)
//    32  12 B nonce of the data key's wrap
//    44  32 B wrapped data key, 76: 16 B its GCM tag (AAD: bytes 0..32)
//   then the chunks: chunk i is AES-256-GCM(data key, nonce = prefix || u32 i,
//   AAD = the 92-byte header || u64 i || u8 last) of C plaintext bytes (the
//   last: 0..C), followed by its 16-byte tag.
// The body's length fixes the chunk layout; `last` in the AAD makes a file
// cut at a chunk boundary fail, the index in the nonce makes swapped chunks
// fail, the header in the AAD makes a changed header fail. Nonces: 64 random
// bits per object and a 32-bit chunk counter under a key used for that one
// object only — no nonce repeats under a key.
// Stateless functions over a kek_store (thread-safe).
#pragma once

#include "libs/atrest/kek_store.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace loom::atrest {

inline constexpr std::size_t sealed_header_size = 92, sealed_tag_size = 16;
inline constexpr std::uint32_t default_chunk = 1u << 20;

// Whether `head` (a file's first bytes) starts like a sealed object.
bool looks_sealed(std::string_view head);

// The plaintext size a sealed file of `file_size` bytes holds, from its header
// (`head`: at least its first 92 bytes) — a stat-cheap size check that needs
// no key. nullopt when the header or the size cannot be a sealed object's.
std::optional<std::uint64_t> sealed_plain_size(std::string_view head, std::uint64_t file_size);

// Sealed bytes of `plain` (a new data key, wrapped by keys.for_wrap(now)).
// invalid_argument for a chunk size outside 4 KiB..64 MiB.
result<std::string> seal(std::string_view plain, kek_store& keys, sys_time now, std::uint32_t chunk = default_chunk);

// The plaintext of sealed bytes. `what` names them in errors (a path):
// corruption "<what>: chunk 3 (plaintext bytes 3145728..4194304) fails
// authentication: changed, cut or not sealed by this deployment" and the
// like for a bad header, a wrong length or an unwrap that fails; not_found
// when the KEK version it names is missing.
result<std::string> unseal(std::string_view sealed, kek_store& keys, const std::string& what);

// The same into the caller's buffer, reusing its capacity: a reader of many
// objects (a shard loader) pays for fresh pages once, not per object
// (measured: allocating 16 MiB per read made a sealed read 20x a plain one
// on this VM, mostly page faults; reused, see bench/crypt_bench).
status seal_into(std::string_view plain, kek_store& keys, sys_time now, std::string& out,
                 std::uint32_t chunk = default_chunk);
status unseal_into(std::string_view sealed, kek_store& keys, const std::string& what, std::string& out);

// Unseals the sealed file at `path` chunk by chunk through buffers of one
// chunk's size, handing each chunk's plaintext, verified, to `sink` in order:
// a reader that hashes or scans never holds (or page-faults in) the whole
// file. Errors as unseal's, naming `path`; a sink's error ends it and is
// returned. A sink may have seen earlier chunks of a file that then fails.
status unseal_file(const std::string& path, kek_store& keys, const std::function<status(std::string_view)>& sink);

// A sealed file written as its plaintext arrives, in pieces of any size:
// each chunk is sealed and written once it is known not to be the last (one
// chunk is held back until finish()), and the plaintext's SHA-256 and size are
// counted on the way — a writer of a large file (a snapshot's tensors) never
// holds it whole, sealed or plain (measured: encoding then sealing a 200 MB
// snapshot in fresh buffers cost more than the AES; bench/crypt_bench).
// finish() publishes atomically (temporary "<path>.tmp.<pid>.<n>", fsync,
// rename, fsync of the directory); a writer dropped unfinished removes its
// temporary file. Errors name the temporary file or the path. One thread.
class sealed_writer {
 public:
  struct facts {
    std::string sha256_hex;  // of the plaintext
    std::uint64_t bytes = 0;  // the plaintext's size
  };
  // A new object at `path` under a new data key wrapped by keys.for_wrap(now);
  // the file gets files::masked_mode(mode).
  static result<std::unique_ptr<sealed_writer>> create(const std::string& path, kek_store& keys, sys_time now,
                                                       mode_t mode = 0600, std::uint32_t chunk = default_chunk);
  ~sealed_writer();
  sealed_writer(const sealed_writer&) = delete;
  sealed_writer& operator=(const sealed_writer&) = delete;

  // Appends plaintext. After an error the writer only refuses.
  status append(std::string_view plain);
  // Seals the last chunk and publishes the file. REQUIRES: called once.
  result<facts> finish();

 private:
  struct impl;
  explicit sealed_writer(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

// A sealed file read in order, in pieces of any size, one chunk in memory at
// a time — each chunk verified before any of its bytes is handed out: a
// reader that parses records (the importer's spill) pulls exact byte counts.
// Errors as unseal's, naming the path. One thread.
class sealed_reader {
 public:
  // corruption for a file that is not a whole sealed object of this
  // deployment (its header, its length, its data key's unwrap).
  static result<std::unique_ptr<sealed_reader>> open(const std::string& path, kek_store& keys);
  ~sealed_reader();
  sealed_reader(const sealed_reader&) = delete;
  sealed_reader& operator=(const sealed_reader&) = delete;
  // Up to n plaintext bytes into `out`: fewer only at the end (0: at the end).
  result<std::size_t> read(void* out, std::size_t n);
  std::uint64_t size() const;  // the plaintext's
  std::uint32_t chunk_size() const;  // plaintext bytes per chunk

 private:
  struct impl;
  explicit sealed_reader(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

// The same on files: write_sealed publishes atomically (temporary name,
// fsync, rename, fsync of the directory), read_sealed names the path.
status write_sealed(const std::string& path, std::string_view plain, kek_store& keys, sys_time now,
                    std::uint32_t chunk = default_chunk, mode_t mode = 0600);
result<std::string> read_sealed(const std::string& path, kek_store& keys);
// read_sealed into `out`, the file's bytes read into `scratch` (both reused).
status read_sealed_into(const std::string& path, kek_store& keys, std::string& scratch, std::string& out);

}  // namespace loom::atrest
