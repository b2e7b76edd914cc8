#include "libs/cdc/fastcdc.hpp"

#include "libs/files/files.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace loom::cdc {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): a well-mixed, seedable sequence, so the
// table is reproducible from two lines instead of 256 literals.
constexpr std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Seed = "loom-cdc" in ASCII. Part of the chunk format: never change it.
constexpr std::uint64_t gear_seed = 0x6c6f6f6d2d636463ull;

constexpr std::array<std::uint64_t, 256> make_gear() {
  std::array<std::uint64_t, 256> g{};
  std::uint64_t s = gear_seed;
  for (auto& v : g) v = splitmix64(s);
  return g;
}

constexpr std::array<std::uint64_t, 256> gear = make_gear();

// gear << 1, for rolling two bytes per step (TPDS'20 §3.4): after
// fp = (fp << 2) + gear_ls[a], fp equals (the one-byte hash after a) << 1,
// so testing it against mask << 1 is the one-byte test at a. Exact because
// no mask uses bit 63.
constexpr std::array<std::uint64_t, 256> make_gear_ls() {
  std::array<std::uint64_t, 256> g{};
  for (std::size_t i = 0; i < 256; ++i) g[i] = gear[i] << 1;
  return g;
}
constexpr std::array<std::uint64_t, 256> gear_ls = make_gear_ls();

// `bits` one-bits ending just below bit 63.
constexpr std::uint64_t top_mask(unsigned bits) { return ((std::uint64_t{1} << bits) - 1) << (63 - bits); }

// Scans data[i, end) for (fp & mask) == 0 one position after the other;
// returns the cut length or 0 when none was found (fp and i then describe
// the state at end, to carry on into the next phase).
inline std::size_t scan_serial(const std::uint8_t* data, std::size_t& i, std::size_t end, std::uint64_t& fp,
                               std::uint64_t mask) {
  const std::uint64_t mask_ls = mask << 1;
  std::uint64_t h = fp;
  std::size_t j = i;
  for (; j + 2 <= end; j += 2) {
    h = (h << 2) + gear_ls[data[j]];
    if ((h & mask_ls) == 0) return j + 1;
    h += gear[data[j + 1]];
    if ((h & mask) == 0) return j + 2;
  }
  if (j < end) {
    h = (h << 1) + gear[data[j]];
    if ((h & mask) == 0) return j + 1;
    ++j;
  }
  fp = h;
  i = j;
  return 0;
}

// The hash is one serial dependency chain (~1.5 cycles per byte), so a
// single chain leaves most of the core idle. A gear hash depends only on the
// last 64 bytes (older terms are shifted out), so the second half of a block
// can be hashed by an independent chain started 64 bytes early. Blocks with
// no cut in either half (most of them) then cost half the latency; a block
// with a hit is rescanned serially to find the first cut. 2 KiB halves: the
// warm-up adds 3%, and the rescan of one block per chunk adds ~4 KiB.
constexpr std::size_t half_block = 2048;

inline std::size_t scan(const std::uint8_t* data, std::size_t& i, std::size_t end, std::uint64_t& fp,
                        std::uint64_t mask) {
  const std::uint64_t mask_ls = mask << 1;
  while (end - i >= 2 * half_block) {
    const std::uint8_t* pa = data + i;
    const std::uint8_t* pb = pa + half_block;
    std::uint64_t a = fp, b = 0;
    for (const std::uint8_t* w = pb - 64; w < pb; ++w) b = (b << 1) + gear[*w];  // REQUIRES i >= chunk start
    bool hit = false;
    for (std::size_t k = 0; k < half_block; k += 2) {
      a = (a << 2) + gear_ls[pa[k]];
      b = (b << 2) + gear_ls[pb[k]];
      if ((a & mask_ls) == 0 || (b & mask_ls) == 0) { hit = true; break; }
      a += gear[pa[k + 1]];
      b += gear[pb[k + 1]];
      if ((a & mask) == 0 || (b & mask) == 0) { hit = true; break; }
    }
    if (hit) {
      std::size_t block_end = i + 2 * half_block;
      if (std::size_t cut = scan_serial(data, i, block_end, fp, mask)) return cut;
      continue;  // not reached: the serial scan finds the same hit
    }
    fp = b;
    i += 2 * half_block;
  }
  return scan_serial(data, i, end, fp, mask);
}

}  // namespace

status validate(const params& p) {
  auto bad = [&](const char* why) {
    return make_error(errc::invalid_argument, "cdc params " + std::to_string(p.min_size) + "/" +
                                                  std::to_string(p.avg_size) + "/" + std::to_string(p.max_size) +
                                                  ": " + why);
  };
  if (p.min_size < 64) return bad("min_size below 64");
  if (!(p.min_size < p.avg_size && p.avg_size < p.max_size)) return bad("want min < avg < max");
  if (p.max_size > (64u << 20)) return bad("max_size above 64 MiB");
  if (!std::has_single_bit(p.avg_size) || p.avg_size < 256 || p.avg_size > (1u << 24))
    return bad("avg_size must be a power of two in 256..16 MiB");
  return {};
}

const std::array<std::uint64_t, 256>& gear_table() { return gear; }

std::uint64_t mask_small(const params& p) { return top_mask(static_cast<unsigned>(std::countr_zero(p.avg_size)) + 2); }
std::uint64_t mask_large(const params& p) { return top_mask(static_cast<unsigned>(std::countr_zero(p.avg_size)) - 2); }

std::size_t next_cut(const std::uint8_t* data, std::size_t n, const params& p) {
  if (n <= p.min_size) return n;
  const std::size_t end = std::min<std::size_t>(n, p.max_size);
  const std::size_t normal = std::min<std::size_t>(end, p.avg_size);
  std::uint64_t fp = 0;
  std::size_t i = p.min_size;  // cut-point skipping: no hashing below min_size
  if (std::size_t cut = scan(data, i, normal, fp, mask_small(p))) return cut;
  if (std::size_t cut = scan(data, i, end, fp, mask_large(p))) return cut;
  return end;
}

std::vector<std::uint32_t> chunk_lengths(std::string_view data, const params& p) {
  std::vector<std::uint32_t> out;
  const auto* d = reinterpret_cast<const std::uint8_t*>(data.data());
  for (std::size_t off = 0; off < data.size();) {
    std::size_t len = next_cut(d + off, data.size() - off, p);
    out.push_back(static_cast<std::uint32_t>(len));
    off += len;
  }
  return out;
}

std::vector<chunk> chunk_data(std::string_view data, const params& p) {
  std::vector<chunk> out;
  const auto* d = reinterpret_cast<const std::uint8_t*>(data.data());
  for (std::size_t off = 0; off < data.size();) {
    std::size_t len = next_cut(d + off, data.size() - off, p);
    out.push_back({off, static_cast<std::uint32_t>(len), crypto::sha256(data.substr(off, len))});  // still in cache
    off += len;
  }
  return out;
}

status chunk_stream(const read_fn& read, const params& p, const chunk_fn& on_chunk) {
  if (auto s = validate(p); !s.ok()) return s;
  // 4 MiB: a refill moves at most max_size bytes, so larger buffers make that
  // copy rare; 4 MiB keeps the per-file footprint small.
  const std::size_t cap = std::max<std::size_t>(4u << 20, 2 * std::size_t{p.max_size});
  std::string buf(cap, '\0');
  std::size_t begin = 0, end = 0;
  std::uint64_t offset = 0;
  bool eof = false;
  for (;;) {
    if (!eof && end - begin < p.max_size) {
      std::memmove(buf.data(), buf.data() + begin, end - begin);
      end -= begin;
      begin = 0;
      while (!eof && end < cap) {
        auto got = read(buf.data() + end, cap - end);
        if (!got.ok()) return got.err();
        if (*got == 0) eof = true;
        end += *got;
      }
    }
    if (begin == end) return {};
    std::size_t len = next_cut(reinterpret_cast<const std::uint8_t*>(buf.data()) + begin, end - begin, p);
    if (auto s = on_chunk(offset, std::string_view(buf).substr(begin, len)); !s.ok()) return s;
    begin += len;
    offset += len;
  }
}

result<std::vector<chunk>> chunk_fd(int fd, const std::string& path, const params& p) {
  std::vector<chunk> out;
  auto read = [&](char* buf, std::size_t cap) -> result<std::size_t> {
    for (;;) {
      ssize_t n = ::read(fd, buf, cap);
      if (n >= 0) return static_cast<std::size_t>(n);
      if (errno != EINTR) return files::errno_error("read", path);
    }
  };
  auto add = [&](std::uint64_t offset, std::string_view bytes) -> status {
    out.push_back({offset, static_cast<std::uint32_t>(bytes.size()), crypto::sha256(bytes)});
    return {};
  };
  if (auto s = chunk_stream(read, p, add); !s.ok()) return s.err();
  return out;
}

result<std::vector<chunk>> chunk_file(const std::string& path, const params& p) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  auto r = chunk_fd(fd, path, p);
  ::close(fd);
  return r;
}

}  // namespace loom::cdc
