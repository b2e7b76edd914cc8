#include "libs/files/files.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/shards/loader.hpp"
#include "libs/shards/placement.hpp"
#include "libs/shards/testing.hpp"
#include "libs/shards/writer.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

using namespace loom;
using namespace loom::shards;
namespace fs = std::filesystem;
using loom::shards::testing::temp_dir;

namespace {

// Writes a stream whose token at stream offset i is i (uint32), in documents of 1..37
// tokens, over several small shards so windows straddle shard boundaries.
std::string write_counting_stream(const temp_dir& tmp, std::uint32_t n) {
  writer_options o;
  o.dir = tmp.path();
  o.type = dtype::uint32;
  o.target_bytes = 512;
  auto w = shard_writer::create(o);
  REQUIRE(w.ok());
  std::uint32_t next = 0, len = 1;
  while (next < n) {
    std::vector<std::uint32_t> doc;
    for (std::uint32_t k = 0; k < len && next < n; ++k) doc.push_back(next++);
    REQUIRE(w->append(doc).ok());
    len = len % 37 + 1;
  }
  auto m = w->finish();
  REQUIRE(m.ok());
  REQUIRE(m->shards.size() >= 3);
  return tmp.path();
}

// Pulls `batches` batches; returns the first token of every window (window = first / T).
std::vector<std::uint64_t> pull(loader& l, std::size_t batches, std::size_t B, std::size_t T) {
  std::vector<std::uint32_t> buf(B * (T + 1));
  std::vector<std::uint64_t> firsts;
  for (std::size_t i = 0; i < batches; ++i) {
    REQUIRE(l.next(buf).ok());
    for (std::size_t b = 0; b < B; ++b) {
      const std::uint32_t* row = buf.data() + b * (T + 1);
      for (std::size_t t = 1; t <= T; ++t) REQUIRE(row[t] == row[0] + t);  // consecutive tokens
      REQUIRE(row[0] % T == 0);
      firsts.push_back(row[0] / T);
    }
  }
  return firsts;
}

}  // namespace

TEST_CASE("a dataset reads consecutive tokens across shard boundaries") {
  temp_dir tmp;
  auto dir = write_counting_stream(tmp, 2000);
  auto d = dataset::open(dir);
  REQUIRE_MESSAGE(d.ok(), d.err().to_string());
  CHECK(d->token_count() == 2000);
  std::vector<std::uint32_t> out(700);
  REQUIRE(d->read(1000, out).ok());
  for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == 1000 + i);
  CHECK(d->read(1500, out).code() == errc::invalid_argument);
}

TEST_CASE("the loader yields every window exactly once per epoch even when batches straddle epochs") {
  temp_dir tmp;
  auto d = dataset::open(write_counting_stream(tmp, 2000));
  REQUIRE(d.ok());
  const std::size_t B = 7, T = 16;  // 124 windows, not a multiple of 7
  auto l = loader::create(*d, {B, T, 42});
  REQUIRE(l.ok());
  const std::uint64_t W = l->windows_per_epoch();
  REQUIRE(W == (2000 - 1) / T);
  REQUIRE(W % B != 0);
  auto firsts = pull(*l, (3 * W) / B + 1, B, T);
  for (std::size_t e = 0; e < 3; ++e) {
    std::set<std::uint64_t> seen(firsts.begin() + e * W, firsts.begin() + (e + 1) * W);
    CHECK(seen.size() == W);
    CHECK(*seen.rbegin() == W - 1);
  }
  CHECK(l->position().epoch == 3);
}

TEST_CASE("window order differs across epochs and seeds and repeats for the same seed") {
  temp_dir tmp;
  auto d = dataset::open(write_counting_stream(tmp, 2000));
  REQUIRE(d.ok());
  auto a = loader::create(*d, {4, 8, 1});
  auto b = loader::create(*d, {4, 8, 1});
  auto c = loader::create(*d, {4, 8, 2});
  REQUIRE((a.ok() && b.ok() && c.ok()));
  const std::uint64_t W = a->windows_per_epoch();
  std::vector<std::uint64_t> e0, e1, same, other;
  for (std::uint64_t p = 0; p < W; ++p) {
    e0.push_back(a->window_at(0, p));
    e1.push_back(a->window_at(1, p));
    same.push_back(b->window_at(0, p));
    other.push_back(c->window_at(0, p));
  }
  CHECK(e0 != e1);
  CHECK(e0 == same);
  CHECK(e0 != other);
  std::vector<std::uint64_t> identity(W);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(e0 != identity);
  CHECK(pull(*a, 20, 4, 8) == pull(*b, 20, 4, 8));

  auto plain = loader::create(*d, {4, 8, 1, /*shuffle=*/false});
  REQUIRE(plain.ok());
  auto firsts = pull(*plain, 3, 4, 8);
  CHECK(firsts == std::vector<std::uint64_t>(identity.begin(), identity.begin() + 12));
}

TEST_CASE("a cursor saved mid-epoch resumes a fresh loader on the identical sequence") {
  temp_dir tmp;
  auto dir = write_counting_stream(tmp, 2000);
  const std::size_t B = 5, T = 12;
  auto d1 = dataset::open(dir);
  REQUIRE(d1.ok());
  auto first = loader::create(*d1, {B, T, 7});
  REQUIRE(first.ok());
  pull(*first, 37, B, T);  // 185 windows: into epoch 1 of 166
  const cursor saved = first->position();
  CHECK(saved.epoch == 1);
  CHECK(saved.position > 0);
  const std::string json = to_json(saved);
  auto rest = pull(*first, 50, B, T);

  auto d2 = dataset::open(dir, verify::lazy);
  REQUIRE(d2.ok());
  auto c = cursor_from_json(json);
  REQUIRE(c.ok());
  CHECK(*c == saved);
  auto resumed = loader::create(*d2, {B, T, 7}, *c);
  REQUIRE(resumed.ok());
  CHECK(pull(*resumed, 50, B, T) == rest);
  CHECK(resumed->position() == first->position());
}

TEST_CASE("targets are the inputs shifted by one token") {
  temp_dir tmp;
  auto d = dataset::open(write_counting_stream(tmp, 2000));
  REQUIRE(d.ok());
  const std::size_t B = 3, T = 10;
  auto split = loader::create(*d, {B, T, 9});
  auto joined = loader::create(*d, {B, T, 9});
  REQUIRE((split.ok() && joined.ok()));
  std::vector<std::uint32_t> in(B * T), tg(B * T), win(B * (T + 1));
  for (int i = 0; i < 10; ++i) {
    REQUIRE(split->next(in, tg).ok());
    REQUIRE(joined->next(win).ok());
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < T; ++t) {
        REQUIRE(in[b * T + t] == win[b * (T + 1) + t]);
        REQUIRE(tg[b * T + t] == win[b * (T + 1) + t + 1]);
        REQUIRE(tg[b * T + t] == in[b * T + t] + 1);  // the stream counts up
      }
  }
  std::vector<std::uint32_t> wrong(B * T);
  CHECK(split->next(wrong).code() == errc::invalid_argument);
}

TEST_CASE("a corrupt shard is refused by name eagerly and on first read when lazy") {
  temp_dir tmp;
  auto dir = write_counting_stream(tmp, 2000);
  const std::string victim = dir + "/shard-000002.bin";
  auto bytes = files::read_file(victim);
  REQUIRE(bytes.ok());
  (*bytes)[100] ^= 0x40;
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << *bytes;

  auto eager = dataset::open(dir);
  REQUIRE_FALSE(eager.ok());
  CHECK(eager.code() == errc::corruption);
  CHECK(eager.err().message.find("shard-000002.bin: sha256 ") != std::string::npos);

  auto lazy = dataset::open(dir, verify::lazy);
  REQUIRE(lazy.ok());
  std::vector<std::uint32_t> out(10);
  CHECK(lazy->read(0, out).ok());  // shard 1 is intact
  auto s = lazy->read(lazy->info().shards[0].tokens, out);
  CHECK(s.code() == errc::corruption);
  CHECK(s.err().message.find("shard-000002.bin") != std::string::npos);
}

TEST_CASE("a cursor that is malformed or past the epoch is refused") {
  CHECK(cursor_from_json("{\"epoch\":1}").code() == errc::invalid_argument);
  CHECK(cursor_from_json("{\"epoch\":-1,\"position\":0}").code() == errc::invalid_argument);
  temp_dir tmp;
  auto d = dataset::open(write_counting_stream(tmp, 2000));
  REQUIRE(d.ok());
  CHECK(loader::create(*d, {2, 16, 0}, cursor{0, 124}).code() == errc::invalid_argument);
  CHECK(loader::create(*d, {2, 2000, 0}).code() == errc::invalid_argument);
}

TEST_CASE("a dataset opened for one node reads only the shards placed on it, and a node with none is refused by name") {
  temp_dir tmp;
  const std::string dir = write_counting_stream(tmp, 6000);
  auto m = read_manifest(dir);
  REQUIRE(m.ok());
  const std::vector<std::string> nodes = {"node-a", "node-b"};
  REQUIRE(place_manifest(*m, nodes).ok());
  REQUIRE(write_manifest(dir, *m).ok());
  // Each node's view holds its shards, in manifest order; together they are the whole.
  std::uint64_t tokens = 0;
  std::size_t count = 0;
  for (const auto& n : nodes) {
    auto d = dataset::open_placed(dir, n);
    REQUIRE_MESSAGE(d.ok(), d.err().to_string());
    REQUIRE_FALSE(d->info().shards.empty());
    for (const auto& s : d->info().shards) CHECK(s.node == n);
    tokens += d->token_count();
    count += d->info().shards.size();
    // The first token read is the first token of the node's first shard in the whole stream.
    std::uint64_t before = 0;
    for (const auto& s : m->shards) {
      if (s.name == d->info().shards[0].name) break;
      before += s.tokens;
    }
    std::vector<std::uint32_t> out(1);
    REQUIRE(d->read(0, out).ok());
    CHECK(out[0] == before);
  }
  CHECK(tokens == 6000);
  CHECK(count == m->shards.size());
  // Another node's shard may be missing from this node's copy: the view never opens it.
  std::string gone;
  for (const auto& s : m->shards)
    if (s.node == "node-b") gone = s.name;
  fs::remove(dir + "/" + gone);
  CHECK(dataset::open_placed(dir, "node-a").ok());
  auto none = dataset::open_placed(dir, "node-c");
  REQUIRE_FALSE(none.ok());
  CHECK(none.code() == errc::invalid_argument);
  CHECK(none.err().message.find("no shard is placed on node node-c (its shards are placed on: node-a, node-b)") !=
        std::string::npos);
}
