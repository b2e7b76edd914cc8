#include "services/scheduler/roster.hpp"

namespace loom::scheduler {

const char* to_string(node_state s) {
  switch (s) {
    case node_state::alive: return "alive";
    case node_state::suspect: return "suspect";
    case node_state::dead: return "dead";
  }
  return "unknown";
}

void roster::register_node(node n, time_point now) {
  alive_until_.erase(n.id);  // heard from: its beats say from now on
  n.registered = now;
  n.last_seen = now;
  if (auto b = bindings_.find(n.id); b != bindings_.end()) n.draining = b->second.drained;
  nodes_[n.id] = std::move(n);
  ++version_;
}

void roster::restore(node n, time_point alive_until) {
  auto id = n.id;
  nodes_[id] = std::move(n);
  if (alive_until != time_point{}) alive_until_[id] = alive_until;
  ++version_;
}

bool roster::heartbeat(const std::string& id, time_point now) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return false;
  it->second.last_seen = now;
  alive_until_.erase(id);
  return true;
}

bool roster::set_drained(const std::string& id, bool drained) {
  auto it = nodes_.find(id);
  auto b = bindings_.find(id);
  if (it == nodes_.end() && b == bindings_.end()) return false;
  if (it != nodes_.end()) it->second.draining = drained;
  if (b == bindings_.end())  // a node no key bound yet (tests, a pre-v10 row): the drain is kept all the same
    b = bindings_.emplace(id, node_binding{"", it->second.zone, false, it->second.registered}).first;
  b->second.drained = drained;
  ++version_;
  return true;
}

const node_binding* roster::binding(const std::string& id) const {
  auto it = bindings_.find(id);
  return it == bindings_.end() ? nullptr : &it->second;
}

void roster::bind(const std::string& id, node_binding b) { bindings_[id] = std::move(b); }

node_state roster::state(const node& n, time_point now) const {
  if (auto g = alive_until_.find(n.id); g != alive_until_.end() && now < g->second) return node_state::alive;
  auto silent = now - n.last_seen;
  if (silent > interval_ * max_missed_) return node_state::dead;
  if (silent > interval_) return node_state::suspect;
  return node_state::alive;
}

std::vector<std::string> roster::reap(time_point now, std::chrono::milliseconds keep, std::vector<node>* removed) {
  std::vector<std::string> gone;
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (now - it->second.last_seen > interval_ * max_missed_ + keep) {
      gone.push_back(it->first);
      if (removed) removed->push_back(it->second);
      it = nodes_.erase(it);
    } else {
      ++it;
    }
  }
  if (!gone.empty()) ++version_;
  return gone;
}

std::vector<node> roster::list(const std::string& zone) const {
  std::vector<node> out;
  for (auto& [id, n] : nodes_)
    if (zone.empty() || n.zone == zone) out.push_back(n);
  return out;
}

const node* roster::find(const std::string& id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

}  // namespace loom::scheduler
