#include "tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace exo {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;

// OpenSSL's reason for the last failure, and its error queue emptied (it is per thread and
// would otherwise show up in an unrelated later call).
std::string openssl_error() {
  const unsigned long e = ERR_peek_last_error();
  const char* reason = e ? ERR_reason_error_string(e) : nullptr;  // a static string
  ERR_clear_error();
  return reason ? reason : e ? "unknown OpenSSL error" : "no PEM data";
}

BioPtr bio_of(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

X509Ptr parse_cert(const std::string& pem) {
  BioPtr b = bio_of(pem);
  return X509Ptr(b ? PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr) : nullptr);
}

KeyPtr parse_key(const std::string& pem) {
  BioPtr b = bio_of(pem);
  return KeyPtr(b ? PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr) : nullptr);
}

std::string common_name(X509* cert) {
  X509_NAME* subject = X509_get_subject_name(cert);
  const int len = subject ? X509_NAME_get_text_by_NID(subject, NID_commonName, nullptr, 0) : -1;
  if (len < 0) return "";
  std::string cn(static_cast<size_t>(len) + 1, '\0');
  X509_NAME_get_text_by_NID(subject, NID_commonName, cn.data(), len + 1);
  cn.resize(static_cast<size_t>(len));
  return cn;
}

// "" when `cert` chains to `ca` and is within its validity period, else OpenSSL's reason.
std::string verify_against(X509* ca, X509* cert) {
  StorePtr store(X509_STORE_new());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) != 1)
    return "cannot set up verification: " + openssl_error();
  if (X509_verify_cert(ctx.get()) == 1) return "";
  const std::string why = X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
  ERR_clear_error();
  return why;
}

std::string read_whole(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = std::strerror(errno);
    return "";
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) *error = "read error";
  return text.str();
}

}  // namespace

std::string check_tls_files(const TlsFiles& f, const std::string& name) {
  const std::string crt = name + ".crt", key_file = name + ".key";
  X509Ptr ca = parse_cert(f.ca_pem);
  if (!ca) return "ca.crt: not a PEM certificate (" + openssl_error() + ")";
  X509Ptr cert = parse_cert(f.cert_pem);
  if (!cert) return crt + ": not a PEM certificate (" + openssl_error() + ")";
  KeyPtr key = parse_key(f.key_pem);
  if (!key) return key_file + ": not a PEM private key (" + openssl_error() + ")";
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return key_file + ": is not the key of " + crt;
  }
  if (std::string why = verify_against(ca.get(), cert.get()); !why.empty())
    return crt + ": not valid under ca.crt: " + why;
  // Peers know this program by its name (the target-name override, the caller checks): a
  // certificate for another name would fail every handshake or be refused every call.
  if (const std::string cn = common_name(cert.get()); cn != name)
    return crt + ": subject CN is '" + cn + "', expected '" + name + "'";
  return "";
}

TlsFiles load_tls_files(const std::string& cert_dir, const std::string& name) {
  const auto where = [&](const std::string& file) {
    return "security.cert_dir: " + cert_dir + "/" + file;
  };
  const std::string hint = " (create the certificates with `exo certs init --config FILE`)";
  TlsFiles f;
  for (auto [file, text] : {std::pair{std::string("ca.crt"), &f.ca_pem},
                            std::pair{name + ".crt", &f.cert_pem},
                            std::pair{name + ".key", &f.key_pem}}) {
    std::string err;
    *text = read_whole(cert_dir + "/" + file, &err);
    if (!err.empty()) throw SecurityError(where(file) + ": cannot read: " + err + hint);
  }
  if (std::string e = check_tls_files(f, name); !e.empty())
    throw SecurityError("security.cert_dir: " + cert_dir + "/" + e);
  return f;
}

}  // namespace exo
