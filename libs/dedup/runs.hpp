// External sorting for libs/dedup (internal): records buffer in memory up to a
// limit, spill as sorted runs, and come back merged in one ascending stream
// (k-way heap merge; runs beyond the fan-in are merged in extra passes first).
// seq_store keeps records addressed by a dense sequence number, spilling its
// in-memory tail to one append-only file. Rec: trivially copyable, operator<.
// Each object is owned by one thread.
#pragma once

#include "libs/dedup/io.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace loom::dedup::detail {

// Sorted records: at most one in-memory part plus sorted run files.
template <class Rec>
struct run_set {
  std::shared_ptr<const std::vector<Rec>> memory;
  std::vector<std::string> files;
  std::uint64_t size = 0;
};

// Ascending stream over a run_set.
template <class Rec>
class merged {
 public:
  static result<merged> open(const run_set<Rec>& set, std::size_t buffer_bytes) {
    merged m;
    m.mem_ = set.memory;
    for (const auto& f : set.files) {
      auto in = in_file::open(f, buffer_bytes);
      if (!in) return in.err();
      m.files_.push_back(std::move(*in));
    }
    if (auto s = m.prime(); !s) return s.err();
    return m;
  }

  // Next record in order: true; end of all sources: false.
  result<bool> next(Rec& out) {
    if (heap_.empty()) return false;
    std::pop_heap(heap_.begin(), heap_.end(), greater{this});
    const int src = heap_.back();
    out = head_[src];
    auto more = advance(src);
    if (!more) return more.err();
    if (*more)
      std::push_heap(heap_.begin(), heap_.end(), greater{this});
    else
      heap_.pop_back();
    return true;
  }

  // Repositions every source at its first record r with !before(r); `before`
  // must be true on a prefix of the sort order (binary search per source).
  template <class Before>
  status seek(Before before) {
    if (mem_) mem_pos_ = static_cast<std::size_t>(std::partition_point(mem_->begin(), mem_->end(), before) - mem_->begin());
    for (auto& f : files_) {
      std::uint64_t lo = 0, hi = f.size() / sizeof(Rec);
      while (lo < hi) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        Rec r;
        if (auto s = f.pread(&r, sizeof(Rec), mid * sizeof(Rec)); !s) return s;
        if (before(r))
          lo = mid + 1;
        else
          hi = mid;
      }
      if (auto s = f.seek(lo * sizeof(Rec)); !s) return s;
    }
    return prime();
  }

 private:
  struct greater {
    const merged* m;
    bool operator()(int a, int b) const { return m->head_[b] < m->head_[a]; }
  };

  int sources() const { return static_cast<int>(files_.size()) + 1; }  // last = memory

  result<bool> advance(int src) {
    if (src == static_cast<int>(files_.size())) {
      if (!mem_ || mem_pos_ >= mem_->size()) return false;
      head_[src] = (*mem_)[mem_pos_++];
      return true;
    }
    return files_[src].read(&head_[src], sizeof(Rec));
  }

  status prime() {
    head_.assign(sources(), Rec{});
    heap_.clear();
    for (int i = 0; i < sources(); ++i) {
      auto more = advance(i);
      if (!more) return more.err();
      if (*more) heap_.push_back(i);
    }
    std::make_heap(heap_.begin(), heap_.end(), greater{this});
    return {};
  }

  std::shared_ptr<const std::vector<Rec>> mem_;
  std::size_t mem_pos_ = 0;
  std::vector<in_file> files_;
  std::vector<Rec> head_;
  std::vector<int> heap_;
};

// Geometric growth up to `limit` elements: the vector is at most `limit` long and
// the reallocation peak is 1.5x limit (callers budget for that).
template <class T>
void push_bounded(std::vector<T>& v, const T& x, std::size_t limit) {
  if (v.size() == v.capacity()) v.reserve(std::min(limit, std::max<std::size_t>(256, v.capacity() * 2)));
  v.push_back(x);
}

template <class Rec>
class sorted_runs {
  static_assert(std::is_trivially_copyable_v<Rec>);

 public:
  explicit sorted_runs(const char* tag) : tag_(tag) {}
  void set_limit(std::size_t records) { limit_ = std::max<std::size_t>(records, 1); }
  bool full() const { return buf_.size() >= limit_; }
  void push(const Rec& r) { push_bounded(buf_, r, limit_); }
  std::size_t memory_bytes() const { return buf_.capacity() * sizeof(Rec); }
  std::uint64_t size() const { return spilled_ + buf_.size(); }
  std::size_t runs() const { return files_.size(); }

  // Sorts the buffer into a new run file and empties it; `release` frees its
  // memory too (otherwise it is kept for refilling: re-faulting fresh pages
  // cost more than the sort in a VM).
  status spill(scratch& s, std::size_t io_buffer, bool release = true) {
    if (buf_.empty()) return {};
    std::sort(buf_.begin(), buf_.end());
    auto f = out_file::create(s.new_path(tag_), io_buffer, &s);
    if (!f) return f.err();
    if (auto st = f->write(buf_.data(), buf_.size() * sizeof(Rec)); !st) return st;
    if (auto st = f->close(); !st) return st;
    files_.push_back(f->path());
    spilled_ += buf_.size();
    buf_.clear();
    if (release) std::vector<Rec>().swap(buf_);
    ++runs_written;
    return {};
  }

  // Sorts the in-memory part and merges files down to at most `fanin`; leaves
  // this object empty. `s` may be null when nothing was spilled.
  result<run_set<Rec>> finish(scratch* s, std::size_t io_buffer, std::size_t fanin) {
    fanin = std::max<std::size_t>(fanin, 2);
    while (files_.size() > fanin) {
      run_set<Rec> part;
      part.files.assign(files_.begin(), files_.begin() + static_cast<std::ptrdiff_t>(fanin));
      auto m = merged<Rec>::open(part, io_buffer);
      if (!m) return m.err();
      auto f = out_file::create(s->new_path(tag_), io_buffer, s);
      if (!f) return f.err();
      Rec r;
      for (;;) {
        auto more = m->next(r);
        if (!more) return more.err();
        if (!*more) break;
        if (auto st = f->write(&r, sizeof(Rec)); !st) return st.err();
      }
      if (auto st = f->close(); !st) return st.err();
      for (const auto& p : part.files) std::remove(p.c_str());
      files_.erase(files_.begin(), files_.begin() + static_cast<std::ptrdiff_t>(fanin));
      files_.push_back(f->path());
      ++runs_written;
    }
    std::sort(buf_.begin(), buf_.end());
    run_set<Rec> out;
    out.size = size();
    out.files = std::move(files_);
    if (!buf_.empty()) out.memory = std::make_shared<const std::vector<Rec>>(std::move(buf_));
    buf_ = {};
    files_ = {};
    spilled_ = 0;
    return out;
  }

  std::uint64_t runs_written = 0;

 private:
  const char* tag_;
  std::size_t limit_ = static_cast<std::size_t>(-1);
  std::vector<Rec> buf_;
  std::vector<std::string> files_;
  std::uint64_t spilled_ = 0;
};

// Records by dense sequence number 0, 1, 2, ...: a file prefix plus an in-memory
// tail. Reads need seal() once the last record is in.
template <class Rec>
class seq_store {
  static_assert(std::is_trivially_copyable_v<Rec>);

 public:
  explicit seq_store(const char* tag) : tag_(tag) {}
  void push(const Rec& r, std::size_t limit) { push_bounded(tail_, r, limit); }
  std::size_t memory_bytes() const { return tail_.capacity() * sizeof(Rec); }
  std::uint64_t size() const { return in_file_ + tail_.size(); }

  // Appends the tail to the store's file and empties it (`release`: frees it).
  status spill(scratch& s, std::size_t io_buffer, bool release = true) {
    if (tail_.empty()) return {};
    if (!writer_) {
      auto f = out_file::create(s.new_path(tag_), io_buffer, &s);
      if (!f) return f.err();
      writer_ = std::move(*f);
    }
    if (auto st = writer_->write(tail_.data(), tail_.size() * sizeof(Rec)); !st) return st;
    if (auto st = writer_->flush(); !st) return st;
    in_file_ += tail_.size();
    tail_.clear();
    if (release) std::vector<Rec>().swap(tail_);
    return {};
  }

  status seal() {
    if (!writer_) return {};
    reader_path_ = writer_->path();
    if (auto st = writer_->close(); !st) return st;
    writer_.reset();
    auto r = in_file::open(reader_path_, 4096);
    if (!r) return r.err();
    reader_ = std::move(*r);
    return {};
  }

  status get(std::uint64_t seq, Rec& out) const {
    if (seq >= in_file_) {
      out = tail_[seq - in_file_];
      return {};
    }
    return reader_->pread(&out, sizeof(Rec), seq * sizeof(Rec));
  }

  // Sequential reads from seq 0; REQUIRES sealed.
  class scanner {
   public:
    result<bool> next(Rec& out) {
      if (seq_ < store_->in_file_) {
        ++seq_;
        return file_->read(&out, sizeof(Rec));
      }
      if (seq_ - store_->in_file_ >= store_->tail_.size()) return false;
      out = store_->tail_[seq_++ - store_->in_file_];
      return true;
    }

   private:
    friend class seq_store;
    const seq_store* store_ = nullptr;
    std::optional<in_file> file_;
    std::uint64_t seq_ = 0;
  };

  result<scanner> scan(std::size_t io_buffer) const {
    scanner sc;
    sc.store_ = this;
    if (in_file_ > 0) {
      auto f = in_file::open(reader_path_, io_buffer);
      if (!f) return f.err();
      sc.file_ = std::move(*f);
    }
    return sc;
  }

 private:
  const char* tag_;
  std::vector<Rec> tail_;
  std::uint64_t in_file_ = 0;
  std::optional<out_file> writer_;
  std::optional<in_file> reader_;
  std::string reader_path_;
};

}  // namespace loom::dedup::detail
