// Response encoder: memcached's reply lines, appended to the connection's output buffer.
#include <charconv>
#include <cstdint>

#include "base64.h"
#include "text_protocol.h"

namespace exo::proxy::reply {
namespace {

template <typename T>
void append_number(std::string& out, T v) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

void line(std::string& out, std::string_view text) {
  out += text;
  out += "\r\n";
}

// The key as the client sent it: base64 again if it came with b.
void append_key(std::string& out, const Request& req) {
  if (req.keys.empty()) return;
  if (req.meta.base64_key()) {
    base64::encode(req.keys[0], out);
  } else {
    out += req.keys[0];
  }
}

template <typename T>
void append_flag(std::string& out, char letter, const std::optional<T>& v) {
  if (!v) return;
  out += ' ';
  out += letter;
  append_number(out, *v);
}

// The return flags, in request order. O and k on every code (a binary key is followed by
// " b", as memcached does, so the client knows to decode it); the item's fields only on a hit
// (`item` set) and only those the proxy filled in.
void return_flags(std::string& out, const Request& req, const MetaItem* item) {
  for (const MetaFlag& f : req.meta.list) {
    switch (f.letter) {
      case 'O':
        out += " O";
        out += f.token;
        break;
      case 'k':
        out += " k";
        append_key(out, req);
        if (req.meta.base64_key()) out += " b";
        break;
      default:
        if (item == nullptr) break;
        if (f.letter == 'f') append_flag(out, 'f', item->client_flags);
        if (f.letter == 'c') append_flag(out, 'c', item->cas);
        if (f.letter == 't') append_flag(out, 't', item->ttl);
        if (f.letter == 's') append_flag(out, 's', item->size);
        if (f.letter == 'l') append_flag(out, 'l', item->last_access);
        if (f.letter == 'h' && item->hit_before) out += *item->hit_before ? " h1" : " h0";
        break;
    }
  }
}

void meta_code(std::string& out, std::string_view code, const Request& req, const MetaItem* item) {
  out += code;
  return_flags(out, req, item);
  out += "\r\n";
}

}  // namespace

void value(std::string& out, std::string_view key, uint32_t flags, std::string_view data,
           std::optional<uint64_t> cas) {
  out += "VALUE ";
  out += key;
  out += ' ';
  append_number(out, flags);
  out += ' ';
  append_number(out, data.size());
  if (cas) {
    out += ' ';
    append_number(out, *cas);
  }
  out += "\r\n";
  line(out, data);
}

void end(std::string& out) { line(out, "END"); }
void stored(std::string& out) { line(out, "STORED"); }
void not_stored(std::string& out) { line(out, "NOT_STORED"); }
void exists(std::string& out) { line(out, "EXISTS"); }
void not_found(std::string& out) { line(out, "NOT_FOUND"); }
void deleted(std::string& out) { line(out, "DELETED"); }
void touched(std::string& out) { line(out, "TOUCHED"); }
void ok(std::string& out) { line(out, "OK"); }
void error(std::string& out) { line(out, "ERROR"); }

void number(std::string& out, uint64_t v) {
  append_number(out, v);
  out += "\r\n";
}

void version(std::string& out, std::string_view v) {
  out += "VERSION ";
  line(out, v);
}

void stat(std::string& out, std::string_view name, std::string_view value) {
  out += "STAT ";
  out += name;
  out += ' ';
  line(out, value);
}

void client_error(std::string& out, std::string_view msg) {
  out += "CLIENT_ERROR ";
  line(out, msg);
}

void server_error(std::string& out, std::string_view msg) {
  out += "SERVER_ERROR ";
  line(out, msg);
}

void meta_value(std::string& out, const Request& req, const MetaItem& item, std::string_view data) {
  out += "VA ";
  append_number(out, data.size());
  return_flags(out, req, &item);
  out += "\r\n";
  line(out, data);
}

void meta_hit_no_value(std::string& out, const Request& req, const MetaItem& item) {
  meta_code(out, "HD", req, &item);
}
void meta_miss(std::string& out, const Request& req) { meta_code(out, "EN", req, nullptr); }
void meta_not_found(std::string& out, const Request& req) { meta_code(out, "NF", req, nullptr); }
void meta_not_stored(std::string& out, const Request& req) { meta_code(out, "NS", req, nullptr); }
void meta_exists(std::string& out, const Request& req) { meta_code(out, "EX", req, nullptr); }
void meta_noop(std::string& out) { line(out, "MN"); }

void meta_debug(std::string& out, const Request& req, std::string_view info) {
  out += "ME ";
  append_key(out, req);
  out += ' ';
  line(out, info);
}

bool quiet_suppresses(Cmd cmd, MetaOutcome outcome) {
  switch (cmd) {
    case Cmd::kMetaGet:
      return outcome == MetaOutcome::kMiss;
    case Cmd::kMetaSet:
    case Cmd::kMetaDelete:
      return outcome == MetaOutcome::kHit;
    case Cmd::kMetaArithmetic:  // memcached drops a successful ma's reply, value or not
      return outcome == MetaOutcome::kHit || outcome == MetaOutcome::kValue;
    default:
      return false;
  }
}

}  // namespace exo::proxy::reply
