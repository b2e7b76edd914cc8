// piece_counts: how often each GPT-2 pre-token ("piece", pretokenize.hpp)
// occurs in a stream of text -- the word counts BPE training learns from.
// Text arrives in chunks of any size (a file read 4 MB at a time); a piece that
// may still grow, or split differently, with the bytes after the chunk waits
// for them, so the counts equal those of splitting each whole document.
// Not thread-safe: one counter per thread, merged with add_all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::tokenizer {

class piece_counts {
 public:
  // Appends `chunk` to the current document and counts the pieces it completes.
  void feed(std::string_view chunk);
  // Ends the current document: its remaining pieces are counted.
  void end_document();
  // Both at once: one whole document.
  void add_document(std::string_view text) {
    feed(text);
    end_document();
  }
  // Adds every count of `other` (a counter of another thread). REQUIRES:
  // other has no document in progress.
  void add_all(const piece_counts& other);

  std::size_t distinct() const { return entries_.size(); }
  std::string_view piece(std::size_t i) const { return {arena_.data() + entries_[i].off, entries_[i].len}; }
  std::uint64_t count(std::size_t i) const { return entries_[i].count; }
  std::uint64_t total_bytes() const { return bytes_; }    // fed so far, pending bytes included
  std::uint64_t total_pieces() const { return pieces_; }  // counted so far
  std::uint64_t documents() const { return documents_; }

 private:
  void add(std::string_view piece, std::uint64_t times);
  void grow();
  struct entry {
    std::uint64_t off = 0;
    std::uint32_t len = 0;
    std::uint64_t count = 0;
  };
  struct slot {
    std::uint32_t tag = 0;    // high half of the hash
    std::uint32_t index = 0;  // entries_ index + 1; 0 = empty
  };
  std::string arena_;          // piece bytes, back to back
  std::vector<entry> entries_;
  std::vector<slot> slots_;    // open addressing, load <= 1/2
  std::string pending_;        // bytes of the current document not yet split
  std::uint64_t bytes_ = 0, pieces_ = 0, documents_ = 0;
};

}  // namespace loom::tokenizer
