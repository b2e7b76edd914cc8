// loom-ingest-import: one import from the command line, the same code the ingest
// service runs (services/ingest/importer). Ctrl-C stops cleanly: nothing is
// published and the previous version of the dataset stays.
//   loom-ingest-import PATH --dataset N --datasets-root D [--memory 512MiB]
//       [--nodes a,b,c] [--profile default|web|code|minimal] [--deny GPL-*,AGPL-*]
//       [--jsonl-field text] [--shard-size 16MiB] [--no-pii] [--no-dedup]
//       [--exact-only] [--no-media] [--image-filter F] [--text-filter F]
//       [--vocab gpt2.json] [--progress] [--json]
// Exit: 0 imported, 2 usage, else loom::exit_code of the error.
#include "services/ingest/importer/importer.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <string>
#include <vector>

namespace {

std::atomic<bool> stop_flag{false};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t c = std::min(s.find(',', pos), s.size());
    if (c > pos) out.push_back(s.substr(pos, c - pos));
    pos = c + 1;
  }
  return out;
}

int usage(const char* why) {
  std::fprintf(stderr,
               "loom-ingest-import: %s\nusage: loom-ingest-import PATH --dataset N --datasets-root D [--memory 512MiB] "
               "[--nodes a,b,c] [--profile P] [--deny IDS] [--jsonl-field F] [--shard-size S] [--no-pii] "
               "[--no-dedup] [--exact-only] [--no-media] [--image-filter F] [--text-filter F] [--vocab FILE] [--progress] "
               "[--json]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace loom::ingest;
  import_options o;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto size = [&](std::uint64_t& out) -> std::string {
      const char* v = value();
      if (!v) return a + " needs a value";
      auto n = parse_byte_size(v);
      if (!n) return n.err().message;
      out = *n;
      return {};
    };
    std::string err;
    if (a == "--dataset" || a == "--datasets-root" || a == "--nodes" || a == "--profile" || a == "--deny" ||
        a == "--jsonl-field" || a == "--vocab" || a == "--image-filter" || a == "--text-filter") {
      const char* v = value();
      if (!v) return usage((a + " needs a value").c_str());
      if (a == "--dataset") o.dataset = v;
      else if (a == "--datasets-root") o.datasets_root = v;
      else if (a == "--nodes") o.nodes = split(v);
      else if (a == "--profile") o.profile = v;
      else if (a == "--jsonl-field") o.reader.jsonl_text_field = v;
      else if (a == "--vocab") o.vocab_path = v;
      else if (a == "--image-filter") o.image_filter = v;
      else if (a == "--text-filter") o.text_filter = v;
      else {
        o.licences.action = licence_policy::mode::deny;
        o.licences.deny = split(v);
      }
    } else if (a == "--memory") err = size(o.memory_budget);
    else if (a == "--shard-size") err = size(o.shard_target_bytes);
    else if (a == "--no-pii") o.pii = false;
    else if (a == "--no-dedup") o.dedup = false;
    else if (a == "--exact-only") o.near_dedup = false;
    else if (a == "--no-media") o.media = false;
    else if (a == "--json") json = true;
    else if (a == "--progress")
      o.progress = [](const import_progress& p) {
        std::fprintf(stderr, "\r%-8s %6.1f s  %llu files  %.1f MB  %llu docs  %llu kept  %llu rejected   ", p.phase.c_str(),
                     p.elapsed_s, static_cast<unsigned long long>(p.files), static_cast<double>(p.bytes_read) / 1e6,
                     static_cast<unsigned long long>(p.documents), static_cast<unsigned long long>(p.kept),
                     static_cast<unsigned long long>(p.rejected + p.quarantined));
        if (p.phase == "done") std::fputc('\n', stderr);
      };
    else if (!a.empty() && a[0] == '-') return usage(("unknown option " + a).c_str());
    else if (o.source.empty()) o.source = a;
    else return usage("more than one PATH");
    if (!err.empty()) return usage(err.c_str());
  }
  if (o.source.empty()) return usage("no PATH");
  std::signal(SIGINT, [](int) { stop_flag = true; });
  std::signal(SIGTERM, [](int) { stop_flag = true; });
  o.stop = &stop_flag;
  auto s = import_dataset(o);
  if (!s) {
    std::fprintf(stderr, "loom-ingest-import: %s\n", s.err().to_string().c_str());
    return loom::exit_code(s.code());
  }
  std::fputs(json ? report_json(*s, o).c_str() : summary_text(*s).c_str(), stdout);
  return 0;
}
