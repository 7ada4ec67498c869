// The memcached text protocol and meta commands as exo-proxy speaks them to web tiers: an
// incremental request parser and a response encoder. Pure codec (Pelikan's split: no sockets,
// no storage); the proxy's core owns the connection buffers and turns each Request into cluster
// GET/PUT/DELETE frames. Source of truth: memcached's doc/protocol.txt; where it is silent we
// follow what memcached itself answers (proxy/README.md lists every such choice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exo::proxy {

struct Limits {
  // Longest command line, '\r' included, '\n' not. get/gets/gat/gats lines may be longer:
  // retrieval_line_limit() (memcached too lets multigets past its 2048-byte line buffer).
  size_t max_line = 2048;
  size_t max_key = 250;
  // Largest data block of a storage command; the caller derives it from the cluster MTU.
  size_t max_value = 1400;
  size_t max_keys_per_get = 64;
};

// Room for max_keys_per_get keys of max_key bytes, each after a space, on top of max_line.
size_t retrieval_line_limit(const Limits& limits);

enum class Cmd : uint8_t {
  kGet, kGets, kSet, kAdd, kReplace, kAppend, kPrepend, kCas, kIncr, kDecr, kTouch, kGat, kGats,
  kDelete, kVersion, kStats, kQuit, kFlushAll, kVerbosity,
  kMetaGet /*mg*/, kMetaSet /*ms*/, kMetaDelete /*md*/, kMetaNoop /*mn*/,
  kMetaArithmetic /*ma*/, kMetaDebug /*me*/
};

bool is_meta(Cmd cmd);

// One flag of a meta command as sent: its letter and the token glued to it ("O123" is 'O' with
// "123"; "v" is 'v' with ""). The parser has already checked the letter is known, not repeated,
// and that numeric tokens (N T R F C E J D), the opaque length and the mode (M) are valid.
struct MetaFlag {
  char letter = 0;
  std::string token;
  bool operator==(const MetaFlag&) const = default;
};

struct MetaFlags {
  std::vector<MetaFlag> list;  // request order: return flags are echoed in this order

  bool has(char letter) const;
  std::string_view token(char letter) const;  // "" if absent
  bool value() const { return has('v'); }       // v: return the value (VA instead of HD)
  bool return_key() const { return has('k'); }  // k: echo the key
  bool quiet() const { return has('q'); }       // q: quiet_suppresses() says what is dropped
  bool base64_key() const { return has('b'); }  // b: the key was base64 (Request holds it decoded)
  std::optional<std::string_view> opaque() const;  // O
  std::optional<int32_t> ttl() const;              // T
  std::optional<uint32_t> client_flags() const;    // F
  char mode() const;                               // M: 0 when absent
  bool operator==(const MetaFlags&) const = default;
};

// One parsed command. Owns its bytes (keys and value are copies), so it outlives the input
// buffer it came from: the caller may erase the consumed bytes at once.
struct Request {
  Cmd cmd = Cmd::kGet;
  // get/gets/gat/gats: 1..max_keys_per_get keys. stats: its arguments (not validated as keys).
  // version/quit/flush_all/verbosity/mn: none. Every other command: exactly one; for meta
  // commands with b, the decoded binary key.
  std::vector<std::string> keys;
  uint32_t flags = 0;     // client flags: storage commands; ms: F
  int32_t exptime = 0;    // storage, touch, gat/gats, flush_all delay; meta: T (0 if absent)
  std::string value;      // storage commands and ms: the data block, without its \r\n
  uint64_t cas = 0;       // cas: <cas unique>; meta: C (0 if absent)
  uint64_t delta = 0;     // incr/decr; ma: D (1 if absent)
  uint32_t verbosity = 0; // verbosity level
  bool noreply = false;   // classic "noreply", or meta q (see quiet_suppresses for q)
  MetaFlags meta;         // meta commands only
  bool operator==(const Request&) const = default;
};

struct ParseError {
  // The exact bytes to send (always a static string), e.g. "ERROR\r\n".
  std::string_view line;
  // Close the connection after sending `line` (line too long, binary protocol).
  bool close = false;
  // The failed line ended in a classic "noreply": memcached sends nothing then (the client
  // reads no reply). Never set for meta commands: their errors are always returned.
  bool noreply = false;
  // Bytes after the command line discarded as its data block (<bytes> + 2 for \r\n), whether
  // already in this call's *consumed or still to arrive (Parser swallows those itself).
  uint64_t swallowed = 0;
  bool operator==(const ParseError&) const = default;
};

struct ParseResult {
  enum Kind : uint8_t { kRequest, kNeedMore, kError };
  Kind kind = kNeedMore;
  Request request;   // kRequest
  ParseError error;  // kError
};

// Incremental parser. The caller keeps the unconsumed input, passes all of it to next(),
// erases *consumed bytes from its front (after every call, kNeedMore included: a swallowed
// data block is consumed as it arrives), and calls again until kNeedMore. After a kError
// with close set, stop reading. The only state between calls is the count of data-block
// bytes still to swallow; everything else is re-read from `in`, so how the input is split
// never changes the results.
class Parser {
 public:
  explicit Parser(Limits limits) : limits_(limits) {}

  ParseResult next(std::string_view in, size_t* consumed);

  const Limits& limits() const { return limits_; }
  uint64_t swallowing() const { return swallow_; }  // data-block bytes still to discard

 private:
  ParseResult parse_line(std::string_view in, size_t* consumed);
  // Errors after a storage line whose <bytes> was read: swallow that data block.
  ParseResult fail_with_data(std::string_view in, size_t line_len, uint64_t data_len,
                             std::string_view line, bool noreply, size_t* consumed);

  Limits limits_;
  uint64_t swallow_ = 0;
};

// ---- responses (each appends one complete reply to `out`) ----
namespace reply {

void value(std::string& out, std::string_view key, uint32_t flags, std::string_view data,
           std::optional<uint64_t> cas = std::nullopt);  // VALUE ... (gets/gats pass cas)
void end(std::string& out);         // END
void stored(std::string& out);      // STORED
void not_stored(std::string& out);  // NOT_STORED
void exists(std::string& out);      // EXISTS
void not_found(std::string& out);   // NOT_FOUND
void deleted(std::string& out);     // DELETED
void touched(std::string& out);     // TOUCHED
void ok(std::string& out);          // OK (flush_all, verbosity)
void number(std::string& out, uint64_t v);  // incr/decr result
void version(std::string& out, std::string_view v);
void stat(std::string& out, std::string_view name, std::string_view value);
void error(std::string& out);  // ERROR
void client_error(std::string& out, std::string_view msg);
void server_error(std::string& out, std::string_view msg);

// What the proxy knows of an item, for the return flags a meta request asked for. A requested
// flag whose field is empty is left out of the reply.
struct MetaItem {
  std::optional<uint32_t> client_flags;  // f
  std::optional<uint64_t> cas;           // c
  std::optional<int64_t> ttl;            // t: seconds left, -1 for none
  std::optional<uint64_t> size;          // s
  std::optional<bool> hit_before;        // h
  std::optional<uint64_t> last_access;   // l: seconds since
};

// `req` is the meta request answered: its flags pick and order the return flags; O and k
// (re-encoded in base64 plus a 'b' when the request had b) are echoed on every code.
void meta_value(std::string& out, const Request& req, const MetaItem& item,
                std::string_view data);                                          // VA <size> ...
void meta_hit_no_value(std::string& out, const Request& req, const MetaItem& item);  // HD ...
void meta_miss(std::string& out, const Request& req);        // EN
void meta_not_found(std::string& out, const Request& req);   // NF
void meta_not_stored(std::string& out, const Request& req);  // NS
void meta_exists(std::string& out, const Request& req);      // EX
void meta_noop(std::string& out);                            // MN
// me: "ME <key> <info>" (info is "exp=.. la=.. cas=.." pairs); a miss is meta_miss.
void meta_debug(std::string& out, const Request& req, std::string_view info);

enum class MetaOutcome : uint8_t { kValue, kHit, kMiss, kNotFound, kNotStored, kExists };
// Whether a reply of `outcome` to a meta request of `cmd` carrying q is not sent: EN for mg,
// HD for ms and md, HD and VA for ma (as memcached). Errors are always sent.
bool quiet_suppresses(Cmd cmd, MetaOutcome outcome);

}  // namespace reply
}  // namespace exo::proxy
