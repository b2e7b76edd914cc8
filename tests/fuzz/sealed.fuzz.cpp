// Fuzzes the at-rest sealed-object reader (libs/atrest/sealed.hpp and
// object.hpp): every snapshot file, shard and stage cache a process reads may
// be sealed, and the bytes on disk are outside input (a disk, a backup, a
// synced copy, an attacker with the files but not the keys). The input is the
// file's bytes; the key store is fixed (fixed_keys.hpp), so the seeds that
// fuzz_seeds sealed under it unseal and the fuzzer starts past the header.
// It checks what the headers promise: the in-memory and the streaming
// readers agree (same plaintext, or both refuse), the plaintext has the size
// sealed_plain_size predicted from the header alone, and read_object hands a
// file that is not sealed back unchanged.
#include "libs/atrest/object.hpp"
#include "libs/atrest/sealed.hpp"
#include "tests/fuzz/fixed_keys.hpp"
#include "tests/fuzz/fuzz_file.hpp"

#include <cstdlib>
#include <string>

using namespace loom;
using namespace loom::atrest;

namespace {
void require(bool ok) {
  if (!ok) std::abort();  // a broken promise: libFuzzer saves the input
}

kek_store& keys() {
  static auto k = fuzz::fixed_kek_store((fuzz::scratch_dir("sealed") / "keys").string());
  return *k;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto predicted = sealed_plain_size(bytes, size);
  std::string plain;
  const auto in_memory = unseal_into(bytes, keys(), "fuzz", plain);
  if (in_memory) require(predicted && *predicted == plain.size());

  // The same bytes as a file, through the readers that take a path.
  const auto dir = fuzz::scratch_dir("sealed") / "obj";
  std::filesystem::create_directories(dir);
  const auto path = fuzz::write_file(dir, "object", data, size);
  const bool sealed = looks_sealed(bytes);
  require(is_sealed_file(path) == sealed);

  std::string streamed;
  const auto file = unseal_file(path, keys(), [&](std::string_view piece) {
    streamed.append(piece);
    return ok_status();
  });
  require(file.ok() == in_memory.ok());
  if (file) require(streamed == plain);

  auto object = read_object(path, &keys());
  if (sealed) {
    require(object.ok() == in_memory.ok());
    if (object) require(*object == plain);
  } else {
    require(object.ok() && *object == bytes);  // a plain file is read as is
  }
  std::string scratch, into;
  bool was_sealed = !sealed;
  const auto st = read_object_into(path, scratch, into, &keys(), &was_sealed);
  require(st.ok() == object.ok() && (!st || (into == *object && was_sealed == sealed)));
  // read_object_stream reads a plain file through a fresh 1 MiB buffer,
  // which ASan maps and unmaps per call (10x the cost of everything else
  // here) in a plain read loop: the first plain input covers it.
  static bool plain_streamed = false;
  if (!sealed && plain_streamed) return 0;
  plain_streamed = plain_streamed || !sealed;
  std::string pieces;
  const auto stream = read_object_stream(
      path,
      [&](std::string_view piece) {
        pieces.append(piece);
        return ok_status();
      },
      &keys());
  require(stream.ok() == object.ok() && (!stream || pieces == *object));
  return 0;
}
