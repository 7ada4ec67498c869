// A fake Peers for the cache node's tests and fuzz targets: canned Fetch data, injectable
// failures and hooks, and a log of every call. Shared by filler_test.cc, control_service_test.cc
// and fuzz/control_fuzz.cc.
//
// EXO_FAKE_PEERS_CHECK(cond, what) reports a broken ordering invariant: a GoogleTest failure by
// default; a fuzz target defines it (before including this) to abort instead.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cache_state.h"
#include "key_rate.h"
#include "peers.h"

#ifndef EXO_FAKE_PEERS_CHECK
#include <gtest/gtest.h>
#define EXO_FAKE_PEERS_CHECK(cond, what) EXPECT_TRUE(cond) << (what)
#endif

namespace exo::cache::testing {

using KR = std::vector<exo::KeyRate>;

// Records every call in order, with whether each key's entry was in the map at that moment.
struct FakePeers final : Peers {
  CacheState* state = nullptr;
  std::mutex mu;
  std::map<std::string, std::string> data;
  std::set<std::string> unreachable;  // Fetch fails for these keys' "db node"
  int fail_adds = 0;                  // the next N add_rules calls fail
  int fail_removes = 0;
  int reject_adds = 0;                // the next N add_rules calls reach the controller, rejected
  int full_adds = 0;                  // the next N add_rules calls are turned down: Ruleset 2 full
  std::function<void(const Keys&)> during_fetch;
  std::function<void(const Keys&)> during_evict;
  std::vector<std::string> log;  // "fetch a b", "add a b", "remove a", "evict a"
  std::vector<KR> adds;
  std::vector<bool> add_no_wait, remove_no_wait;
  std::vector<Keys> removes, evicts;
  std::map<std::string, bool> present_at_remove, present_at_evict;

  bool in_map(const std::string& k) {
    std::lock_guard lock(state->mu);
    return state->map.find(k) != nullptr;
  }
  static std::string join(const std::string& what, const Keys& keys) {
    std::string s = what;
    for (const auto& k : keys) s += " " + k;
    return s;
  }
  FetchResult fetch(const Keys& keys) override {
    if (during_fetch) during_fetch(keys);
    std::lock_guard lock(mu);
    log.push_back(join("fetch", keys));
    FetchResult r;
    for (const auto& k : keys) {
      if (unreachable.count(k)) r.failed.push_back(k);
      else if (auto it = data.find(k); it != data.end()) r.found.emplace_back(k, it->second);
    }
    if (!r.failed.empty()) r.error = "db0.Fetch: unreachable";
    return r;
  }
  std::string evict(const Keys& keys) override {
    if (during_evict) during_evict(keys);
    std::lock_guard lock(mu);
    log.push_back(join("evict", keys));
    evicts.push_back(keys);
    for (const auto& k : keys) present_at_evict[k] = in_map(k);
    return "";
  }
  RuleOutcome add_rules(const KR& keys, bool no_wait) override {
    std::lock_guard lock(mu);
    Keys ks;
    for (const auto& kr : keys) ks.push_back(kr.key);
    log.push_back(join("add", ks));
    adds.push_back(keys);
    add_no_wait.push_back(no_wait);
    for (const auto& k : ks) EXO_FAKE_PEERS_CHECK(in_map(k), k + ": rule requested before insert");
    if (fail_adds > 0) {
      --fail_adds;
      return {"Controller.AddCacheRules: unavailable", /*delivered=*/false};
    }
    if (reject_adds > 0) {
      --reject_adds;
      return {"Controller.AddCacheRules: 1 rejected: unknown cache node", /*delivered=*/true, {}, ks.size()};
    }
    if (full_adds > 0) {
      --full_adds;
      return {"Controller.AddCacheRules: 1 rejected: Ruleset 2 is full", /*delivered=*/true, ks, ks.size()};
    }
    return {"", true};
  }
  RuleOutcome remove_rules(const Keys& keys, bool no_wait) override {
    std::lock_guard lock(mu);
    log.push_back(join("remove", keys));
    removes.push_back(keys);
    remove_no_wait.push_back(no_wait);
    for (const auto& k : keys) present_at_remove[k] = in_map(k);
    if (fail_removes > 0) {
      --fail_removes;
      return {"Controller.RemoveCacheRules: deadline exceeded", /*delivered=*/true};
    }
    return {"", true};
  }
};

}  // namespace exo::cache::testing
