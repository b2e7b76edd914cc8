#include "services/scheduler/jobs/admission.hpp"

#include "libs/model/memory.hpp"

#include <algorithm>

namespace loom::scheduler {
namespace {

std::vector<const trainer_view*> in_zone(const std::string& zone, const std::vector<trainer_view>& all) {
  std::vector<const trainer_view*> out;
  for (const auto& t : all)
    if (t.live && (zone.empty() || t.zone == zone)) out.push_back(&t);
  return out;
}

std::string zone_name(const std::string& zone) { return zone.empty() ? "any zone" : "zone " + zone; }

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? "none" : out;
}

}  // namespace

std::uint64_t usable_memory(std::uint64_t physical) { return physical / 4 * 3; }

status admit(const runspec::job_plan& plan, const std::string& zone, const std::set<std::string>& known_zones,
             const std::vector<trainer_view>& trainers) {
  if (!zone.empty() && !known_zones.count(zone))
    return make_error(errc::not_found, "zone " + zone + " is not a zone of this deployment (known: " +
                                           join(known_zones) + "); nothing would ever run there");
  const auto here = in_zone(zone, trainers);
  if (here.empty()) return ok_status();  // starting up: placement and the trainer check
  std::uint64_t most_memory = 0;
  std::uint32_t most_cores = 0;
  for (const auto* t : here) {
    most_memory = std::max(most_memory, usable_memory(t->memory_bytes));
    most_cores = std::max(most_cores, t->cores);
  }
  for (const auto& st : plan.stages) {
    const auto& s = st.spec;
    const auto& sized = st.sizing;  // an hpo stage: its largest trial (job_template.hpp)
    const auto need = sized.memory();
    if (need.total() > most_memory)
      return make_error(errc::invalid_argument,
                        "stage " + st.name + (st.sizing_what.empty() ? "" : ", " + st.sizing_what + ",") +
                            " needs an estimated " + need.describe() + " per trainer, but the largest " +
                            "trainer in " + zone_name(zone) + " can give it " + model::format_bytes(most_memory) +
                            " (3/4 of its memory): lower train.batch (now " + std::to_string(sized.batch) +
                            ") or train.seq_len" + (st.sizing_what.empty() ? "" : " (for a search: in [hpo.space])") +
                            ", or use a smaller model");
    if (s.threads > 0 && static_cast<std::uint32_t>(s.threads) > most_cores)
      return make_error(errc::invalid_argument,
                        "stage " + st.name + ": train.threads " + std::to_string(s.threads) + " exceeds the " +
                            std::to_string(most_cores) + " cores of the largest trainer in " + zone_name(zone) +
                            " (0 uses every core)");
  }
  return ok_status();
}

std::string waiting_reason(const std::string& zone, std::uint32_t min_trainers, std::uint64_t memory_bytes,
                           const std::vector<trainer_view>& trainers) {
  const auto here = in_zone(zone, trainers);
  if (here.empty()) return "no live trainer in " + zone_name(zone);
  std::vector<const trainer_view*> fit, free;
  std::uint64_t most = 0;
  for (const auto* t : here) {
    most = std::max(most, usable_memory(t->memory_bytes));
    if (t->draining || usable_memory(t->memory_bytes) < memory_bytes) continue;
    fit.push_back(t);
    if (t->running.empty()) free.push_back(t);
  }
  if (fit.empty() && most < memory_bytes)
    return "needs an estimated " + model::format_bytes(memory_bytes) + " per trainer; the largest live trainer in " +
           zone_name(zone) + " can give " + model::format_bytes(most);
  if (fit.size() < min_trainers)
    return "a group of " + std::to_string(min_trainers) + " trainers; " + zone_name(zone) + " has " +
           std::to_string(fit.size()) + " that can take it (draining ones excluded)";
  if (free.size() < min_trainers) {
    std::string busy;
    for (const auto* t : fit)
      if (!t->running.empty()) busy += (busy.empty() ? "" : ", ") + t->id + " runs " + t->running;
    return "waiting for a free trainer: " + busy;
  }
  return "queued behind jobs of higher priority or earlier arrival (or a reservation) in " + zone_name(zone);
}

}  // namespace loom::scheduler
