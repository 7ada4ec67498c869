// A cluster CA and leaf certificates made at test time with the openssl CLI, in the shape
// `exo certs init` gives them (docs/security.md): ECDSA P-256, subject CN=<name>, SAN DNS:<name>,
// EKU serverAuth + clientAuth, ca.crt / <name>.crt / <name>.key in one directory. Header-only, for
// the C++ tests of every program (included as "tests/test_pki.h").
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace exo::testing {

// A temporary directory, removed with everything in it.
struct PkiDir {
  std::filesystem::path path;
  PkiDir() {
    char tmpl[] = "/tmp/exo_pki_testXXXXXX";
    const char* p = mkdtemp(tmpl);
    if (p == nullptr) throw std::runtime_error("mkdtemp failed");
    path = p;
  }
  ~PkiDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  PkiDir(const PkiDir&) = delete;
  PkiDir& operator=(const PkiDir&) = delete;
  std::string str() const { return path.string(); }
};

// Runs a shell command; throws with the command and its output on failure (a missing `openssl`
// fails the test: it is a prerequisite, never a reason to skip).
inline void run_or_throw(const std::string& cmd, const std::filesystem::path& dir) {
  const std::string log = (dir / "openssl.log").string();
  const int rc = std::system((cmd + " >" + log + " 2>&1").c_str());
  if (rc != 0) {
    std::ifstream in(log);
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    throw std::runtime_error("`" + cmd + "` failed (status " + std::to_string(rc) + "): " + out);
  }
}

// ca.crt and ca.key in `dir` (CN = `ca_name`).
inline void make_test_ca(const std::filesystem::path& dir, const std::string& ca_name = "exo test CA") {
  const auto d = dir.string();
  {
    std::ofstream cnf(dir / "ca.cnf");
    cnf << "[req]\ndistinguished_name = dn\nprompt = no\nx509_extensions = v3_ca\n"
        << "[dn]\nCN = " << ca_name << "\n"
        << "[v3_ca]\nbasicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\n"
        << "subjectKeyIdentifier = hash\n";
  }
  run_or_throw("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -config " +
                   d + "/ca.cnf -keyout " + d + "/ca.key -out " + d + "/ca.crt",
               dir);
}

// <name>.crt and <name>.key in `dir`, issued by the CA in `ca_dir` (default: the same directory).
// `cn` defaults to `name` (a different one makes a certificate whose name does not match).
inline void make_test_leaf(const std::filesystem::path& dir, const std::string& name,
                           const std::string& role = "test", std::filesystem::path ca_dir = {},
                           std::string cn = {}) {
  if (ca_dir.empty()) ca_dir = dir;
  if (cn.empty()) cn = name;
  const auto d = dir.string(), c = ca_dir.string();
  {
    std::ofstream ext(dir / (name + ".ext"));
    ext << "basicConstraints = CA:FALSE\nkeyUsage = critical, digitalSignature\n"
        << "extendedKeyUsage = serverAuth, clientAuth\nsubjectAltName = DNS:" << cn << "\n";
  }
  const std::string base = d + "/" + name;
  static int serial = 1000;  // unique within a test process: each CA here issues a few leaves
  run_or_throw("openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj '/CN=" + cn +
                   "/O=exo:test/OU=" + role + "' -keyout " + base + ".key -out " + base + ".csr",
               dir);
  run_or_throw("openssl x509 -req -days 2 -in " + base + ".csr -CA " + c + "/ca.crt -CAkey " + c +
                   "/ca.key -set_serial " + std::to_string(++serial) + " -extfile " + base +
                   ".ext -out " + base + ".crt",
               dir);
}

// A CA and one leaf per name in `dir`.
inline void make_test_pki(const std::filesystem::path& dir, const std::vector<std::string>& names) {
  make_test_ca(dir);
  for (const auto& n : names) make_test_leaf(dir, n);
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace exo::testing
