// The start-up check of the certificate files (tls_files.h): good files load; each kind of bad
// file is refused with a message naming the file and security.cert_dir.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_pki.h"
#include "tls_files.h"

namespace {

using exo::SecurityError;
using exo::testing::make_test_ca;
using exo::testing::make_test_leaf;
using exo::testing::PkiDir;

// The message of the SecurityError `fn` throws ("" if none).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const SecurityError& e) {
    return e.what();
  }
  return "";
}

TEST(TlsFiles, GoodFilesLoad) {
  PkiDir dir;
  make_test_ca(dir.path);
  make_test_leaf(dir.path, "cache0");
  const exo::TlsFiles f = exo::load_tls_files(dir.str(), "cache0");
  EXPECT_NE(f.ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(f.key_pem.find("PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(exo::check_tls_files(f, "cache0"), "");
}

TEST(TlsFiles, MissingFileNamesItAndTheConfigField) {
  PkiDir dir;
  make_test_ca(dir.path);
  const std::string e = error_of([&] { exo::load_tls_files(dir.str(), "db0"); });
  EXPECT_NE(e.find("security.cert_dir"), std::string::npos) << e;
  EXPECT_NE(e.find(dir.str() + "/db0.crt"), std::string::npos) << e;
  EXPECT_NE(e.find("No such file"), std::string::npos) << e;
  const std::string no_dir = error_of([] { exo::load_tls_files("/nonexistent/pki", "db0"); });
  EXPECT_NE(no_dir.find("/nonexistent/pki/ca.crt"), std::string::npos) << no_dir;
}

TEST(TlsFiles, UnreadableFileIsRefused) {
  PkiDir dir;
  make_test_ca(dir.path);
  make_test_leaf(dir.path, "db0");
  std::filesystem::remove(dir.path / "db0.key");
  std::filesystem::create_directory(dir.path / "db0.key");  // open succeeds, reading fails
  const std::string e = error_of([&] { exo::load_tls_files(dir.str(), "db0"); });
  EXPECT_NE(e.find("db0.key"), std::string::npos) << e;
  EXPECT_NE(e.find("security.cert_dir"), std::string::npos) << e;
}

TEST(TlsFiles, GarbageIsNotAPemCertificate) {
  PkiDir dir;
  make_test_ca(dir.path);
  make_test_leaf(dir.path, "db0");
  exo::TlsFiles f = exo::load_tls_files(dir.str(), "db0");
  f.cert_pem = "hello";
  EXPECT_NE(exo::check_tls_files(f, "db0").find("db0.crt: not a PEM certificate"), std::string::npos);
  f = exo::load_tls_files(dir.str(), "db0");
  f.key_pem = f.cert_pem;
  EXPECT_NE(exo::check_tls_files(f, "db0").find("db0.key: not a PEM private key"), std::string::npos);
  f = exo::load_tls_files(dir.str(), "db0");
  f.ca_pem.clear();
  EXPECT_NE(exo::check_tls_files(f, "db0").find("ca.crt: not a PEM certificate"), std::string::npos);
}

TEST(TlsFiles, KeyOfAnotherCertificateIsRefused) {
  PkiDir dir;
  make_test_ca(dir.path);
  make_test_leaf(dir.path, "db0");
  make_test_leaf(dir.path, "db1");
  exo::TlsFiles f = exo::load_tls_files(dir.str(), "db0");
  f.key_pem = exo::testing::read_text(dir.path / "db1.key");
  EXPECT_EQ(exo::check_tls_files(f, "db0"), "db0.key: is not the key of db0.crt");
}

TEST(TlsFiles, CertificateOfAnotherCaIsRefused) {
  PkiDir dir, other;
  make_test_ca(dir.path);
  make_test_ca(other.path, "another CA");
  make_test_leaf(dir.path, "db0", "db", other.path);  // in our directory, signed by the other CA
  const std::string e = error_of([&] { exo::load_tls_files(dir.str(), "db0"); });
  EXPECT_NE(e.find("db0.crt: not valid under ca.crt"), std::string::npos) << e;
}

TEST(TlsFiles, CertificateForAnotherNameIsRefused) {
  PkiDir dir;
  make_test_ca(dir.path);
  make_test_leaf(dir.path, "cache0", "cache", {}, /*cn=*/"cache1");
  const std::string e = error_of([&] { exo::load_tls_files(dir.str(), "cache0"); });
  EXPECT_NE(e.find("cache0.crt: subject CN is 'cache1', expected 'cache0'"), std::string::npos) << e;
}

}  // namespace
