#include "services/ingest/config.hpp"

#include "libs/wire/endpoint.hpp"

namespace loom::ingest {

result<ingest_config> load_config(const env_lookup& env) {
  ingest_config c;
  if (const char* v = env("LOOM_INGEST_SYNC_BIND"); v && *v) {
    if (!wire::valid_tcp_endpoint(v, wire::endpoint_use::bind))
      return make_error(errc::invalid_argument, std::string("LOOM_INGEST_SYNC_BIND=") + v +
                                                    " is not an endpoint to listen on: want tcp://HOST:PORT "
                                                    "(HOST may be *, PORT 1..65535 or *)");
    c.sync_bind = v;
  }
  return c;
}

}  // namespace loom::ingest
