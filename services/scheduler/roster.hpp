// The node roster: who is registered, with what resources, and whether it is
// alive. Pure logic: time is passed in, no sockets, no clock, no database.
// Liveness follows Paranoid Pirate: a node is suspect after one missed
// heartbeat interval and dead after three (the interval is 1 s).
// Beside the live nodes it keeps every node id's binding (roster_binding.hpp):
// the CURVE key and zone of its first registration and whether it is drained,
// which outlive the node's row when a silent node is reaped.
// Not thread-safe: owned by the scheduler actor.
#pragma once

#include "libs/wire/heartbeat.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::scheduler {

using time_point = std::chrono::system_clock::time_point;

struct node_resources {
  std::uint32_t cpu_cores = 0;
  std::uint32_t gpus = 0;
  std::uint64_t memory_bytes = 0;
  std::uint64_t disk_bytes = 0;
  std::string gpu_model;
};

struct node {
  std::string id;
  std::string service;
  std::string zone;
  node_resources resources;
  std::string endpoint;
  std::uint32_t pid = 0;
  std::string version;
  time_point registered{};
  time_point last_seen{};
  bool draining = false;
};

// Who may speak for a node id, for good: the CURVE principal (ZAP user id) and
// zone of its first registration. `drained` (an admin's or its site's drain)
// survives restarts, re-registrations and the node being reaped.
struct node_binding {
  std::string peer;  // "": a node stored before bindings (v10): its next request from a fitting key binds it
  std::string zone;
  bool drained = false;
  time_point bound{};
};

enum class node_state { alive, suspect, dead };
const char* to_string(node_state s);

class roster {
 public:
  explicit roster(std::chrono::milliseconds heartbeat_interval = wire::heartbeat_interval,
                  int max_missed = wire::heartbeat_max_missed)
      : interval_(heartbeat_interval), max_missed_(max_missed) {}

  // Adds or replaces a node (a restarted process re-registers with a new pid);
  // a drained node id stays drained.
  void register_node(node n, time_point now);
  // Puts back a node loaded from the state store, times as stored. With
  // `alive_until` (a scheduler taking over), the node counts as alive until
  // then whatever its last beat, and after that as its beats say.
  void restore(node n, time_point alive_until = {});
  // False when the node is unknown (it must register again).
  bool heartbeat(const std::string& id, time_point now);
  // Drains (or undrains) the node id: its binding and, when listed, the node.
  // False when the id was never registered.
  bool set_drained(const std::string& id, bool drained);
  node_state state(const node& n, time_point now) const;
  // Removes nodes dead for longer than `keep`; returns their ids (and, when
  // `removed` is given, appends the nodes themselves to it).
  std::vector<std::string> reap(time_point now, std::chrono::milliseconds keep, std::vector<node>* removed = nullptr);

  std::vector<node> list(const std::string& zone = "") const;
  // Every node by id, without copying (list() copies): for hot paths that only read.
  const std::map<std::string, node>& all() const { return nodes_; }
  const node* find(const std::string& id) const;
  // The id's binding; null when no key ever registered it.
  const node_binding* binding(const std::string& id) const;
  // Sets the id's binding (a first registration, a pre-v10 node bound, a restore).
  void bind(const std::string& id, node_binding b);
  std::uint64_t version() const { return version_; }
  std::chrono::milliseconds interval() const { return interval_; }

 private:
  std::chrono::milliseconds interval_;
  int max_missed_;
  std::map<std::string, node> nodes_;
  std::map<std::string, node_binding> bindings_;  // never reaped
  std::map<std::string, time_point> alive_until_;  // a takeover's grace, by node (restore)
  std::uint64_t version_ = 0;
};

}  // namespace loom::scheduler
