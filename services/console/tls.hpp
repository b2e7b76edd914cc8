// tls: the console's certificate and its TLS settings. With no certificate
// given, the first start makes a self-signed one (ECDSA P-256, a year, SANs
// for the advertised host, 127.0.0.1, ::1 and localhost) under
// <data>/console/tls/ and every later start reuses it, so a browser that
// accepted it once keeps trusting it. Stateless functions; thread-safe.
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <vector>

typedef struct ssl_ctx_st SSL_CTX;

namespace loom::console {

struct cert_files {
  std::string cert, key;  // PEM paths
  bool generated = false;  // made by this call
};

// `cert`/`key` given (both or neither): checked readable and matching. Else
// <dir>/cert.pem and <dir>/key.pem, made when absent (key file 0600).
result<cert_files> ensure_certificate(const std::string& cert, const std::string& key, const std::string& dir,
                                      const std::vector<std::string>& hosts);

// The SHA-256 fingerprint of a PEM certificate, "AB:CD:..." (printed at start
// so an operator can compare it with what the browser shows).
result<std::string> fingerprint(const std::string& cert_path);

// Loads the pair into `ctx` and allows TLS 1.3 only (no renegotiation, no
// compression, server's cipher order). false (with `why`) on any failure.
bool configure_tls13(SSL_CTX& ctx, const cert_files& files, std::string& why);

}  // namespace loom::console
