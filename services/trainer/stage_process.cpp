#include "services/trainer/stage_process.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/collective/relay.hpp"
#include "services/trainer/hpo/trial_score.hpp"

#include "libs/atrest/object.hpp"
#include "libs/layout/layout.hpp"

#include "libs/files/files.hpp"
#include "libs/runspec/run_config.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace loom::trainer {
namespace {

using json = nlohmann::json;
constexpr int event_fd = 3;  // the child's events; its stdout goes to stderr (the log)
// A group member's all-reduce, relayed through the parent, which holds the
// group (libs/collective/relay.hpp).
constexpr int relay_fd = 4;

// fd `to` in the child is `from`, kept across exec (dup2 onto itself keeps FD_CLOEXEC).
void child_fd(int from, int to) {
  if (from == to)
    ::fcntl(to, F_SETFD, 0);
  else
    ::dup2(from, to);
}

json spec_json(const stage_process_spec& s) {
  return {{"config", s.config},         {"sets", s.sets},         {"out_dir", s.out_dir},
          {"init_from", s.init_from},   {"data_dir", s.data_dir}, {"dataset_root", s.dataset_root},
          {"leak_mib_per_step", s.leak_mib_per_step}, {"node", s.node},
          {"trial_stop_at", s.trial_stop_at},   {"trial_eval_text", s.trial_eval_text},
          {"group_rank", s.group_rank},         {"group_world", s.group_world}};
}

std::string signal_name(int sig) {
  const char* d = ::strsignal(sig);
  return "signal " + std::to_string(sig) + (d ? std::string(" (") + d + ")" : std::string());
}

// Replays one event of the child into the run's hooks; the end events fill `end`.
void replay(const json& e, const run_options& o, const stage_process_options& po,
            std::optional<result<run_summary>>& end, std::string& crash) {
  const std::string kind = e.value("e", "");
  if (kind == "started") {
    if (o.on_started) o.on_started();
  } else if (kind == "step") {
    step_record r{e.value("step", std::uint64_t(0)), e.value("loss", 0.0f), e.value("lr", 0.0f),
                  e.value("grad_norm", 0.0f), e.value("tokens_per_s", 0.0), e.value("ms", 0.0)};
    if (o.on_step) o.on_step(r);
  } else if (kind == "snapshot") {
    if (o.on_snapshot) o.on_snapshot(e.value("dir", ""));
  } else if (kind == "notice") {
    if (o.on_notice) o.on_notice(e.value("kind", ""), e.value("text", ""));
  } else if (kind == "rollback") {
    if (o.on_rollback) o.on_rollback(e.value("bad_step", std::uint64_t(0)), e.value("back_to", std::uint64_t(0)), e.value("why", ""));
  } else if (kind == "anomaly") {
    if (o.on_anomaly) o.on_anomaly(e.value("kind", ""));
  } else if (kind == "precision") {
    if (o.on_precision) o.on_precision(e.value("used", ""), e.value("why", ""));
  } else if (kind == "scored") {
    if (po.on_scored) po.on_scored(e.at("step").get<std::uint64_t>(), e.at("loss").get<double>());
  } else if (kind == "done") {
    run_summary s;
    s.first_step = e.value("first_step", std::uint64_t(0));
    s.steps = e.value("steps", std::uint64_t(0));
    s.last_loss = e.value("last_loss", 0.0f);
    s.snapshot = e.value("snapshot", "");
    s.params_sha256 = e.value("params_sha256", "");
    s.stopped = e.value("stopped", false);
    s.precision = e.value("precision", "fp32");
    for (const auto& kv : e.value("eval", json::array())) s.eval.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<double>());
    end = result<run_summary>(std::move(s));
  } else if (kind == "error") {
    const errc c = errc_from_string(e.value("code", "")).value_or(errc::internal);
    end = result<run_summary>(make_error(c, e.value("message", "")));
  } else if (kind == "crash") {
    crash = e.value("cause", "");
  }
}

}  // namespace

result<run_summary> run_in_process(const stage_process_spec& s, const run_options& o, const runtime::process_box& box,
                                   const stage_process_options& po) {
  // Members of one group on one host share out_dir: a spec file each.
  const std::string spec_path =
      s.out_dir + "/stage-process" + (s.group_rank > 0 ? "-rank-" + std::to_string(s.group_rank) : "") + ".json";
  if (auto st = files::make_dirs(s.out_dir); !st) return st.err();
  if (auto st = files::write_atomic(spec_path, spec_json(s).dump(1) + "\n"); !st) return st.err();
  int events[2], commands[2], relay[2] = {-1, -1};
  if (::pipe2(events, O_CLOEXEC) != 0) return make_error(errc::unavailable, std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(commands, O_CLOEXEC) != 0) {
    ::close(events[0]);
    ::close(events[1]);
    return make_error(errc::unavailable, std::string("pipe: ") + std::strerror(errno));
  }
  if (s.group_world > 1 && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, relay) != 0) {
    for (int fd : {events[0], events[1], commands[0], commands[1]}) ::close(fd);
    return make_error(errc::unavailable, std::string("socketpair: ") + std::strerror(errno));
  }
  const std::uint64_t kills_before = box.oom_kills();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {events[0], events[1], commands[0], commands[1], relay[0], relay[1]})
      if (fd >= 0) ::close(fd);
    return make_error(errc::unavailable, std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {  // the child: async-signal-safe calls only, until exec
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (!box.enter()) ::_exit(126);
    child_fd(commands[0], 0);
    ::dup2(2, 1);
    child_fd(events[1], event_fd);
    if (relay[1] >= 0) child_fd(relay[1], relay_fd);
    const char* argv[] = {"loom-trainer", "stage-child", "--spec", spec_path.c_str(), nullptr};
    ::execv(po.exe.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(events[1]);
  ::close(commands[0]);
  if (relay[1] >= 0) ::close(relay[1]);
  if (po.on_spawn) po.on_spawn(pid);
  std::optional<result<run_summary>> end;
  std::string crash, buf;
  bool told_stop = false;
  char chunk[4096];
  for (;;) {
    if (!told_stop && o.stop && o.stop->load()) {
      ::kill(pid, SIGTERM);
      told_stop = true;
    }
    if (po.shed)
      if (std::string why = po.shed(); !why.empty()) {
        const std::string line = "shed " + why + "\n";
        (void)!::write(commands[1], line.data(), line.size());  // a child that is gone: its end is read below
      }
    pollfd p[2] = {{events[0], POLLIN, 0}, {relay[0], POLLIN, 0}};
    const int n = ::poll(p, relay[0] >= 0 ? 2 : 1, 200);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    if (relay[0] >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      // Stopped while exchanging: the child is told before it reads the failed exchange, as in-thread.
      auto told = [&] {
        if (!told_stop && o.stop && o.stop->load()) {
          ::kill(pid, SIGTERM);
          told_stop = true;
        }
      };
      if (!collective::relay::serve_one(relay[0], po.all_reduce_sum, told)) {
        ::close(relay[0]);  // the child is gone or broke the relay: its end is read below
        relay[0] = -1;
      }
      continue;
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const ssize_t got = ::read(events[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // the child closed its end: it is gone
    buf.append(chunk, static_cast<std::size_t>(got));
    for (std::size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
      auto e = json::parse(buf.substr(0, nl), nullptr, false);
      if (e.is_discarded() || !e.is_object()) continue;  // not ours: ignored
      try {
        replay(e, o, po, end, crash);
      } catch (const json::exception&) {
        // a malformed field of one event: that event is lost, not the run
      }
    }
  }
  ::close(events[0]);
  ::close(commands[1]);
  if (relay[0] >= 0) ::close(relay[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (end && WIFEXITED(status)) return std::move(*end);
  std::string cause;
  if (!crash.empty()) {
    cause = crash;
  } else if (WIFSIGNALED(status) && box.oom_kills() > kills_before) {
    cause = "killed by the kernel for memory at its limit of " + box.memory_limit_text() + " (" +
            runtime::to_string(box.mode()) + ")";
  } else if (WIFSIGNALED(status)) {
    cause = "killed by " + signal_name(WTERMSIG(status));
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 126) {
    cause = "could not join its limits (" + box.describe() + ")";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    cause = "could not start " + po.exe;
  } else {
    cause = "exited with code " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + " without a result";
  }
  throw stage_crash("its process " + std::to_string(pid) + " " + cause);
}

// ---- the child ---------------------------------------------------------------

namespace {

std::atomic<bool> g_child_stop{false};
extern "C" void on_child_stop(int) { g_child_stop.store(true); }

std::mutex g_out_mu;
void emit(const json& e) {
  const std::string line = e.dump() + "\n";
  std::lock_guard lock(g_out_mu);
  for (std::size_t off = 0; off < line.size();) {
    const ssize_t n = ::write(event_fd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone: PR_SET_PDEATHSIG ends us
    off += static_cast<std::size_t>(n);
  }
}

}  // namespace

int stage_child_main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[0]) != "--spec") {
    std::fprintf(stderr, "loom-trainer stage-child --spec FILE: run by the trainer service, not by people\n");
    return 2;
  }
  std::signal(SIGTERM, on_child_stop);
  std::signal(SIGINT, on_child_stop);
  try {
    auto text = files::read_file(argv[1]);
    if (!text) {
      emit({{"e", "error"}, {"code", std::string(to_string(text.code()))}, {"message", text.err().message}});
      return 1;
    }
    const json spec = json::parse(*text);
    stage_process_spec s;
    s.config = spec.at("config").get<std::string>();
    s.sets = spec.at("sets").get<std::vector<std::string>>();
    s.out_dir = spec.at("out_dir").get<std::string>();
    s.init_from = spec.at("init_from").get<std::string>();
    s.data_dir = spec.at("data_dir").get<std::string>();
    s.dataset_root = spec.at("dataset_root").get<std::string>();
    s.leak_mib_per_step = spec.at("leak_mib_per_step").get<std::uint64_t>();
    s.node = spec.value("node", std::string());
    s.trial_stop_at = spec.value("trial_stop_at", std::uint64_t(0));
    s.trial_eval_text = spec.value("trial_eval_text", std::string());
    s.group_rank = spec.value("group_rank", std::uint32_t(0));
    s.group_world = spec.value("group_world", std::uint32_t(1));
    // The service's keys at rest (its environment is ours): snapshots and stage data sealed as in-process.
    layout::paths at_rest_paths;
    at_rest_paths.root = s.data_dir;
    auto at_rest = atrest::open_process_keys_from_env(
        at_rest_paths.atrest_keys(), [](const char* n) { return std::getenv(n); }, loom::wall_now());
    if (!at_rest) {
      emit({{"e", "error"}, {"code", std::string(to_string(at_rest.code()))}, {"message", at_rest.err().message}});
      return 1;
    }
    auto toml = files::read_file(s.config);
    if (!toml) {
      emit({{"e", "error"}, {"code", std::string(to_string(toml.code()))}, {"message", toml.err().message}});
      return 1;
    }
    auto cfg = runspec::parse_run_config(*toml, s.config, s.sets);
    if (!cfg) {
      emit({{"e", "error"}, {"code", std::string(to_string(cfg.code()))}, {"message", cfg.err().message}});
      return 1;
    }
    cfg->out_dir = s.out_dir;
    if (!s.init_from.empty()) cfg->init_from = s.init_from;

    // "shed <why>" lines from the parent, taken before the next step.
    std::mutex shed_mu;
    std::string shed_why;
    std::thread reader([&] {
      std::string line;
      while (std::getline(std::cin, line))
        if (line.starts_with("shed ")) {
          std::lock_guard lock(shed_mu);
          shed_why = line.substr(5);
        }
    });
    reader.detach();  // ends with the process; stdin closes when the parent goes

    std::vector<std::unique_ptr<char[]>> leaked;  // LOOM_INJECT_LEAK: what a leaking stage would hold
    run_options o;
    o.resume = true;
    o.data_dir = s.data_dir;
    o.dataset_root = s.dataset_root;
    o.node = s.node;
    o.log = &std::cerr;
    o.stop = &g_child_stop;
    o.on_started = [] { emit({{"e", "started"}}); };
    o.on_step = [&](const step_record& r) {
      emit({{"e", "step"}, {"step", r.step}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
            {"tokens_per_s", r.tokens_per_s}, {"ms", r.ms_per_step}});
      if (s.leak_mib_per_step) {
        const std::size_t n = s.leak_mib_per_step << 20;
        leaked.emplace_back(new char[n]);
        std::memset(leaked.back().get(), 1, n);
      }
    };
    o.on_snapshot = [](const std::string& dir) { emit({{"e", "snapshot"}, {"dir", dir}}); };
    o.on_notice = [](const std::string& kind, const std::string& t) { emit({{"e", "notice"}, {"kind", kind}, {"text", t}}); };
    o.on_rollback = [](std::uint64_t bad, std::uint64_t back, const std::string& why) {
      emit({{"e", "rollback"}, {"bad_step", bad}, {"back_to", back}, {"why", why}});
    };
    o.on_anomaly = [](const std::string& kind) { emit({{"e", "anomaly"}, {"kind", kind}}); };
    o.on_precision = [](const std::string& used, const std::string& why) {
      emit({{"e", "precision"}, {"used", used}, {"why", why}});
    };
    o.shed = [&] {
      std::lock_guard lock(shed_mu);
      return std::exchange(shed_why, std::string());
    };
    // A group member: its all-reduce goes through the parent, which holds the group.
    if (s.group_world > 1)
      o.group = {s.group_rank, s.group_world, [](std::span<float> v) { return collective::relay::exchange(relay_fd, v); }};
    // An hpo trial: scored here at its rung (the parent records what is
    // reported), then ended after that step's snapshot, as in-process.
    std::optional<trial_scorer> scorer;
    if (s.trial_stop_at > 0) {
      auto made = trial_scorer::make(*cfg, s.trial_eval_text);
      if (!made) {
        emit({{"e", "error"}, {"code", std::string(to_string(made.code()))}, {"message", made.err().message}});
        return exit_code(made.code());
      }
      scorer = std::move(*made);
      o.resume_at_most = s.trial_stop_at;
      const auto stop_at = s.trial_stop_at, last = static_cast<std::uint64_t>(cfg->steps);
      o.outer.after_step = [&scorer, stop_at, last](std::uint64_t step, std::span<float> p, std::uint64_t) -> status {
        if (step != stop_at) return ok_status();
        auto loss = scorer->score(p);
        if (!loss) return loss.err();
        emit({{"e", "scored"}, {"step", step}, {"loss", *loss}});
        if (step < last) g_child_stop.store(true);  // ends after this step's snapshot
        return ok_status();
      };
    }
    auto sum = run_training(*cfg, o);
    if (!sum) {
      emit({{"e", "error"}, {"code", std::string(to_string(sum.code()))}, {"message", sum.err().message}});
      return exit_code(sum.code());
    }
    json eval = json::array();
    for (const auto& [k, v] : sum->eval) eval.push_back({k, v});
    emit({{"e", "done"},
          {"first_step", sum->first_step},
          {"steps", sum->steps},
          {"last_loss", sum->last_loss},
          {"snapshot", sum->snapshot},
          {"params_sha256", sum->params_sha256},
          {"stopped", sum->stopped},
          {"precision", sum->precision},
          {"eval", eval}});
    return 0;
  } catch (const std::bad_alloc&) {
    emit({{"e", "crash"}, {"cause", "ran out of memory (an allocation failed under its limit)"}});
    return 3;
  } catch (const std::exception& e) {
    emit({{"e", "crash"}, {"cause", std::string("crashed: ") + e.what()}});
    return 3;
  }
}

}  // namespace loom::trainer
