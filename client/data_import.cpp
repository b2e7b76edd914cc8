// `loom data import|status|verify|rejects|list`: datasets at the ingest
// service. import sends the path (made absolute: the service reads it, and
// only inside its import roots), then follows the task with a live progress
// line (files, MB, MB/s, rejects) until it ends: exit 0 when the import
// completed (rejected files included), 1 when the import itself failed or was
// cancelled, 3 when the path lies outside the import roots. verify hashes
// every shard as a task: exit 0 intact, 1 damaged (naming the shards).
// Datasets are per tenant: each command acts on the token's tenant's, or with
// --tenant T (admins) on T's; `list` as an admin shows every tenant's.
#include "client/cli.hpp"
#include "client/templates.hpp"
#include "client/typed_call.hpp"

#include "libs/runspec/template_info.hpp"

#include "loom/v1/ingest.pb.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace loom::cli {
namespace {

using nlohmann::json;

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ','))
    if (!part.empty()) out.push_back(part);
  return out;
}

json task_json(const loom::v1::TaskInfo& t) {
  json j{{"id", t.id()},           {"kind", t.kind()},         {"dataset", t.dataset()}, {"tenant", t.tenant()},
         {"state", t.state()},     {"phase", t.phase()},       {"files", t.files()},
         {"bytes_read", t.bytes_read()}, {"documents", t.documents()}, {"kept", t.kept()},
         {"rejected", t.rejected()}, {"duplicates", t.duplicates()}, {"tokens", t.tokens()},
         {"shards", t.shards()},   {"elapsed_s", t.elapsed_s()}, {"mb_per_s", t.mb_per_s()},
         {"source", t.source()},   {"message", t.message()},   {"bytes_sent", t.bytes_sent()}};
  if (!t.report_json().empty()) {
    auto r = json::parse(t.report_json(), nullptr, false);
    if (!r.is_discarded()) j["report"] = r;
  }
  return j;
}

std::string progress_line(const loom::v1::TaskInfo& t) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-7s %-8s %6llu files %9.1f MB %7.1f MB/s  %llu kept  %llu rejected  %llu dup  %.1fs",
                printable(t.kind()).c_str(), printable(t.phase().empty() ? t.state() : t.phase()).c_str(),
                static_cast<unsigned long long>(t.files()), t.bytes_read() / 1e6, t.mb_per_s(),
                static_cast<unsigned long long>(t.kept()), static_cast<unsigned long long>(t.rejected()),
                static_cast<unsigned long long>(t.duplicates()), t.elapsed_s());
  return buf;
}

// Every file under `path` (hidden ones skipped, as the readers do) whose format
// is not in `formats`: "name (format)" for the first few, "" when all are.
std::string outside_formats(const std::filesystem::path& path, const std::vector<std::string>& formats) {
  namespace fs = std::filesystem;
  std::vector<std::string> bad;
  std::size_t n = 0;
  auto check = [&](const fs::path& f) {
    const std::string fmt = runspec::ingest_format_of(f.string());
    if (std::find(formats.begin(), formats.end(), fmt) != formats.end()) return;
    if (++n <= 5) bad.push_back(f.string() + " (" + (fmt.empty() ? std::string("unknown format") : fmt) + ")");
  };
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    check(path);
  } else {
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->path().filename().string().starts_with(".")) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) check(it->path());
    }
  }
  std::string out;
  for (const auto& b : bad) out += (out.empty() ? "" : ", ") + b;
  if (n > bad.size()) out += " and " + std::to_string(n - bad.size()) + " more";
  return out;
}

bool ended(const std::string& s) { return s == "succeeded" || s == "failed" || s == "cancelled"; }

}  // namespace

// Follows an ingest task until it ends; shared with `loom data sync`.
int follow_task(context& c, loom::v1::TaskInfo t) {
  const bool tty = ::isatty(1) && !c.json;
  auto last_print = std::chrono::steady_clock::now() - std::chrono::seconds(10);
  int unreachable = 0;
  while (!ended(t.state())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    loom::v1::GetTaskRequest q;
    q.set_id(t.id());
    auto rep = typed_call<loom::v1::GetTaskReply>(c, "ingest", q, 1);
    if (!rep) {
      // The service restarting: keep asking for a while.
      if (rep.code() == errc::unavailable && ++unreachable < 50) continue;
      return fail(c, rep.err());
    }
    unreachable = 0;
    t = rep->task();
    auto now = std::chrono::steady_clock::now();
    if (!c.json && (tty || now - last_print >= std::chrono::seconds(1) || ended(t.state()))) {
      std::printf(tty ? "\r%s" : "%s\n", progress_line(t).c_str());
      std::fflush(stdout);
      last_print = now;
    }
  }
  if (tty) std::printf("\n");
  if (c.json) {
    print_json(task_json(t));
  } else if (t.state() == "succeeded" && t.kind() == "verify") {
    std::printf("verify %s: dataset %s is intact: %u shards, %.1f MB hashed, every SHA-256 matches\n",
                printable(t.id()).c_str(), printable(t.dataset()).c_str(), t.shards(), t.bytes_read() / 1e6);
  } else if (t.state() == "succeeded") {
    std::printf("%s %s: %s — %llu documents kept, %llu rejected, %llu duplicates, %llu tokens in %u shards\n",
                printable(t.kind()).c_str(), printable(t.id()).c_str(), printable(t.dataset()).c_str(),
                static_cast<unsigned long long>(t.kept()),
                static_cast<unsigned long long>(t.rejected()), static_cast<unsigned long long>(t.duplicates()),
                static_cast<unsigned long long>(t.tokens()), t.shards());
    const auto report = nlohmann::json::parse(t.report_json(), nullptr, false);
    if (report.is_object() && report.contains("media") && report["media"].value("seen", 0) > 0) {
      const auto& m = report["media"];
      std::printf("  media: %llu images + %llu audio kept in %llu tars (%llu captioned), %llu refused, %llu duplicates\n",
                  m.value("images", 0ull), m.value("audio", 0ull), m.value("tars", 0ull), m.value("captioned", 0ull),
                  m.value("rejected", 0ull),
                  m.value("exact_duplicates", 0ull) + m.value("near_duplicates", 0ull) +
                      m.value("semantic_duplicates", 0ull));
    }
    if (t.rejected() > 0 || (report.is_object() && report.contains("media") && report["media"].value("rejected", 0) > 0))
      std::printf("  `loom data rejects %s` lists what was rejected and why\n", printable(t.dataset()).c_str());
    if (t.kind() == "import" && t.tokens() == 0)
      std::printf("  dataset %s has no tokens: it is not ready, and a job naming it is refused at submit\n",
                  printable(t.dataset()).c_str());
  } else {
    std::fprintf(stderr, "error: %s %s %s: %s\n", printable(t.kind()).c_str(), printable(t.id()).c_str(),
                 printable(t.state()).c_str(), printable(t.message()).c_str());
  }
  return t.state() == "succeeded" ? ok_exit : error_exit;
}

int cmd_data_import(context& c) {
  auto& pos = c.a.positional;
  auto dataset = c.a.get("dataset");
  if (pos.size() < 3 || !dataset)
    return usage("usage: loom data import PATH --dataset NAME [--profile default|web|code|minimal] [--memory 512MiB]\n"
                 "       [--nodes n1,n2] [--deny GPL-3.0,CC-BY-NC-*] [--no-pii] [--no-dedup] [--field text] [--template T]\n"
                 "       [--no-media] [--image-filter FILE] [--text-filter FILE] [--json]");
  std::error_code ec;
  auto abs = std::filesystem::absolute(pos[2], ec);
  if (ec) return usage("loom data import: cannot resolve " + printable(pos[2]));
  // --template T: the import options of T's [ingest] section; explicit flags override them.
  runspec::ingest_settings g;
  if (auto tn = c.a.get("template")) {
    auto t = find_template(c, *tn);
    if (!t) return fail(c, t.err());
    auto s = runspec::read_ingest_section(t->name, t->text);
    if (!s) return fail(c, s.err());
    if (!s->present)
      return fail(c, make_error(errc::invalid_argument, "template " + t->name + " (" + t->path +
                                                            ") has no [ingest] section (industry templates have one: "
                                                            "`loom templates`)"));
    g = std::move(*s);
    if (auto bad = g.formats.empty() ? std::string() : outside_formats(abs, g.formats); !bad.empty()) {
      std::string accepted;
      for (const auto& f : g.formats) accepted += (accepted.empty() ? "" : ", ") + f;
      return fail(c, make_error(errc::invalid_argument, "template " + t->name + " accepts only " + accepted +
                                                            " files (ingest.formats); refused before importing: " + bad));
    }
  }
  loom::v1::ImportDatasetRequest req;
  req.set_path(abs.lexically_normal().string());
  req.set_dataset(*dataset);
  req.set_profile(c.a.get_or("profile", g.profile));
  if (auto m = c.a.number("memory")) req.set_memory_bytes(*m);  // checked by the table (kind size)
  for (auto& n : split_commas(c.a.get_or("nodes", ""))) req.add_nodes(n);
  if (c.a.get("deny"))
    for (auto& d : split_commas(c.a.get_or("deny", ""))) req.add_deny_licences(d);
  else
    for (auto& d : g.deny_licences) req.add_deny_licences(d);
  req.set_no_pii(c.a.flag("no-pii") || (g.pii && !*g.pii));
  req.set_no_dedup(c.a.flag("no-dedup") || (g.dedup && !*g.dedup));
  req.set_text_field(c.a.get_or("field", g.text_field));
  req.set_for_tenant(c.a.get_or("tenant", ""));
  req.set_no_media(c.a.flag("no-media"));
  for (const char* flag : {"image-filter", "text-filter"}) {
    const auto f = c.a.get(flag);
    if (!f) continue;
    std::error_code fec;
    const auto model = std::filesystem::absolute(*f, fec).lexically_normal().string();
    if (fec) return usage("loom data import: cannot resolve " + printable(*f));
    (std::string_view(flag) == "image-filter" ? req.set_image_filter(model) : req.set_text_filter(model));
  }
  auto rep = typed_call<loom::v1::ImportDatasetReply>(c, "ingest", req, 1);
  if (!rep) return fail(c, rep.err());
  if (!c.json) std::printf("importing %s into dataset %s (task %s)\n", printable(req.path()).c_str(),
                           printable(*dataset).c_str(), printable(rep->task().id()).c_str());
  return follow_task(c, rep->task());
}

int cmd_data_list(context& c) {
  loom::v1::ListDatasetsRequest q;
  q.set_for_tenant(c.a.get_or("tenant", ""));
  auto rep = typed_call<loom::v1::ListDatasetsReply>(c, "ingest", q, 1);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    json arr = json::array();
    for (auto& d : rep->datasets())
      arr.push_back({{"name", d.name()}, {"tenant", d.tenant()}, {"documents", d.documents()}, {"tokens", d.tokens()},
                     {"shards", d.shards()}, {"bytes", d.bytes()}, {"version", d.version()}, {"state", d.state()},
                     {"dir", d.dir()}, {"damage", d.damage()}, {"reason", d.reason()}});
    print_json({{"datasets", arr}});
    return ok_exit;
  }
  // The tenant column only when the list spans tenants (an admin's).
  std::set<std::string> tenants;
  for (auto& d : rep->datasets()) tenants.insert(d.tenant());
  const bool by_tenant = tenants.size() > 1;
  if (by_tenant) std::printf("%-16s ", "tenant");
  std::printf("%-24s %-7s %10s %12s %7s %10s\n", "dataset", "state", "documents", "tokens", "shards", "version");
  for (auto& d : rep->datasets()) {
    if (by_tenant) std::printf("%-16s ", printable(d.tenant()).c_str());
    std::printf("%-24s %-7s %10llu %12llu %7u %10lld\n", printable(d.name()).c_str(), printable(d.state()).c_str(),
                static_cast<unsigned long long>(d.documents()), static_cast<unsigned long long>(d.tokens()), d.shards(),
                static_cast<long long>(d.version()));
  }
  return ok_exit;
}

int cmd_data_status(context& c) {
  auto& pos = c.a.positional;
  if (pos.size() < 3) return usage("usage: loom data status NAME [--json]");
  loom::v1::DatasetStatusRequest q;
  q.set_name(pos[2]);
  q.set_for_tenant(c.a.get_or("tenant", ""));
  auto rep = typed_call<loom::v1::DatasetStatusReply>(c, "ingest", q, 1);
  if (!rep) return fail(c, rep.err());
  std::map<std::string, std::uint64_t> per_node;
  for (auto& s : rep->shards()) ++per_node[s.node()];
  double mean = per_node.empty() ? 0 : static_cast<double>(rep->shards_size()) / per_node.size();
  std::uint64_t most = 0;
  for (auto& [n, k] : per_node) most = std::max(most, k);
  if (c.json) {
    const auto& d = rep->dataset();
    json j{{"name", pos[2]},         {"tenant", d.tenant()}, {"reason", d.reason()},
           {"state", d.state()},     {"documents", d.documents()}, {"tokens", d.tokens()},
           {"shards", d.shards()},   {"bytes", d.bytes()},   {"version", d.version()},     {"dir", d.dir()},
           {"report", d.report_path()}, {"placement", per_node}, {"max_over_mean", mean > 0 ? most / mean : 0},
           {"damage", d.damage()},   {"rejects", d.rejects()}, {"verified_unix_ns", d.verified_unix_ns()}};
    json problems = json::object();
    for (auto& s : rep->shards())
      if (!s.problem().empty()) problems[s.name()] = s.problem();
    j["shard_problems"] = problems;
    if (rep->has_last_task()) j["last_task"] = task_json(rep->last_task());
    print_json(j);
    return ok_exit;
  }
  if (rep->has_dataset()) {
    const auto& d = rep->dataset();
    std::printf("dataset %s (%s, version %lld): %llu documents, %llu tokens, %u shards, %.1f MB\n  %s\n",
                printable(d.name()).c_str(), printable(d.state()).c_str(), static_cast<long long>(d.version()),
                static_cast<unsigned long long>(d.documents()), static_cast<unsigned long long>(d.tokens()), d.shards(),
                d.bytes() / 1e6, printable(d.dir()).c_str());
    if (!d.damage().empty())
      std::printf("  DAMAGED: %s\n  (re-import it; `loom data verify %s` checks every shard's SHA-256)\n",
                  printable(d.damage()).c_str(), printable(d.name()).c_str());
    else if (!d.reason().empty())
      std::printf("  NOT READY (%s): %s\n", printable(d.state()).c_str(), printable(d.reason()).c_str());
    std::printf("  placement:");
    for (auto& [n, k] : per_node) std::printf(" %s=%llu", printable(n).c_str(), static_cast<unsigned long long>(k));
    if (mean > 0) std::printf("  (max/mean %.3f)", most / mean);
    std::printf("\n");
  }
  if (rep->media_size() > 0) {
    std::uint64_t records = 0, bytes = 0;
    std::map<std::string, std::uint64_t> on;
    for (const auto& m : rep->media()) {
      records += m.records();
      bytes += m.bytes();
      ++on[m.node()];
    }
    std::printf("  media: %d tars, %llu records (images and audio), %.1f MB; placement:", rep->media_size(),
                static_cast<unsigned long long>(records), bytes / 1e6);
    for (auto& [n, k] : on) std::printf(" %s=%llu", printable(n).c_str(), static_cast<unsigned long long>(k));
    std::printf("\n");
    for (const auto& m : rep->media())
      if (!m.problem().empty())
        std::printf("  DAMAGED: %s %s\n", printable(m.name()).c_str(), printable(m.problem()).c_str());
  }
  if (rep->has_last_task())
    std::printf("  last task: %s %s\n", printable(rep->last_task().id()).c_str(),
                progress_line(rep->last_task()).c_str());
  return ok_exit;
}

int cmd_data_verify(context& c) {
  auto& pos = c.a.positional;
  if (pos.size() < 3) return usage("usage: loom data verify NAME [--json]");
  loom::v1::VerifyDatasetRequest q;
  q.set_name(pos[2]);
  q.set_for_tenant(c.a.get_or("tenant", ""));
  auto rep = typed_call<loom::v1::VerifyDatasetReply>(c, "ingest", q, 1);
  if (!rep) return fail(c, rep.err());
  if (!c.json)
    std::printf("verifying every shard of %s (task %s)\n", printable(pos[2]).c_str(),
                printable(rep->task().id()).c_str());
  return follow_task(c, rep->task());
}

int cmd_data_place(context& c) {
  auto& pos = c.a.positional;
  if (pos.size() < 3) return usage("usage: loom data place NAME --nodes a,b,c [--json]");
  loom::v1::PlaceDatasetRequest q;
  q.set_dataset(pos[2]);
  for (auto& n : split_commas(c.a.get_or("nodes", ""))) q.add_nodes(n);
  q.set_for_tenant(c.a.get_or("tenant", ""));
  auto rep = typed_call<loom::v1::PlaceDatasetReply>(c, "ingest", q, 1);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    json nodes = json::array();
    for (const auto& n : rep->nodes())
      nodes.push_back({{"node", n.node()}, {"shards", n.shards()}, {"media", n.media()}, {"bytes", n.bytes()}});
    print_json({{"dataset", pos[2]}, {"shards", rep->shards()}, {"shards_moved", rep->shards_moved()},
                {"media", rep->media()}, {"media_moved", rep->media_moved()}, {"bytes_moved", rep->bytes_moved()},
                {"nodes", nodes}});
    return ok_exit;
  }
  std::printf("placed %s on %d nodes: %llu of %llu shards moved", printable(pos[2]).c_str(), rep->nodes_size(),
              static_cast<unsigned long long>(rep->shards_moved()), static_cast<unsigned long long>(rep->shards()));
  if (rep->media() > 0)
    std::printf(", %llu of %llu media tars", static_cast<unsigned long long>(rep->media_moved()),
                static_cast<unsigned long long>(rep->media()));
  std::printf(" (%.1f MB)\n", rep->bytes_moved() / 1e6);
  for (const auto& n : rep->nodes())
    std::printf("  %-20s %llu shards, %llu media tars, %.1f MB\n", printable(n.node()).c_str(),
                static_cast<unsigned long long>(n.shards()), static_cast<unsigned long long>(n.media()),
                n.bytes() / 1e6);
  return ok_exit;
}

int cmd_data_rejects(context& c) {
  auto& pos = c.a.positional;
  if (pos.size() < 3) return usage("usage: loom data rejects NAME [--limit N] [--offset N] [--json]");
  loom::v1::ListRejectsRequest q;
  q.set_dataset(pos[2]);
  q.set_limit(static_cast<std::uint32_t>(c.a.number("limit").value_or(50)));  // 1..10000: the table's range
  q.set_offset(c.a.number("offset").value_or(0));
  q.set_for_tenant(c.a.get_or("tenant", ""));
  auto rep = typed_call<loom::v1::ListRejectsReply>(c, "ingest", q, 1);
  if (!rep) return fail(c, rep.err());
  if (c.json) {
    json arr = json::array();
    for (auto& r : rep->rejects())
      arr.push_back({{"file", r.file()}, {"line", r.line()}, {"rule", r.rule()}, {"detail", r.detail()}, {"stage", r.stage()}});
    print_json({{"dataset", pos[2]}, {"total", rep->total()}, {"stored", rep->stored()},
                {"offset", rep->offset()}, {"rejects", arr}});
    return ok_exit;
  }
  const auto first = rep->offset() + 1, last = rep->offset() + static_cast<std::uint64_t>(rep->rejects_size());
  std::printf("%llu rejects in %s", static_cast<unsigned long long>(rep->total()), printable(pos[2]).c_str());
  if (rep->rejects_size() > 0)
    std::printf(" (showing %llu-%llu", static_cast<unsigned long long>(first), static_cast<unsigned long long>(last));
  else
    std::printf(" (none from %llu", static_cast<unsigned long long>(first));
  if (rep->stored() < rep->total())
    std::printf("; the first %llu are listed here, all in rejects.jsonl of the dataset",
                static_cast<unsigned long long>(rep->stored()));
  std::printf(")\n");
  for (auto& r : rep->rejects())
    std::printf("  %-28s %s%s  %s\n", printable(r.rule()).c_str(), printable(r.file()).c_str(),
                r.line() > 0 ? (":" + std::to_string(r.line())).c_str() : "", printable(r.detail()).c_str());
  return ok_exit;
}

}  // namespace loom::cli
