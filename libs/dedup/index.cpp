#include "libs/dedup/index.hpp"

#include "libs/dedup/records.hpp"
#include "libs/dedup/runs.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace loom::dedup {

using detail::band_rec;
using detail::drop_rec;
using detail::exact_rec;
using detail::member_rec;
using detail::sig16;

std::string_view to_string(reason r) {
  switch (r) {
    case reason::kept: return "kept";
    case reason::exact: return "exact";
    case reason::near: return "near";
  }
  return "unknown";
}

namespace {

constexpr std::size_t min_budget = 64 << 10;
// Bytes buffered per document during add() (see the header's memory model).
constexpr std::size_t doc_bytes = sizeof(exact_rec) + bands * sizeof(band_rec) + sizeof(doc_id) + sizeof(sig16);
static_assert(doc_bytes == 728);
// Bytes per document that finish() keeps resident: union-find parent + 2 bits.
constexpr double finish_bytes_per_doc = 4.25;

// I/O buffer per open run file: B/64 within [4 KiB, 1 MiB]; a 256 MiB budget
// gets 1 MiB buffers (sequential reads at disk speed), a tiny one still works.
std::size_t io_buffer_for(std::size_t budget) {
  return std::clamp<std::size_t>(budget / 64, 4 << 10, 1 << 20);
}

class bitset {
 public:
  explicit bitset(std::uint64_t n) : w_((n + 63) / 64, 0) {}
  void set(std::uint64_t i) { w_[i >> 6] |= std::uint64_t{1} << (i & 63); }
  bool test(std::uint64_t i) const { return (w_[i >> 6] >> (i & 63)) & 1; }
  std::uint64_t bytes() const { return w_.size() * 8; }

 private:
  std::vector<std::uint64_t> w_;
};

// Roots are the smaller sequence number; components, not roots, decide the
// outcome, so any deterministic linking rule would do.
class union_find {
 public:
  explicit union_find(std::uint64_t n) : p_(n) {
    for (std::uint64_t i = 0; i < n; ++i) p_[i] = static_cast<std::uint32_t>(i);
  }
  std::uint32_t find(std::uint32_t x) {
    while (p_[x] != x) {
      p_[x] = p_[p_[x]];  // path halving
      x = p_[x];
    }
    return x;
  }
  bool unite(std::uint32_t a, std::uint32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return false;
    if (a < b)
      p_[b] = a;
    else
      p_[a] = b;
    return true;
  }
  std::uint64_t bytes() const { return p_.size() * 4; }

 private:
  std::vector<std::uint32_t> p_;
};

sig16 low_bits(const signature& s) {
  sig16 out;
  for (int i = 0; i < permutations; ++i) out[i] = static_cast<std::uint16_t>(s[i]);
  return out;
}

int agreeing(const sig16& a, const sig16& b) {
  int n = 0;
  for (int i = 0; i < permutations; ++i) n += a[i] == b[i];
  return n;
}

}  // namespace

// ---- verdicts and readers

struct verdicts::data {
  summary stats;
  detail::run_set<drop_rec> drops;
  std::shared_ptr<detail::scratch> scratch;  // keeps the run files
  std::size_t io_buffer = 4 << 10;
};

const summary& verdicts::stats() const { return d_->stats; }

struct drop_reader::impl {
  std::shared_ptr<const verdicts::data> d;
  detail::merged<drop_rec> m;
  drop_rec head;
  bool has_head = false;

  status fill() {
    auto more = m.next(head);
    if (!more) return more.err();
    has_head = *more;
    return {};
  }
};

result<drop_reader> verdicts::reader() const {
  // Readers use small buffers: several may be open at once, one per worker.
  auto m = detail::merged<drop_rec>::open(d_->drops, std::min<std::size_t>(d_->io_buffer, 64 << 10));
  if (!m) return m.err();
  auto p = std::make_unique<drop_reader::impl>(drop_reader::impl{d_, std::move(*m), {}, false});
  if (auto s = p->fill(); !s) return s.err();
  return drop_reader(std::move(p));
}

drop_reader::drop_reader(std::unique_ptr<impl> p) : p_(std::move(p)) {}
drop_reader::drop_reader(drop_reader&&) noexcept = default;
drop_reader& drop_reader::operator=(drop_reader&&) noexcept = default;
drop_reader::~drop_reader() = default;

namespace {
drop to_drop(const drop_rec& r) { return drop{r.id, r.kept_by, static_cast<reason>(r.why)}; }
}  // namespace

result<std::optional<drop>> drop_reader::next() {
  if (!p_->has_head) return std::optional<drop>{};
  const drop d = to_drop(p_->head);
  if (auto s = p_->fill(); !s) return s.err();
  return std::optional<drop>{d};
}

result<std::optional<drop>> drop_reader::lookup(doc_id id) {
  while (p_->has_head && p_->head.id < id)
    if (auto s = p_->fill(); !s) return s.err();
  if (p_->has_head && p_->head.id == id) return std::optional<drop>{to_drop(p_->head)};
  return std::optional<drop>{};
}

status drop_reader::seek(doc_id from) {
  if (auto s = p_->m.seek([&](const drop_rec& r) { return r.id < from; }); !s) return s;
  return p_->fill();
}

// ---- index

struct index::state {
  options opt;
  fingerprinter fp;
  fingerprint scratch_fp;
  std::size_t io_buffer = 0;
  std::uint64_t max_docs = 0;
  std::size_t docs_per_run = 0;  // documents buffered before a spill
  std::shared_ptr<detail::scratch> scratch;
  detail::sorted_runs<exact_rec> exact{"exact"};
  detail::sorted_runs<band_rec> bands{"band"};
  detail::seq_store<doc_id> ids{"ids"};
  detail::seq_store<sig16> sigs{"sigs"};
  std::uint64_t n = 0;
  std::size_t buffered = 0;
  bool finished = false;
  std::uint64_t peak = 0;

  explicit state(options o) : opt(std::move(o)), fp(opt.seed) {}

  std::uint64_t resident() const {
    // Open append writers of the two seq_stores hold one buffer each.
    return exact.memory_bytes() + bands.memory_bytes() + ids.memory_bytes() + sigs.memory_bytes() +
           (scratch ? 2 * io_buffer : 0);
  }
  void track(std::uint64_t bytes) { peak = std::max(peak, bytes); }

  status ensure_scratch() {
    if (scratch) return {};
    auto s = detail::scratch::create(opt.work_dir);
    if (!s) return s.err();
    scratch = std::move(*s);
    return {};
  }

  // During add() the buffers keep their memory for the next run; finish() releases it.
  status spill_all(bool release) {
    if (auto s = ensure_scratch(); !s) return s;
    for (auto st : {exact.spill(*scratch, io_buffer, release), bands.spill(*scratch, io_buffer, release),
                    ids.spill(*scratch, io_buffer, release), sigs.spill(*scratch, io_buffer, release)})
      if (!st) return st;
    buffered = 0;
    return {};
  }

  result<verdicts> finish();
};

result<index> index::create(options o) {
  if (o.memory_budget < min_budget)
    return make_error(errc::invalid_argument, "dedup: memory_budget " + std::to_string(o.memory_budget) +
                                                  " B is under the minimum of 64 KiB");
  if (!(o.min_similarity > 0.0 && o.min_similarity <= 1.0))
    return make_error(errc::invalid_argument, "dedup: min_similarity must be in (0, 1]");
  if (!o.work_dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(o.work_dir, ec))
      return make_error(errc::not_found, "dedup: work_dir " + o.work_dir + " is not a directory");
  }
  auto s = std::make_unique<state>(std::move(o));
  const std::size_t b = s->opt.memory_budget;
  s->io_buffer = io_buffer_for(b);
  s->max_docs = std::min<std::uint64_t>(static_cast<std::uint64_t>(static_cast<double>(b) / 2 / finish_bytes_per_doc),
                                        std::uint64_t{0xffffffff});
  // 4 I/O buffers (2 append writers, 1 run writer, slack), 1.5x for vector growth.
  const std::size_t for_records = b > 4 * s->io_buffer ? b - 4 * s->io_buffer : b / 2;
  s->docs_per_run = std::max<std::size_t>(1, for_records * 2 / 3 / doc_bytes);
  s->exact.set_limit(s->docs_per_run);
  s->bands.set_limit(s->docs_per_run * bands);
  return index(std::move(s));
}

index::index(std::unique_ptr<state> s) : s_(std::move(s)) {}
index::index(index&&) noexcept = default;
index& index::operator=(index&&) noexcept = default;
index::~index() = default;

std::uint64_t index::size() const { return s_->n; }

status index::add(doc_id id, std::string_view text) {
  auto& f = s_->scratch_fp;
  f.content = s_->fp.content(text);
  f.shingles = s_->opt.fuzzy ? s_->fp.minhash(text, f.minhash) : 0;
  return add(id, f);
}

status index::add(doc_id id, const fingerprint& f) {
  state& s = *s_;
  if (s.finished) return make_error(errc::invalid_argument, "dedup: add() after finish()");
  if (s.n >= s.max_docs)
    return make_error(errc::resource_exhausted,
                      "dedup: " + std::to_string(s.n) + " documents is the most a memory budget of " +
                          std::to_string(s.opt.memory_budget >> 20) + " MiB can finish (8.5 B per document); raise it");
  const std::uint64_t seq = s.n++;
  s.exact.push(exact_rec{f.content, id, seq});
  s.ids.push(id, s.docs_per_run);
  if (s.opt.fuzzy) {
    if (f.shingles > 0)
      for (int b = 0; b < bands; ++b) s.bands.push(band_rec{band_key(f.minhash, b), id, seq});
    s.sigs.push(low_bits(f.minhash), s.docs_per_run);
  }
  s.track(s.resident());
  if (++s.buffered >= s.docs_per_run) return s.spill_all(false);
  return {};
}

result<verdicts> index::finish() {
  if (s_->finished) return make_error(errc::invalid_argument, "dedup: finish() called twice");
  s_->finished = true;
  return s_->finish();
}

result<verdicts> index::state::finish() {
  const std::uint64_t docs = n;
  const std::size_t budget = opt.memory_budget;
  const auto uf_bytes = static_cast<std::uint64_t>(std::ceil(finish_bytes_per_doc * static_cast<double>(docs))) + 16;
  // Once anything went to disk, or when what is buffered would not leave room
  // for the union-find, the rest follows and memory is handed to the merges.
  if (scratch || resident() + uf_bytes > budget)
    if (auto st = spill_all(true); !st) return st.err();
  if (auto st = ids.seal(); !st) return st.err();
  if (auto st = sigs.seal(); !st) return st.err();

  const std::uint64_t kept_resident = scratch ? 0 : resident();
  const std::uint64_t used = uf_bytes + kept_resident;
  const std::uint64_t avail = budget > used + 4 * io_buffer ? budget - used : 4 * io_buffer;
  const std::size_t fanin = std::max<std::size_t>(2, avail / 2 / io_buffer);  // open read buffers <= avail/2
  const std::size_t out_limit = std::max<std::size_t>(1, avail / 4 * 2 / 3);  // bytes of an output buffer

  summary st;
  st.documents = docs;
  union_find uf(docs);
  bitset exact_dup(docs);

  // Exact: every run of equal keys joins its first (smallest id) member.
  {
    auto rs = exact.finish(scratch.get(), io_buffer, fanin);
    if (!rs) return rs.err();
    auto m = detail::merged<exact_rec>::open(*rs, io_buffer);
    if (!m) return m.err();
    track(used + (rs->files.size() + 1) * io_buffer);
    exact_rec r, first, prev;
    bool any = false;
    for (;;) {
      auto more = m->next(r);
      if (!more) return more.err();
      if (!*more) break;
      if (any && r.key == first.key) {
        if (r.id == prev.id) return make_error(errc::invalid_argument, "dedup: a doc_id was added twice");
        exact_dup.set(r.seq);
        uf.unite(static_cast<std::uint32_t>(first.seq), static_cast<std::uint32_t>(r.seq));
      } else {
        first = r;
        any = true;
      }
      prev = r;
    }
  }

  // Near: buckets in (key, id) order; members that are exact copies are already
  // in their keeper's component and skipped.
  if (opt.fuzzy) {
    auto rs = bands.finish(scratch.get(), io_buffer, fanin);
    if (!rs) return rs.err();
    auto m = detail::merged<band_rec>::open(*rs, io_buffer);
    if (!m) return m.err();
    track(used + (rs->files.size() + 1) * io_buffer);
    const int need = static_cast<int>(std::ceil(opt.min_similarity * permutations - 1e-9));
    struct member {
      std::uint64_t seq = 0;
      sig16 sig{};
      bool loaded = false;
    };
    member first, prev, cur;
    bool have_first = false, have_prev = false;
    std::uint64_t key = 0;
    auto load = [&](member& x) -> status {
      if (x.loaded) return {};
      x.loaded = true;
      return sigs.get(x.seq, x.sig);
    };
    auto confirm = [&](member& a, member& b) -> result<bool> {
      if (auto s = load(a); !s) return s.err();
      if (auto s = load(b); !s) return s.err();
      ++st.candidate_pairs;
      if (agreeing(a.sig, b.sig) < need) return false;
      ++st.confirmed_pairs;
      uf.unite(static_cast<std::uint32_t>(a.seq), static_cast<std::uint32_t>(b.seq));
      return true;
    };
    band_rec r;
    for (;;) {
      auto more = m->next(r);
      if (!more) return more.err();
      if (!*more) break;
      if (!have_first || r.key != key) {
        key = r.key;
        have_first = have_prev = false;
      }
      if (exact_dup.test(r.seq)) continue;
      cur = member{r.seq, {}, false};
      if (!have_first) {
        first = cur;
        have_first = true;
        continue;
      }
      const auto c = static_cast<std::uint32_t>(cur.seq);
      if (uf.find(c) != uf.find(static_cast<std::uint32_t>(first.seq))) {
        auto ok = confirm(first, cur);
        if (!ok) return ok.err();
        if (!*ok && have_prev && prev.seq != first.seq && uf.find(c) != uf.find(static_cast<std::uint32_t>(prev.seq))) {
          auto ok2 = confirm(prev, cur);
          if (!ok2) return ok2.err();
        }
      }
      prev = cur;
      have_prev = true;
    }
  }

  // Members of every component with >= 2 documents, grouped by root; ids come
  // from one sequential scan of the id store.
  detail::sorted_runs<member_rec> members{"member"};
  members.set_limit(out_limit / sizeof(member_rec));
  {
    bitset in_cluster(docs);
    track(used + io_buffer + out_limit);
    for (std::uint64_t i = 0; i < docs; ++i) {
      const std::uint32_t root = uf.find(static_cast<std::uint32_t>(i));
      if (root != i) {
        in_cluster.set(i);
        in_cluster.set(root);
      }
    }
    auto sc = ids.scan(io_buffer);
    if (!sc) return sc.err();
    doc_id id;
    for (std::uint64_t i = 0; i < docs; ++i) {
      auto more = sc->next(id);
      if (!more) return more.err();
      if (!*more) return make_error(errc::internal, "dedup: id store ended early");
      if (!in_cluster.test(i)) continue;
      if (members.full()) {
        if (auto s = ensure_scratch(); !s) return s.err();
        if (auto s = members.spill(*scratch, io_buffer); !s) return s.err();
      }
      members.push(member_rec{uf.find(static_cast<std::uint32_t>(i)), static_cast<std::uint32_t>(i), id});
    }
  }

  // The smallest id of each group is kept; the others become drops.
  detail::sorted_runs<drop_rec> drops{"drop"};
  drops.set_limit(out_limit / sizeof(drop_rec));
  {
    auto rs = members.finish(scratch.get(), io_buffer, fanin);
    if (!rs) return rs.err();
    auto m = detail::merged<member_rec>::open(*rs, io_buffer);
    if (!m) return m.err();
    track(used + (rs->files.size() + 1) * io_buffer + out_limit);
    member_rec r, keeper;
    bool any = false;
    for (;;) {
      auto more = m->next(r);
      if (!more) return more.err();
      if (!*more) break;
      if (!any || r.root != keeper.root) {
        keeper = r;
        any = true;
        ++st.clusters;
        continue;
      }
      const bool ex = exact_dup.test(r.seq);
      ++(ex ? st.exact_dropped : st.near_dropped);
      if (drops.full()) {
        if (auto s = ensure_scratch(); !s) return s.err();
        if (auto s = drops.spill(*scratch, io_buffer); !s) return s.err();
      }
      drops.push(drop_rec{r.id, keeper.id, static_cast<std::uint64_t>(ex ? reason::exact : reason::near)});
    }
  }

  auto ds = drops.finish(scratch.get(), io_buffer, fanin);
  if (!ds) return ds.err();
  st.runs_written = exact.runs_written + bands.runs_written + members.runs_written + drops.runs_written;
  st.bytes_spilled = scratch ? scratch->bytes_written.load() : 0;
  st.tracked_peak_bytes = peak;

  auto d = std::make_shared<verdicts::data>();
  d->stats = st;
  d->drops = std::move(*ds);
  d->scratch = scratch;
  d->io_buffer = io_buffer;
  verdicts v;
  v.d_ = std::move(d);
  return v;
}

}  // namespace loom::dedup
