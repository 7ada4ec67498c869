"""Throwaway fake DbNode + Controller gRPC servers for the cache node smoke test.

    fake_peers.py DB_ADDR CTL_ADDR      (e.g. unix:/tmp/exoc/db0.sock unix:/tmp/exoc/ctl.sock)
DbNode.Fetch returns value b"V:" + key for keys starting with b"hot", not found otherwise.
Controller accepts every rule and logs it.
"""
import sys
import time
from concurrent import futures

import grpc
from exoproto import control_pb2 as pb
from exoproto import control_pb2_grpc as pbg


class Db(pbg.DbNodeServicer):
    def Fetch(self, req, ctx):
        out = pb.FetchReply()
        for k in req.keys:
            found = k.startswith(b"hot")
            out.values.add(key=k, found=found, value=b"V:" + k if found else b"")
        print("Fetch", list(req.keys), req.cache_node, flush=True)
        return out

    def Evict(self, req, ctx):
        print("Evict", list(req.keys), req.cache_node, flush=True)
        return pb.EvictReply(evicted=len(req.keys))


class Ctl(pbg.ControllerServicer):
    def AddCacheRules(self, req, ctx):
        print("AddCacheRules", [hex(r.key_hash) for r in req.rules], flush=True)
        return pb.CacheRulesReply(accepted=len(req.rules))

    def RemoveCacheRules(self, req, ctx):
        print("RemoveCacheRules", [hex(r.key_hash) for r in req.rules], flush=True)
        return pb.CacheRulesReply(accepted=len(req.rules))


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pbg.add_DbNodeServicer_to_server(Db(), server)
    pbg.add_ControllerServicer_to_server(Ctl(), server)
    server.add_insecure_port(sys.argv[1])
    server.add_insecure_port(sys.argv[2])
    server.start()
    print("fake peers up", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop(0)


if __name__ == "__main__":
    main()
