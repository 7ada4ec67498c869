// The cache node's outgoing RPCs (db nodes and controller) behind one small interface, so the
// Cache/Evict RPCs and the filler share them and tests can substitute a fake.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster.h"
#include "exoproto/control.grpc.pb.h"
#include "grpc_security.h"
#include "heads.h"
#include "key_rate.h"

namespace exo::cache {

using Keys = std::vector<std::string>;

struct FetchResult {
  std::vector<std::pair<std::string, std::string>> found;  // (key, value) of keys that exist
  Keys failed;        // keys whose db node could not be asked (RPC failed)
  std::string error;  // "" when every db node answered
};

// What a rule change came to. The controller counts references per (key hash, cache node), so
// a request it received must not be sent again: a second add would need a second remove.
struct RuleOutcome {
  RuleOutcome() = default;
  RuleOutcome(std::string e, bool d, Keys f = {}, size_t r = 0)
      : error(std::move(e)), delivered(d), full(std::move(f)), rejected(r) {}
  std::string error;       // "" when every change was accepted (and confirmed, when waited for)
  bool delivered = false;  // the controller got the request (also when it rejected rules)
  // Adds the controller turned down only because Ruleset 2 was full: it counted nothing for
  // them, so they may (and should) be sent again once removals have made room.
  Keys full;
  size_t rejected = 0;  // rules the controller turned down (full ones included)
};

class Peers {
 public:
  virtual ~Peers() = default;
  // DbNode.Fetch grouped by the head of each key's slot (heads.h): from now on the db nodes
  // propagate writes to these keys to us.
  virtual FetchResult fetch(const Keys& keys) = 0;
  // DbNode.Evict grouped by slot head: the db nodes stop propagating writes to us. "" or an error.
  virtual std::string evict(const Keys& keys) = 0;
  // Controller.AddCacheRules / RemoveCacheRules for this node. no_wait=false waits for the
  // switch to confirm.
  virtual RuleOutcome add_rules(const std::vector<KeyRate>& keys, bool no_wait) = 0;
  virtual RuleOutcome remove_rules(const Keys& keys, bool no_wait) = 0;
};

// The real peers over gRPC. Channels are created lazily (a peer may start after us). Every RPC
// has a deadline; failures become error strings. Thread-safe. Channels use `security` (this
// node's certificate; each peer's certificate name as the target-name override). Fetch and Evict
// go to the heads in `heads` (the controller's SetHeads replaces them; control_heads.cc).
class GrpcPeers final : public Peers {
 public:
  GrpcPeers(const Cluster& cluster, std::string self_name,
            std::shared_ptr<const GrpcSecurity> security, const Heads& heads);

  FetchResult fetch(const Keys& keys) override;
  std::string evict(const Keys& keys) override;
  RuleOutcome add_rules(const std::vector<KeyRate>& keys, bool no_wait) override;
  RuleOutcome remove_rules(const Keys& keys, bool no_wait) override;

  // Cancels the RPCs in flight and fails later ones at once, so threads blocked in a waiting
  // RemoveCacheRules return promptly on shutdown.
  void cancel_all();

 private:
  class Call;  // a ClientContext registered for cancel_all()
  exo::DbNode::Stub& db_stub(uint32_t index);
  // The stub of the instance we currently ask (cluster.controllers[controller_index_]); one
  // channel per instance, made when first needed.
  exo::Controller::Stub& controller_stub(size_t* index = nullptr);
  // After `index` answered with `st`: move to the master it named or to the next instance.
  void controller_answered(size_t index, const grpc::Status& st);
  RuleOutcome change_rules(const std::vector<KeyRate>& keys, bool add, bool no_wait);

  const Cluster& cluster_;
  const std::string name_;
  const std::shared_ptr<const GrpcSecurity> security_;
  const Heads& heads_;

  std::mutex mu_;  // guards the stubs and the live calls
  std::vector<std::unique_ptr<exo::DbNode::Stub>> db_stubs_;
  std::vector<std::unique_ptr<exo::Controller::Stub>> controllers_;
  size_t controller_index_ = 0;
  std::set<grpc::ClientContext*> live_;
  bool cancelled_ = false;
};

}  // namespace exo::cache
