#include "services/console/server.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/auth/token.hpp"
#include "libs/metrics/metrics.hpp"
#include "services/console/api.hpp"
#include "services/console/assets.hpp"
#include "services/console/backend.hpp"
#include "services/console/change_feed.hpp"
#include "services/console/live.hpp"
#include "services/console/sessions.hpp"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace loom::console {

namespace {

using nlohmann::json;
constexpr const char* cookie_name = "__Host-loom_session";
// Every response: nothing from another origin, no framing, no sniffing, no referrer.
constexpr const char* csp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
// A live stream asks the services again when the scheduler's change events
// say so, after a short pause that folds a burst of events into one round of
// requests; and at least every `live_refresh` for what changes without an
// event (a link's RTT, a node's last heartbeat). Without a feed: every
// `live_tick`. It checks its session at least every `live_wait`.
constexpr auto live_tick = std::chrono::milliseconds(200);
constexpr auto live_coalesce = std::chrono::milliseconds(50);
constexpr auto live_refresh = std::chrono::seconds(5);
constexpr auto live_wait = std::chrono::milliseconds(1000);
// A body over 1 MiB is no console request (a submit with overrides is a few KiB).
constexpr std::size_t max_body = 1u << 20;

sys_ms now_ms() {
  return std::chrono::duration_cast<sys_ms>(loom::wall_now().time_since_epoch());
}

std::string cookie_value(const httplib::Request& req, const std::string& name) {
  const std::string all = req.get_header_value("Cookie");
  std::size_t at = 0;
  while (at < all.size()) {
    auto end = all.find(';', at);
    if (end == std::string::npos) end = all.size();
    auto part = all.substr(at, end - at);
    while (!part.empty() && part.front() == ' ') part.erase(0, 1);
    if (part.size() > name.size() && part.compare(0, name.size(), name) == 0 && part[name.size()] == '=')
      return part.substr(name.size() + 1);
    at = end + 1;
  }
  return "";
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const error& e) {
  auto r = error_reply(e);
  send_json(res, r.status, r.body);
}

}  // namespace

struct server::impl {
  server_options opt;
  audit::emitter* audit = nullptr;
  metrics::service_metrics* metrics = nullptr;
  std::unique_ptr<httplib::SSLServer> svr;
  backend back;
  job_series series;
  api routes;
  session_table sessions;
  std::thread listener;
  std::atomic<bool> stopping{false};
  std::atomic<int> streams{0};
  int port = 0;

  impl(zmq::context_t& ctx, server_options o)
      : opt(std::move(o)), back(ctx, opt.paths), routes(back, series, opt.template_dirs) {}

  void record(const std::string& action, audit::decision d, const std::string& principal, const std::string& role,
              const std::string& tenant, const std::string& reason) {
    if (!audit) return;
    audit::record r;
    r.principal = principal;
    r.role = role;
    r.tenant = tenant;
    r.zone = opt.zone;
    r.action = action;
    r.outcome = d;
    r.reason = auth::printable(reason.substr(0, 256));  // may hold the caller's words (a path): one escaped line
    r.service = "console";
    r.peer = "https";
    audit->emit(std::move(r));
  }

  // A same-origin browser request, or no browser at all: Origin (when sent)
  // must be this server's own; Sec-Fetch-Site (when sent) same-origin.
  status same_origin(const httplib::Request& req) const {
    const auto site = req.get_header_value("Sec-Fetch-Site");
    if (!site.empty() && site != "same-origin" && site != "none")
      return make_error(errc::permission_denied, "a cross-site request (Sec-Fetch-Site: " + site.substr(0, 32) + ")");
    const auto origin = req.get_header_value("Origin");
    if (!origin.empty() && origin != "https://" + req.get_header_value("Host"))
      return make_error(errc::permission_denied, "a request from another origin (" + origin.substr(0, 128) + ")");
    return ok_status();
  }

  result<session> session_of(const httplib::Request& req) {
    return sessions.use(cookie_value(req, cookie_name), now_ms());
  }

  void login(const httplib::Request& req, httplib::Response& res) {
    if (auto st = same_origin(req); !st) return send_error(res, st.err());
    auto body = json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("token") || !body["token"].is_string() ||
        body["token"].get<std::string>().size() > 8192)
      return send_error(res, make_error(errc::invalid_argument, "log in with {\"token\": \"lt1....\"}"));
    const auto token = body["token"].get<std::string>();
    auto key = auth::load_token_key(opt.paths.token_key());
    auto epoch = auth::read_epoch(opt.paths.epoch());
    if (!key || !epoch) return send_error(res, make_error(errc::unavailable, "the console cannot read the token key"));
    auto c = auth::verify_token(token, *key, {static_cast<std::int64_t>(now_ms().count() / 1000), *epoch});
    if (!c) {
      record("console.login", audit::decision::deny, "", "", "", c.err().message);
      if (metrics) metrics->add("logins_total", {{"outcome", "refused"}});
      return send_error(res, make_error(errc::unauthenticated, "the token was refused: " + c.err().message));
    }
    const std::string role(auth::to_string(c->r)), tenant(auth::tenant_of(*c));
    auto s = sessions.open(token, c->principal, role, tenant, c->expires_unix_s, now_ms());
    record("console.login", audit::decision::allow, c->principal, role, tenant, "");
    if (metrics) metrics->add("logins_total", {{"outcome", "ok"}});
    res.set_header("Set-Cookie", std::string(cookie_name) + "=" + s.id + "; Path=/; Secure; HttpOnly; SameSite=Strict");
    send_json(res, 200,
              {{"logged_in", true}, {"principal", s.principal}, {"role", s.role}, {"tenant", s.tenant}, {"csrf", s.csrf}});
  }

  void logout(const httplib::Request& req, httplib::Response& res) {
    auto s = session_of(req);
    if (!s) return send_error(res, s.err());
    if (auto st = session_table::check_csrf(*s, req.get_header_value("X-CSRF-Token")); !st)
      return send_error(res, st.err());
    sessions.close(s->id);
    record("console.logout", audit::decision::allow, s->principal, s->role, s->tenant, "");
    res.set_header("Set-Cookie", std::string(cookie_name) + "=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0");
    send_json(res, 200, {{"ok", true}});
  }

  void call(const httplib::Request& req, httplib::Response& res) {
    auto s = session_of(req);
    // A page asking whether it is logged in is told so without an error
    // status (a browser reports every 401 as a console error).
    if (!s && req.method == "GET" && req.path == "/api/session")
      return send_json(res, 200, {{"logged_in", false}, {"why", s.err().message}});
    if (!s) return send_error(res, s.err());
    api_call c;
    c.method = req.method;
    c.path = req.path;
    for (const auto& [k, v] : req.params) c.query[k] = v;
    c.who = *s;
    if (req.method == "POST") {
      if (auto st = same_origin(req); !st) return send_error(res, st.err());
      if (auto st = session_table::check_csrf(*s, req.get_header_value("X-CSRF-Token")); !st) {
        record("console.csrf", audit::decision::deny, s->principal, s->role, s->tenant, req.path);
        return send_error(res, st.err());
      }
      c.body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
      if (!c.body.is_object()) return send_error(res, make_error(errc::invalid_argument, "the body must be a JSON object"));
    }
    auto r = routes.handle(c);
    if (r.stream) {
      res.set_header("Cache-Control", "no-store");
      res.set_header("Content-Disposition", "attachment; filename=\"" + r.file_name + "\"");
      auto stream = r.stream;
      res.set_content_provider(static_cast<std::size_t>(r.file_bytes), "application/octet-stream",
                               [stream, done = false](std::size_t, std::size_t, httplib::DataSink& sink) mutable {
                                 if (done) return true;
                                 done = true;
                                 return stream([&](const std::string& piece) {
                                   return sink.write(piece.data(), piece.size());
                                 });
                               });
      return;
    }
    send_json(res, r.status, r.body);
  }

  void events(const httplib::Request& req, httplib::Response& res) {
    auto s = session_of(req);
    if (!s) return send_error(res, s.err());
    if (streams.fetch_add(1) >= opt.max_streams) {
      streams.fetch_sub(1);
      return send_error(res, make_error(errc::resource_exhausted, "too many live streams; reload later"));
    }
    const std::string id = s->id;
    auto feed = std::make_shared<live_stream>(routes, req.has_param("job") ? req.get_param_value("job") : "");
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Accel-Buffering", "no");
    struct stream_state {
      std::chrono::steady_clock::time_point last_write{}, last_query{};
      std::uint64_t seen = 0;  // the change feed's generation at the last query
      bool first = true;
    };
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, id, feed, st = stream_state{}](std::size_t, httplib::DataSink& sink) mutable {
          if (stopping) return false;
          auto who = sessions.use(id, now_ms());
          if (!who) {
            auto e = sse_event("error", error_reply(who.err()).body);
            sink.write(e.data(), e.size());
            sink.done();
            return true;
          }
          const auto now = std::chrono::steady_clock::now();
          const std::uint64_t gen = opt.feed ? opt.feed->generation() : 0;
          std::string out;
          if (!opt.feed || st.first || gen != st.seen || now - st.last_query >= live_refresh) {
            st.first = false;
            st.seen = gen;
            st.last_query = now;
            out = feed->tick(*who);
          }
          if (out.empty() && now - st.last_write > std::chrono::seconds(15)) out = ": keep-alive\n\n";
          if (!out.empty()) {
            if (!sink.write(out.data(), out.size())) return false;
            st.last_write = now;
          }
          if (!opt.feed) {
            std::this_thread::sleep_for(live_tick);
          } else if (opt.feed->wait(st.seen, live_wait) != st.seen) {
            std::this_thread::sleep_for(live_coalesce);
          }
          return sink.is_writable();
        },
        [this](bool) { streams.fetch_sub(1); });
  }

  void routes_setup() {
    svr->set_payload_max_length(max_body);
    // A browser keeps its connection (one TLS handshake) for a page's calls.
    svr->set_keep_alive_max_count(1000);
    svr->set_keep_alive_timeout(30);
    svr->new_task_queue = [n = opt.workers] { return new httplib::ThreadPool(static_cast<std::size_t>(n)); };
    svr->set_default_headers({{"Content-Security-Policy", csp},
                              {"Strict-Transport-Security", "max-age=31536000"},
                              {"X-Content-Type-Options", "nosniff"},
                              {"X-Frame-Options", "DENY"},
                              {"Referrer-Policy", "no-referrer"},
                              {"Cross-Origin-Opener-Policy", "same-origin"},
                              {"Cross-Origin-Resource-Policy", "same-origin"},
                              {"Permissions-Policy", "camera=(), microphone=(), geolocation=()"}});
    svr->Post("/api/login", [this](const httplib::Request& q, httplib::Response& r) { login(q, r); });
    svr->Post("/api/logout", [this](const httplib::Request& q, httplib::Response& r) { logout(q, r); });
    svr->Get("/api/events", [this](const httplib::Request& q, httplib::Response& r) { events(q, r); });
    svr->Get("/api/.*", [this](const httplib::Request& q, httplib::Response& r) { call(q, r); });
    svr->Post("/api/.*", [this](const httplib::Request& q, httplib::Response& r) { call(q, r); });
    svr->Get("/.*", [](const httplib::Request& q, httplib::Response& r) {
      const asset* a = find_asset(q.path);
      if (!a) {
        r.status = 404;
        r.set_content("not found", "text/plain");
        return;
      }
      r.set_header("Cache-Control", "no-cache");
      r.set_content(std::string(a->bytes), std::string(a->content_type));
    });
    svr->set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr) {
      send_json(r, 500, {{"error", {{"code", "internal"}, {"message", "the console failed on this request"}}}});
    });
    svr->set_logger([this](const httplib::Request& q, const httplib::Response& r) {
      if (!metrics) return;
      std::string area = q.path.rfind("/api/", 0) == 0 ? q.path.substr(5, q.path.find('/', 5) - 5) : "static";
      metrics->add("http_requests_total", {{"area", area}, {"status", std::to_string(r.status)}});
    });
  }
};

result<std::unique_ptr<server>> server::start(zmq::context_t& ctx, server_options opt, audit::emitter* audit,
                                             metrics::service_metrics* metrics) {
  auto p = std::make_unique<impl>(ctx, std::move(opt));
  p->audit = audit;
  p->metrics = metrics;
  std::string why;
  const cert_files files = p->opt.tls;
  p->svr = std::make_unique<httplib::SSLServer>([&why, files](SSL_CTX& ctx) { return configure_tls13(ctx, files, why); });
  if (!p->svr->is_valid()) return make_error(errc::invalid_argument, "console TLS: " + why);
  p->routes_setup();
  p->port = p->opt.port == 0 ? p->svr->bind_to_any_port(p->opt.host) : (p->svr->bind_to_port(p->opt.host, p->opt.port) ? p->opt.port : -1);
  if (p->port <= 0)
    return make_error(errc::unavailable, "the console cannot listen on " + p->opt.host + ":" + std::to_string(p->opt.port));
  p->listener = std::thread([raw = p.get()] { raw->svr->listen_after_bind(); });
  return std::unique_ptr<server>(new server(std::move(p)));
}

server::server(std::unique_ptr<impl> p) : p_(std::move(p)) {}

server::~server() {
  p_->stopping = true;
  p_->svr->stop();
  if (p_->listener.joinable()) p_->listener.join();
}

int server::port() const { return p_->port; }

}  // namespace loom::console
