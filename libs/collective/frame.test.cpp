#include "libs/collective/frame.hpp"
#include "libs/collective/schedule.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

using namespace loom;
using namespace loom::collective;

TEST_CASE("a frame header round-trips through its 64-byte encoding") {
  frame_header h;
  h.sender = 3;
  h.world = 4;
  h.ph = phase::all_gather;
  h.generation = 0x0102030405060708ull;
  h.call = 77;
  h.step = 2;
  h.chunk = 1;
  h.offset = 1'000'000'007ull;
  h.count = 5;
  h.total = 4'000'000'028ull;
  std::vector<unsigned char> f(frame_header_bytes + 5 * 4);
  encode_header(h, f.data());
  CHECK(std::memcmp(f.data(), "LRA1", 4) == 0);
  auto back = decode_header(f.data(), f.size());
  REQUIRE(back.ok());
  CHECK(back->sender == 3);
  CHECK(back->world == 4);
  CHECK(back->ph == phase::all_gather);
  CHECK(back->generation == h.generation);
  CHECK(back->call == 77);
  CHECK(back->step == 2);
  CHECK(back->chunk == 1);
  CHECK(back->offset == h.offset);
  CHECK(back->count == 5);
  CHECK(back->total == h.total);
  CHECK(describe_position(*back) == "all-gather step 2 chunk 1");
}

TEST_CASE("short frames, a bad magic and a wrong payload size are corruption") {
  std::vector<unsigned char> f(frame_header_bytes + 8);
  frame_header h;
  h.count = 2;
  encode_header(h, f.data());
  REQUIRE(decode_header(f.data(), f.size()).ok());

  auto shortf = decode_header(f.data(), 10);
  CHECK(shortf.code() == errc::corruption);
  CHECK(shortf.err().message.find("short ring frame of 10 bytes") != std::string::npos);

  auto longer = decode_header(f.data(), f.size() - 4);  // announces 2 floats, carries 1
  CHECK(longer.code() == errc::corruption);
  CHECK(longer.err().message.find("announces 2 floats") != std::string::npos);

  h.count = ~std::uint64_t{0};  // count * 4 would overflow
  encode_header(h, f.data());
  CHECK(decode_header(f.data(), f.size()).code() == errc::corruption);

  f[0] = 'X';
  auto magic = decode_header(f.data(), f.size());
  CHECK(magic.code() == errc::corruption);
  CHECK(magic.err().message.find("magic") != std::string::npos);
}

TEST_CASE("counts in messages carry thousands separators") {
  CHECK(with_commas(0) == "0");
  CHECK(with_commas(999) == "999");
  CHECK(with_commas(12345) == "12,345");
  CHECK(with_commas(1000000) == "1,000,000");
}

TEST_CASE("chunks split as evenly as possible and cover the buffer, even below one float per member") {
  for (std::size_t size : {0, 1, 2, 3, 4, 7, 1000, 1003}) {
    ring_schedule s(size, 4, 0, 1 << 20);
    std::size_t next = 0, lo = size, hi = 0;
    for (std::uint32_t c = 0; c < 4; ++c) {
      CHECK(s.chunk(c).offset == next);
      next += s.chunk(c).count;
      lo = std::min(lo, s.chunk(c).count);
      hi = std::max(hi, s.chunk(c).count);
      CHECK(s.segments(c) == 1);
    }
    CHECK(next == size);
    CHECK(hi - lo <= 1);
  }
}

TEST_CASE("a chunk larger than a segment travels as several segments, the last one shorter") {
  ring_schedule s(10, 2, 1, 2);  // chunks of 5 floats, segments of 2
  CHECK(s.segments(0) == 3);
  CHECK(s.segment(1, 0).offset == 5);
  CHECK(s.segment(1, 2).offset == 9);
  CHECK(s.segment(1, 2).count == 1);
}

TEST_CASE(
    "each step sends what the previous rank's step sends next and every chunk is reduced once per member") {
  const std::uint32_t w = 5;
  for (std::uint32_t r = 0; r < w; ++r) {
    ring_schedule me(100, w, r, 7), prev(100, w, (r + w - 1) % w, 7);
    CHECK(me.steps() == 2 * (w - 1));
    std::set<std::uint32_t> reduced, gathered;
    for (std::uint32_t t = 0; t < me.steps(); ++t) {
      CHECK(me.recv_chunk(t) == prev.send_chunk(t));               // what arrives is what was sent
      if (t > 0) CHECK(me.send_chunk(t) == me.recv_chunk(t - 1));  // forward what just arrived
      (me.reduces(t) ? reduced : gathered).insert(me.recv_chunk(t));
    }
    CHECK(me.send_chunk(0) == r);    // the ring starts at the own chunk
    CHECK(reduced.size() == w - 1);  // every other chunk, once
    CHECK(reduced.count(r) == 0);
    CHECK(gathered.size() == w - 1);
    CHECK(me.recv_chunk(w - 2) == (r + 1) % w);  // finished here: chunk r+1
    CHECK(gathered.count((r + 1) % w) == 0);
    CHECK(me.step_in_phase(w - 1) == 0);
  }
}
