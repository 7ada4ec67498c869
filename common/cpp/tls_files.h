// The PEM files one program's mutual TLS runs from (security.cert_dir, docs/security.md):
// ca.crt, <name>.crt and <name>.key, as `exo certs init` writes them. Read and checked once at
// start-up, so a missing, unreadable or mismatched file is an error naming the file and the
// config field, not a TLS handshake that fails later on every call.
#pragma once

#include <stdexcept>
#include <string>

namespace exo {

// A start-up error of the security setup; the message names the file and `security.cert_dir`.
struct SecurityError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TlsFiles {
  std::string ca_pem;    // ca.crt: the cluster CA, the only issuer a peer's certificate may have
  std::string cert_pem;  // <name>.crt
  std::string key_pem;   // <name>.key
};

// Reads <cert_dir>/ca.crt, <cert_dir>/<name>.crt and <cert_dir>/<name>.key and checks them
// (check_tls_files). Throws SecurityError naming the file and security.cert_dir.
TlsFiles load_tls_files(const std::string& cert_dir, const std::string& name);

// Pure check of the PEM texts: each parses, the key belongs to the certificate, the certificate
// was issued by the CA and is valid now, and its subject CN is `name`. Returns "" or what is
// wrong, naming the file ("ca.crt", "<name>.crt", "<name>.key").
std::string check_tls_files(const TlsFiles& files, const std::string& name);

}  // namespace exo
