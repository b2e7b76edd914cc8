// Rules on what surrounds the training: the data fetch, the nodes, the disk,
// file permissions, placement, and the links of a cross-site stage.
#include "libs/diagnose/rule_set.hpp"
#include "libs/diagnose/signals.hpp"

#include <algorithm>
#include <map>

namespace loom::diagnose {
namespace {

// "data.dataset NAME: cannot fetch ..." -> NAME ("" when the text does not say).
std::string dataset_named(const std::string& text) {
  const std::string key = "data.dataset ";
  const auto at = text.find(key);
  if (at == std::string::npos) return "";
  const auto from = at + key.size(), end = text.find_first_of(": ", from);
  return text.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

std::optional<finding> data_fetch(const evidence& e) {
  auto fail = failure_mentioning(e, {"cannot fetch it from the ingest", "no ingest endpoint", "cannot fetch"});
  if (!fail) return std::nullopt;
  finding f;
  f.confidence = 0.95;
  f.stage = fail->stage;
  f.evidence.push_back("failed: " + first_line(fail->text));
  const std::string name = dataset_named(fail->text);
  f.repair.push_back("is ingest up and answering: loom ping ingest");
  f.repair.push_back("is the dataset there, for the job's tenant: loom data list");
  f.repair.push_back("are its shards whole: loom data verify " + (name.empty() ? "DATASET" : name));
  f.repair.push_back("then submit it again: " + resubmit(e, {"dataset=" + (name.empty() ? "DATASET" : name)}));
  return f;
}

// "trainer NODE lost; ..." / "... NODE lost, now on ..." / "trainer NODE restarted; ..." -> NODE.
std::string lost_node(const std::string& text) {
  auto end = text.find(" lost");
  if (end == std::string::npos) end = text.find(" restarted");
  if (end == std::string::npos || end == 0) return "";
  const auto from = text.rfind(' ', end - 1);
  return text.substr(from == std::string::npos ? 0 : from + 1, end - (from == std::string::npos ? 0 : from + 1));
}

std::optional<finding> node_lost(const evidence& e) {
  auto fail = failure_mentioning(e, {"stopped answering"});
  std::map<std::string, int> losses;
  // Lost (missed its heartbeats) or restarted under the stage (crashed, killed): each counts.
  for (const auto* ev : events_mentioning(e, {"requeued", "replaced", "regroup", "resumed"}, {" lost", " restarted"}))
    ++losses[lost_node(ev->text)];
  // A trainer back from a cut link took its loss back (its own word: silent,
  // its loop on time): not a node fault (the link rules speak of links).
  // One back whose own loop ran late was stopped or starved: said as such.
  auto named = [](const std::string& text) {
    const std::string_view t = text;
    if (!t.starts_with("trainer ")) return std::string();
    const auto end = t.find(' ', 8);
    return std::string(t.substr(8, end == std::string_view::npos ? t.size() - 8 : end - 8));
  };
  std::vector<std::string> stalled;
  for (const auto& ev : e.events) {
    if (ev.kind == "cut_off") {
      auto it = losses.find(named(ev.text));
      if (it != losses.end() && --it->second <= 0) losses.erase(it);
    } else if (ev.kind == "stalled") {
      stalled.push_back(first_line(ev.text));
    }
  }
  std::vector<std::string> dead;
  for (const auto& s : e.stages)
    for (const auto& n : e.nodes)
      if (n.id == s.node && (n.state == "dead" || n.state == "suspect") && s.state == "running") dead.push_back(n.id);
  if (!fail && losses.empty() && dead.empty()) return std::nullopt;
  int most = 0;
  std::string most_lost;
  for (const auto& [node, n] : losses)
    if (n > most) most = n, most_lost = node;
  const std::string worst = dead.empty() ? most_lost : dead.front();
  finding f;
  f.confidence = fail ? 0.95 : !dead.empty() || most >= 2 ? 0.85 : e.state == "succeeded" ? 0.45 : 0.6;
  f.stage = fail ? fail->stage : "";
  if (fail) f.evidence.push_back("failed: " + first_line(fail->text));
  for (const auto& [node, n] : losses)
    f.evidence.push_back(fmt("%s lost or restarted %d time(s) while running the job%s", node.c_str(), n,
                             n >= 2 ? " (flapping)" : ""));
  for (const auto& n : e.nodes)
    if (std::find(dead.begin(), dead.end(), n.id) != dead.end())
      f.evidence.push_back(fmt("%s is %s in the roster, last seen %.0f s ago", n.id.c_str(), n.state.c_str(), n.seen_s_ago));
  for (const auto& t : stalled) f.evidence.push_back(t);
  if (e.state == "succeeded") f.evidence.push_back("the job resumed from its checkpoints and succeeded");
  const std::string node = worst.empty() ? "NODE" : worst;
  f.repair.push_back("see the roster (state, last heard from): loom status");
  f.repair.push_back("on " + node + "'s host: its log <data>/logs/" + (node.starts_with("trainer") ? node : "trainer") +
                     ".log, and dmesg for the OOM killer or a crash");
  f.repair.push_back("keep work off it until it is fixed: loom node drain " + node + " --reason 'lost while running'");
  if (fail) f.repair.push_back("then submit it again, lighter if the node ran out: " + resubmit(e, {"train.threads=1"}));
  return f;
}

std::optional<finding> disk_full(const evidence& e) {
  auto fail = failure_mentioning(e, {"no space left", "disk full", "enospc", "disk quota exceeded"});
  const disk_fact* low = nullptr;
  // Under 16 MiB free, or under 1% and 1 GiB: the next snapshot may not fit.
  constexpr std::uint64_t mib = std::uint64_t{1} << 20;
  for (const auto& d : e.disks)
    if (d.total_bytes && (d.free_bytes < 16 * mib || (d.free_bytes * 100 < d.total_bytes && d.free_bytes < 1024 * mib)))
      low = &d;
  if (!fail && !low) return std::nullopt;
  finding f;
  f.confidence = fail ? 0.97 : e.state == "failed" ? 0.8 : 0.6;
  f.stage = fail ? fail->stage : "";
  if (fail) f.evidence.push_back("failed: " + first_line(fail->text));
  if (low)
    f.evidence.push_back(fmt("%s: %.1f MiB free of %.1f MiB", low->path.c_str(), double(low->free_bytes) / mib,
                             double(low->total_bytes) / mib));
  const std::string where = low ? low->path : "the job's output directory";
  f.repair.push_back("see what fills it: df -h " + where + "; du -sh " + where + "/../*");
  f.repair.push_back("remove the directories of finished jobs you no longer need (loom job list; <data>/jobs/JOB)");
  f.repair.push_back("keep fewer snapshots: --set checkpoint.keep=2");
  f.repair.push_back("then submit it again: " + resubmit(e, {"checkpoint.keep=2"}));
  return f;
}

// "... PATH is outside the allowed roots [...]" -> PATH.
std::string refused_path(const std::string& text) {
  const auto end = text.find(" is outside");
  if (end == std::string::npos) return "";
  auto from = text.rfind(": ", end);
  from = from == std::string::npos ? 0 : from + 2;
  std::string p = text.substr(from, end - from);
  if (const auto via = p.find(" (via "); via != std::string::npos) p = p.substr(0, via);
  return p;
}

std::optional<finding> permission(const evidence& e) {
  auto outside = failure_mentioning(e, {"outside the allowed roots"});
  auto denied = outside ? outside : failure_mentioning(e, {"permission denied", "operation not permitted"});
  std::size_t audited = 0;
  for (const auto& a : e.audit) audited += a.action == "data.refused";
  if (!denied) return std::nullopt;
  finding f;
  f.confidence = outside ? 0.97 : 0.9;
  f.stage = denied->stage;
  f.evidence.push_back("failed: " + first_line(denied->text));
  if (audited) f.evidence.push_back(fmt("%zu data.refused record(s) in the audit trail", audited));
  const std::string path = refused_path(denied->text);
  if (outside) {
    f.repair.push_back("put the file under <data>/imports (always allowed), then submit with that path");
    f.repair.push_back("or allow its directory: loom down; loom up --import-root " +
                       (path.empty() ? std::string("DIR") : path.substr(0, path.rfind('/') == 0 ? 1 : path.rfind('/'))) +
                       " (kept for later `loom up`)");
  } else {
    f.repair.push_back("the trainer runs as the user who ran `loom up`: ls -l the file named above, then chmod/chown it");
  }
  f.repair.push_back("then submit it again: " + resubmit(e, {}));
  return f;
}

std::optional<finding> unplaced(const evidence& e) {
  for (const auto& s : e.stages) {
    if (s.state != "queued" || s.waiting.empty()) continue;
    finding f;
    f.stage = s.name;
    f.evidence.push_back(s.name + " is queued: " + s.waiting);
    if (e.submitted_unix_ns && e.now_unix_ns > e.submitted_unix_ns)
      f.evidence.push_back(fmt("the job was submitted %.0f s ago", double(e.now_unix_ns - e.submitted_unix_ns) / 1e9));
    const auto& w = s.waiting;
    bool paused = false;  // paused under pressure: the out_of_memory rule's, it waits for room
    for (const auto& ev : e.events) paused = paused || (ev.stage == s.name && ev.kind == "paused");
    const std::string zone = e.zone.empty() ? "ZONE" : e.zone;
    if (w.starts_with("no live trainer in")) {
      f.confidence = 0.9;
      f.evidence.push_back("the zone is empty: nothing there can ever take it");
      f.repair.push_back("start trainers in " + zone + ": loom up --zone " + zone + " --trainers N (on a host there)");
      f.repair.push_back("or submit it to a zone that has trainers (loom status): " + resubmit(e, {}) + " --zone Z");
    } else if (w.starts_with("needs an estimated")) {
      f.confidence = 0.9;
      f.evidence.push_back("its memory estimate is above every trainer's");
      const int b = s.config.known ? s.config.batch : 0;
      f.repair.push_back("a smaller micro-batch: " +
                         resubmit(e, {fmt("train.batch=%d", std::max(1, b / 2)),
                                      fmt("train.grad_accum=%d", 2 * std::max(1, s.config.known ? s.config.grad_accum : 1))}));
      f.repair.push_back("a smaller model: loom templates");
      f.repair.push_back("or a trainer with more memory: loom status (each trainer's memory)");
    } else if (w.starts_with("a group of")) {
      f.confidence = 0.9;
      f.evidence.push_back(fmt("its gang (parallel.trainers %u) is bigger than the trainers that can take it",
                               s.min_trainers));
      f.repair.push_back("a smaller gang: " + resubmit(e, {"trainers=1"}));
      f.repair.push_back(fmt("or more trainers: loom up --trainers %u (kept for later `loom up`)", s.min_trainers));
    } else if (w.starts_with("no free live trainer at site")) {
      f.confidence = 0.85;
      f.evidence.push_back("a site of the stage has no live trainer");
      f.repair.push_back("see each site and its trainers: loom site list; loom status");
      f.repair.push_back("on the site's host: loom up --site NAME (its trainers register with the cloud)");
      f.repair.push_back("or let the stage go on without it: --set diloco.min_sites=N");
    } else {  // busy: it will be placed when a trainer frees
      f.confidence = 0.4;
      f.evidence.push_back("every trainer that can take it is busy: it waits its turn");
      f.repair.push_back("see what runs: loom job list --state running");
      f.repair.push_back("submit it at a higher priority (it preempts lower ones): " + resubmit(e, {}) + " --priority high");
    }
    if (paused) f.confidence = std::min(f.confidence, 0.5);
    return f;
  }
  return std::nullopt;
}

// "... site south never contributed ..." -> south.
std::string silent_site(const std::string& text) {
  const auto end = text.find(" never contributed");
  if (end == std::string::npos) return "";
  const auto from = text.rfind("site ", end);
  return from == std::string::npos ? "" : text.substr(from + 5, end - from - 5);
}

// A site of a cross-site stage stalled on the cloud, dropping deltas or absent at its end.
std::optional<finding> site_cut_off(const evidence& e) {
  constexpr double stall_limit_s = 30;  // normally ~0: the sync thread keeps ahead of training
  auto fail = failure_mentioning(e, {" never contributed"});
  for (const auto& s : e.stages) {
    // Stalled on the cloud and rounds behind another site: a site level with
    // the others that stalls waits on their rounds (the late_site rule's).
    std::uint64_t top_round = 0;
    for (const auto& x : s.sites) top_round = std::max(top_round, x.round);
    std::vector<const site_fact*> cut;
    for (const auto& x : s.sites)
      if (x.deltas_dropped > 0 || (x.stall_s > stall_limit_s && x.round < top_round)) cut.push_back(&x);
    const bool failed_here = fail && (fail->stage.empty() || fail->stage == s.name);
    if (cut.empty() && s.missing_sites.empty() && !failed_here) continue;
    finding f;
    f.stage = s.name;
    f.confidence = failed_here ? 0.95 : 0.85;
    if (failed_here) f.evidence.push_back("failed: " + first_line(fail->text));
    for (const auto* x : cut)
      f.evidence.push_back(fmt("%s: stalled %.1f s waiting on the cloud, %llu delta(s) dropped, %llu deferred, round %llu",
                               x->site.c_str(), x->stall_s, static_cast<unsigned long long>(x->deltas_dropped),
                               static_cast<unsigned long long>(x->deltas_deferred),
                               static_cast<unsigned long long>(x->round)));
    for (const auto& m : s.missing_sites) f.evidence.push_back(m + " never contributed to the stage");
    const std::string site = !cut.empty()                ? cut.front()->site
                             : !s.missing_sites.empty()   ? s.missing_sites.front()
                             : !silent_site(fail->text).empty() ? silent_site(fail->text)
                                                               : "the site";
    f.repair.push_back("check " + site + "'s link to the cloud: on its host `loom ping`, and the cloud's `loom site list`");
    f.repair.push_back("smaller deltas on a thin link: --set diloco.codec=int8");
    f.repair.push_back(fmt("let rounds close without it: --set diloco.min_sites=%zu", std::max<std::size_t>(1, s.sites.size() - 1)));
    return f;
  }
  return std::nullopt;
}

// A round held up by one site: its deltas late, its round or step far behind
// the others', or the others waiting on the rounds a fifth of the stage's time.
std::optional<finding> late_site(const evidence& e) {
  constexpr double held_s = 5, held_share = 0.2;
  for (const auto& s : e.stages) {
    if (s.sites.empty() || s.members.size() < 2) continue;
    std::uint64_t top_round = 0, top_step = 0;
    for (const auto& x : s.sites) top_round = std::max(top_round, x.round), top_step = std::max(top_step, x.step);
    const site_fact* late = nullptr;
    for (const auto& x : s.sites)
      if (x.deltas_late > 0 || x.round + 2 <= top_round || (top_step >= 20 && x.step * 2 < top_step)) late = &x;
    const std::uint64_t end = s.finished_unix_ns ? s.finished_unix_ns : e.now_unix_ns;
    const double ran_s = end > s.started_unix_ns && s.started_unix_ns ? double(end - s.started_unix_ns) / 1e9 : 0;
    const site_fact* waiting = nullptr;  // a site whose training waited on the rounds
    for (const auto& x : s.sites)
      if (x.stall_s >= held_s && ran_s > 0 && x.stall_s >= held_share * ran_s) waiting = &x;
    if (!late && !waiting) continue;
    finding f;
    f.stage = s.name;
    f.confidence = 0.8;
    if (late)
      f.evidence.push_back(fmt("%s: step %llu, round %llu, %llu late delta(s); the leading site is at step %llu, round %llu",
                               late->site.c_str(), static_cast<unsigned long long>(late->step),
                               static_cast<unsigned long long>(late->round),
                               static_cast<unsigned long long>(late->deltas_late),
                               static_cast<unsigned long long>(top_step), static_cast<unsigned long long>(top_round)));
    if (waiting) {
      std::string others;
      for (const auto& m : s.members)
        if (m != waiting->node) others += (others.empty() ? "" : ", ") + m;
      f.evidence.push_back(fmt("%s waited %.1f s of the stage's %.1f s for rounds to close: they waited on ",
                               waiting->site.c_str(), waiting->stall_s, ran_s) +
                           (others.empty() ? std::string("another site") : others));
    }
    f.repair.push_back("see each site's speed and stall: loom job show " + e.job);
    f.repair.push_back("close rounds on the sites that are in time: --set diloco.quorum=0.5");
    f.repair.push_back("accept later deltas for a slow site: --set diloco.staleness=2");
    return f;
  }
  return std::nullopt;
}

// A failed job no other rule explains: its message, and where to look. Last
// (its confidence is below every other rule's), so it never hides a named cause.
std::optional<finding> unexplained_failure(const evidence& e) {
  if (e.state != "failed") return std::nullopt;
  auto all = failures(e);
  finding f;
  f.confidence = 0.2;
  f.stage = all.empty() ? "" : all.back().stage;
  f.evidence.push_back("failed: " + (all.empty() ? std::string("(no message)") : first_line(all.front().text)));
  f.repair.push_back("read the job's events: loom job logs " + e.job);
  f.repair.push_back("read the trainer's log: <data>/logs/trainer*.log on the host that ran it (loom job show " + e.job +
                     " names the trainer)");
  f.repair.push_back("the job's audit trail: loom audit trail " + e.job);
  return f;
}

}  // namespace

std::vector<rule> platform_rules() {
  return {
      {"data_fetch", "Data fetch failed: the trainer could not pull the dataset from ingest",
       "the job's failure", {"a failure saying the trainer cannot fetch data.dataset from the ingest service"},
       {"loom ping ingest", "loom data list (the job's tenant)", "loom data verify DATASET", "submit again"},
       data_fetch},
      {"node_lost", "A trainer died or flaps: the stage lost its node",
       "requeued/replaced events less those a trainer back from a cut link took back (cut_off), stalled events, "
       "the failure, the roster's node states",
       {"a failure saying the trainer stopped answering N times", "a node lost two or more times (flapping)",
        "the running stage's node dead or suspect in the roster",
        "a node lost or restarted under the stage once (the job may have recovered)"},
       {"loom status (the roster)", "the node's log and dmesg", "loom node drain NODE", "submit again, lighter"},
       node_lost},
      {"disk_full", "Disk full: the job's output directory has no room",
       "the failure; free space of the job's output directory",
       {"a failure naming no space left on device (ENOSPC) or a disk quota",
        "under 16 MiB free where the job writes, or under 1% and 1 GiB"},
       {"df -h / du -sh where it writes", "remove finished jobs' directories", "keep fewer snapshots (checkpoint.keep=2)"},
       disk_full},
      {"permission", "Permission denied: a file outside the allowed roots, or unreadable",
       "the failure; data.refused audit records",
       {"a failure naming a path outside the allowed roots", "a failure naming permission denied"},
       {"move the file under <data>/imports", "or loom up --import-root DIR", "or fix the file's owner and mode"},
       permission},
      {"unplaced", "The stage was never placed",
       "the queued stage's waiting reason from the scheduler",
       {"no live trainer in the zone (the zone is empty)", "a memory estimate above every trainer's",
        "a gang bigger than the trainers that can take it", "a site with no live trainer",
        "every fitting trainer busy (low confidence: it waits its turn)"},
       {"start trainers there, or submit to another zone", "a smaller micro-batch or model",
        "a smaller gang, or more trainers", "bring the site's trainers up", "a higher priority"},
       unplaced},
      {"site_cut_off", "A site is cut off from the cloud",
       "each site's progress in a cross-site (diloco) stage: stall, dropped deltas; sites that never contributed",
       {"a stage failed because a site never contributed a delta the aggregator accepted",
        "a site dropping deltas, or stalled over 30 s on the cloud while rounds behind another site",
        "a site that never contributed to the stage"},
       {"check the site's link (loom ping, loom site list)", "a smaller codec (diloco.codec=int8)",
        "close rounds without it (diloco.min_sites)"},
       site_cut_off},
      {"late_site", "A cross-site round stalled by a late site",
       "each site's step, round and late deltas in a cross-site stage",
       {"a site with late deltas", "a site two or more rounds behind the leader", "a site at under half the leader's step",
        "a site whose training waited on the rounds 5 s or more, and a fifth of the stage's time"},
       {"loom job show JOB (each site's speed)", "close rounds by quorum (diloco.quorum)",
        "accept later deltas (diloco.staleness)"},
       late_site},
      {"unexplained_failure", "The job failed for a reason no rule names",
       "the job's failure message",
       {"the job failed (always listed for a failed job, below any named cause)"},
       {"loom job logs JOB", "the trainer's log", "loom audit trail JOB"},
       unexplained_failure},
  };
}

}  // namespace loom::diagnose
