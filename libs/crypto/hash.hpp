// Hashes, MACs and randomness (OpenSSL 3 EVP underneath; no OpenSSL types leak).
// Stateless functions are thread-safe; a sha256_stream is owned by one thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace loom::crypto {

using digest = std::array<std::uint8_t, 32>;

digest sha256(std::string_view data);
std::string sha256_hex(std::string_view data);
digest hmac_sha256(std::string_view key, std::string_view message);

// Incremental SHA-256 for data that does not fit in memory at once.
class sha256_stream {
 public:
  sha256_stream();
  ~sha256_stream();
  sha256_stream(const sha256_stream&) = delete;
  sha256_stream& operator=(const sha256_stream&) = delete;
  void update(std::string_view data);
  void update(const void* data, std::size_t n);
  digest finish();  // REQUIRES: called once

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// Compares in time independent of where the inputs differ (for MACs, keys).
bool constant_time_equal(std::string_view a, std::string_view b);

// n bytes from the OS CSPRNG (RAND_bytes); aborts if the RNG fails, which
// only happens on a broken system.
std::string random_bytes(std::size_t n);

inline std::string_view as_view(const digest& d) {
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

}  // namespace loom::crypto
